"""MCP over streamable HTTP against a real ``ctxpack serve`` on a socket, with the SDK's
streamable-HTTP client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import Key, KeyFactory
from tests.mcp.conftest import exercise_every_tool, structured

FACT = "Deploys go through the blue-green switch; never restart the primary by hand."


def leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


@asynccontextmanager
async def http_client(base: str, key: str | None, mode: str = "auto") -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        transport = streamable_http_client(f"{base}/mcp", http_client=http)
        async with Client(transport, mode=mode) as client:
            yield client


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_every_tool_over_http(live_server: str, key: Key, mode: str) -> None:
    async with http_client(live_server, key.key, mode) as client:
        await exercise_every_tool(client, live_server, key.key, f"ops-{mode}")


async def test_no_key_no_access(live_server: str) -> None:
    response = httpx.post(
        f"{live_server}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        headers={"Accept": "application/json, text/event-stream"},
    )
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"
    # The SDK client cannot even connect: it sees an HTTP error, never an MCP session.
    with pytest.raises(BaseExceptionGroup) as caught:
        async with http_client(live_server, None) as client:
            await client.list_tools()
    assert any(isinstance(e, MCPError) for e in leaves(caught.value))


async def test_revoked_or_unknown_key_no_access(live_server: str) -> None:
    response = httpx.post(
        f"{live_server}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        headers={
            "Accept": "application/json, text/event-stream",
            "Authorization": "Bearer ctxp_unknown",
        },
    )
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"


async def test_key_limits_apply_to_tools(live_server: str, make_key: KeyFactory) -> None:
    reader = await make_key(scopes=["read"])
    async with http_client(live_server, reader.key) as client:
        refused = await client.call_tool("remember", {"content": FACT, "namespace": "ops"})
    assert refused.is_error
    assert structured(refused)["error"] | {"status": 403} == structured(refused)["error"]
    assert structured(refused)["error"]["code"] == "scope_denied"

    alice_only = await make_key(namespaces=["alice"])
    async with http_client(live_server, alice_only.key) as client:
        outside = await client.call_tool("remember", {"content": FACT, "namespace": "bob"})
        inside = await client.call_tool("remember", {"content": FACT, "namespace": "alice:s1"})
    assert structured(outside)["error"]["code"] == "namespace_access_denied"
    assert not inside.is_error


async def test_tool_calls_are_audited_like_http(live_server: str, key: Key) -> None:
    async with http_client(live_server, key.key) as client:
        await client.call_tool("remember", {"content": FACT, "namespace": "ops"})
        await client.call_tool("remember", {"content": "ok", "namespace": "ops"})
        await client.call_tool("remember", {"namespace": "ops"})
    rows = httpx.get(
        f"{live_server}/v1/audit", params={"action": "remember"}, headers=key.headers
    ).json()["items"]
    outcomes = sorted((r["outcome"], r["status_code"]) for r in rows)
    assert outcomes == [("created", 201), ("rejected", 422), ("rejected", 422)]
