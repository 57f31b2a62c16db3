"""Fixtures of the hardening tests: apps with settings of their own, MCP clients, SQL."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from mcp import Client
from sqlalchemy import text

from service.app import create_app
from service.embedding.fake import FakeEmbedder
from service.mcp.backends import LocalBackend, bearer_key
from service.mcp.server import build_server
from tests.conftest import Key, make_settings

AppFactory = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]


@pytest.fixture
def app_with(pg_url: str) -> AppFactory:
    """``async with app_with(**settings) as client``: a fresh app on the test database with
    those settings overridden, running its lifespan, and a client of it (``client.app``)."""

    @asynccontextmanager
    async def open_app(**overrides: Any) -> AsyncIterator[httpx.AsyncClient]:
        settings = make_settings(pg_url, audit_prune_interval_seconds=0, **overrides)
        application = create_app(settings, embedder=FakeEmbedder(), database_url=pg_url)
        async with application.router.lifespan_context(application):
            transport = httpx.ASGITransport(app=application)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                client.app = application  # type: ignore[attr-defined]
                yield client

    return open_app


McpConnect = Callable[[Key], AbstractAsyncContextManager[Client]]


@pytest.fixture
def mcp_connect(app: FastAPI) -> McpConnect:
    """``async with mcp_connect(key) as client``: an in-memory MCP client acting as ``key``.
    Open it inside the test: its task group must be left in the task that entered it."""
    state = app.state.ctx

    @asynccontextmanager
    async def open_client(key: Key) -> AsyncIterator[Client]:
        server = build_server(LocalBackend(state, bearer_key(key.key)))
        async with Client(server, raise_exceptions=True) as client:
            yield client

    return open_client


SqlRows = Callable[..., Awaitable[list[Any]]]


@pytest.fixture
def sql(app: FastAPI) -> SqlRows:
    """``await sql("SELECT ...", **params)``: rows of a query on the test database."""

    async def run(query: str, **params: Any) -> list[Any]:
        async with app.state.ctx.sessionmaker() as session:
            return list((await session.execute(text(query), params)).all())

    return run


def org_of(key: Key) -> uuid.UUID:
    return key.org_id
