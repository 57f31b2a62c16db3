"""Scenario suites that cut across the service (red team, review regressions): the hardening
fixtures (``sql``, ``app_with``, ``mcp_connect``) for every file here."""

from tests.hardening.conftest import app_with, mcp_connect, sql  # noqa: F401
