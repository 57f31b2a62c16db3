"""mcp/backends.py: where a tool's call goes. ``LocalBackend`` runs an operation's domain
call through the call runner as the MCP transport (audited under the operation's action, a
refusal naming the transport; a revoked key stops at once); ``RemoteBackend`` sends it to the operation's HTTP route (route
parameters in the path, the rest as the query of a GET or DELETE or else as the JSON body)
and reads the answer as the operation's model."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from starlette.requests import Request

from service.domain import keys as key_service
from service.domain.auth import Caller
from service.errors import AuthenticationError, InvalidInput
from service.mcp.backends import (
    CALLER_SCOPE_KEY,
    LocalBackend,
    RemoteBackend,
    bearer_key,
    caller_from_request,
)
from service.operations import FORGET, LIST_MEMORIES, REMEMBER
from service.remote import CtxpackHttp, RemoteError
from service.schemas.memories import MemoryQuery, MemoryRef, RememberRequest
from tests.conftest import Key, SqlRows

FACT = "The staging database listens on port 5433; the default 5432 is the legacy cluster."


async def mcp_rows(sql: SqlRows, key: Key) -> list[tuple[str, str | None, int]]:
    """(action, the transport a failure names, status) of the key's org."""
    rows = await sql(
        "SELECT action, details->>'transport', status_code FROM audit_events "
        "WHERE org_id = :o ORDER BY created_at",
        o=key.org_id,
    )
    return [tuple(r) for r in rows]


async def test_a_local_call_runs_the_operation_audited_as_mcp(
    app: FastAPI, key: Key, sql: SqlRows
) -> None:
    backend = LocalBackend(app.state.ctx, bearer_key(key.key))
    stored = await backend.run(None, REMEMBER, RememberRequest(content=FACT, namespace="ops"))  # type: ignore[arg-type]
    page = await backend.run(None, LIST_MEMORIES, MemoryQuery(namespace="ops"))  # type: ignore[arg-type]
    assert [m.id for m in page.items] == [stored.id]
    assert await mcp_rows(sql, key) == [("remember", None, 201), ("list", None, 200)]


async def test_a_local_refusal_is_audited_and_a_revoked_key_stops_at_once(
    app: FastAPI, key: Key, sql: SqlRows
) -> None:
    backend = LocalBackend(app.state.ctx, bearer_key(key.key))
    await backend.refused(None, LIST_MEMORIES.action, InvalidInput("limit", "too small"))  # type: ignore[arg-type]
    assert await mcp_rows(sql, key) == [("list", "mcp", 422)]
    async with app.state.ctx.sessionmaker() as session:
        await key_service.revoke_key(session, str(key.key_id), cache=app.state.ctx.callers)
        await session.commit()
    with pytest.raises(AuthenticationError):
        await backend.run(None, LIST_MEMORIES, MemoryQuery())  # type: ignore[arg-type]


def test_the_caller_comes_from_the_http_request_the_endpoint_authenticated() -> None:
    caller = Caller(uuid.uuid4(), uuid.uuid4(), "k", frozenset({"read"}))

    class Context:
        request = Request({"type": "http", "headers": [], CALLER_SCOPE_KEY: caller})

    assert caller_from_request(Context()) is caller  # type: ignore[arg-type]
    with pytest.raises(AuthenticationError):
        caller_from_request(None)


class Recording(httpx.AsyncBaseTransport):
    """The app as a server, remembering what it was sent."""

    def __init__(self, app: FastAPI) -> None:
        self.inner = httpx.ASGITransport(app=app)
        self.sent: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        self.sent.append(request)
        return await self.inner.handle_async_request(request)


@pytest.fixture
async def remote(app: FastAPI, key: Key) -> AsyncIterator[tuple[RemoteBackend, Recording]]:
    transport = Recording(app)
    async with CtxpackHttp("http://test", key.key, agent="t", timeout=30,
                           transport=transport) as http:  # fmt: skip
        yield RemoteBackend(http), transport


async def test_a_remote_call_goes_to_the_operations_route(
    remote: tuple[RemoteBackend, Recording],
) -> None:
    backend, transport = remote
    stored = await backend.run(None, REMEMBER, RememberRequest(content=FACT, namespace="a:s1"))  # type: ignore[arg-type]
    page = await backend.run(None, LIST_MEMORIES, MemoryQuery(namespace="a:s1", limit=5))  # type: ignore[arg-type]
    gone = await backend.run(None, FORGET, MemoryRef(memory_id=stored.id))  # type: ignore[arg-type]
    assert [m.id for m in page.items] == [stored.id] and gone.deleted
    post, get, delete = transport.sent
    assert (post.method, post.url.path) == ("POST", "/v1/remember")
    body: dict[str, Any] = json.loads(post.content)
    assert body == {"content": FACT, "namespace": "a:s1"}  # unset fields left out
    assert (get.method, get.url.path) == ("GET", "/v1/memories")
    assert dict(get.url.params) == {"namespace": "a:s1", "limit": "5", "offset": "0"}
    assert (delete.method, delete.url.path) == ("DELETE", f"/v1/memories/{stored.id}")
    assert delete.content == b""


async def test_a_remote_refusal_carries_the_servers_error(
    remote: tuple[RemoteBackend, Recording],
) -> None:
    backend, _ = remote
    with pytest.raises(RemoteError) as refused:
        await backend.run(None, FORGET, MemoryRef(memory_id=uuid.uuid4()))  # type: ignore[arg-type]
    assert (refused.value.status_code, refused.value.body["code"]) == (404, "not_found")
    assert await backend.refused(None, FORGET.action, InvalidInput("id", "bad")) is None  # type: ignore[arg-type]
    assert (await backend.whoami())["org_id"]
