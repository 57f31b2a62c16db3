"""/mcp auth, through the app in process (httpx ASGI transport)."""

from __future__ import annotations

import httpx

from service.app import create_app
from service.embedding.fake import FakeEmbedder
from tests.conftest import Key, KeyFactory, make_settings

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


async def test_rate_limit_applies_to_mcp(pg_url: str, make_key: KeyFactory) -> None:
    """/mcp shares the key's rate limit with the API: the over-limit request is a 429 JSON
    error with Retry-After, before any MCP processing."""
    settings = make_settings(pg_url, rate_limit_per_minute=1, rate_limit_burst=1)
    app = create_app(settings, embedder=FakeEmbedder(), database_url=pg_url)
    key = await make_key()
    async with app.router.lifespan_context(app):
        assert app.state.ctx.limiter is not None
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            first = await client.post("/mcp", json=INIT, headers={**HEADERS, **key.headers})
            second = await client.post("/mcp", json=INIT, headers={**HEADERS, **key.headers})
    assert first.status_code == 200
    assert second.status_code == 429
    assert second.json()["error"]["code"] == "rate_limited"
    assert int(second.headers["retry-after"]) >= 1


async def test_a_malformed_message_is_answered_without_quoting_it(
    client: httpx.AsyncClient, key: Key
) -> None:
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    bad = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": f"{secret} password=Hunter22xQ"}
    response = await client.post("/mcp", json=bad, headers={**HEADERS, **key.headers})
    assert 400 <= response.status_code < 500
    body = response.json()
    assert body["error"]["code"] == -32602 and "input_value=<omitted>" in body["error"]["message"]
    assert secret[:12] not in response.text and "Hunter22xQ" not in response.text
    assert int(response.headers["content-length"]) == len(response.content)
    ok = await client.post("/mcp", json=INIT, headers={**HEADERS, **key.headers})
    assert ok.status_code == 200 and ok.json()["result"]["serverInfo"]["name"] == "ctxpack"
