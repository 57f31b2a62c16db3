"""Migration 0008: a memory's vector stays in the heap (no TOAST read per ranked row), its
long text still goes to TOAST; the downgrade puts the default back."""

from __future__ import annotations

import random
import uuid

import psycopg

from service.store.database import downgrade, ensure_database, upgrade

VEC = "[" + ",".join(["0.123456789"] * 384) + "]"


def _insert(conn: psycopg.Connection, org: uuid.UUID, content: str) -> uuid.UUID:
    mid = uuid.uuid4()
    conn.execute(
        "INSERT INTO memories (org_id, id, namespace, type, name, content, content_hash, "
        "embedding) VALUES (%s, %s, 'alice', 'episode', 'n', %s, %s, %s)",
        (org, mid, content, uuid.uuid4().hex, VEC),
    )
    return mid


def _toasted(conn: psycopg.Connection, mid: uuid.UUID, column: str) -> bool:
    row = conn.execute(
        f"SELECT pg_column_toast_chunk_id({column}) IS NOT NULL FROM memories WHERE id = %s",
        (mid,),
    ).fetchone()
    assert row is not None
    return bool(row[0])


def test_vectors_stay_inline_and_long_text_is_toasted(pg_server: object) -> None:
    ensure_database(pg_server.get_uri(), "ctxpack_0008")  # type: ignore[attr-defined]
    url = pg_server.get_uri("ctxpack_0008")  # type: ignore[attr-defined]
    upgrade(url, "0007")
    org = uuid.uuid4()
    # A memory of ordinary length: 1.5 kB of vector and 600 bytes of text that does not
    # compress (pglz tries the text first); and a long one, 30 kB.
    rng = random.Random(8)
    ordinary = " ".join(f"w{rng.randrange(10**6)}" for _ in range(80))
    long = " ".join(f"w{rng.randrange(10**6)}" for _ in range(4000))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO orgs (org_id, name) VALUES (%s, %s)", (org, f"o-{org}"))
        before = _insert(conn, org, ordinary)
        assert _toasted(conn, before, "embedding")  # what 0008 fixes
    upgrade(url)
    with psycopg.connect(url, autocommit=True) as conn:
        after = _insert(conn, org, ordinary)
        assert not _toasted(conn, after, "embedding")
        big = _insert(conn, org, long)
        assert not _toasted(conn, big, "embedding")
        assert _toasted(conn, big, "content")
        assert _toasted(conn, before, "embedding")  # not rewritten by the migration
    downgrade(url, "0007")
    with psycopg.connect(url, autocommit=True) as conn:
        assert _toasted(conn, _insert(conn, org, ordinary), "embedding")
    upgrade(url)
