"""/mcp auth, through the app in process (httpx ASGI transport)."""

from __future__ import annotations

import httpx

from tests.conftest import Key

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def test_no_key_is_401_json_before_mcp(client: httpx.AsyncClient) -> None:
    response = await client.post("/mcp", json=INIT, headers=HEADERS)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"
    assert response.headers["www-authenticate"] == "Bearer"
    assert "mcp-session-id" not in response.headers


async def test_bad_key_is_401(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/mcp", json=INIT, headers={**HEADERS, "Authorization": "Bearer ctxp_nope"}
    )
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"


async def test_good_key_initializes(client: httpx.AsyncClient, key: Key) -> None:
    response = await client.post("/mcp", json=INIT, headers={**HEADERS, **key.headers})
    assert response.status_code == 200, response.text
    assert response.json()["result"]["serverInfo"]["name"] == "ctxpack"
