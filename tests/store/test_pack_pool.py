"""Context packs run on their own pool (autocommit, generic plans). A pack over a wide scope
(the index path, with transaction-local settings) commits its audit row and leaves no
connection inside a transaction; so does a narrow one."""

from __future__ import annotations

from typing import Any

import httpx
import psycopg
import pytest
from fastapi import FastAPI
from sqlalchemy import text

from service.app import create_app
from service.embedding.fake import FakeEmbedder
from service.store import namespace_indexes, retrieval
from service.store.database import libpq_url
from tests.conftest import Key, Seeder, make_settings


def _idle_in_transaction(pg_url: str) -> int:
    with psycopg.connect(libpq_url(pg_url)) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND state LIKE 'idle in transaction%'"
        ).fetchone()
        return int(row[0]) if row else 0


async def _audited(app: FastAPI, audit_id: str) -> bool:
    async with app.state.ctx.sessionmaker() as session:
        found = await session.execute(
            text("SELECT 1 FROM audit_events WHERE id = CAST(:id AS uuid)"), {"id": audit_id}
        )
        return found.first() is not None


async def _pack_then_check(
    app: FastAPI, key: Key, seed: Seeder, pg_url: str, *, index: bool = False
) -> None:
    """Three packs and their audit rows; with ``index``, the namespace has its own indexes
    (store/namespace_indexes.py), so the packs take the wide path."""
    for n in range(3):
        await seed.add(f"The deploy pipeline runs health checks before traffic shifts ({n}).")
    if index:
        await namespace_indexes.sync(app.state.ctx.engine, 0, org_id=key.org_id)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        for _ in range(3):
            response = await client.post(
                "/v1/context",
                json={"goal": "deploy pipeline health checks", "namespace": "alice:s1"},
                headers=key.headers,
            )
            assert response.status_code == 200, response.text
            body = response.json()
            assert body["total_items"] == 3
            assert await _audited(app, body["audit_id"])
    assert _idle_in_transaction(pg_url) == 0


async def test_wide_scope_pack(
    pg_url: str, key: Key, seed: Seeder, monkeypatch: pytest.MonkeyPatch, on_citus: bool
) -> None:
    # The namespace has its own indexes: the index path, inside an explicit transaction,
    # sent in two pipelines with its settings and its statement on one node; on Citus
    # through ``use_indexes`` (SET LOCAL, which the coordinator propagates).
    calls: list[str] = []
    pipelined = retrieval.pipelined_transaction
    use_indexes = retrieval.RetrievalRepository.use_indexes

    async def spy_pipelined(session: Any, settings: tuple[str, dict[str, Any]], ranked: Any) -> Any:
        assert int(settings[1]["ef"]) >= 40
        calls.append("pipelined")
        return await pipelined(session, settings, ranked)

    async def spy_use_indexes(self: Any, *args: Any, **kwargs: Any) -> list[str]:
        calls.append("use_indexes")
        return await use_indexes(self, *args, **kwargs)

    monkeypatch.setattr(retrieval, "pipelined_transaction", spy_pipelined)
    monkeypatch.setattr(retrieval.RetrievalRepository, "use_indexes", spy_use_indexes)
    settings = make_settings(pg_url)
    wide = create_app(settings, embedder=FakeEmbedder(), database_url=pg_url)
    async with wide.router.lifespan_context(wide):
        await _pack_then_check(wide, key, seed, pg_url, index=True)
    assert calls == ["use_indexes" if on_citus else "pipelined"] * 3


async def test_a_failed_wide_statement_is_rolled_back(
    pg_url: str, key: Key, seed: Seeder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wide pack whose statement fails inside its pipeline leaves no transaction open,
    and the next pack on the pool is answered."""
    build = retrieval.build_pack_sql
    failing = [True]

    def broken(*args: Any, **kwargs: Any) -> str:
        sql = build(*args, **kwargs)
        return sql.replace("FROM memories m", "FROM no_such_table m", 1) if failing[0] else sql

    monkeypatch.setattr(retrieval, "build_pack_sql", broken)
    settings = make_settings(pg_url)
    wide = create_app(settings, embedder=FakeEmbedder(), database_url=pg_url)
    async with wide.router.lifespan_context(wide):
        for n in range(3):
            await seed.add(f"The deploy pipeline runs health checks before traffic shifts ({n}).")
        await namespace_indexes.sync(wide.state.ctx.engine, 0, org_id=key.org_id)
        transport = httpx.ASGITransport(app=wide, raise_app_exceptions=False)
        body = {"goal": "deploy pipeline health checks", "namespace": "alice:s1"}
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            for _ in range(2):
                response = await client.post("/v1/context", json=body, headers=key.headers)
                assert response.status_code == 500
                assert "no_such_table" not in response.text
            assert _idle_in_transaction(pg_url) == 0
            failing[0] = False
            response = await client.post("/v1/context", json=body, headers=key.headers)
            assert response.status_code == 200, response.text
            assert response.json()["total_items"] == 3


async def test_narrow_scope_pack(app: FastAPI, pg_url: str, key: Key, seed: Seeder) -> None:
    await _pack_then_check(app, key, seed, pg_url)
