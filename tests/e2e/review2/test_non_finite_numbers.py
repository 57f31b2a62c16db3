"""Review 2, finding 1: NaN, Infinity, -Infinity or 1e400 anywhere in a JSON the service stores
(metadata, an artifact body, a batch item, a PATCH) answered 500: Python's parser takes them,
jsonb refuses them. Now a 422 naming the field, over HTTP and MCP, and nothing is written."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.conftest import Key, KeyFactory, SqlRows
from tests.mcp.test_http import HEADERS as MCP_HEADERS
from tests.mcp.test_http import INIT as MCP_INIT

TEXT = "The nightly backup of the billing database runs at 02:00 UTC and takes forty minutes."
NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e400", "-1E+999"]


async def post_raw(
    client: httpx.AsyncClient, method: str, url: str, raw: str, key: Key
) -> httpx.Response:
    headers = {**key.headers, "content-type": "application/json"}
    return await client.request(method, url, content=raw.encode(), headers=headers)


@pytest.mark.parametrize("literal", NON_FINITE)
async def test_remember_batch_patch_and_artifacts_refuse_non_finite(
    client: httpx.AsyncClient, make_key: KeyFactory, sql: SqlRows, literal: str
) -> None:
    key = await make_key()
    nested = f'{{"a": {{"b": [1, {literal}]}}}}'
    one = await post_raw(
        client, "POST", "/v1/remember",
        f'{{"namespace": "n", "content": {json.dumps(TEXT)}, "metadata": {nested}}}', key,
    )
    assert one.status_code == 422, one.text
    assert one.json()["error"]["field"] == "metadata"
    assert "a.b.1" in one.json()["error"]["message"]

    batch = await post_raw(
        client, "POST", "/v1/remember/batch",
        '{"items": [{"namespace": "n", "content": "Deploys freeze on Fridays after noon."},'
        f' {{"namespace": "n", "content": {json.dumps(TEXT)}, "metadata": {{"x": {literal}}}}}]}}',
        key,
    )
    assert batch.status_code == 422, batch.text
    assert batch.json()["error"]["field"] == "items.1.metadata"

    made = await client.post(
        "/v1/remember", json={"namespace": "n", "content": TEXT}, headers=key.headers
    )
    mid = made.json()["id"]
    patched = await post_raw(
        client, "PATCH", f"/v1/memories/{mid}", f'{{"metadata": {{"score": {literal}}}}}', key
    )
    assert patched.status_code == 422, patched.text
    assert patched.json()["error"]["field"] == "metadata"

    art = await post_raw(
        client, "POST", "/v1/artifacts",
        f'{{"namespace": "n", "name": "Scan", "body": {{"rows": [{{"v": {literal}}}]}}}}', key,
    )
    assert art.status_code == 422, art.text
    assert art.json()["error"]["field"] == "body"

    rows = await sql("SELECT count(*) FROM memories WHERE org_id = :o", o=key.org_id)
    assert rows[0][0] == 1  # only the one good remember; the batch stored nothing
    meta = await sql("SELECT metadata FROM memories WHERE org_id = :o", o=key.org_id)
    assert meta[0][0] == {}


async def test_mcp_over_http_refuses_non_finite(
    client: httpx.AsyncClient, make_key: KeyFactory, sql: SqlRows
) -> None:
    """The MCP SDK parses NaN and Infinity literals in a tool's arguments as Python floats;
    the tool's schema is the HTTP body's, so the same 422 comes back as a tool error."""
    key = await make_key()
    headers = {**MCP_HEADERS, **key.headers}
    init = await client.post("/mcp", json=MCP_INIT, headers=headers)
    assert init.status_code == 200, init.text
    session = init.headers.get("mcp-session-id")
    if session:
        headers["mcp-session-id"] = session
    await client.post(
        "/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
    )
    for n, literal in enumerate(NON_FINITE):
        raw = (
            f'{{"jsonrpc": "2.0", "id": {n + 2}, "method": "tools/call", "params": {{"name": '
            f'"remember", "arguments": {{"namespace": "n", "content": {json.dumps(TEXT)}, '
            f'"metadata": {{"x": [{literal}]}}}}}}}}'
        )
        response = await client.post("/mcp", content=raw.encode(), headers=headers)
        assert response.status_code == 200, response.text
        result = response.json()["result"]
        assert result["isError"] is True, result
        error = result["structuredContent"]["error"]
        assert error["status"] == 422 and error["field"] == "metadata", error
    rows = await sql("SELECT count(*) FROM memories WHERE org_id = :o", o=key.org_id)
    assert rows[0][0] == 0
