"""Review of issue 29's fixes: new inputs of the same classes (review29 probes)."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta

import httpx
import psycopg
import pytest

from tests.conftest import Key, KeyFactory, SqlRows
from tests.mcp.test_http import HEADERS as MCP_HEADERS
from tests.mcp.test_http import INIT as MCP_INIT

TEXT = "The nightly backup of the billing database runs at 02:00 UTC and takes forty minutes."
OTHER = "Staging certificates are renewed by cert-manager thirty days before they expire."


async def raw(client: httpx.AsyncClient, method: str, url: str, body: str, key: Key) -> httpx.Response:
    headers = {**key.headers, "content-type": "application/json"}
    return await client.request(method, url, content=body.encode(), headers=headers)


async def mcp_session(client: httpx.AsyncClient, key: Key) -> dict[str, str]:
    headers = {**MCP_HEADERS, **key.headers}
    init = await client.post("/mcp", json=MCP_INIT, headers=headers)
    assert init.status_code == 200, init.text
    if init.headers.get("mcp-session-id"):
        headers["mcp-session-id"] = init.headers["mcp-session-id"]
    await client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                      headers=headers)
    return headers


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400"])
async def test_tool_results_render_non_finite_as_strings(
    client: httpx.AsyncClient, make_key: KeyFactory, literal: str
) -> None:
    key = await make_key()
    body = ('{"tool_call_id": "call_1", "tool_name": "scan", "budget_tokens": 500, '
            f'"result": {{"rows": [{{"v": {literal}}}, {{"w": [1, 2, {literal}]}}]}}}}')
    r = await raw(client, "POST", "/v1/tool-results", body, key)
    assert r.status_code == 200, r.text
    json.loads(r.json()["content"])  # valid strict JSON
    # A JSON text holding NaN, as a string result.
    inner = json.dumps(f'{{"a": {literal}, "b": "x"}}')
    body2 = ('{"tool_call_id": "call_2", "tool_name": "scan", "budget_tokens": 500, '
             f'"result": {inner}}}')
    r2 = await raw(client, "POST", "/v1/tool-results", body2, key)
    assert r2.status_code == 200, r2.text
    for strat in ("json", "summary", "first_n", "text"):
        b = ('{"tool_call_id": "call_3", "tool_name": "scan", "budget_tokens": 40, '
             f'"strategy": "{strat}", "result": {{"rows": [{literal}, {literal}], "k": "{"x" * 400}"}}}}')
        r3 = await raw(client, "POST", "/v1/tool-results", b, key)
        assert r3.status_code == 200, (strat, r3.text)
    b = ('{"tool_call_id": "call_4", "tool_name": "scan", "budget_tokens": 50, '
         f'"fields": ["a.b"], "result": {{"a": {{"b": {literal}}}}}}}')
    r4 = await raw(client, "POST", "/v1/tool-results", b, key)
    assert r4.status_code == 200, r4.text


@pytest.mark.parametrize("literal", ["NaN", "1e400"])
async def test_assemble_renders_non_finite_as_strings(
    client: httpx.AsyncClient, make_key: KeyFactory, literal: str
) -> None:
    key = await make_key()
    body = (
        '{"budget_tokens": 2000, "system": "You help.", "user_message": "What failed?", '
        '"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", '
        '"type": "function", "function": {"name": "scan", "arguments": "{}"}}]}], '
        '"tool_results": [{"tool_call_id": "call_1", "tool_name": "scan", "budget_tokens": 300, '
        f'"result": {{"v": [{literal}, 1]}}}}]}}'
    )
    r = await raw(client, "POST", "/v1/assemble", body, key)
    assert r.status_code == 200, r.text


async def test_mcp_tool_result_and_artifact_non_finite(
    client: httpx.AsyncClient, make_key: KeyFactory
) -> None:
    key = await make_key()
    headers = await mcp_session(client, key)
    raw_call = ('{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": '
                '"tool_result", "arguments": {"tool_call_id": "call_1", "tool_name": "scan", '
                '"result": {"v": [NaN, Infinity]}}}}')
    r = await client.post("/mcp", content=raw_call.encode(), headers=headers)
    assert r.status_code == 200, r.text
    result = r.json()["result"]
    assert result.get("isError") is not True, result


async def test_context_and_list_with_non_finite_elsewhere(
    client: httpx.AsyncClient, make_key: KeyFactory
) -> None:
    key = await make_key()
    # Any other JSON field a body accepts: context filters, batch top-level, PATCH nested.
    for url, method, body in [
        ("/v1/context", "POST", '{"namespace": "n", "goal": "x", "max_items": NaN}'),
        ("/v1/context", "POST", '{"namespace": "n", "goal": "x", "markdown_token_budget": 1e400}'),
        ("/v1/remember", "POST", '{"namespace": "n", "content": "x y z", "ttl_seconds": Infinity}'),
        ("/v1/remember", "POST", '{"namespace": "n", "content": "x y z", "importance": NaN}'),
        ("/v1/remember", "POST", '{"namespace": "n", "content": "x y z", "confidence": NaN}'),
        ("/v1/remember", "POST", '{"namespace": "n", "content": "x y z", "related": [{"id": NaN}]}'),
        ("/v1/tool-results", "POST", '{"tool_call_id": "c", "tool_name": "t", "result": 1, "budget_tokens": NaN}'),
        ("/v1/assemble", "POST", '{"budget_tokens": Infinity, "user_message": "hi"}'),
        ("/v1/artifacts", "POST", '{"namespace": "n", "name": "x", "body": {"a": 1}, "summary": NaN}'),
    ]:
        r = await raw(client, method, url, body, key)
        assert r.status_code < 500, (url, body, r.status_code, r.text)


async def test_supersedes_target_deleted_concurrently(
    client: httpx.AsyncClient, make_key: KeyFactory, pg_url: str
) -> None:
    key = await make_key()
    made = await client.post("/v1/remember", json={"namespace": "n", "content": OTHER},
                             headers=key.headers)
    target = made.json()
    conn = await psycopg.AsyncConnection.connect(pg_url)
    try:
        await conn.execute("DELETE FROM memories WHERE org_id = %s AND id = %s",
                           (key.org_id, uuid.UUID(target["id"])))

        async def commit_later() -> None:
            await asyncio.sleep(0.5)
            await conn.commit()

        committer = asyncio.create_task(commit_later())
        response = await client.post(
            "/v1/remember",
            json={"namespace": "n", "content": TEXT, "supersedes": target["id"]},
            headers=key.headers,
        )
        await committer
    finally:
        await conn.close()
    assert response.status_code < 500, response.text


async def test_batch_related_target_deleted_concurrently(
    client: httpx.AsyncClient, make_key: KeyFactory, pg_url: str
) -> None:
    key = await make_key()
    made = await client.post("/v1/remember", json={"namespace": "n", "content": OTHER},
                             headers=key.headers)
    target = made.json()
    conn = await psycopg.AsyncConnection.connect(pg_url)
    try:
        await conn.execute("DELETE FROM memories WHERE org_id = %s AND id = %s",
                           (key.org_id, uuid.UUID(target["id"])))

        async def commit_later() -> None:
            await asyncio.sleep(0.5)
            await conn.commit()

        committer = asyncio.create_task(commit_later())
        response = await client.post(
            "/v1/remember/batch",
            json={"items": [{"namespace": "n", "content": TEXT, "related": [{"id": target["id"]}]}]},
            headers=key.headers,
        )
        await committer
    finally:
        await conn.close()
    assert response.status_code < 500, response.text


async def test_patch_related_or_keyed_related_race(
    client: httpx.AsyncClient, make_key: KeyFactory, pg_url: str
) -> None:
    key = await make_key()
    target = (await client.post("/v1/remember", json={"namespace": "n", "content": OTHER},
                                headers=key.headers)).json()
    conn = await psycopg.AsyncConnection.connect(pg_url)
    try:
        await conn.execute("DELETE FROM memories WHERE org_id = %s AND id = %s",
                           (key.org_id, uuid.UUID(target["id"])))

        async def commit_later() -> None:
            await asyncio.sleep(0.5)
            await conn.commit()

        committer = asyncio.create_task(commit_later())
        response = await client.post(
            "/v1/remember",
            json={"namespace": "n", "content": TEXT, "key": "backup-window",
                  "related": [{"id": target["id"]}]},
            headers=key.headers,
        )
        await committer
    finally:
        await conn.close()
    assert response.status_code < 500, response.text


async def test_duplicate_with_ttl_inside_one_batch(
    client: httpx.AsyncClient, make_key: KeyFactory, sql: SqlRows
) -> None:
    key = await make_key()
    r = await client.post("/v1/remember/batch", json={"items": [
        {"namespace": "n", "content": TEXT, "ttl_seconds": 60},
        {"namespace": "n", "content": TEXT},
    ]}, headers=key.headers)
    assert r.status_code == 200, r.text
    items = r.json()["items"]
    rows = await sql("SELECT id::text, expires_at FROM memories WHERE org_id = :o", o=key.org_id)
    stored = dict(rows)
    for item in items:
        promised = item.get("expires_at")
        kept = stored[item["id"]]
        if promised is None:
            assert kept is None, (items, rows)


async def test_keyed_duplicate_without_ttl_single(
    client: httpx.AsyncClient, make_key: KeyFactory, sql: SqlRows
) -> None:
    key = await make_key()
    first = (await client.post("/v1/remember", json={
        "namespace": "n", "content": TEXT, "key": "k1", "ttl_seconds": 60}, headers=key.headers)).json()
    again = (await client.post("/v1/remember", json={
        "namespace": "n", "content": TEXT, "key": "k1"}, headers=key.headers)).json()
    rows = await sql("SELECT expires_at FROM memories WHERE id = :i", i=uuid.UUID(again["id"]))
    assert again["expires_at"] is None
    assert rows[0][0] is None
    # Unkeyed write of a keyed copy's text, and a keyed write of an unkeyed copy's text.
    (await client.post("/v1/remember", json={
        "namespace": "n", "content": OTHER, "ttl_seconds": 60}, headers=key.headers)).json()
    k2 = (await client.post("/v1/remember", json={
        "namespace": "n", "content": OTHER, "key": "k2"}, headers=key.headers)).json()
    rows = await sql("SELECT expires_at FROM memories WHERE id = :i", i=uuid.UUID(k2["id"]))
    assert (k2.get("expires_at") is None) == (rows[0][0] is None), (k2, rows)
    assert first["id"]


async def _expired_artifact(client: httpx.AsyncClient, key: Key, pg_url: str) -> dict:
    made = await client.post("/v1/artifacts", json={
        "namespace": "n", "name": "Runner inventory zq",
        "body": {"hosts": [{"name": "r1", "disk": "nvme-7f3a"}]}}, headers=key.headers)
    assert made.status_code == 201, made.text
    art = made.json()
    with psycopg.connect(pg_url) as conn:
        conn.execute("UPDATE memories SET expires_at = now() - interval '1 second' WHERE id = %s",
                     (uuid.UUID(art["memory_id"]),))
    return art  # type: ignore[no-any-return]


async def test_expired_artifact_on_other_read_paths(
    client: httpx.AsyncClient, make_key: KeyFactory, pg_url: str
) -> None:
    key = await make_key()
    art = await _expired_artifact(client, key, pg_url)
    # assemble task_state
    r = await client.post("/v1/assemble", json={
        "budget_tokens": 2000, "user_message": "What hosts?",
        "task_state": [{"artifact_id": art["artifact_id"]}]}, headers=key.headers)
    assert r.status_code == 404 or "nvme-7f3a" not in r.text, r.text
    # MCP recall_artifact over HTTP
    headers = await mcp_session(client, key)
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "recall_artifact", "arguments": {"artifact_id": art["artifact_id"]}}}
    m = await client.post("/mcp", json=call, headers=headers)
    assert "nvme-7f3a" not in m.text, m.text
    # context pack
    c = await client.post("/v1/context", json={"namespace": "n", "goal": "runner inventory"},
                          headers=key.headers)
    assert "Runner inventory zq" not in c.text, c.text
    # delete of an expired artifact is not a 500
    d = await client.delete(f"/v1/artifacts/{art['artifact_id']}", headers=key.headers)
    assert d.status_code < 500, d.text


GOAL = "goal-about-yves-41b"
DOMAIN_W = "domain-yves-8c1"
FIELD_W = "yves_field_7d2"
ART_NAME = "yves-artifact-name-3e9"
TAG_W = "tag-yves-6a0"


async def test_erase_scrubs_assemble_and_mcp_calls(
    client: httpx.AsyncClient, make_key: KeyFactory, sql: SqlRows
) -> None:
    key = await make_key()
    h = key.headers
    ns = "yves:s1"
    await client.post("/v1/remember", json={"namespace": ns, "content": TEXT, "tags": ["x"]},
                      headers=h)
    art = (await client.post("/v1/artifacts", json={
        "namespace": ns, "name": ART_NAME, "body": {FIELD_W: 1}}, headers=h)).json()
    a = await client.post("/v1/assemble", json={
        "budget_tokens": 3000, "user_message": "What now?",
        "memory": {"namespace": ns, "goal": GOAL, "domain": DOMAIN_W},
        "task_state": [{"artifact_id": art["artifact_id"], "fields": [FIELD_W, FIELD_W + "_missing"]}],
    }, headers=h)
    assert a.status_code == 200, a.text
    headers = await mcp_session(client, key)
    for n, (name, args) in enumerate([
        ("context", {"namespace": ns, "goal": GOAL + "-mcp"}),
        ("list_memories", {"namespace": ns, "tag": TAG_W + "-mcp"}),
        ("recall_artifact", {"artifact_id": art["artifact_id"], "fields": [FIELD_W + "_mcp"]}),
        ("wake", {"namespace": ns, "goal": GOAL + "-wake"}),
    ]):
        call = {"jsonrpc": "2.0", "id": 10 + n, "method": "tools/call",
                "params": {"name": name, "arguments": args}}
        await client.post("/mcp", json=call, headers=headers)
    await client.post("/v1/context", json={"namespace": ns + ":*", "goal": GOAL + "-sub"},
                      headers=h)
    erased = await client.delete("/v1/namespaces/yves", headers=h)
    assert erased.status_code == 200, erased.text
    after = await sql(
        "SELECT action, request::text || ' ' || coalesce(details::text, '') FROM audit_events "
        "WHERE org_id = :o", o=key.org_id)
    leftovers = [(r[0], r[1][:600]) for r in after
                 for w in (GOAL, DOMAIN_W, FIELD_W, ART_NAME, TAG_W) if w in r[1]]
    assert not leftovers, leftovers



async def test_export_leaves_out_expired_memories_and_their_artifacts(
    client: httpx.AsyncClient, make_key: KeyFactory, pg_url: str
) -> None:
    """review29: an expired memory (not yet purged) and its artifact were exported, body and
    all; expiry must remove everything erasure removes, and an erased memory is never exported."""
    from tests.lifecycle.test_transfer import export_lines

    key = await make_key()
    art = await _expired_artifact(client, key, pg_url)
    soon = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    gone = (await client.post("/v1/remember", json={
        "namespace": "n", "content": OTHER, "expires_at": soon}, headers=key.headers)).json()
    with psycopg.connect(pg_url) as conn:
        conn.execute("UPDATE memories SET expires_at = now() - interval '1 second' WHERE id = %s",
                     (uuid.UUID(gone["id"]),))
    live = (await client.post("/v1/remember", json={"namespace": "n", "content": TEXT},
                              headers=key.headers)).json()
    lines = await export_lines(pg_url, key.org)
    text = json.dumps(lines)
    assert live["id"] in text
    assert "nvme-7f3a" not in text and art["artifact_id"] not in text
    assert gone["id"] not in text and OTHER not in text
    assert lines[0]["memories"] == 1 and lines[-1] == {"kind": "end", "memories": 1, "artifacts": 0}
