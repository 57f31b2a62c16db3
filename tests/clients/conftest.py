"""Client fixtures: a live ``ctxpack serve`` (a real process on a free port, on the test
session's embedded Postgres, fake embedder) and ctxpack-client pointed at it.

The client distribution lives in clients/python; it is put on ``sys.path`` here so the tests
run against the source without installing it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLIENT_SRC = ROOT / "clients" / "python"
if str(CLIENT_SRC) not in sys.path:
    sys.path.insert(0, str(CLIENT_SRC))


@pytest.fixture(scope="session")
def ctxpack_server(request: pytest.FixtureRequest) -> str:
    """``ctxpack serve`` in a subprocess (the suite's ``live_server``, tests/conftest.py); its base URL."""
    url: str = request.getfixturevalue("live_server")
    return url


@pytest.fixture
def ctxpack_env(ctxpack_server: str, key: object, monkeypatch: pytest.MonkeyPatch) -> str:
    """CTXPACK_URL and CTXPACK_API_KEY set for this test (an admin key in a fresh org)."""
    monkeypatch.setenv("CTXPACK_URL", ctxpack_server)
    monkeypatch.setenv("CTXPACK_API_KEY", key.key)  # type: ignore[attr-defined]
    return ctxpack_server


@pytest.fixture
def cx(ctxpack_env: str) -> Iterator[object]:
    """A ctxpack_client.Client on the live server (closed after the test)."""
    from ctxpack_client import Client

    with Client() as client:
        yield client
