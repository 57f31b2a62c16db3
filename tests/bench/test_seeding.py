"""bench/seeding.py: the vectors of memories past the embedding budget are reused from
embedded ones, with their own ticket (so every text stays distinct) and noise; a bulk load
ends with its indexes built again and its tables vacuumed and analyzed, on a real database."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime

import numpy as np
import psycopg
import pytest
from psycopg import sql

from bench.corpus import corpus_for
from bench.seeding import VectorPool, deferred_indexes, prewarm, seed_method, ticket_number
from service.store.database import libpq_url

LOCOMO = ["Melanie: We went camping in the mountains last weekend with the kids."]


def _unit(rng: np.random.Generator) -> np.ndarray:
    v = rng.normal(size=384).astype(np.float32)
    return v / np.linalg.norm(v)


def test_ticket_number_is_the_last_ticket_of_the_text() -> None:
    assert ticket_number("breaks when the file has a UTF-8 BOM (seen in BILLING-104237).") == (
        "104237"
    )
    with pytest.raises(ValueError, match="no ticket"):
        ticket_number("no ticket here")


def test_the_pool_embeds_up_to_its_limit_and_reuses_past_it() -> None:
    rng = np.random.default_rng(0)
    items = corpus_for(range(3), 7, LOCOMO)
    pool = VectorPool(limit=100, noise=0.02)
    first = items[:100]
    pool.add(first, [_unit(rng) for _ in first])
    assert pool.room == 0
    assert np.array_equal(pool.known(first[5][3]), pool.vectors[5])
    assert pool.known(items[150][3]) is None

    again, vecs = pool.reuse(items[100:])
    texts = [text for *_, text in again]
    assert len(set(texts)) == len(texts) == 200
    assert not set(texts) & set(pool.texts)
    for (ns, iid, _, text), (ns2, iid2, typ2, text2), vec in zip(
        items[100:], again, vecs, strict=True
    ):
        assert (ns2, iid2) == (ns, iid)
        assert ticket_number(text2) == ticket_number(text)
        assert typ2 in set(pool.types)
        assert abs(float(np.linalg.norm(vec)) - 1.0) < 1e-5
    # Each reused vector stays near the embedded one it came from (noise 0.02 per dimension).
    best = max(float(np.max(np.stack(pool.vectors) @ v)) for v in vecs[:20])
    assert best > 0.85


def test_reuse_needs_embedded_vectors() -> None:
    with pytest.raises(ValueError, match="no embedded vectors"):
        VectorPool(limit=0).reuse(corpus_for(range(1), 7, LOCOMO)[:2])


def test_seed_method_says_what_was_reused() -> None:
    pool = VectorPool(limit=10)
    assert seed_method(10, 0, pool).startswith("embedded")
    assert seed_method(10, 90, pool).startswith("reused vectors: 10 memories embedded")


# -------------------------------------------------------------------------- bulk loads


@pytest.fixture
def loaded_table(pg_url: str) -> Iterator[tuple[str, str]]:
    """A table of its own in the test database, with a GIN index for the load to defer (the
    shared tables' indexes stay put while other tests use them)."""
    url = libpq_url(pg_url)
    table = f"bench_load_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE TABLE {} (id int, body tsvector)").format(sql.Identifier(table))
        )
        conn.execute(
            sql.SQL("CREATE INDEX {} ON {} USING gin (body)").format(
                sql.Identifier(f"{table}_body"), sql.Identifier(table)
            )
        )
    yield url, table
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(table)))


def _indexes(url: str, table: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = %s", (table,))
        return [name for (name,) in rows]


def _maintained(url: str, table: str) -> tuple[datetime | None, datetime | None]:
    """The table's last manual VACUUM and ANALYZE (autovacuum's are counted apart)."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT last_vacuum, last_analyze FROM pg_stat_user_tables WHERE relname = %s",
            (table,),
        ).fetchone()
    assert row is not None
    return row[0], row[1]


def _load(url: str, table: str, rows: int) -> None:
    with psycopg.connect(url) as conn:
        conn.execute(
            sql.SQL(
                "INSERT INTO {} SELECT g, to_tsvector('simple', 'row ' || g) "
                "FROM generate_series(1, %s) g"
            ).format(sql.Identifier(table)),
            (rows,),
        )


def test_a_bulk_load_ends_with_its_indexes_built_and_its_tables_settled(
    loaded_table: tuple[str, str],
) -> None:
    url, table = loaded_table
    built: dict[str, float] = {}
    settled: dict[str, float] = {}
    with deferred_indexes(url, [table], built, settled=settled):
        assert _indexes(url, table) == []
        _load(url, table, 5000)
        assert _maintained(url, table) == (None, None)
    assert _indexes(url, table) == [f"{table}_body"]
    assert set(built) == {f"{table}_body"}
    last_vacuum, last_analyze = _maintained(url, table)
    assert last_vacuum is not None
    assert last_analyze is not None
    assert set(settled) == {table}


def test_a_failed_bulk_load_gets_its_indexes_back_but_is_not_settled(
    loaded_table: tuple[str, str],
) -> None:
    url, table = loaded_table
    settled: dict[str, float] = {}

    def broken_load() -> None:
        with deferred_indexes(url, [table], {}, settled=settled):
            _load(url, table, 100)
            raise RuntimeError("the load broke")

    with pytest.raises(RuntimeError, match="the load broke"):
        broken_load()
    assert _indexes(url, table) == [f"{table}_body"]
    assert _maintained(url, table) == (None, None)
    assert settled == {}


def test_prewarm_reads_every_block_of_the_table_and_its_indexes(
    loaded_table: tuple[str, str],
) -> None:
    url, table = loaded_table
    _load(url, table, 5000)
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT sum(pg_relation_size(c.oid)) / current_setting('block_size')::int"
            " FROM pg_class c WHERE c.oid = CAST(%(t)s AS regclass)"
            " OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = CAST(%(t)s AS regclass))",
            {"t": table},
        ).fetchone()
    assert row is not None
    expected = int(row[0])
    relations = (
        "SELECT c.oid FROM pg_class c WHERE c.oid = CAST(%(t)s AS regclass)"
        " OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = CAST(%(t)s AS regclass))"
    )
    in_buffers = (
        "SELECT count(*) FROM pg_buffercache b JOIN pg_class c"
        " ON b.relfilenode = pg_relation_filenode(c.oid) AND b.relforknumber = 0"
        " AND b.reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database())"
        f" WHERE c.oid IN ({relations})"
    )
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_buffercache")
        # Out of shared buffers (the load left them there), as after a restart.
        conn.execute(
            f"SELECT pg_buffercache_evict_relation(r.oid) FROM ({relations}) r", {"t": table}
        )
        assert conn.execute(in_buffers, {"t": table}).fetchone() == (0,)
    warmed = prewarm(url, [table])
    # The heap alone is fewer blocks: the index's count is in the total.
    assert expected > 20 and warmed["blocks"] == expected
    # Into Postgres's own buffers ('buffer' mode), not only the operating system's cache.
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute(in_buffers, {"t": table}).fetchone() == (expected,)
    assert warmed["seconds"] >= 0
