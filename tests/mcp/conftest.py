"""MCP fixtures: an in-memory MCP client bound to a key, against the session's app resources."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest
from fastapi import FastAPI
from mcp import Client

from service.mcp.backends import LocalBackend, caller_from_key
from service.mcp.server import build_server
from tests.conftest import Key

Connect = Callable[[Key | str], AbstractAsyncContextManager[Client]]


@pytest.fixture
def connect(app: FastAPI) -> Connect:
    """``async with connect(key) as client``: an MCP client talking in memory to a server
    built on the app's resources (built once, in the app lifespan), acting as ``key``.

    Open it inside the test, not in a fixture: the client's task group must be entered and
    left in the same task."""
    state = app.state.ctx

    @asynccontextmanager
    async def open_client(key: Key | str) -> AsyncIterator[Client]:
        secret: str = getattr(key, "key", key)
        server = build_server(LocalBackend(state, caller_from_key(state.sessionmaker, secret)))
        async with Client(server, raise_exceptions=True) as client:
            yield client

    return open_client


def structured(result: Any) -> dict[str, Any]:
    assert isinstance(result.structured_content, dict), result
    return result.structured_content
