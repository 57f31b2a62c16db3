"""Acknowledged writes are durable: a write call's transaction commits with
``synchronous_commit`` on, whatever the audit row does to read-only calls (which may commit
asynchronously: they wrote nothing that a crash could lose but their own audit row)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from service.domain import keys as key_service
from service.domain import memories as memory_service
from service.domain import remember as remember_service
from service.domain.audit import AuditContext
from service.schemas.memories import RememberBatchRequest, RememberRequest
from tests.conftest import Key

FACT = "The billing export runs at 02:00 UTC because the warehouse snapshot finishes at 01:40."


async def _caller(app: FastAPI, key: Key) -> Any:
    async with app.state.ctx.sessionmaker() as session:
        return await key_service.authenticate(session, key.key)


async def _setting_at_commit(app: FastAPI, call: Any) -> str:
    """Run ``call(session)`` as a route would, and read synchronous_commit just before the
    commit (SET LOCAL lasts until then)."""
    async with app.state.ctx.sessionmaker() as session:
        await call(session)
        value = (await session.execute(text("SHOW synchronous_commit"))).scalar_one()
        await session.commit()
    return str(value)


async def test_write_calls_commit_synchronously(app: FastAPI, key: Key, on_citus: bool) -> None:
    if on_citus:
        pytest.skip("on Citus the rows live on the workers, whose commits stay synchronous")
    state = app.state.ctx
    caller = await _caller(app, key)

    async def remember(session: Any) -> None:
        await remember_service.remember(
            session,
            state.embedder,
            state.settings,
            caller,
            RememberRequest(namespace="alice", content=FACT),
            AuditContext("remember", caller),
        )

    async def batch(session: Any) -> None:
        await remember_service.remember_batch(
            session,
            state.embedder,
            state.settings,
            caller,
            RememberBatchRequest(items=[RememberRequest(namespace="bob", content=FACT)]),
            AuditContext("remember_batch", caller),
            state.text_workers,
        )

    assert await _setting_at_commit(app, remember) == "on"
    assert await _setting_at_commit(app, batch) == "on"


async def test_read_calls_may_commit_asynchronously(app: FastAPI, key: Key) -> None:
    caller = await _caller(app, key)

    async def listing(session: Any) -> None:
        await memory_service.list_memories(
            session,
            caller,
            AuditContext("list", caller),
            namespace=None,
            type_=None,
            project=None,
            agent_id=None,
            tag=None,
            offset=0,
            limit=5,
        )

    assert await _setting_at_commit(app, listing) in ("on", "off")


async def test_a_write_is_acknowledged_only_after_its_commit(
    app: FastAPI, key: Key, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def failing_commit(self: AsyncSession) -> None:
        raise RuntimeError("the commit failed (disk full, connection lost, ...)")

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        monkeypatch.setattr(AsyncSession, "commit", failing_commit)
        response = await client.post(
            "/v1/remember", json={"namespace": "carol", "content": FACT}, headers=key.headers
        )
        monkeypatch.undo()
    assert response.status_code >= 500, "acknowledged a write that was never committed"
