"""The namespace index job (domain/namespace_indexes.py): a pass builds the indexes of the
namespaces above the threshold and logs their names (hashes, never a namespace's name); a
failed pass is logged with its SQLSTATE and the job goes on."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import create_async_engine

from service.domain.namespace_indexes import index_namespaces, run_namespace_indexing
from service.store import namespace_indexes
from service.store.namespace_indexes import VECTOR, index_name
from tests.conftest import Key, Seeder


async def test_a_pass_logs_the_hashed_names_it_built(
    app: FastAPI,
    key: Key,
    seed: Seeder,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    namespace = "patient-jane-doe"
    for n in range(3):
        await seed.add(f"The triage rota changes every Monday, note {n}.", namespace=namespace)
    engine = app.state.ctx.engine
    real = namespace_indexes.sync

    async def one_org(engine: Any, min_rows: int, **kw: Any) -> namespace_indexes.SyncReport:
        # The whole table's pass would index every other test's namespaces too.
        return await real(engine, min_rows, org_id=key.org_id, **kw)

    monkeypatch.setattr(namespace_indexes, "sync", one_org)
    with caplog.at_level(logging.INFO, logger="ctxpack.namespace_indexes"):
        report = await index_namespaces(engine, 2, 10)
    assert index_name(key.org_id, namespace, VECTOR) in report.built
    logged = [r for r in caplog.records if r.getMessage() == "namespace_indexes_synced"]
    assert len(logged) == 1
    assert index_name(key.org_id, namespace, VECTOR) in logged[0].built  # type: ignore[attr-defined]
    assert not any(namespace in str(vars(r)) for r in caplog.records)


async def test_a_failed_pass_is_logged_and_the_job_goes_on(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A database that refuses the pass (here: one that does not exist) fails each round;
    the job logs it and tries again at the next interval."""
    base = pg_url.split("?")[0].rsplit("/", 1)[0]
    query = pg_url.split("?", 1)[1] if "?" in pg_url else ""
    missing = f"{base}/ctxpack_no_such_database" + (f"?{query}" if query else "")
    engine = create_async_engine(missing.replace("postgresql://", "postgresql+psycopg_async://"))
    with caplog.at_level(logging.ERROR, logger="ctxpack.namespace_indexes"):
        job = asyncio.create_task(
            run_namespace_indexing(engine, min_rows=10, max_indexed=10, interval_seconds=0.05)
        )
        for _ in range(100):
            await asyncio.sleep(0.05)
            if sum(r.getMessage() == "namespace_index_sync_failed" for r in caplog.records) >= 2:
                break
        assert not job.done()
        job.cancel()
        with pytest.raises(asyncio.CancelledError):
            await job
    await engine.dispose()
    failures = [r for r in caplog.records if r.getMessage() == "namespace_index_sync_failed"]
    assert len(failures) >= 2
    assert all(hasattr(r, "sqlstate") for r in failures)
