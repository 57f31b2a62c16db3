"""POST /v1/tool-results over HTTP: the tool message, read scope, rate limit, 413, NaN,
identifiers holding secrets, and an audit row with sizes and labels, never content."""

from __future__ import annotations

import json

import httpx

from tests.conftest import AppFactory, Key, KeyFactory, SqlRows

SECRET = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
LOG = "\n".join(
    [f"curl -H 'Authorization: Bearer {SECRET}' https://api.internal/logs"]
    + [f"2026-11-26 10:00:{i % 60:02d} INFO served request {i} in {i % 50} ms" for i in range(3000)]
    + ["ERROR payment-worker: upstream 502 from ledger.internal", "exit code 2"]
)


async def test_envelope_answers_the_tool_message_and_audits_without_content(
    client: httpx.AsyncClient, key: Key, sql: SqlRows
) -> None:
    response = await client.post(
        "/v1/tool-results",
        json={
            "tool_call_id": "call_7a3f",
            "tool_name": "search_logs",
            "result": LOG,
            "budget_tokens": 300,
        },
        headers=key.headers,
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["role"] == "tool" and body["tool_call_id"] == "call_7a3f"
    assert SECRET not in response.text
    assert body["redactions"] == [{"label": "GITHUB_TOKEN", "count": 1}]
    assert body["tokens_after"] <= 300 < body["tokens_before"]
    assert body["strategy"] == "text" and body["content_type"] == "text" and body["trimmed"]
    assert "ERROR payment-worker: upstream 502 from ledger.internal" in body["content"]
    assert body["content"].rstrip().endswith("exit code 2")
    assert body["tokenizer"].startswith("fake")
    rows = await sql(
        "SELECT action, status_code, request, details, redaction_count FROM audit_events "
        "WHERE org_id = :o",
        o=key.org_id,
    )
    [row] = rows
    assert (row.action, row.status_code, row.redaction_count) == ("tool_result", 200, 1)
    stored = json.dumps(row.request) + json.dumps(row.details)
    assert (
        SECRET not in stored and "payment-worker" not in stored and "served request" not in stored
    )
    assert row.details["tool_name"] == "search_logs"
    assert row.details["redactions"] == {"GITHUB_TOKEN": 1}
    assert row.details["bytes_before"] == body["bytes_before"]
    assert row.details["tokens_after"] == body["tokens_after"]
    assert str(row.details["cuts"]["lines"]) in json.dumps(body["cuts"])


async def test_json_result_with_fields_and_non_finite_numbers(
    client: httpx.AsyncClient, key: Key
) -> None:
    raw = (
        b'{"tool_call_id": "call_1", "tool_name": "db.query", "budget_tokens": 200,'
        b' "fields": ["rows.id", "rows.loss", "total"],'
        b' "result": {"rows": [{"id": 1, "loss": NaN, "secret": "x"},'
        b' {"id": 2, "loss": Infinity, "secret": "y"}], "total": 2}}'
    )
    response = await client.post(
        "/v1/tool-results",
        content=raw,
        headers={**key.headers, "content-type": "application/json"},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["strategy"] == "fields" and body["content_type"] == "json"
    assert json.loads(body["content"]) == {
        "rows": [{"id": 1, "loss": "NaN"}, {"id": 2, "loss": "Infinity"}],
        "total": 2,
    }


async def test_bad_input_is_422_naming_the_field(client: httpx.AsyncClient, key: Key) -> None:
    base = {"tool_call_id": "call_1", "tool_name": "t", "result": "x"}
    cases = [
        ({**base, "budget_tokens": 5}, "budget_tokens"),
        ({**base, "strategy": "fields"}, "fields"),
        ({**base, "fields": ["a..b"]}, "fields"),
        ({**base, "tool_call_id": "has space"}, "tool_call_id"),
        ({**base, "tool_name": SECRET}, "tool_name"),
        ({k: v for k, v in base.items() if k != "result"}, "result"),
    ]
    for body, field in cases:
        response = await client.post("/v1/tool-results", json=body, headers=key.headers)
        assert response.status_code == 422, (body, response.text)
        assert response.json()["error"]["field"] == field, response.text
        assert SECRET not in response.text


async def test_needs_read_scope(client: httpx.AsyncClient, key: Key, make_key: KeyFactory) -> None:
    writer = await make_key(org=key.org, scopes=["write"])
    body = {"tool_call_id": "call_1", "tool_name": "t", "result": "x"}
    denied = await client.post("/v1/tool-results", json=body, headers=writer.headers)
    assert denied.status_code == 403
    assert denied.json()["error"]["code"] == "scope_denied"
    reader = await make_key(org=key.org, scopes=["read"])
    assert (
        await client.post("/v1/tool-results", json=body, headers=reader.headers)
    ).status_code == 200
    assert (await client.post("/v1/tool-results", json=body)).status_code == 401


async def test_rate_limit_and_body_limit_apply(app_with: AppFactory, make_key: KeyFactory) -> None:
    limited = await make_key()
    body = {"tool_call_id": "call_1", "tool_name": "t", "result": "x"}
    async with app_with(rate_limit_per_minute=60, rate_limit_burst=2, max_body_bytes=4096) as c:
        for _ in range(2):
            assert (
                await c.post("/v1/tool-results", json=body, headers=limited.headers)
            ).status_code == 200
        refused = await c.post("/v1/tool-results", json=body, headers=limited.headers)
        assert refused.status_code == 429
    other = await make_key()
    async with app_with(max_body_bytes=4096) as c:
        big = {**body, "result": "y" * 5000}
        too_large = await c.post("/v1/tool-results", json=big, headers=other.headers)
        assert too_large.status_code == 413
        assert too_large.json()["error"]["code"] == "payload_too_large"
