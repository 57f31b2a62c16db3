"""Indexes of their own for big namespaces: a partial HNSW and a partial GIN index per
namespace that holds more than ``exact_scan_max_rows`` memories.

Why. One HNSW graph over every org's rows answered a scope with a filter, and a filtered
HNSW search costs in proportion to the inverse of the scope's share of the table: a task
scope of 57k memories in a 200k-row table visited thousands of tuples and took 40-60 ms
(docs/context.md, "Big scopes"), and every write into any namespace, big or small, paid an
insertion into that one big graph (most of a batch INSERT). A graph per big namespace is
searched without a filter: the same pack's vector part took 4-6 ms, at recall@10 100%
against an exact scan (ef_search 200). The GIN index per namespace reads a rare word's
matches in that namespace alone rather than ANDing the table's posting list with a bitmap
of the namespace's 50k btree entries. A small namespace has no vector index at all: it is
scanned exactly (store/retrieval.py, store/memories.py), and its writes insert into no graph.

How a statement finds them. An index's predicate is ``org_id = '<org>' AND namespace =
'<namespace>'``; a statement that names the org and one namespace as values (a custom plan:
``retrieval.use_indexes`` sets it) lets the planner prove the predicate and take the
index. Generic plans never can, so only the wide ranking path and the indexed duplicate
probe use them.

Names. ``ix_memories_ns_<24 hex of sha256(org|namespace)>_v`` (HNSW) and ``..._t`` (GIN):
the same on every process and node, so the catalog is the registry: ``ready_names`` lists
the valid ones, and a namespace is indexed when both of its names are there.

Lifecycle (``sync``, run by the namespace index job, domain/namespace_indexes.py):
- a namespace with more than ``min_rows`` memories gets both indexes, built with
  ``CREATE INDEX CONCURRENTLY`` (writes go on while it builds; until it is valid the
  namespace is scanned exactly, which gives the same results, slower);
- an index whose namespace fell to ``min_rows // 2`` memories or fewer (erased, expired,
  moved) is dropped (``DROP INDEX CONCURRENTLY``), so an erased namespace's name does not
  stay in the catalog, and a namespace near the threshold is not rebuilt back and forth;
- a build that failed half-way (an invalid index) is dropped and built again;
- one process syncs at a time (a session advisory lock); the others skip the round;
- on request (``ctxpack db index --rebuild``), a graph built with other parameters than
  today's (``GRAPH_OPTIONS``; an earlier release built with ef_construction 64) is rebuilt
  under its name with REINDEX CONCURRENTLY, the old graph answering meanwhile.

On Citus the index is created on the distributed table, and Citus builds it on every shard
(empty on the shards that do not hold the org); the statement that uses it is routed to the
org's shard, where the predicate is proved the same way.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

from service.cache import TtlLru

PREFIX = "ix_memories_ns_"
VECTOR = "v"
TEXT = "t"
# HNSW build parameters. m as the table-wide index had it (migration 0001). ef_construction
# 32 rather than that index's 64, chosen by measured recall (docs/context.md, "The graph's
# build parameter"): with 200 LoCoMo questions against an exact scan, on the 100k user's 40k-
# and 13k-memory namespaces, recall@10 at ef_search 48 was 0.9935 / 0.997 against 0.9925 /
# 0.997 at 64, recall@48 0.9943 / 0.998 against 0.9956 / 0.9986, recall@10 at ef_search 200
# 1.0 for both; 500 rows inserted in 0.81-1.16 / 0.71-0.91 s against 1.33-1.72 / 0.98-1.06.
# Indexes built before keep the parameters they were built with (same recall).
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 32
# The graph's build parameters as CREATE INDEX ... WITH and ALTER INDEX ... SET take them, and
# as the catalog (pg_class.reloptions) lists them.
GRAPH_OPTIONS = (f"m={HNSW_M}", f"ef_construction={HNSW_EF_CONSTRUCTION}")
# The full-text index's pending list (GIN's fast update), at most this many kB: every
# statement that reads the index scans the whole list, and Postgres' default (4 MB, about
# 500 pages) would let a namespace written to all day cost each of its reads that scan. An
# insert that takes the list past it moves the list into the index (a batch of 500 fills
# about 30 pages). 134 pending pages made the task namespace's index scan of a big pack
# take 5.0 ms instead of 0.17 (docs/context.md, 'Eighteenth session').
GIN_PENDING_LIST_KB = 256
TEXT_OPTIONS = (f"gin_pending_list_limit={GIN_PENDING_LIST_KB}",)
# maintenance_work_mem of a build: a 100k-row graph (about 160 MB) is built in memory.
BUILD_MEMORY = "512MB"
# pg_try_advisory_lock key of the sync (any constant distinct from the others in store/).
SYNC_LOCK_KEY = 0x6E73_6964_7800
# How long a process trusts its list of ready indexes.
READY_TTL = 5.0
_READY: TtlLru[str, frozenset[str]] = TtlLru(READY_TTL, 16)


def index_name(org_id: uuid.UUID, namespace: str, kind: str) -> str:
    """The name of ``kind`` (``VECTOR`` or ``TEXT``) index of the namespace."""
    digest = hashlib.sha256(f"{org_id}|{namespace}".encode()).hexdigest()[:24]
    return f"{PREFIX}{digest}_{kind}"


def _cache_key(bind: object) -> str:
    url = getattr(bind, "url", None)
    return str(url)


def forget_ready() -> None:
    """Drop every process-local list of ready indexes (after a sync, and for tests)."""
    _READY.clear()


CATALOG_SQL = text(
    r"""
    SELECT c.relname, i.indisvalid AND i.indisready
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
    WHERE i.indrelid = CAST('memories' AS regclass) AND c.relname LIKE 'ix\_memories\_ns\_%'
    """
)
"""Every per-namespace index of the table, with whether it is valid and ready (a build
that failed half-way leaves an invalid one)."""


async def ready_names(session: AsyncSession) -> frozenset[str]:
    """The valid per-namespace indexes, remembered for ``READY_TTL`` seconds per database."""
    key = _cache_key(session.bind)
    names = _READY.get(key)
    if names is None:
        rows = (await session.execute(CATALOG_SQL)).all()
        names = frozenset(str(name) for name, ok in rows if ok)
        _READY.put(key, names)
    return names


async def indexed_namespaces(
    session: AsyncSession, org_id: uuid.UUID, namespaces: Iterable[str]
) -> frozenset[str]:
    """Those of ``namespaces`` (of ``org_id``) whose two indexes are ready."""
    ready = await ready_names(session)
    return frozenset(
        ns
        for ns in namespaces
        if index_name(org_id, ns, VECTOR) in ready and index_name(org_id, ns, TEXT) in ready
    )


@dataclass(frozen=True)
class SyncReport:
    """What one ``sync`` did: index names built, dropped and rebuilt (``rebuild``: a graph
    built with other parameters than ``GRAPH_OPTIONS``), full-text indexes given
    ``TEXT_OPTIONS`` (``tuned``: built before they were the module's); ``skipped`` when
    another process held the lock."""

    built: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    rebuilt: tuple[str, ...] = ()
    tuned: tuple[str, ...] = ()
    skipped: bool = False


BIG_NAMESPACES_SQL = text(
    """
    SELECT org_id, namespace, count(*) AS n
    FROM memories
    GROUP BY org_id, namespace
    HAVING count(*) > :keep
    """
)

ORG_NAMESPACES_SQL = text(
    """
    SELECT org_id, namespace, count(*) AS n
    FROM memories
    WHERE org_id = :org
    GROUP BY org_id, namespace
    """
)


def _create_sql(kind: str) -> str:
    """A statement that returns the CREATE INDEX CONCURRENTLY of one namespace's ``kind``
    index (``:name``, ``:org``, ``:namespace``), its values quoted by Postgres (``format``'s
    %I and %L)."""
    using = (
        f"hnsw (embedding vector_cosine_ops) WITH ({', '.join(GRAPH_OPTIONS)})"
        if kind == VECTOR
        else f"gin (tsv) WITH ({', '.join(TEXT_OPTIONS)})"
    )
    return (
        "SELECT format('CREATE INDEX CONCURRENTLY %I ON memories USING "
        + using
        + " WHERE org_id = %L::uuid AND namespace = %L', "
        "CAST(:name AS text), CAST(:org AS text), CAST(:namespace AS text))"
    )


async def _ddl(conn: AsyncConnection, sql: str, **params: str) -> None:
    """Run the DDL that ``sql`` (a SELECT of ``format``, which quotes the values) returns."""
    await conn.exec_driver_sql((await conn.execute(text(sql), params)).scalar_one())


async def _drop(conn: AsyncConnection, name: str) -> None:
    await _ddl(
        conn,
        "SELECT format('DROP INDEX CONCURRENTLY IF EXISTS %I', CAST(:name AS text))",
        name=name,
    )


INDEX_OPTIONS_SQL = text(
    """
    SELECT c.relname, coalesce(c.reloptions, CAST('{}' AS text[]))
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
    WHERE i.indrelid = CAST('memories' AS regclass) AND i.indisvalid AND i.indisready
      AND c.relname = ANY(CAST(:names AS text[]))
    """
)
"""The storage parameters of the valid indexes among ``:names`` (none listed: the defaults,
pgvector's m 16 and ef_construction 64 for a graph, the server's gin_pending_list_limit for a
full-text index)."""

# One graph rebuilt with the module's parameters: they are set on the index, then REINDEX
# CONCURRENTLY builds a new graph beside the old one, which answers until the new one
# takes its name (writes go on meanwhile); on failure the old parameters are set back, so
# that the next ``--rebuild`` tries again. Citus carries both to every shard.
SET_OPTIONS_SQL = "SELECT format('ALTER INDEX %I SET (' || :options || ')', CAST(:name AS text))"
RESET_OPTIONS_SQL = (
    "SELECT format('ALTER INDEX %I RESET (m, ef_construction)', CAST(:name AS text))"
)
REINDEX_SQL = "SELECT format('REINDEX INDEX CONCURRENTLY %I', CAST(:name AS text))"


async def _tune_text(conn: AsyncConnection, names: Iterable[str]) -> list[str]:
    """Set ``TEXT_OPTIONS`` on those of the full-text indexes ``names`` built without them
    (by an earlier release): a catalog change, no rebuild; Citus carries it to every shard."""
    tuned: list[str] = []
    rows = (await conn.execute(INDEX_OPTIONS_SQL, {"names": sorted(names)})).all()
    for name, options in sorted(rows):
        if set(TEXT_OPTIONS) <= set(options):
            continue
        await _ddl(conn, SET_OPTIONS_SQL, name=name, options=", ".join(TEXT_OPTIONS))
        tuned.append(name)
    return tuned


async def _rebuild_stale(conn: AsyncConnection, names: Iterable[str]) -> list[str]:
    """Rebuild those of the vector indexes ``names`` whose graph was built with other
    parameters than ``GRAPH_OPTIONS`` (an index of an earlier release, built with
    ef_construction 64): inserts into the new graph are faster, its recall the same
    (docs/context.md, "The graph's build parameter")."""
    rebuilt: list[str] = []
    rows = (await conn.execute(INDEX_OPTIONS_SQL, {"names": sorted(names)})).all()
    for name, options in sorted(rows):
        if set(options) == set(GRAPH_OPTIONS):
            continue
        await _ddl(conn, SET_OPTIONS_SQL, name=name, options=", ".join(GRAPH_OPTIONS))
        try:
            await _ddl(conn, REINDEX_SQL, name=name)
        except Exception:
            if options:
                await _ddl(conn, SET_OPTIONS_SQL, name=name, options=", ".join(options))
            else:
                await _ddl(conn, RESET_OPTIONS_SQL, name=name)
            raise
        rebuilt.append(name)
    return rebuilt


async def sync(
    engine: AsyncEngine,
    min_rows: int,
    org_id: uuid.UUID | None = None,
    max_indexed: int | None = None,
    *,
    rebuild: bool = False,
) -> SyncReport:
    """Build the indexes of namespaces above ``min_rows`` memories and drop those of
    namespaces at ``min_rows // 2`` or fewer (see the module docstring). Runs its DDL on a
    connection of its own, outside any transaction (CONCURRENTLY requires it).

    ``org_id``: one org's namespaces only (an operator re-indexing one tenant; tests). Such
    a pass drops the indexes of the org's namespaces that shrank, not of those that hold no
    memory at all any more (an erased namespace): the next whole pass drops those.

    ``max_indexed``: at most this many namespaces keep or get indexes, the biggest first
    (each index of the table adds to the planning of every statement that reads it).

    ``rebuild``: also rebuild the kept graphs built with other parameters than
    ``GRAPH_OPTIONS`` (``_rebuild_stale``; ``ctxpack db index --rebuild``). Never done by the
    job: a 100k-memory graph takes minutes of CPU to build again, an operator's call."""
    keep = min_rows // 2
    built: list[str] = []
    dropped: list[str] = []
    rebuilt: list[str] = []
    tuned: list[str] = []
    async with engine.connect() as raw:
        conn = await raw.execution_options(isolation_level="AUTOCOMMIT")
        got = (
            await conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": SYNC_LOCK_KEY})
        ).scalar_one()
        if not got:
            return SyncReport(skipped=True)
        try:
            await conn.exec_driver_sql(f"SET maintenance_work_mem = '{BUILD_MEMORY}'")
            await conn.exec_driver_sql("SET statement_timeout = 0")
            if org_id is None:
                counts = (await conn.execute(BIG_NAMESPACES_SQL, {"keep": keep})).all()
            else:
                counts = (await conn.execute(ORG_NAMESPACES_SQL, {"org": org_id})).all()
            catalog: dict[str, bool] = {
                str(name): bool(ok) for name, ok in (await conn.execute(CATALOG_SQL)).all()
            }
            wanted: set[str] = set()
            unwanted: set[str] = set()
            for org, namespace, n in sorted(counts, key=lambda r: (-r[2], str(r[0]), r[1])):
                names = {kind: index_name(org, namespace, kind) for kind in (VECTOR, TEXT)}
                if n <= keep or (max_indexed is not None and len(wanted) >= 2 * max_indexed):
                    unwanted.update(names.values())
                    continue
                wanted.update(names.values())
                if n <= min_rows and not any(name in catalog for name in names.values()):
                    continue  # between keep and min_rows: kept if built, not built anew
                for kind, name in names.items():
                    if catalog.get(name):
                        continue
                    if name in catalog:  # a build that failed half-way
                        await _drop(conn, name)
                    await _ddl(
                        conn, _create_sql(kind), name=name, org=str(org), namespace=namespace
                    )
                    built.append(name)
            stale = set(catalog) - wanted if org_id is None else set(catalog) & unwanted
            for name in sorted(stale):
                await _drop(conn, name)
                dropped.append(name)
            tuned = await _tune_text(
                conn, {n for n in wanted if n.endswith(f"_{TEXT}")} - set(built)
            )
            if rebuild:
                graphs = {n for n in wanted if n.endswith(f"_{VECTOR}")} - set(built)
                rebuilt = await _rebuild_stale(conn, graphs)
        finally:
            await conn.exec_driver_sql("RESET maintenance_work_mem")
            await conn.exec_driver_sql("RESET statement_timeout")
            await conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": SYNC_LOCK_KEY})
    forget_ready()
    return SyncReport(
        built=tuple(built), dropped=tuple(dropped), rebuilt=tuple(rebuilt), tuned=tuple(tuned)
    )
