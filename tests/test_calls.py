"""service/calls.py: the call runner every face goes through (authenticate, rate limit, unit
of work, audit on failure), driven directly, as a new face (a console, a client) would."""

from __future__ import annotations

import uuid

import httpx
import psycopg
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from service.app import create_app
from service.calls import CallRunner, Transport, failure_of, outcome_of, parse_bearer
from service.domain import keys as key_service
from service.domain.audit import AuditAction, AuditContext
from service.domain.auth import Caller
from service.embedding.fake import FakeEmbedder
from service.errors import AuthenticationError, GateRejected, InvalidInput, NotFound
from service.resources import Resources
from tests.conftest import AppFactory, Key, KeyFactory, SqlRows, make_settings


def _runner(app: FastAPI) -> CallRunner:
    resources: Resources = app.state.ctx
    return resources.runner


@pytest.mark.parametrize(
    ("header", "token"),
    [("Bearer abc", "abc"), ("bearer  abc ", "abc"), ("BEARER x.y", "x.y")],
)
def test_parse_bearer(header: str, token: str) -> None:
    assert parse_bearer(header) == token


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer   ", "Basic abc", "abc"])
def test_parse_bearer_refuses(header: str | None) -> None:
    with pytest.raises(AuthenticationError):
        parse_bearer(header)


def test_failures_map_to_status_code_and_details() -> None:
    assert failure_of(NotFound("x")) == (404, "not_found", {})
    assert failure_of(InvalidInput("items.0.content", "bad"))[2] == {"field": "items.0.content"}
    gated = failure_of(GateRejected([{"code": "fragment", "hint": "h"}]))
    assert gated[0] == 422 and gated[2]["reasons"] == ["fragment"]
    assert failure_of(RuntimeError("boom")) == (500, "internal_error", {})
    assert [outcome_of(s) for s in (422, 404, 429, 500)] == [
        "rejected",
        "refused",
        "refused",
        "error",
    ]


async def test_one_resources_object_serves_every_face(app: FastAPI) -> None:
    resources: Resources = app.state.ctx
    assert resources.runner is resources.runner
    assert resources.pipeline.redactor is not None
    assert resources.has_embedder


async def test_a_token_is_authenticated_and_a_bad_one_refused(app: FastAPI, key: Key) -> None:
    runner = _runner(app)
    caller = await runner.authenticate(key.key)
    assert caller.key_id == key.key_id
    for bad in ("nope", "ctxp_" + "x" * 40, "ctxp_" + "x" * 300):
        with pytest.raises(AuthenticationError):
            await runner.authenticate(bad)


async def test_run_commits_and_the_domain_writes_the_row(
    app: FastAPI, key: Key, sql: SqlRows
) -> None:
    async def work(session: AsyncSession, caller: Caller, ctx: AuditContext) -> uuid.UUID:
        ctx.namespace = "calls"
        from service.domain import audit as audit_service

        await audit_service.record(session, ctx, outcome="ok", status_code=200)
        return ctx.audit_id

    audit_id = await _runner(app).run(key.key, AuditAction.LIST, work)
    rows = await sql("SELECT action, outcome FROM audit_events WHERE id = :id", id=audit_id)
    assert [tuple(r) for r in rows] == [("list", "ok")]


async def test_a_failed_run_rolls_back_and_audits_once(
    app: FastAPI, key: Key, sql: SqlRows
) -> None:
    org = f"calls-{uuid.uuid4().hex[:8]}"
    seen: list[uuid.UUID] = []

    async def work(session: AsyncSession, caller: Caller, ctx: AuditContext) -> None:
        seen.append(ctx.audit_id)
        await key_service.create_key(session, org=org)  # rolled back with the call
        raise InvalidInput("content", "bad")

    with pytest.raises(InvalidInput):
        await _runner(app).run(key.key, AuditAction.REMEMBER, work, transport=Transport.MCP)
    assert await sql("SELECT 1 FROM orgs WHERE name = :n", n=org) == []
    rows = await sql(
        "SELECT outcome, status_code, details FROM audit_events WHERE id = :id", id=seen[0]
    )
    assert len(rows) == 1
    outcome, status, details = rows[0]
    assert (outcome, status) == ("rejected", 422)
    assert details == {"error_code": "validation_error", "field": "content", "transport": "mcp"}


async def test_an_authenticated_caller_skips_authentication(app: FastAPI, key: Key) -> None:
    """A face that resolved the caller itself (the /mcp endpoint; a console's session)."""
    caller = await _runner(app).authenticate(key.key)

    async def work(session: AsyncSession, given: Caller, ctx: AuditContext) -> Caller:
        return given

    assert await _runner(app).run(caller, AuditAction.LIST, work) is caller


async def test_the_rate_limit_refuses_and_audits(
    app_with: AppFactory, key: Key, sql: SqlRows
) -> None:
    async with app_with(rate_limit_per_minute=60, rate_limit_burst=1) as client:
        runner = _runner(client.app)  # type: ignore[attr-defined]
        caller = await runner.authenticate(key.key)
        await runner.admit(caller, request={"tool": "list"})
        with pytest.raises(Exception, match="Rate limit exceeded") as caught:
            await runner.admit(caller, request={"tool": "list"})
        assert caught.value.details["retry_after"] >= 1  # type: ignore[attr-defined]
    rows = await sql(
        "SELECT outcome, status_code, request FROM audit_events "
        "WHERE key_id = :k AND action = 'rate_limited'",
        k=key.key_id,
    )
    assert [(r[0], r[1], r[2]) for r in rows] == [("refused", 429, {"tool": "list"})]


async def test_a_rate_limit_row_names_the_face_it_came_through(
    pg_url: str, make_key: KeyFactory
) -> None:
    """Every face is admitted by the runner, and its refusal row says which face it was
    (the runner labelled every one ``http``)."""
    from tests.console.conftest import csrf_of
    from tests.mcp.test_http import HEADERS, INIT

    key = await make_key()
    settings = make_settings(pg_url, rate_limit_per_minute=1, rate_limit_burst=1,
                             audit_prune_interval_seconds=0)
    application = create_app(settings, embedder=FakeEmbedder(), database_url=pg_url)
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            assert (await client.post("/mcp", json=INIT, headers={**HEADERS, **key.headers})).status_code == 200
            assert (await client.post("/mcp", json=INIT, headers={**HEADERS, **key.headers})).status_code == 429
        other = await make_key(org=key.org)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            form = await client.get("/ui/login")
            signed = await client.post("/ui/login", data={"csrf": csrf_of(form.text), "key": other.key},
                                       follow_redirects=False)
            assert signed.status_code == 303
            assert (await client.get("/ui/")).status_code == 429
        with psycopg.connect(pg_url) as conn:
            rows = conn.execute(
                "SELECT key_id, details->>'transport' FROM audit_events WHERE org_id = %s "
                "AND action = 'rate_limited'", (key.org_id,),
            ).fetchall()
    faces = {str(k): t for k, t in rows}
    assert faces == {str(key.key_id): "mcp", str(other.key_id): "console"}
