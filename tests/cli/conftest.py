"""Fixtures of the CLI suites: the audit trail's seed (tests/domain/audit/conftest.py)."""

from tests.domain.audit.conftest import seed  # noqa: F401
