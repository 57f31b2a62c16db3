"""store/revocations.py: a revocation is announced by NOTIFY when its transaction commits
(never on rollback), and ``RevocationListener`` hears it, says when it is live, and on every
connect asks for everything to be dropped (a revocation may have passed while it was away)."""

from __future__ import annotations

import asyncio

import psycopg
from fastapi import FastAPI

from service.store.database import libpq_url
from service.store.revocations import CHANNEL, RevocationListener, notify_revocation


async def test_a_revocation_is_announced_on_commit_and_never_on_rollback(
    app: FastAPI, pg_url: str
) -> None:
    async with await psycopg.AsyncConnection.connect(libpq_url(pg_url), autocommit=True) as conn:
        await conn.execute(f"LISTEN {CHANNEL}")
        async with app.state.ctx.sessionmaker() as session:
            await notify_revocation(session, "rolled-back-hash")
            await session.rollback()
        async with app.state.ctx.sessionmaker() as session:
            await notify_revocation(session, "committed-hash")
            await session.commit()
        heard = [n.payload async for n in conn.notifies(timeout=5, stop_after=1)]
    assert heard == ["committed-hash"]


async def test_the_listener_is_live_hears_revocations_and_stops(
    app: FastAPI, pg_url: str
) -> None:
    revoked: list[str | None] = []
    live: list[bool] = []
    listening = asyncio.Event()
    heard = asyncio.Event()

    def on_revoked(key_hash: str | None) -> None:
        revoked.append(key_hash)
        if key_hash == "a-hash":
            heard.set()

    def on_live(up: bool) -> None:
        live.append(up)
        if up:
            listening.set()

    stop = asyncio.Event()
    listener = RevocationListener(libpq_url(pg_url), on_revoked, on_live)
    task = asyncio.create_task(listener.run(stop))
    try:
        await asyncio.wait_for(listening.wait(), 30)
        async with app.state.ctx.sessionmaker() as session:
            await notify_revocation(session, "a-hash")
            await session.commit()
        await asyncio.wait_for(heard.wait(), 30)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    assert revoked[0] is None  # on connect: drop everything
    assert "a-hash" in revoked
    assert revoked[-1] is None and live == [True, False]  # on stop: down, drop everything
