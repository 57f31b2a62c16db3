"""record(): one row per call, with every field; a read-only call's row never waits for a
WAL flush, a write call's row commits with the write."""

from __future__ import annotations

import uuid

from fastapi import FastAPI
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from service.domain.audit import AuditContext, record
from service.domain.auth import Caller
from service.store.models import AuditEvent, Org
from tests.conftest import Key


def _caller(key: Key) -> Caller:
    return Caller(key.org_id, key.key_id, "recorder", frozenset({"read", "write"}))


async def _synchronous_commit(session: AsyncSession) -> str:
    return str((await session.execute(text("SHOW synchronous_commit"))).scalar_one())


async def test_records_one_whole_row(app: FastAPI, key: Key) -> None:
    ctx = AuditContext(action="context", caller=_caller(key), namespace="alice:s1")
    ctx.request = {"goal": "g", "limit": 5}
    memory = uuid.uuid4()
    async with app.state.ctx.sessionmaker() as session:
        audit_id = await record(
            session,
            ctx,
            outcome="ok",
            status_code=200,
            memory_ids=[memory],
            details={"gated_out": 2},
            redaction_count=1,
            rejection_count=0,
        )
        await session.commit()
    assert audit_id == ctx.audit_id
    async with app.state.ctx.sessionmaker() as session:
        rows = (
            (await session.execute(select(AuditEvent).where(AuditEvent.org_id == key.org_id)))
            .scalars()
            .all()
        )
    assert len(rows) == 1
    row = rows[0]
    assert (row.id, row.key_id, row.caller, row.action, row.namespace) == (
        audit_id,
        key.key_id,
        "recorder",
        "context",
        "alice:s1",
    )
    assert row.request == {"goal": "g", "limit": 5}
    assert row.details == {"gated_out": 2}
    assert row.memory_ids == [memory]
    assert (row.outcome, row.status_code, row.redaction_count) == ("ok", 200, 1)
    assert row.latency_ms >= 0
    assert row.created_at is not None


async def test_no_row_without_a_caller(app: FastAPI) -> None:
    async with app.state.ctx.sessionmaker() as session:
        assert (
            await record(session, AuditContext(action="x"), outcome="ok", status_code=200) is None
        )


async def test_read_only_call_commits_its_row_asynchronously(app: FastAPI, key: Key) -> None:
    async with app.state.ctx.sessionmaker() as session:
        await session.execute(text("SELECT 1"))  # the call's reads
        await record(session, AuditContext("context", _caller(key)), outcome="ok", status_code=200)
        assert await _synchronous_commit(session) == "off"
        await session.commit()
    # SET LOCAL: the pooled connection is back to the default afterwards.
    async with app.state.ctx.sessionmaker() as session:
        assert await _synchronous_commit(session) == "on"


async def test_write_call_commits_its_row_synchronously(app: FastAPI, key: Key) -> None:
    async with app.state.ctx.sessionmaker() as session:
        await session.execute(
            text("INSERT INTO orgs (org_id, name) VALUES (:id, :name)"),
            {"id": uuid.uuid4(), "name": f"w-{uuid.uuid4().hex}"},
        )
        await record(session, AuditContext("remember", _caller(key)), outcome="ok", status_code=201)
        assert await _synchronous_commit(session) == "on"
        await session.rollback()


async def test_pending_orm_writes_count_as_writes(app: FastAPI, key: Key) -> None:
    async with app.state.ctx.sessionmaker() as session:
        session.add(Org(org_id=uuid.uuid4(), name=f"p-{uuid.uuid4().hex}"))
        await record(session, AuditContext("remember", _caller(key)), outcome="ok", status_code=201)
        assert await _synchronous_commit(session) == "on"
        await session.rollback()
