"""domain/audit/read_queue.py: with ``read_audit = queued`` a read call's row leaves its
transaction for the process's queue and arrives as inline would have written it; the answer's
audit_id is the row's id; shutdown drains the queue; a full queue falls back inline; a read of
the trail in the process sees every row queued before it; a failed batch is retried, then
written row by row; a rolled-back call leaves no row; write calls keep their row inline."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text

from service import operations
from service.domain import remember as remember_service
from service.domain.audit import AuditAction, AuditContext, ReadAuditQueue, record, settle
from service.domain.audit.read_queue import MAX_ROW_ATTEMPTS, attach, queued_row
from service.domain.auth import Caller
from service.errors import ServiceUnavailable
from service.resources import Resources
from service.schemas.context import ContextRequest
from service.schemas.memories import MemoryQuery, MemoryRef, RememberRequest
from service.schemas.tool_results import ToolResultRequest
from service.store.database import create_engine, make_sessionmaker
from tests.conftest import AppFactory, Key, KeyFactory, SqlRows, make_settings

GOAL = "how do we rotate the refresh token in the auth service"
FACTS = [
    "The auth service rotates refresh tokens every 24 hours through the token job.",
    "Refresh token rotation failures page the identity on-call rotation.",
]
# Never flushes on its own within a test: only a read of the trail, or shutdown, writes.
HELD = {"read_audit": "queued", "read_audit_flush_ms": 600_000, "read_audit_batch_rows": 10_000}
COMPARED = (
    "org_id caller action namespace request outcome status_code memory_ids details "
    "redaction_count rejection_count"
).split()


async def _remember(client: httpx.AsyncClient, key: Key) -> list[str]:
    ids = []
    for fact in FACTS:
        body = {"content": fact, "namespace": "alice:s1", "type": "rule", "project": "auth"}
        response = await client.post("/v1/remember", json=body, headers=key.headers)
        assert response.status_code in (200, 201), response.text
        ids.append(response.json()["id"])
    return ids


async def _reads(client: httpx.AsyncClient, key: Key, memory_id: str) -> list[str]:
    """One call of each read the HTTP API has (its pack in assemble too); the audit ids the
    answers carry (a memory list or get answers none)."""
    context = await client.post(
        "/v1/context", json={"goal": GOAL, "namespace": "alice:s1:t1"}, headers=key.headers
    )
    listed = await client.get("/v1/memories", params={"namespace": "alice:s1"}, headers=key.headers)
    got = await client.get(f"/v1/memories/{memory_id}", headers=key.headers)
    tool = await client.post(
        "/v1/tool-results",
        json={"tool_call_id": "c1", "tool_name": "grep", "result": "a\nb\n", "budget_tokens": 50},
        headers=key.headers,
    )
    assembled = await client.post(
        "/v1/assemble",
        json={
            "budget_tokens": 4000,
            "user_message": "Fix the rotation test.",
            "memory": {"goal": GOAL, "namespace": "alice:s1"},
        },
        headers=key.headers,
    )
    for response in (context, listed, got, tool, assembled):
        assert response.status_code == 200, response.text
    return [
        context.json()["audit_id"],
        tool.json()["audit_id"],
        assembled.json()["memory_audit_id"],
        assembled.json()["audit_id"],
    ]


async def _rows_of(sql: SqlRows, key: Key) -> list[dict[str, Any]]:
    """The key's rows, oldest first (read straight from the table: no settle)."""
    found = await sql(
        "SELECT * FROM audit_events WHERE org_id = :o AND key_id = :k ORDER BY created_at, id",
        o=key.org_id,
        k=key.key_id,
    )
    return [dict(r._mapping) for r in found]


async def _rows(sql: SqlRows, ids: list[str]) -> list[dict[str, Any]]:
    """The rows of ``ids``, in that order (read straight from the table: no settle)."""
    found = await sql(
        "SELECT * FROM audit_events WHERE id = ANY(CAST(:ids AS uuid[]))", ids=list(ids)
    )
    by_id = {str(r.id): dict(r._mapping) for r in found}
    return [by_id[i] for i in ids if i in by_id]


def _comparable(row: dict[str, Any], parent: str) -> dict[str, Any]:
    out = {c: row[c] for c in COMPARED}
    if out["details"].get("part_of") == parent:
        out["details"] = {**out["details"], "part_of": "<the assemble call>"}
    return out


async def test_queued_rows_arrive_as_inline_ones_with_the_answers_ids(
    app_with: AppFactory, key: Key, make_key: KeyFactory, sql: SqlRows
) -> None:
    inline_key, queued_key = await make_key(org=key.org), await make_key(org=key.org)
    async with app_with() as client:
        memory_id = (await _remember(client, key))[0]
        inline_ids = await _reads(client, inline_key, memory_id)
    async with app_with(**HELD) as client:
        queued_ids = await _reads(client, queued_key, memory_id)
        assert await _rows_of(sql, queued_key) == []  # still queued: none in the table yet
    # The app's shutdown drained the queue: every answer's audit_id is a row's id.
    inline, queued = await _rows_of(sql, inline_key), await _rows_of(sql, queued_key)
    assert [r["action"] for r in queued] == [
        "context", "list", "memory_get", "tool_result", "context", "assemble"
    ]  # fmt: skip
    assert [
        str(r["id"]) for r in queued if r["action"] in ("context", "tool_result", "assemble")
    ] == queued_ids
    assert [_comparable(r, queued_ids[-1]) for r in queued] == [
        _comparable(r, inline_ids[-1]) for r in inline
    ]
    # A queued row is stamped when the call recorded it (the listing above is by created_at,
    # so in call order), after what came before and before what follows.
    after = await sql("SELECT now() AS at")
    assert inline[-1]["created_at"] < queued[0]["created_at"] < after[0].at


async def test_the_trail_and_replay_see_a_read_made_just_before(
    app_with: AppFactory, key: Key, make_key: KeyFactory, sql: SqlRows
) -> None:
    async with app_with(**HELD) as client:
        await _remember(client, key)
        response = await client.post(
            "/v1/context", json={"goal": GOAL, "namespace": "alice:s1"}, headers=key.headers
        )
        audit_id = response.json()["audit_id"]
        assert await _rows(sql, [audit_id]) == []
        got = await client.get(f"/v1/audit/{audit_id}", headers=key.headers)
        assert got.status_code == 200, got.text
        assert got.json()["action"] == "context"
        again = await client.post(
            "/v1/context", json={"goal": GOAL, "namespace": "alice:s1"}, headers=key.headers
        )
        listed = await client.get("/v1/audit", params={"limit": 5}, headers=key.headers)
        assert again.json()["audit_id"] in [i["id"] for i in listed.json()["items"]]
        replay = await client.post(f"/v1/audit/{audit_id}/replay", headers=key.headers)
        assert replay.status_code == 200, replay.text
        # Another org sees none of it, by id or in its listing.
        other = await make_key()
        assert (await client.get(f"/v1/audit/{audit_id}", headers=other.headers)).status_code == 404
        theirs = await client.get("/v1/audit", params={"limit": 500}, headers=other.headers)
        assert theirs.json()["total"] == 0
        with pytest.raises(httpx.HTTPStatusError):
            (
                await client.post(f"/v1/audit/{audit_id}/replay", headers=other.headers)
            ).raise_for_status()
    rows = await _rows(sql, [audit_id, replay.json()["audit_id"]])
    assert [r["org_id"] for r in rows] == [key.org_id, key.org_id]


async def test_a_write_keeps_its_row_in_its_transaction(
    app_with: AppFactory, key: Key, sql: SqlRows
) -> None:
    async with app_with(**HELD) as client:
        response = await client.post(
            "/v1/remember",
            json={"content": FACTS[0], "namespace": "alice:s1", "type": "rule"},
            headers=key.headers,
        )
        audit_id = response.json()["audit_id"]
        assert [str(r["id"]) for r in await _rows(sql, [audit_id])] == [audit_id]


async def test_a_full_queue_falls_back_to_inline(
    app_with: AppFactory, key: Key, sql: SqlRows
) -> None:
    async with app_with(**HELD, read_audit_queue_rows=1) as client:
        body = {"goal": GOAL, "namespace": "alice:s1"}
        first = await client.post("/v1/context", json=body, headers=key.headers)
        second = await client.post("/v1/context", json=body, headers=key.headers)
        ids = [first.json()["audit_id"], second.json()["audit_id"]]
        assert [str(r["id"]) for r in await _rows(sql, ids)] == [ids[1]]  # inline at once
        queue = client.app.state.ctx.read_audit  # type: ignore[attr-defined]
        assert (len(queue.rows), queue.reserved) == (1, 0)
    assert len(await _rows(sql, ids)) == 2


# --- the queue itself, on a runner's unit of work ------------------------------------------------


@asynccontextmanager
async def _queued(app_with: AppFactory, **settings: Any) -> AsyncIterator[Resources]:
    async with app_with(**{**HELD, **settings}) as client:
        yield client.app.state.ctx  # type: ignore[attr-defined]


def _caller_of(key: Key) -> Caller:
    return Caller(key.org_id, key.key_id, "queued", frozenset({"read", "write"}))


async def test_a_rolled_back_call_leaves_no_row_and_no_place_held(
    app_with: AppFactory, key: Key, sql: SqlRows
) -> None:
    async with _queued(app_with) as res:
        ctx = AuditContext(AuditAction.LIST, _caller_of(key), read_only=True)
        held = []

        async def fails_after_recording() -> None:
            async with res.runner.unit_of_work() as session:
                await record(session, ctx, outcome="ok", status_code=200)
                assert res.read_audit is not None
                held.append(res.read_audit.reserved)
                raise RuntimeError("the call fails after recording")

        with pytest.raises(RuntimeError):
            await fails_after_recording()
        assert held == [1]
        assert res.read_audit is not None
        assert (len(res.read_audit.rows), res.read_audit.reserved) == (0, 0)
    assert await _rows(sql, [str(ctx.audit_id)]) == []


@pytest.mark.parametrize(
    ("operation", "request_of"),
    [
        (operations.CONTEXT, lambda m: ContextRequest(goal=GOAL, namespace="alice:s1")),
        (operations.WAKE, lambda m: ContextRequest(namespace="alice:s1", layer="wake")),
        (operations.LIST_MEMORIES, lambda m: MemoryQuery(namespace="alice:s1")),
        (operations.GET_MEMORY, lambda m: MemoryRef(memory_id=m)),
        (
            operations.TOOL_RESULT,
            lambda m: ToolResultRequest(
                tool_call_id="c", tool_name="t", result="x y z", budget_tokens=50
            ),
        ),
    ],
)
async def test_a_queued_read_writes_nothing_in_its_transaction(
    app_with: AppFactory, key: Key, operation: Any, request_of: Any
) -> None:
    """What makes queueing safe: a read-only operation's transaction writes nothing, so no
    write can ever wait in the queue for its row."""
    async with _queued(app_with) as res:
        memory_id = await _one_memory(res, key)

        async def fn(session: Any, caller: Any, ctx: AuditContext) -> Any:
            await operation.answer(res, session, caller, ctx, request_of(memory_id))
            xid = await session.execute(text("SELECT pg_current_xact_id_if_assigned()"))
            return xid.scalar_one()

        assert operation.read_only
        xid = await res.runner.run(_caller_of(key), operation.action, fn, read_only=True)
        assert xid is None
        assert res.read_audit is not None and len(res.read_audit.rows) >= 1


async def _one_memory(res: Resources, key: Key) -> uuid.UUID:
    ctx = AuditContext(AuditAction.REMEMBER, _caller_of(key))
    async with res.runner.unit_of_work() as session:
        answer = await remember_service.remember(
            session,
            res.embedder,
            res.settings,
            _caller_of(key),
            RememberRequest(content=FACTS[0], namespace="alice:s1", type="rule"),
            ctx,
        )
    return answer.id


def _row(key: Key, **values: Any) -> Any:
    return queued_row(
        {
            "id": uuid.uuid4(),
            "org_id": key.org_id,
            "key_id": key.key_id,
            "caller": "queued",
            "action": "context",
            "namespace": "alice:s1",
            "request": {"goal": "a goal that must never reach a log"},
            "outcome": "ok",
            "status_code": 200,
            "memory_ids": [uuid.uuid4()],
            "details": {"gated_out": 1},
            "redaction_count": 0,
            "rejection_count": 0,
            "latency_ms": 1.0,
            **values,
        }
    )


async def test_a_failed_batch_is_retried_then_written_row_by_row(
    app: FastAPI, key: Key, sql: SqlRows, caplog: pytest.LogCaptureFixture
) -> None:
    queue = ReadAuditQueue(
        app.state.ctx.sessionmaker, capacity=10, batch_rows=10, flush_seconds=60, per_org=False
    )
    good = [_row(key), _row(key)]
    bad = _row(key, caller="x" * 300)  # longer than the column: the database refuses it
    queue.reserved = 3
    queue.submit([good[0], bad, good[1]])
    with caplog.at_level(logging.WARNING, logger="ctxpack.audit"):
        for _ in range(MAX_ROW_ATTEMPTS):
            await queue.flush()
    ids = [str(r.values["id"]) for r in good]
    assert [str(r["id"]) for r in await _rows(sql, ids)] == ids
    assert await _rows(sql, [str(bad.values["id"])]) == []
    assert (len(queue.rows), queue.dropped, queue.written) == (0, 1, 2)
    messages = [r.getMessage() for r in caplog.records]
    assert "read_audit_batch_failed" in messages and "read_audit_row_dropped" in messages
    logged = " ".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records)
    assert "must never reach a log" not in logged and "x" * 300 not in logged
    assert str(bad.values["id"]) in logged


async def test_rows_stay_queued_while_the_database_does_not_answer(pg_url: str, key: Key) -> None:
    dead = pg_url.rsplit("@", 1)[0] + "@127.0.0.1:1/nowhere"
    engine = create_engine(dead, make_settings(pg_url))
    queue = ReadAuditQueue(
        make_sessionmaker(engine), capacity=10, batch_rows=10, flush_seconds=60, per_org=False
    )
    rows = [_row(key), _row(key)]
    queue.reserved = 2
    queue.submit(rows)
    try:
        with pytest.raises(ServiceUnavailable):
            await queue.flush()
    finally:
        await engine.dispose()
    assert list(queue.rows) == rows and queue.dropped == 0


async def test_a_row_is_frozen_when_recorded(key: Key) -> None:
    request: dict[str, Any] = {"name": "n"}
    row = _row(key, request=request)
    request.pop("name")
    assert row.values["request"] == '{"name": "n"}'


async def test_settle_writes_the_calls_own_rows_into_its_transaction(
    app_with: AppFactory, key: Key, sql: SqlRows
) -> None:
    async with _queued(app_with) as res:
        assert res.read_audit is not None
        ctx = AuditContext(AuditAction.LIST, _caller_of(key), read_only=True)
        async with res.sessionmaker() as session:
            deferred = attach(session, res.read_audit)
            await record(session, ctx, outcome="ok", status_code=200)
            assert len(deferred.rows) == 1
            await settle(session)
            seen = await session.execute(
                text("SELECT count(*) FROM audit_events WHERE id = :i"), {"i": ctx.audit_id}
            )
            assert seen.scalar_one() == 1
            await session.rollback()  # the call failed after all: its row goes with it
        assert (deferred.rows, res.read_audit.reserved) == ([], 0)
    assert await _rows(sql, [str(ctx.audit_id)]) == []
