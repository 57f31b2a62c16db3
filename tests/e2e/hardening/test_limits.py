"""Per-key rate limits (429 with Retry-After and an audit row) and request-size limits
(413 or 422 before any work)."""

from __future__ import annotations

import pytest

from tests.conftest import AppFactory, KeyFactory, SqlRows

FACT = "The staging cluster runs Postgres 17 with pgvector 0.8 since the March upgrade."


async def test_rate_limited_calls_get_429_retry_after_and_an_audit_row(
    app_with: AppFactory, make_key: KeyFactory, sql: SqlRows
) -> None:
    limited, other = await make_key(), await make_key()
    # One token every 10 s: the bucket stays empty from the refused remember to the MCP
    # call however slow the machine (at 60 a minute a second's wait refilled it, and a run
    # on a loaded machine saw the MCP call answered).
    async with app_with(rate_limit_per_minute=6, rate_limit_burst=3) as client:
        for _ in range(3):
            ok = await client.get("/v1/memories", headers=limited.headers)
            assert ok.status_code == 200, ok.text
        refused = await client.post(
            "/v1/remember", json={"namespace": "alice", "content": FACT}, headers=limited.headers
        )
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "rate_limited"
        assert 1 <= int(refused.headers["Retry-After"]) <= 10
        # Other keys have buckets of their own.
        assert (await client.get("/v1/memories", headers=other.headers)).status_code == 200
        # MCP over HTTP takes from the same bucket.
        mcp = await client.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={**limited.headers, "Accept": "application/json, text/event-stream"},
        )
        assert mcp.status_code == 429
        assert mcp.json()["error"]["code"] == "rate_limited"
    # The refused calls did no work: nothing stored, and each left a refusal row.
    assert await sql("SELECT id FROM memories WHERE org_id = :o", o=limited.org_id) == []
    rows = await sql(
        "SELECT action, outcome, status_code, request, details FROM audit_events "
        "WHERE org_id = :o AND status_code = 429 ORDER BY created_at",
        o=limited.org_id,
    )
    assert len(rows) == 2
    assert {r.action for r in rows} == {"rate_limited"}
    assert {r.outcome for r in rows} == {"refused"}
    assert {r.request["route"] for r in rows} == {"/v1/remember", "/mcp"}
    assert all(r.details["error_code"] == "rate_limited" for r in rows)


async def test_rate_limit_zero_disables_the_limiter(
    app_with: AppFactory, make_key: KeyFactory
) -> None:
    key = await make_key()
    async with app_with(rate_limit_per_minute=0, rate_limit_burst=1) as client:
        assert client.app.state.ctx.limiter is None  # type: ignore[attr-defined]
        for _ in range(5):
            assert (await client.get("/v1/whoami", headers=key.headers)).status_code == 200


async def test_unauthenticated_calls_are_refused_before_the_limiter(
    app_with: AppFactory,
) -> None:
    async with app_with(rate_limit_per_minute=60, rate_limit_burst=1) as client:
        for _ in range(3):
            response = await client.get("/v1/whoami", headers={"Authorization": "Bearer nope"})
            assert response.status_code == 401


# --- request size -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chunked", "content_type"),
    [
        (False, "application/json"),
        (True, "application/json"),
        (False, "text/plain"),
        (True, "text/plain"),
    ],
)
async def test_oversized_body_is_413_before_any_work(
    app_with: AppFactory, make_key: KeyFactory, sql: SqlRows, chunked: bool, content_type: str
) -> None:
    key = await make_key()
    body = b'{"namespace": "alice", "content": "' + b"x" * 5000 + b'"}'
    async with app_with(max_body_bytes=2048) as client:

        async def stream():  # no Content-Length: the guard counts what it reads
            for i in range(0, len(body), 512):
                yield body[i : i + 512]

        response = await client.post(
            "/v1/remember",
            content=stream() if chunked else body,
            headers={**key.headers, "Content-Type": content_type},
        )
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    # Before any work: no memory, and not even an audit row (the key was never looked at).
    assert await sql("SELECT 1 FROM memories WHERE org_id = :o", o=key.org_id) == []
    assert await sql("SELECT 1 FROM audit_events WHERE org_id = :o", o=key.org_id) == []


async def test_oversized_fields_are_422_naming_the_field(
    app_with: AppFactory, make_key: KeyFactory, sql: SqlRows
) -> None:
    key = await make_key()
    async with app_with(max_batch_items=5) as client:
        cases = [
            ({"namespace": "a" * 65, "content": FACT}, "namespace"),
            ({"namespace": "alice", "content": FACT, "name": "n" * 301}, "name"),
            ({"namespace": "alice", "content": FACT, "tags": ["t"] * 33}, "tags"),
            ({"namespace": "alice", "content": FACT, "tags": ["t" * 65]}, "tags"),
            ({"namespace": "alice", "content": FACT, "url": "u" * 2001}, "url"),
            ({"namespace": "alice", "content": FACT, "metadata": {"k": "v" * 20000}}, "metadata"),
        ]
        for body, field in cases:
            response = await client.post("/v1/remember", json=body, headers=key.headers)
            assert response.status_code == 422, (field, response.text)
            assert response.json()["error"]["field"].startswith(field), response.text
        too_long = await client.post(
            "/v1/remember",
            json={"namespace": "alice", "content": FACT + " " + "word " * 20000},
            headers=key.headers,
        )
        assert too_long.status_code == 422
        assert "oversize" in str(too_long.json()["error"]["reasons"])
        batch = await client.post(
            "/v1/remember/batch",
            json={"items": [{"namespace": "alice", "content": f"{FACT} ({i})"} for i in range(6)]},
            headers=key.headers,
        )
        assert batch.status_code == 422
        assert batch.json()["error"]["field"] == "items"
    assert await sql("SELECT 1 FROM memories WHERE org_id = :o", o=key.org_id) == []
