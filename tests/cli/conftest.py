"""Fixtures of the CLI suites: the audit trail's seed (tests/audit)."""

from tests.audit.conftest import seed  # noqa: F401
