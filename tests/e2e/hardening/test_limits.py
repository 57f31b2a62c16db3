"""Per-key rate limits (429 with Retry-After and an audit row) and request-size limits
(413 or 422 before any work)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from service.config import Settings
from service.domain.rate_limit import RateLimiter, SharedRateLimiter
from service.store.database import create_engine
from tests.conftest import AppFactory, KeyFactory, SqlRows

FACT = "The staging cluster runs Postgres 17 with pgvector 0.8 since the March upgrade."


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_bucket_allows_burst_then_the_rate() -> None:
    clock = FakeClock()
    limiter = RateLimiter(per_minute=60, burst=3, clock=clock)
    key = uuid.uuid4()
    assert [limiter.take(key) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.take(key) == pytest.approx(1.0)  # one token a second
    clock.now += 0.5
    assert limiter.take(key) == pytest.approx(0.5)  # a refusal takes nothing
    clock.now += 0.5
    assert limiter.take(key) == 0.0
    assert limiter.take(key) > 0
    clock.now += 3600  # idle: back to a full burst, never more
    assert [limiter.take(key) for _ in range(4)][-1] > 0
    assert limiter.take(uuid.uuid4()) == 0.0  # keys do not share a bucket


def test_full_buckets_are_dropped_when_the_table_is_full() -> None:
    clock = FakeClock()
    limiter = RateLimiter(per_minute=60, burst=2, clock=clock, max_buckets=10)
    busy = uuid.uuid4()
    limiter.take(busy)
    limiter.take(busy)
    for _ in range(9):
        limiter.take(uuid.uuid4())
    clock.now += 5  # every bucket has refilled
    limiter.take(uuid.uuid4())
    assert len(limiter._buckets) <= 2
    limiter.take(busy)  # a dropped bucket comes back full: nothing was lost
    assert limiter.take(busy) == 0.0


async def test_shared_buckets_are_one_bucket_for_every_process(
    pg_url: str, settings: Settings
) -> None:
    """Two limiters on two engines (two server processes) draw from one row per key."""
    engines = [create_engine(pg_url, settings, generic_plans=True) for _ in range(2)]
    try:
        first, second = (SharedRateLimiter(e, per_minute=60, burst=4) for e in engines)
        org, key = uuid.uuid4(), uuid.uuid4()
        waits = [await (first, second)[i % 2].acquire(org, key) for i in range(4)]
        assert waits == [0.0] * 4
        wait = await second.acquire(org, key)
        assert 0 < wait <= 1.0  # one token a second
        assert await first.acquire(org, key) > 0  # a refusal takes nothing, on either side
        await asyncio.sleep(1.05)
        assert await first.acquire(org, key) == 0.0  # refilled for the time that passed
        assert await second.acquire(uuid.uuid4(), uuid.uuid4()) == 0.0  # keys do not share
        # Concurrent takes never grant more than the bucket holds (one token a minute:
        # nothing refills during the test).
        slow = [SharedRateLimiter(e, per_minute=1, burst=4) for e in engines]
        other = uuid.uuid4()
        granted = await asyncio.gather(*(slow[i % 2].acquire(org, other) for i in range(12)))
        assert sum(1 for w in granted if w == 0.0) == 4
    finally:
        for engine in engines:
            await engine.dispose()


async def test_rate_limited_calls_get_429_retry_after_and_an_audit_row(
    app_with: AppFactory, make_key: KeyFactory, sql: SqlRows
) -> None:
    limited, other = await make_key(), await make_key()
    async with app_with(rate_limit_per_minute=60, rate_limit_burst=3) as client:
        for _ in range(3):
            ok = await client.get("/v1/memories", headers=limited.headers)
            assert ok.status_code == 200, ok.text
        refused = await client.post(
            "/v1/remember", json={"namespace": "alice", "content": FACT}, headers=limited.headers
        )
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "rate_limited"
        assert 1 <= int(refused.headers["Retry-After"]) <= 2
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


async def test_429_and_413_are_in_the_openapi_schema(app_with: AppFactory) -> None:
    async with app_with() as client:
        schema = (await client.get("/openapi.json")).json()
    remember = schema["paths"]["/v1/remember"]["post"]["responses"]
    assert {"413", "429"} <= set(remember)
    listing = schema["paths"]["/v1/memories"]["get"]["responses"]
    assert "429" in listing
    assert "413" not in listing
    assert "ErrorResponse" in schema["components"]["schemas"]


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


# --- request text (JsonGuard) --------------------------------------------------------------------


def test_json_body_problem_finds_nul_surrogates_and_depth() -> None:
    from service.api.json_guard import json_body_problem, query_problem

    assert json_body_problem(b'{"content": "fine \\u00e9 \\ud83d\\ude00"}') is None
    assert json_body_problem(b'{"content": "an escaped backslash: \\\\u0000"}') is None
    assert json_body_problem(b'{"items": [{"content": "x\\u0000"}]}') == (
        "items.0.content",
        "NUL characters are not allowed in text",
    )
    field, message = json_body_problem(b'{"metadata": {"\\udc00": 1}}')  # type: ignore[misc]
    assert field.startswith("metadata.")
    assert "surrogate" in message
    deep = b'{"metadata": {"x": ' + b"[" * 40 + b"]" * 40 + b"}}"
    assert json_body_problem(deep) == (
        "metadata.x." + ".".join(["0"] * 30),
        "JSON nests deeper than 32 levels",
    )
    assert (
        json_body_problem(b'{"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}') is None
    )  # in a string
    assert json_body_problem(b"{not json \\u0000") is None  # left to the endpoint
    assert query_problem(b"tag=%00") == ("tag", "NUL characters are not allowed in text")
    assert query_problem(b"tag=a%20b") is None


def test_json_guard_is_linear_on_unterminated_strings() -> None:
    """A string that never closes (every quote escaped) was retried from each later quote:
    40 KB of ``\\"`` held the event loop for 5 s, before any key was looked at."""
    import time

    from service.api.json_guard import json_body_problem

    body = b'{"a": "' + b'\\"' * 30_000 + b"[]" * 40
    started = time.perf_counter()
    json_body_problem(body)
    assert time.perf_counter() - started < 1.0
    many = b"[" + b"[]," * 300_000 + b"[]"  # unbalanced: the exact scan, still linear
    started = time.perf_counter()
    assert json_body_problem(many) is None
    assert time.perf_counter() - started < 3.0
    shallow = b"[" + b'[{"k": "[[[["}],' * 50_000 + b"[]]"
    assert json_body_problem(shallow) is None
    deep = b'{"x": ' + b'[{"k": ' * 17 + b"1" + b"}]" * 17 + b"}"
    assert json_body_problem(deep) == (
        "x." + ".".join(["0.k"] * 15) + ".0",
        "JSON nests deeper than 32 levels",
    )


async def test_large_bodies_are_checked_off_the_event_loop(
    app_with: AppFactory, make_key: KeyFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard's scan of a large body runs in a worker thread: /healthz answers while it
    works (a slow scan stands in for a hostile 4 MB body)."""
    import asyncio
    import time

    from service.api import json_guard

    real = json_guard.json_body_problem

    def slow(body: bytes, max_depth: int = json_guard.MAX_JSON_DEPTH) -> tuple[str, str] | None:
        time.sleep(1.5)
        return real(body, max_depth)

    monkeypatch.setattr(json_guard, "json_body_problem", slow)
    key = await make_key()
    body = b'{"namespace": "alice", "content": "' + b"word " * 20_000 + b'"}'
    async with app_with() as client:
        started = time.perf_counter()
        post = asyncio.create_task(
            client.post(
                "/v1/remember",
                content=body,
                headers={**key.headers, "Content-Type": "application/json"},
            )
        )
        await asyncio.sleep(0.2)  # the post is in the guard's scan by now
        health = await client.get("/healthz")
        assert health.status_code == 200
        assert time.perf_counter() - started < 1.2  # the scan takes 1.5 s
        await post


async def test_a_body_that_is_not_json_names_the_body(
    app_with: AppFactory, make_key: KeyFactory
) -> None:
    """FastAPI reports malformed JSON at ``("body", <character offset>)``: the error named a
    field ``5`` (review E)."""
    key = await make_key()
    async with app_with() as client:
        response = await client.post(
            "/v1/remember",
            content=b'{"a": nope}',
            headers={**key.headers, "Content-Type": "application/json"},
        )
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert error["field"] == "body"
    assert error["errors"] == [
        {"field": "body", "message": "the body is not valid JSON at character 6: Expecting value"}
    ]
