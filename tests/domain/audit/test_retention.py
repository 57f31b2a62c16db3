"""Retention: rows older than their org's retention are pruned, by the domain function and by
the background job the app runs in its lifespan."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

from fastapi import FastAPI
from sqlalchemy import text

from service.app import create_app
from service.domain.audit import prune_audit
from service.embedding.fake import FakeEmbedder
from tests.conftest import KeyFactory, make_settings
from tests.domain.audit.conftest import Seed

# Far in the past, so that pruning here never touches rows other tests are using.
NOW = datetime(2001, 1, 1, tzinfo=UTC)


async def _backdate(app: FastAPI, audit_id: uuid.UUID, when: datetime) -> None:
    async with app.state.ctx.sessionmaker() as session:
        await session.execute(
            text("UPDATE audit_events SET created_at = :when WHERE id = :id"),
            {"when": when, "id": audit_id},
        )
        await session.commit()


async def _set_retention(app: FastAPI, org_id: uuid.UUID, days: int | None) -> None:
    async with app.state.ctx.sessionmaker() as session:
        await session.execute(
            text("UPDATE orgs SET audit_retention_days = :days WHERE org_id = :org"),
            {"days": days, "org": org_id},
        )
        await session.commit()


async def _remaining(app: FastAPI, ids: list[uuid.UUID]) -> set[uuid.UUID]:
    async with app.state.ctx.sessionmaker() as session:
        rows = await session.execute(
            text("SELECT id FROM audit_events WHERE id = ANY(:ids)"), {"ids": ids}
        )
        return {row[0] for row in rows}


async def test_prune_follows_each_orgs_retention(
    app: FastAPI, make_key: KeyFactory, seed: Seed
) -> None:
    short, default, forever = await make_key(), await make_key(), await make_key()
    await _set_retention(app, short.org_id, 5)
    await _set_retention(app, forever.org_id, 0)
    aged = {
        "short_old": (short, 6),
        "short_new": (short, 4),
        "default_old": (default, 31),
        "default_new": (default, 29),
        "forever_old": (forever, 1000),
    }
    ids: dict[str, uuid.UUID] = {}
    for name, (key, days) in aged.items():
        ids[name] = await seed(key.org_id)
        await _backdate(app, ids[name], NOW - timedelta(days=days))

    async with app.state.ctx.sessionmaker() as session:
        result = await prune_audit(session, NOW, default_days=30)
        await session.commit()

    assert not result.skipped
    assert result.by_org.get(short.org_id) == 1
    assert result.by_org.get(default.org_id) == 1
    assert forever.org_id not in result.by_org
    assert await _remaining(app, list(ids.values())) == {
        ids["short_new"],
        ids["default_new"],
        ids["forever_old"],
    }

    # A second pass finds nothing more to do.
    async with app.state.ctx.sessionmaker() as session:
        again = await prune_audit(session, NOW, default_days=30)
        await session.commit()
    assert short.org_id not in again.by_org
    assert default.org_id not in again.by_org


async def test_prune_goes_in_batches(app: FastAPI, make_key: KeyFactory, seed: Seed) -> None:
    key = await make_key()
    ids = [await seed(key.org_id) for _ in range(5)]
    for audit_id in ids:
        await _backdate(app, audit_id, NOW - timedelta(days=400))
    passes = []
    while True:
        async with app.state.ctx.sessionmaker() as session:
            result = await prune_audit(session, NOW, default_days=30, batch_size=2)
            await session.commit()
        passes.append(result.by_org.get(key.org_id, 0))
        if not result.more:
            break
    assert passes == [2, 2, 1]
    assert await _remaining(app, ids) == set()


async def test_a_concurrent_prune_is_skipped(app: FastAPI) -> None:
    sessionmaker = app.state.ctx.sessionmaker
    async with sessionmaker() as first, sessionmaker() as second:
        assert not (await prune_audit(first, NOW, default_days=30)).skipped
        # The first pass's transaction still holds the lock.
        assert (await prune_audit(second, NOW, default_days=30)).skipped
        await first.rollback()
        await second.rollback()


async def test_the_app_prunes_in_the_background(
    app: FastAPI, pg_url: str, make_key: KeyFactory, seed: Seed
) -> None:
    key = await make_key()
    now = datetime.now(UTC)
    old = await seed(key.org_id)
    await _backdate(app, old, now - timedelta(days=120))
    recent = await seed(key.org_id)
    await _backdate(app, recent, now - timedelta(days=1))

    settings = make_settings(pg_url, audit_prune_interval_seconds=0.05, audit_retention_days=90)
    pruning_app = create_app(settings, embedder=FakeEmbedder(), database_url=pg_url)
    async with pruning_app.router.lifespan_context(pruning_app):
        for _ in range(100):
            if old not in await _remaining(app, [old]):
                break
            await asyncio.sleep(0.05)
        assert await _remaining(app, [old, recent]) == {recent}
        task = pruning_app.state.retention_task
    # Leaving the lifespan stops the job.
    assert task.done()


async def test_the_job_can_be_disabled(pg_url: str) -> None:
    settings = make_settings(pg_url, audit_prune_interval_seconds=0)
    quiet_app = create_app(settings, embedder=FakeEmbedder(), database_url=pg_url)
    async with quiet_app.router.lifespan_context(quiet_app):
        assert quiet_app.state.retention_task is None
