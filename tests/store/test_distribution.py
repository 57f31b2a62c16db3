"""Citus distribution by the migration itself: reference tables first, then every org-scoped
table by org_id, colocated; idempotent; nothing on plain PostgreSQL. The round trip
(upgrade -> downgrade -> upgrade) runs on the cluster under ``make test-citus``, which sets
``CTXPACK_TEST_ROUNDTRIP_DATABASE_URL`` to a second, empty database of it."""

from __future__ import annotations

import os

import psycopg
import pytest
from alembic import command
from sqlalchemy import create_engine, inspect

from service.store.database import alembic_config, downgrade, libpq_url, sync_url, upgrade
from service.store.distribution import (
    ANCHOR,
    REFERENCE_TABLES,
    distribute,
    has_citus,
    plan,
)
from service.store.models import Base

ROUNDTRIP_URL = os.environ.get("CTXPACK_TEST_ROUNDTRIP_DATABASE_URL")


def test_the_plan_covers_every_org_scoped_table() -> None:
    steps = plan(Base.metadata)
    names = [name for name, _ in steps]
    assert names[: len(REFERENCE_TABLES)] == list(REFERENCE_TABLES)
    assert steps[len(REFERENCE_TABLES)] == (ANCHOR, "distributed")
    org_scoped = {t.name for t in Base.metadata.sorted_tables if "org_id" in t.c}
    assert set(names) == org_scoped
    assert len(names) == len(set(names))
    # A table looked up before its org is known must be a reference table: a unique index
    # without org_id could not be distributed by it.
    for table in Base.metadata.sorted_tables:
        for index in table.indexes:
            if index.unique and "org_id" not in index.columns:
                assert table.name in REFERENCE_TABLES, (table.name, index.name)


def _citus_tables(url: str) -> dict[str, tuple[str, str]]:
    with psycopg.connect(libpq_url(url)) as conn:
        rows = conn.execute(
            "SELECT table_name::text, citus_table_type, distribution_column FROM citus_tables"
        ).fetchall()
    return {name: (kind, column) for name, kind, column in rows}


def _expected() -> dict[str, tuple[str, str]]:
    return {
        name: ("reference", "<none>") if how == "reference" else ("distributed", "org_id")
        for name, how in plan(Base.metadata)
    }


def test_distribution_is_idempotent_and_follows_the_plan(pg_url: str) -> None:
    engine = create_engine(sync_url(pg_url))
    try:
        with engine.connect() as conn:
            auto = conn.execution_options(isolation_level="AUTOCOMMIT")
            citus = has_citus(auto)
            # The suite's database was migrated (and so distributed) at the start.
            assert distribute(auto, Base.metadata) == []
    finally:
        engine.dispose()
    if not citus:
        return  # plain PostgreSQL: nothing to distribute, nothing done
    assert _citus_tables(pg_url) == _expected()
    with psycopg.connect(libpq_url(pg_url)) as conn:
        groups = conn.execute(
            "SELECT count(DISTINCT colocationid) FROM pg_dist_partition WHERE partmethod = 'h'"
        ).fetchone()
    assert groups == (1,)  # every distributed table colocated with memories


@pytest.mark.skipif(not ROUNDTRIP_URL, reason="needs CTXPACK_TEST_ROUNDTRIP_DATABASE_URL (make test-citus)")
def test_upgrade_downgrade_upgrade_on_the_cluster() -> None:
    assert ROUNDTRIP_URL is not None
    upgrade(ROUNDTRIP_URL)
    assert _citus_tables(ROUNDTRIP_URL) == _expected()
    upgrade(ROUNDTRIP_URL)  # again: nothing to do
    downgrade(ROUNDTRIP_URL, "base")
    assert _citus_tables(ROUNDTRIP_URL) == {}
    engine = create_engine(sync_url(ROUNDTRIP_URL))
    try:
        assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    finally:
        engine.dispose()
    upgrade(ROUNDTRIP_URL)
    assert _citus_tables(ROUNDTRIP_URL) == _expected()
    command.check(alembic_config(ROUNDTRIP_URL))
    # Migration 0010 on a distributed table: its index dropped and built CONCURRENTLY on the
    # shards, outside the migration's transaction, the migrations around it still run.
    downgrade(ROUNDTRIP_URL, "0008")
    upgrade(ROUNDTRIP_URL)
    with psycopg.connect(libpq_url(ROUNDTRIP_URL)) as conn:
        shards = conn.execute(
            "SELECT count(*) FROM run_command_on_shards('memories', $$SELECT 1 FROM pg_index "
            "WHERE indexrelid = to_regclass('ix_memories_live_org_id_namespace_type_' || "
            "split_part('%s', '_', 2)) AND indisvalid$$) WHERE result = '1'"
        ).fetchone()
        total = conn.execute(
            "SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'memories'::regclass"
        ).fetchone()
    assert shards == total and total is not None and total[0] > 0
    command.check(alembic_config(ROUNDTRIP_URL))
