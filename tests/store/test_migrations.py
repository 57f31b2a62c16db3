"""Alembic owns the schema: upgrade head leaves no drift, and the schema round-trips."""

from __future__ import annotations

import psycopg
import pytest
from alembic import command
from alembic.util.exc import CommandError

from service.store.database import (
    alembic_config,
    downgrade,
    ensure_database,
    upgrade,
    with_database,
)


def test_alembic_check_finds_no_drift(pg_url: str) -> None:
    # Raises when the models and the migrations disagree.
    command.check(alembic_config(pg_url))


def test_vector_extension_and_indexes_exist(pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn:
        ext = conn.execute("SELECT extversion FROM pg_extension WHERE extname='vector'").fetchone()
        assert ext is not None
        indexes = {
            row[0]: row[1]
            for row in conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'memories'"
            )
        }
    # No table-wide vector index (migration 0009): big namespaces get their own at run
    # time (tests/store/test_namespace_indexes.py).
    assert not [d for name, d in indexes.items() if "hnsw" in d and "WHERE" not in d], indexes
    assert "USING gin (tsv)" in indexes["ix_memories_tsv"]
    assert "(org_id, namespace" in indexes["ix_memories_org_id_namespace_created_at"]


def test_every_primary_and_unique_key_starts_with_org_id(pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(
            """
            SELECT c.conrelid::regclass::text, c.conname,
                   (SELECT a.attname FROM pg_attribute a
                    WHERE a.attrelid = c.conrelid AND a.attnum = c.conkey[1])
            FROM pg_constraint c
            JOIN pg_class t ON t.oid = c.conrelid
            JOIN pg_namespace n ON n.oid = t.relnamespace
            WHERE c.contype IN ('p', 'u') AND n.nspname = 'public'
              AND t.relname <> 'alembic_version'
            """
        ).fetchall()
    assert rows
    for table, name, first_column in rows:
        assert first_column == "org_id", f"{table}.{name} starts with {first_column}"


def test_downgrade_and_upgrade_round_trip(pg_server: object) -> None:
    admin = pg_server.get_uri()  # type: ignore[attr-defined]
    ensure_database(admin, "ctxpack_roundtrip")
    url = str(with_database(admin, "ctxpack_roundtrip"))
    upgrade(url)
    downgrade(url, "base")
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT to_regclass('memories')").fetchone() == (None,)
    upgrade(url)
    command.check(alembic_config(url))


def test_check_detects_drift(pg_server: object) -> None:
    """The drift test can fail: on a database migrated to base only, check complains."""
    admin = pg_server.get_uri()  # type: ignore[attr-defined]
    ensure_database(admin, "ctxpack_empty")
    url = str(with_database(admin, "ctxpack_empty"))
    with pytest.raises(CommandError):
        command.check(alembic_config(url))


def test_an_index_build_that_failed_is_built_again(pg_server: object) -> None:
    """Migration 0010 builds its index CONCURRENTLY, which on failure leaves an invalid index
    of that name behind; the next upgrade drops it and builds the right one (``IF NOT
    EXISTS`` alone would keep the invalid one for good)."""
    admin = pg_server.get_uri()  # type: ignore[attr-defined]
    ensure_database(admin, "ctxpack_rebuild")
    url = str(with_database(admin, "ctxpack_rebuild"))
    upgrade(url)
    downgrade(url, "0009")
    name = "ix_memories_live_org_id_namespace_type"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE INDEX {name} ON memories (org_id)")
        conn.execute(f"UPDATE pg_index SET indisvalid = false WHERE indexrelid = '{name}'::regclass")
    upgrade(url)
    with psycopg.connect(url) as conn:
        valid, definition = conn.execute(
            "SELECT i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i "
            "WHERE i.indexrelid = %s::regclass",
            (name,),
        ).fetchone()  # type: ignore[misc]
    assert valid
    assert "(org_id, namespace, type) WHERE (superseded_by IS NULL)" in definition
    command.check(alembic_config(url))
