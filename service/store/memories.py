"""Memories and their relations: the write path and the management reads. (The ranked
retrieval of context packs lives in store/retrieval.py.)

Duplicate reach. Every duplicate check (exact by content hash, near by cosine, the PATCH
hash check) sees only memories a reader of the new memory could see: the same org and
namespace, the write's project or none, the write's agent diary or none, and, for a key
limited to projects, only those projects or none. A write never learns the id or name of a
memory outside that reach. The unique key is ``(org, namespace, project, agent_id,
content_hash)`` over current memories (NULLs not distinct), so the same text is stored once
per project and diary, and a superseded text can be stored again. Keyed writes
(domain/writes/keyed.py) look for copies of their content within the same reach
(``keyed_copies``); a key itself is unique per (org, namespace) among current memories.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any, Literal

import numpy as np
from sqlalchemy import (
    ColumnElement,
    Select,
    TextClause,
    and_,
    delete,
    func,
    or_,
    select,
    text,
    true,
    tuple_,
    update,
)
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from service.store.models import Artifact, Memory, Project, Relation
from service.store.namespace_indexes import indexed_namespaces
from service.store.retrieval import sql_literal, use_indexes
from service.store.vectors import VectorBatch, vector_at, vector_literal


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class RowArray:
    """How one key of a memory row travels in ``insert_rows``: as the array parameter
    ``CAST(:<key> AS <array>)``, each element read back by ``read`` (SQL on ``u.<key>``)
    into ``column``, after ``convert`` in Python."""

    column: str
    array: str
    read: str
    convert: Callable[[Any], Any] = _same


def _plain(key: str, array: str = "text[]") -> RowArray:
    return RowArray(key, array, f"u.{key}")


# Every key a memory row may carry (``plan.row_values``, an import's ids and times, a keyed
# write's key), in table order. Plain values go as they are; the vectors as one
# ``VectorBatch`` (``:embedding_batch``, store/vectors.py), each row's array holding its
# vector's position there (NULL: no vector); the metadata and the tags as JSON text (a
# text[] per row does not fit in one array parameter).
ROW_ARRAYS: dict[str, RowArray] = {
    "org_id": _plain("org_id", "uuid[]"),
    "id": _plain("id", "uuid[]"),
    "namespace": _plain("namespace"),
    "type": _plain("type"),
    "name": _plain("name"),
    "content": _plain("content"),
    "content_hash": _plain("content_hash"),
    "embedding": RowArray(
        "embedding", "int[]", vector_at(":embedding_batch", "u.embedding", ":embedding_dim")
    ),
    "project": _plain("project"),
    "domain": _plain("domain"),
    "agent_id": _plain("agent_id"),
    "tags": RowArray(
        "tags",
        "text[]",
        "CASE WHEN u.tags IS NOT NULL"
        " THEN ARRAY(SELECT jsonb_array_elements_text(CAST(u.tags AS jsonb))) END",
        _json,
    ),
    "source": _plain("source"),
    "origin": _plain("origin"),
    "url": _plain("url"),
    "valid_at": _plain("valid_at", "timestamptz[]"),
    "created_at": _plain("created_at", "timestamptz[]"),
    "updated_at": _plain("updated_at", "timestamptz[]"),
    "superseded_by": _plain("superseded_by", "uuid[]"),
    "expires_at": _plain("expires_at", "timestamptz[]"),
    "meta": RowArray("metadata", "text[]", "CAST(u.meta AS jsonb)", _json),
    "key": _plain("key"),
}


def insert_rows_sql(keys: Sequence[str], skip: Literal["duplicates", "existing"] | None) -> str:
    """INSERT of memory rows carrying ``keys`` (``ROW_ARRAYS``' keys), each bound as one
    array parameter named after it (``:namespace`` holds every row's namespace) and read
    back by ``unnest``. One statement text per set of keys, whatever the number of rows: it
    is parsed and prepared once, where a VALUES list of n rows is a new statement of
    n x 20 parameters for every n (its compiling took 0.5 s of a 500-row batch, on the
    event loop)."""
    columns = ", ".join(ROW_ARRAYS[k].column for k in keys)
    arrays = ", ".join(f"CAST(:{k} AS {ROW_ARRAYS[k].array})" for k in keys)
    reads = ", ".join(ROW_ARRAYS[k].read for k in keys)
    conflict = {
        "duplicates": " ON CONFLICT (org_id, namespace, project, agent_id, content_hash)"
        " WHERE superseded_by IS NULL DO NOTHING",
        "existing": " ON CONFLICT DO NOTHING",
        None: "",
    }[skip]
    return (
        f"INSERT INTO memories ({columns}) SELECT {reads} FROM unnest({arrays}) "
        f"AS u({', '.join(keys)}){conflict} "
        "RETURNING id, namespace, project, agent_id, content_hash"
    )


def _embedding_params(vectors: Sequence[Any]) -> dict[str, Any]:
    """The rows' vectors as ``insert_rows_sql`` binds them: one ``VectorBatch`` of those
    present, and each row's 1-based position in it (None for a row without one)."""
    present: list[Any] = []
    positions: list[int | None] = []
    for v in vectors:
        if v is not None:
            present.append(v)
        positions.append(None if v is None else len(present))
    batch = VectorBatch(present)
    return {"embedding": positions, "embedding_batch": batch, "embedding_dim": batch.dim}


@dataclass(frozen=True)
class Holder:
    """A stored memory as the keyed-write rules see it (domain/writes/keyed.py)."""

    id: uuid.UUID
    key: str | None
    content_hash: str
    superseded_by: uuid.UUID | None
    project: str | None
    agent_id: str | None = None


def namespace_scope(prefixes: Sequence[str]) -> ColumnElement[bool]:
    """SQL predicate: the memory's namespace lies within one of ``prefixes`` (segment-wise).

    ``starts_with`` rather than LIKE, because ``_`` is legal in namespaces and a LIKE
    wildcard."""
    if not prefixes:
        return true()
    return or_(
        *[or_(Memory.namespace == p, func.starts_with(Memory.namespace, p + ":")) for p in prefixes]
    )


def live() -> ColumnElement[bool]:
    """SQL predicate: the memory has not expired. Expired rows leave every read at once, before
    the expiry job purges them."""
    return or_(Memory.expires_at.is_(None), Memory.expires_at > func.now())


def project_scope(key_projects: Sequence[str]) -> ColumnElement[bool]:
    """SQL predicate: a key limited to projects sees those projects and project-less memories."""
    if not key_projects:
        return true()
    return or_(Memory.project.is_(None), Memory.project.in_(list(key_projects)))


# hnsw.ef_search of a near-duplicate probe through the index: the probe wants the few
# closest memories (a duplicate is far closer than anything else), pgvector's default.
NEAR_DUPLICATE_EF_SEARCH = 40
NEAR_DUPLICATE_MAX_SCAN = 1000
"""Tuples a probe's walk of a namespace's graph visits at most (``hnsw.max_scan_tuples``;
pgvector's default 20,000 is a whole big namespace). The walk goes on past the memories of
other types until it holds ``near_duplicate_limit`` of the probe's own; a type the namespace
barely holds kept it going through the whole graph. A memory past the first 1,000 nearest
is no near duplicate unless a thousand others are as close. The probe walks the graph even
where the planner's estimates say the btree's rows of the type are few: they were stale by
thousands of rows in a namespace written to all day (its statistics wait for 10% of the
table to change), and the btree's sort of them took 5.5 ms a probe against 0.5 for the
graph (docs/context.md, 'Eighteenth session')."""


def near_order(indexed: bool, vec: str = "p.vec") -> str:
    """The ORDER BY of a near-duplicate probe on ``m`` against ``p.vec``. Exact (``+ 0``: a
    scan of the namespace behind the btree) for a namespace without a vector index of its
    own (store/namespace_indexes.py: at most the exact-scan threshold's rows). The bare
    operator in an indexed one, where that scan read every row (250 ms at 40k rows) and the
    namespace's HNSW graph, with an iterative scan past the other types, finds a duplicate,
    far closer than anything else, among the first neighbours."""
    return f"m.embedding <=> {vec}" if indexed else f"(m.embedding <=> {vec}) + 0"


def near_lateral(
    key_projects: Sequence[str],
    *,
    indexed: bool,
    org: str = ":org",
    namespace: str = "p.namespace",
    type_: str = "p.type",
) -> str:
    """``CROSS JOIN LATERAL`` the ``:lim`` nearest memories of probe ``p`` (a row with
    ``namespace``, ``project``, ``agent_id`` and ``vec``) as ``m (id, name, dist)``: current
    ones of the org ``org``, namespace ``namespace`` and type ``type_`` (SQL: a parameter, a
    literal or a column of ``p``) within the duplicate reach, in ``near_order``."""
    return f"""CROSS JOIN LATERAL (
            SELECT m.id, m.name, m.embedding <=> p.vec AS dist
            FROM memories m
            WHERE m.org_id = {org} AND m.namespace = {namespace} AND m.type = {type_}
              AND m.superseded_by IS NULL AND {_dup_reach_sql(key_projects)}
            ORDER BY {near_order(indexed)}
            LIMIT :lim
        ) m"""


def near_branch(key_projects: Sequence[str]) -> str:
    """A single write's near duplicates through HNSW (``probe_one``, ``near_order``), its
    values bound as ``:namespace``, ``:type``, ``:project``, ``:agent`` and ``:vec``:
    constants the planner sees, so it proves the namespace index's predicate and takes the
    index (handed a LATERAL probe's columns it cannot; a batch's probes write the namespace
    into the text instead, ``near_indexed_sql``)."""
    vec = "CAST(:vec AS vector)"
    return f"""(SELECT m.id, m.name, 1 - (m.embedding <=> {vec}) AS score
        FROM (SELECT CAST(:project AS text) AS project,
                     CAST(:agent AS text) AS agent_id) p
        JOIN memories m ON m.org_id = :org AND m.namespace = :namespace
                       AND m.type = :type
        WHERE m.superseded_by IS NULL AND {_dup_reach_sql(key_projects)}
        ORDER BY {near_order(True, vec)}
        LIMIT :lim)"""


# A near-duplicate probe batch's rows (``probe_rows_params``): each probe's index in the
# batch, namespace, type, project, agent and vector, the vector read once per probe rather
# than once per compared row.
PROBE_ROWS_SQL = f"""
    SELECT idx, namespace, type, project, agent_id,
           {vector_at(":vecs", "u.ord", ":vecs_dim")} AS vec
    FROM unnest(CAST(:idxs AS int[]), CAST(:namespaces AS text[]),
                CAST(:types AS text[]), CAST(:projects AS text[]),
                CAST(:agents AS text[]))
         WITH ORDINALITY AS u(idx, namespace, type, project, agent_id, ord)
    -- a fence: keeps Postgres from inlining the cast into the scan
    OFFSET 0
"""


def probe_rows_params(
    org_id: uuid.UUID,
    probes: Sequence[tuple[int, str, str, str | None, str | None, Any]],
    threshold: float,
    limit: int,
    key_projects: Sequence[str],
) -> dict[str, Any]:
    """The parameters of ``PROBE_ROWS_SQL`` and of a near-duplicate statement around it."""
    batch = VectorBatch([p[5] for p in probes])
    params: dict[str, Any] = {
        "idxs": [p[0] for p in probes],
        "namespaces": [p[1] for p in probes],
        "types": [p[2] for p in probes],
        "projects": [p[3] for p in probes],
        "agents": [p[4] for p in probes],
        "vecs": batch,
        "vecs_dim": batch.dim,
        "org": org_id,
        "lim": limit,
        "threshold": threshold,
    }
    if key_projects:
        params["key_projects"] = list(key_projects)
    return params


CROWDED_PROBES = 4
"""Probes into one namespace without an index of its own from which ``near_duplicates``
reads the namespace once for all of them (``near_joined_sql``) rather than once per probe.
A probe's own scan visits each row through the btree (about 1.1 µs a row, measured); the
join reads each row once and computes each (probe, row) cosine (about 0.35 µs): from a few
probes on, one pass is cheaper."""


def crowded_namespaces(namespaces: Iterable[str]) -> set[str]:
    """The namespaces that ``CROWDED_PROBES`` or more of ``namespaces`` (one per probe) name."""
    counts = Counter(namespaces)
    return {ns for ns, n in counts.items() if n >= CROWDED_PROBES}


def near_exact_sql(key_projects: Sequence[str]) -> str:
    """``near_duplicates`` by an exact scan of each probe's namespace (``near_order``), over
    ``PROBE_ROWS_SQL``'s rows."""
    return f"""
        SELECT p.idx, m.id, m.name, 1 - m.dist AS score
        FROM ({PROBE_ROWS_SQL}) p
        {near_lateral(key_projects, indexed=False)}
        WHERE 1 - m.dist >= :threshold
        ORDER BY p.idx, score DESC"""


def near_joined_sql(key_projects: Sequence[str]) -> str:
    """``near_duplicates`` of many probes into the same few namespaces without indexes of
    their own (``:crowded``; a batch into one namespace): each namespace's memories are read
    once and compared with all of its probes (a join on namespace and type), where a scan
    per probe (``near_exact_sql``) read them once per probe (500 probes into a
    2,000-memory namespace: 1.1-1.4 s of execution, against 0.35-0.45 s joined;
    docs/context.md, 'A batch into one namespace'). The same duplicates: the memories
    within reach at or above ``:threshold``, the ``:lim`` nearest of each probe."""
    return f"""
        WITH p AS MATERIALIZED ({PROBE_ROWS_SQL})
        SELECT idx, id, name, score
        FROM (
            SELECT p.idx, m.id, m.name, 1 - (m.embedding <=> p.vec) AS score,
                   row_number() OVER (PARTITION BY p.idx
                                      ORDER BY m.embedding <=> p.vec) AS nearest
            FROM p
            JOIN memories m
              ON m.org_id = :org AND m.namespace = p.namespace AND m.type = p.type
            WHERE m.namespace = ANY(CAST(:crowded AS text[]))
              AND m.superseded_by IS NULL AND {_dup_reach_sql(key_projects)}
              AND 1 - (m.embedding <=> p.vec) >= :threshold
        ) m
        WHERE nearest <= :lim
        ORDER BY idx, score DESC"""


def near_indexed_sql(
    org_id: uuid.UUID, namespaces: Iterable[str], key_projects: Sequence[str]
) -> str:
    """``near_duplicates`` through HNSW: a branch per namespace whose probes each walk its
    graph (a LATERAL nearest-neighbour query, ``near_order``), the org and namespace written
    into the text so the planner proves the namespace index's predicate (bound as
    parameters, or read from the probe's columns, it cannot). A branch per probe, as
    before, was planned once per probe: 500 probes into one namespace took 220-270 ms to
    plan and 300 ms to run, against 4-6 and 150-170 ms (docs/context.md, 'A batch into one
    namespace')."""
    org = sql_literal(org_id)
    branches = []
    for namespace in sorted(namespaces):
        ns = sql_literal(namespace)
        branches.append(
            f"""(SELECT p.idx, m.id, m.name, 1 - m.dist AS score
            FROM p {near_lateral(key_projects, indexed=True, org=org, namespace=ns)}
            WHERE p.namespace = {ns})"""
        )
    return (
        f"WITH p AS MATERIALIZED ({PROBE_ROWS_SQL}) "
        "SELECT idx, id, name, score FROM ("
        + " UNION ALL ".join(branches)
        + ") b WHERE score >= :threshold ORDER BY idx, score DESC"
    )


def _dup_reach_sql(key_projects: Sequence[str]) -> str:
    """SQL predicate on ``m`` (a memory) against ``p`` (a probe with ``project`` and
    ``agent_id`` columns): the duplicate reach described in the module docstring."""
    reach = (
        "(m.project IS NULL OR m.project = p.project)"
        " AND (m.agent_id IS NULL OR m.agent_id = p.agent_id)"
        # an expired memory is gone for every read, duplicate checks included
        " AND (m.expires_at IS NULL OR m.expires_at > now())"
    )
    if key_projects:
        reach += " AND (m.project IS NULL OR m.project = ANY(CAST(:key_projects AS text[])))"
    return reach


# A write's exact-duplicate key: (namespace, project, agent_id, content_hash).
ContentKey = tuple[str, str | None, str | None, str]


def under_namespace(namespace: str) -> ColumnElement[bool]:
    """Strictly under ``namespace`` (segment-wise), as ``LIKE 'ns:%'`` so the
    varchar_pattern_ops index (migration 0006) serves it under any collation."""
    escaped = namespace.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return Memory.namespace.like(escaped + ":%", escape="\\")


class MemoryRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    # --- write path ------------------------------------------------------------------

    async def existing_by_hash(
        self,
        org_id: uuid.UUID,
        probes: Sequence[tuple[int, str, str | None, str | None, str]],
        key_projects: Sequence[str],
    ) -> dict[int, tuple[uuid.UUID, bool]]:
        """For each probe ``(index, namespace, project, agent_id, content_hash)``, the memory
        with that content within the duplicate reach, as ``{index: (id, current)}``: a current
        one if there is one (the write's own project and diary first, then shared), else the
        newest superseded one (a re-assertion)."""
        if not probes:
            return {}
        sql = text(
            f"""
            SELECT p.idx, m.id, m.current
            FROM unnest(CAST(:idxs AS int[]), CAST(:namespaces AS text[]),
                        CAST(:projects AS text[]), CAST(:agents AS text[]),
                        CAST(:hashes AS text[])) AS p(idx, namespace, project, agent_id, hash)
            CROSS JOIN LATERAL (
                SELECT m.id, m.superseded_by IS NULL AS current
                FROM memories m
                WHERE m.org_id = :org AND m.namespace = p.namespace
                  AND m.content_hash = p.hash AND {_dup_reach_sql(key_projects)}
                ORDER BY (m.superseded_by IS NULL) DESC,
                         (m.project IS NOT DISTINCT FROM p.project) DESC,
                         (m.agent_id IS NOT DISTINCT FROM p.agent_id) DESC,
                         m.created_at DESC
                LIMIT 1
            ) m
            """
        )
        params: dict[str, Any] = {
            "org": org_id,
            "idxs": [p[0] for p in probes],
            "namespaces": [p[1] for p in probes],
            "projects": [p[2] for p in probes],
            "agents": [p[3] for p in probes],
            "hashes": [p[4] for p in probes],
        }
        if key_projects:
            params["key_projects"] = list(key_projects)
        rows = (await self.session.execute(sql, params)).all()
        return {idx: (mid, bool(current)) for idx, mid, current in rows}

    async def current_by_key(
        self, org_id: uuid.UUID, keys: Sequence[ContentKey]
    ) -> dict[ContentKey, uuid.UUID]:
        """``{key: id}`` of the current memories holding exactly these content keys (a write
        that lost an insert race to the same key finds the winner here)."""
        if not keys:
            return {}
        sql = text(
            """
            SELECT m.namespace, m.project, m.agent_id, m.content_hash, m.id
            FROM unnest(CAST(:namespaces AS text[]), CAST(:projects AS text[]),
                        CAST(:agents AS text[]), CAST(:hashes AS text[]))
                 AS p(namespace, project, agent_id, hash)
            JOIN memories m
              ON m.org_id = :org AND m.namespace = p.namespace AND m.content_hash = p.hash
             AND m.project IS NOT DISTINCT FROM p.project
             AND m.agent_id IS NOT DISTINCT FROM p.agent_id
             AND m.superseded_by IS NULL
            """
        )
        params = {
            "org": org_id,
            "namespaces": [k[0] for k in keys],
            "projects": [k[1] for k in keys],
            "agents": [k[2] for k in keys],
            "hashes": [k[3] for k in keys],
        }
        rows = (await self.session.execute(sql, params)).all()
        return {(ns, pr, ag, h): mid for ns, pr, ag, h, mid in rows}

    async def chain_head(self, org_id: uuid.UUID, memory_id: uuid.UUID) -> Memory | None:
        """The current memory at the end of ``memory_id``'s supersession chain (following
        ``superseded_by``), or None when the chain is broken or loops."""
        sql = text(
            """
            WITH RECURSIVE chain(id, next, depth) AS (
                SELECT id, superseded_by, 0 FROM memories WHERE org_id = :org AND id = :id
                UNION ALL
                SELECT m.id, m.superseded_by, c.depth + 1
                FROM chain c JOIN memories m ON m.org_id = :org AND m.id = c.next
                WHERE c.depth < 1000
            )
            SELECT id FROM chain WHERE next IS NULL AND depth > 0
            """
        )
        head = (await self.session.execute(sql, {"org": org_id, "id": memory_id})).scalar()
        if head is None:
            return None
        return await self.session.get(Memory, (org_id, head))

    async def accessible_ids(
        self,
        org_id: uuid.UUID,
        ids: Sequence[uuid.UUID],
        prefixes: Sequence[str],
        key_projects: Sequence[str],
    ) -> set[uuid.UUID]:
        """Those of ``ids`` that exist in the org and lie within the key's reach."""
        if not ids:
            return set()
        stmt = select(Memory.id).where(
            Memory.org_id == org_id,
            Memory.id.in_(list(ids)),
            namespace_scope(prefixes),
            project_scope(key_projects),
            live(),
        )
        return set((await self.session.execute(stmt)).scalars().all())

    async def predecessor_projects(
        self, org_id: uuid.UUID, memory_id: uuid.UUID
    ) -> set[str | None]:
        """The projects (None: shared) of the memories ``memory_id`` supersedes directly."""
        stmt = select(Memory.project).where(
            Memory.org_id == org_id, Memory.superseded_by == memory_id
        )
        return set((await self.session.execute(stmt)).scalars())

    async def link_targets(
        self,
        org_id: uuid.UUID,
        ids: Sequence[uuid.UUID],
        prefixes: Sequence[str],
        key_projects: Sequence[str],
    ) -> dict[uuid.UUID, tuple[str | None, str, str | None]]:
        """``{id: (project, namespace, agent_id)}`` for those of ``ids`` within the key's read
        reach (as ``accessible_ids``), so a caller can then check its write reach over them
        and who reads them.

        The rows found are locked ``FOR KEY SHARE`` until the caller's transaction ends: a
        delete or erase racing the write waits for it (the link then cascades away with the
        target), and one that committed first makes the id unknown here, a clean 422, rather
        than a foreign-key failure at the link's INSERT."""
        if not ids:
            return {}
        stmt = (
            select(Memory.id, Memory.project, Memory.namespace, Memory.agent_id)
            .where(
                Memory.org_id == org_id,
                Memory.id.in_(sorted(set(ids))),
                namespace_scope(prefixes),
                project_scope(key_projects),
                live(),
            )
            .order_by(Memory.id)
            .with_for_update(key_share=True, of=Memory)
        )
        rows = (await self.session.execute(stmt)).tuples().all()
        return {mid: (project, namespace, agent_id) for mid, project, namespace, agent_id in rows}

    async def _indexed(self, org_id: uuid.UUID, namespaces: set[str]) -> set[str]:
        """Those of ``namespaces`` with a vector index of their own
        (store/namespace_indexes.py), probed through it (``near_order``, ``_probe_rows``)."""
        return set(await indexed_namespaces(self.session, org_id, namespaces))

    async def _probe_rows(
        self, sql: TextClause, params: dict[str, Any], *, walk: bool
    ) -> Sequence[Any]:
        """The rows of a probe statement. ``walk``: it reads namespaces' own graphs, so the
        transaction may use the indexes, and the probe walks the graph rather than sort the
        namespace's rows of its type and stops after ``NEAR_DUPLICATE_MAX_SCAN`` tuples
        (``use_indexes``); sorts are allowed again once it has run, for the write's later
        statements."""
        if not walk:
            return (await self.session.execute(sql, params)).all()
        await use_indexes(self.session, NEAR_DUPLICATE_EF_SEARCH, max_scan=NEAR_DUPLICATE_MAX_SCAN)
        rows = (await self.session.execute(sql, params)).all()
        await self.session.execute(text("SET LOCAL enable_sort TO DEFAULT"))
        return rows

    async def near_duplicates(
        self,
        org_id: uuid.UUID,
        probes: Sequence[tuple[int, str, str, str | None, str | None, Any]],
        threshold: float,
        limit: int,
        key_projects: Sequence[str] = (),
    ) -> dict[int, list[tuple[uuid.UUID, str, float]]]:
        """For each probe ``(index, namespace, type, project, agent_id, vector)``, the live
        memories of the same namespace and type within the duplicate reach whose cosine is at
        least ``threshold``, best first.

        One round trip per plan (usually one for the whole batch): exact in a namespace
        without an index of its own (``near_exact_sql``, or ``near_joined_sql`` for a
        namespace that ``CROWDED_PROBES`` or more of the probes name), through the
        namespace's HNSW index otherwise (``near_indexed_sql``)."""
        if not probes:
            return {}
        big = await self._indexed(org_id, {p[1] for p in probes})
        exact = [p for p in probes if p[1] not in big]
        crowded = crowded_namespaces(p[1] for p in exact)
        # (statement, its probes, its extra parameters, whether it walks graphs)
        plans: list[tuple[Callable[[Sequence[str]], str], list[Any], dict[str, Any], bool]] = [
            (near_exact_sql, [p for p in exact if p[1] not in crowded], {}, False),
            (
                near_joined_sql,
                [p for p in exact if p[1] in crowded],
                {"crowded": sorted(crowded)},
                False,
            ),
            (partial(near_indexed_sql, org_id, big), [p for p in probes if p[1] in big], {}, True),
        ]
        out: dict[int, list[tuple[uuid.UUID, str, float]]] = {}
        for build, group, extra, walk in plans:
            if not group:
                continue
            params = probe_rows_params(org_id, group, threshold, limit, key_projects) | extra
            sql = text(build(key_projects))
            for idx, mid, name, score in await self._probe_rows(sql, params, walk=walk):
                out.setdefault(idx, []).append((mid, name, float(score)))
        return out

    async def probe_one(
        self,
        org_id: uuid.UUID,
        namespace: str,
        type_: str,
        project: str | None,
        agent_id: str | None,
        content_hash: str,
        vector: Sequence[float] | np.ndarray,
        threshold: float,
        limit: int,
        key_projects: Sequence[str] = (),
    ) -> tuple[tuple[uuid.UUID, bool] | None, list[tuple[uuid.UUID, str, float]]]:
        """A single write's checks in one round trip: the exact match as in
        ``existing_by_hash`` (``(id, current)`` or None), and the near duplicates as in
        ``near_duplicates``; both within the duplicate reach."""
        reach = _dup_reach_sql(key_projects)
        indexed = bool(await self._indexed(org_id, {namespace}))
        near_one = f"""(SELECT false, m.id, m.name, 1 - m.dist
             FROM p {near_lateral(key_projects, indexed=False, type_=":type")}
             WHERE 1 - m.dist >= :threshold)"""
        if indexed:
            near_one = f"""(SELECT false, b.id, b.name, b.score
             FROM {near_branch(key_projects)} b WHERE b.score >= :threshold)"""
        sql = text(
            f"""
            WITH p AS (
                SELECT CAST(:namespace AS text) AS namespace, CAST(:project AS text) AS project,
                       CAST(:agent AS text) AS agent_id, CAST(:vec AS vector) AS vec
                OFFSET 0
            )
            (SELECT true AS exact, m.id, NULL::text AS name,
                    (m.superseded_by IS NULL)::int::float8 AS score
             FROM p CROSS JOIN LATERAL (
                 SELECT m.id, m.superseded_by FROM memories m
                 WHERE m.org_id = :org AND m.namespace = p.namespace
                   AND m.content_hash = :hash AND {reach}
                 ORDER BY (m.superseded_by IS NULL) DESC,
                          (m.project IS NOT DISTINCT FROM p.project) DESC,
                          (m.agent_id IS NOT DISTINCT FROM p.agent_id) DESC,
                          m.created_at DESC
                 LIMIT 1
             ) m)
            UNION ALL
            {near_one}
            """
        )
        params: dict[str, Any] = {
            "org": org_id,
            "namespace": namespace,
            "type": type_,
            "project": project,
            "agent": agent_id,
            "hash": content_hash,
            "vec": vector_literal(vector),
            "lim": limit,
            "threshold": threshold,
        }
        if key_projects:
            params["key_projects"] = list(key_projects)
        exact: tuple[uuid.UUID, bool] | None = None
        near: list[tuple[uuid.UUID, str, float]] = []
        for is_exact, mid, name, score in await self._probe_rows(sql, params, walk=indexed):
            if is_exact:
                exact = (mid, bool(score))
            else:
                near.append((mid, name, float(score)))
        near.sort(key=lambda n: -n[2])
        return exact, near

    async def insert_rows(
        self, rows: list[dict[str, Any]], *, skip: Literal["duplicates", "existing"] | None
    ) -> list[tuple[uuid.UUID, ContentKey]]:
        """The one statement that writes memory rows (remember, batch, keyed writes, import,
        the artifact's memory; only benchmarks' bulk COPY bypasses it): ``insert_rows_sql``,
        one INSERT of the rows as column arrays, once per set of columns the rows carry.

        Args:
            skip: ``duplicates``: a row whose content key (namespace, project, diary, hash)
                a current memory holds is skipped (an identical write that raced in);
                ``existing``: a row whose id or content key is already there is skipped
                (import's idempotence); None: any conflict raises.

        Returns:
            ``(id, content key)`` of each row inserted.
        """
        shapes: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for row in rows:
            shape = tuple(c for c in ROW_ARRAYS if c in row)
            if len(shape) != len(row):
                raise ValueError(f"not a memories column: {sorted(set(row) - set(shape))}")
            shapes.setdefault(shape, []).append(row)
        out: list[tuple[uuid.UUID, ContentKey]] = []
        for columns, group in shapes.items():
            params = {
                c: [ROW_ARRAYS[c].convert(row[c]) for row in group]
                for c in columns
                if c != "embedding"
            }
            if "embedding" in columns:
                params.update(_embedding_params([row["embedding"] for row in group]))
            result = await self.session.execute(text(insert_rows_sql(columns, skip)), params)
            out += [(mid, (ns, pr, ag, h)) for mid, ns, pr, ag, h in result.all()]
        return out

    async def insert_many(self, rows: list[dict[str, Any]]) -> dict[ContentKey, uuid.UUID]:
        """``insert_rows`` skipping raced duplicates: ``{content key: id}`` of the rows
        inserted."""
        return {key: mid for mid, key in await self.insert_rows(rows, skip="duplicates")}

    async def add_relations(
        self, org_id: uuid.UUID, edges: Sequence[tuple[uuid.UUID, uuid.UUID, str]]
    ) -> None:
        if not edges:
            return
        stmt = insert(Relation).values(
            [
                {
                    "org_id": org_id,
                    "id": uuid.uuid4(),
                    "source_id": s,
                    "target_id": t,
                    "relationship": r,
                }
                for s, t, r in edges
            ]
        )
        await self.session.execute(
            stmt.on_conflict_do_nothing(
                index_elements=["org_id", "source_id", "target_id", "relationship"]
            )
        )

    async def mark_superseded(
        self, org_id: uuid.UUID, pairs: Sequence[tuple[uuid.UUID, uuid.UUID]]
    ) -> None:
        """``pairs`` of (old, new): the old memory is kept for history, pointing at the new."""
        for old, new in pairs:
            await self.session.execute(
                update(Memory)
                .where(Memory.org_id == org_id, Memory.id == old)
                .values(superseded_by=new, updated_at=func.now())
            )

    async def extend_life(
        self, org_id: uuid.UUID, wanted: dict[uuid.UUID, datetime | None]
    ) -> dict[uuid.UUID, datetime | None]:
        """The longer life wins: each memory of ``wanted`` (``{id: expires_at or None for
        never}``) keeps its expiry or takes the wanted one, whichever is later (None is
        later than any instant). Returns every one's expiry as stored now."""
        if not wanted:
            return {}
        # One statement for the batch (a batch of 500 duplicates took 500 round trips, 126
        # ms): a memory takes the wanted expiry where it is later, NULL being the latest.
        await self.session.execute(
            text(
                """
                UPDATE memories m SET expires_at = w.expires_at, updated_at = now()
                FROM unnest(CAST(:ids AS uuid[]), CAST(:expiries AS timestamptz[]))
                     AS w(id, expires_at)
                WHERE m.org_id = :org AND m.id = w.id
                  AND CASE WHEN w.expires_at IS NULL THEN m.expires_at IS NOT NULL
                           ELSE m.expires_at < w.expires_at END
                """
            ),
            {"org": org_id, "ids": list(wanted), "expiries": list(wanted.values())},
        )
        rows = await self.session.execute(
            select(Memory.id, Memory.expires_at).where(
                Memory.org_id == org_id, Memory.id.in_(list(wanted))
            )
        )
        return dict(rows.tuples().all())

    # --- keyed writes (domain/writes/keyed.py) --------------------------------------------

    async def lock_keys(self, org_id: uuid.UUID, pairs: Sequence[tuple[str, str]]) -> None:
        """Serialize keyed writes: a transaction-scoped advisory lock per (namespace, key),
        taken in a fixed order so two batches never deadlock."""
        if not pairs:
            return
        names = sorted({f"{org_id}\x1f{ns}\x1f{key}" for ns, key in pairs})
        await self.session.execute(
            text(
                "SELECT count(pg_advisory_xact_lock(hashtextextended(k, 0))) "
                "FROM (SELECT k FROM unnest(CAST(:names AS text[])) AS u(k) ORDER BY k OFFSET 0) s"
            ),
            {"names": names},
        )

    async def current_by_keys(
        self, org_id: uuid.UUID, pairs: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], Holder]:
        """``{(namespace, key): holder}`` of the current, unexpired memories holding these keys."""
        found = await self._holders(
            org_id, Memory.key, pairs, and_(Memory.superseded_by.is_(None), live())
        )
        return {(h_ns, str(h.key)): h for h_ns, h in found}

    async def keyed_copies(
        self,
        org_id: uuid.UUID,
        probes: Sequence[tuple[int, str, str | None, str | None, str, str]],
        key_projects: Sequence[str],
    ) -> dict[int, Holder]:
        """For each probe ``(index, namespace, project, agent_id, content_hash, key)``, the
        memory with that content within the write's duplicate reach (``_dup_reach_sql``, as
        for an exact duplicate), as ``{index: holder}``: a current one first, then a version of
        the probe's key, the write's own project and diary first, then the newest."""
        if not probes:
            return {}
        sql = text(
            f"""
            SELECT p.idx, m.id, m.key, m.content_hash, m.superseded_by, m.project, m.agent_id
            FROM unnest(CAST(:idxs AS int[]), CAST(:namespaces AS text[]),
                        CAST(:projects AS text[]), CAST(:agents AS text[]),
                        CAST(:hashes AS text[]), CAST(:keys AS text[]))
                 AS p(idx, namespace, project, agent_id, hash, key)
            CROSS JOIN LATERAL (
                SELECT m.id, m.key, m.content_hash, m.superseded_by, m.project, m.agent_id
                FROM memories m
                WHERE m.org_id = :org AND m.namespace = p.namespace
                  AND m.content_hash = p.hash AND {_dup_reach_sql(key_projects)}
                ORDER BY (m.superseded_by IS NULL) DESC,
                         (m.key IS NOT DISTINCT FROM p.key) DESC,
                         (m.project IS NOT DISTINCT FROM p.project) DESC,
                         (m.agent_id IS NOT DISTINCT FROM p.agent_id) DESC,
                         m.created_at DESC
                LIMIT 1
            ) m
            """
        )
        params: dict[str, Any] = {
            "org": org_id,
            "idxs": [p[0] for p in probes],
            "namespaces": [p[1] for p in probes],
            "projects": [p[2] for p in probes],
            "agents": [p[3] for p in probes],
            "hashes": [p[4] for p in probes],
            "keys": [p[5] for p in probes],
        }
        if key_projects:
            params["key_projects"] = list(key_projects)
        rows = (await self.session.execute(sql, params)).all()
        return {
            idx: Holder(id=i, key=k, content_hash=h, superseded_by=s, project=pr, agent_id=a)
            for idx, i, k, h, s, pr, a in rows
        }

    async def _holders(
        self,
        org_id: uuid.UUID,
        column: Any,
        pairs: Sequence[tuple[str, str]],
        condition: ColumnElement[bool],
    ) -> list[tuple[str, Holder]]:
        """The memories whose ``(namespace, column)`` is one of ``pairs``, as holders."""
        if not pairs:
            return []
        stmt = select(
            Memory.namespace,
            Memory.id,
            Memory.key,
            Memory.content_hash,
            Memory.superseded_by,
            Memory.project,
            Memory.agent_id,
        ).where(
            Memory.org_id == org_id, tuple_(Memory.namespace, column).in_(list(pairs)), condition
        )
        return [
            (ns, Holder(id=i, key=k, content_hash=h, superseded_by=s, project=p, agent_id=a))
            for ns, i, k, h, s, p, a in (await self.session.execute(stmt)).all()
        ]

    async def claim_key(self, org_id: uuid.UUID, memory_id: uuid.UUID, key: str) -> bool:
        """Give ``key`` to an existing memory and make it current again. False when the memory
        is gone or holds another key by now (a concurrent keyed write of the same content
        claimed it first: the row is re-checked once that write commits)."""
        result = await self.session.execute(
            update(Memory)
            .where(
                Memory.org_id == org_id,
                Memory.id == memory_id,
                or_(Memory.key.is_(None), Memory.key == key),
            )
            .values(key=key, superseded_by=None, updated_at=func.now())
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def ensure_projects(self, org_id: uuid.UUID, projects: set[str]) -> None:
        if not projects:
            return
        stmt = insert(Project).values([{"org_id": org_id, "id": p} for p in sorted(projects)])
        await self.session.execute(stmt.on_conflict_do_nothing(index_elements=["org_id", "id"]))

    # --- management reads and changes ---------------------------------------------------

    async def get(
        self,
        org_id: uuid.UUID,
        memory_id: uuid.UUID,
        prefixes: Sequence[str],
        key_projects: Sequence[str],
        *,
        for_update: bool = False,
    ) -> Memory | None:
        stmt = select(Memory).where(
            Memory.org_id == org_id,
            Memory.id == memory_id,
            namespace_scope(prefixes),
            project_scope(key_projects),
            live(),
        )
        if for_update:
            stmt = stmt.with_for_update()
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def related(
        self,
        org_id: uuid.UUID,
        memory_id: uuid.UUID,
        prefixes: Sequence[str],
        key_projects: Sequence[str],
    ) -> list[tuple[uuid.UUID, str, str, str, str]]:
        """One-hop neighbours within the key's reach: (id, type, name, relationship, direction)."""
        out_stmt = (
            select(Memory.id, Memory.type, Memory.name, Relation.relationship)
            .join(Relation, and_(Relation.org_id == Memory.org_id, Relation.target_id == Memory.id))
            .where(Relation.org_id == org_id, Relation.source_id == memory_id)
            .where(namespace_scope(prefixes), project_scope(key_projects), live())
        )
        in_stmt = (
            select(Memory.id, Memory.type, Memory.name, Relation.relationship)
            .join(Relation, and_(Relation.org_id == Memory.org_id, Relation.source_id == Memory.id))
            .where(Relation.org_id == org_id, Relation.target_id == memory_id)
            .where(namespace_scope(prefixes), project_scope(key_projects), live())
        )
        rows = [(*r, "outgoing") for r in (await self.session.execute(out_stmt)).all()]
        rows += [(*r, "incoming") for r in (await self.session.execute(in_stmt)).all()]
        return rows

    def _list_query(
        self,
        org_id: uuid.UUID,
        *,
        prefixes: Sequence[str],
        key_projects: Sequence[str],
        namespace: str | None,
        subtree: bool,
        type_: str | None,
        project: str | None,
        agent_id: str | None,
        tag: str | None,
        text_query: str | None = None,
        key: str | None = None,
    ) -> Select[Any]:
        stmt = select(Memory).where(
            Memory.org_id == org_id, namespace_scope(prefixes), project_scope(key_projects), live()
        )
        if namespace is not None:
            stmt = stmt.where(
                or_(Memory.namespace == namespace, under_namespace(namespace))
                if subtree
                else Memory.namespace == namespace
            )
        if type_ is not None:
            stmt = stmt.where(Memory.type == type_)
        if project is not None:
            stmt = stmt.where(Memory.project == project)
        if agent_id is not None:
            stmt = stmt.where(Memory.agent_id == agent_id)
        if key is not None:
            # A key finds the memory it names now; its superseded versions are history.
            stmt = stmt.where(Memory.key == key, Memory.superseded_by.is_(None))
        if tag is not None:
            stmt = stmt.where(Memory.tags.contains([tag]))
        if text_query is not None:
            # Full text over name and content (the GIN index on tsv), web-search syntax.
            stmt = stmt.where(Memory.tsv.op("@@")(func.websearch_to_tsquery("english", text_query)))
        return stmt

    async def list(
        self, org_id: uuid.UUID, *, offset: int, limit: int, **filters: Any
    ) -> tuple[list[Memory], int]:
        stmt = self._list_query(org_id, **filters)
        total = (
            await self.session.execute(select(func.count()).select_from(stmt.subquery()))
        ).scalar_one()
        rows = await self.session.execute(
            stmt.order_by(Memory.created_at.desc(), Memory.id).offset(offset).limit(limit)
        )
        return list(rows.scalars().all()), int(total)

    async def update(self, org_id: uuid.UUID, memory_id: uuid.UUID, values: dict[str, Any]) -> None:
        """Change a memory's columns. A new project moves an artifact memory's body with it:
        the artifact's reach (``ArtifactRepository.get``) is its project."""
        values = {**values, "updated_at": datetime.now(UTC)}
        await self.session.execute(
            update(Memory).where(Memory.org_id == org_id, Memory.id == memory_id).values(**values)
        )
        if "project" in values:
            await self.session.execute(
                update(Artifact)
                .where(Artifact.org_id == org_id, Artifact.memory_id == memory_id)
                .values(project=values["project"])
            )

    async def hash_taken(
        self,
        org_id: uuid.UUID,
        key: ContentKey,
        except_id: uuid.UUID,
    ) -> uuid.UUID | None:
        """The current memory, other than ``except_id``, holding exactly this content key
        (namespace, project, agent diary, content hash), if any. It lies in the same project
        and diary as the memory being changed, so naming it leaks nothing."""
        found = await self.current_by_key(org_id, [key])
        taken = found.get(key)
        return taken if taken != except_id else None

    async def erase(self, org_id: uuid.UUID, row: Memory) -> bool:
        """Delete the row (content, embedding), its edges (by cascade) and, for an artifact's
        memory, the artifact's body.

        Supersession is a history: memories ``row`` had superseded now point at its successor
        (deleting a middle link keeps the newest current, with a ``supersedes`` edge from the
        successor). When ``row`` was current they become current again, the newest first;
        one whose content key, or whose ``key`` (keyed writes), is already held by a current
        memory points at that one (of several versions of one key, the newest comes back). The
        row goes first: until then it holds its content key and its key."""
        predecessors = (
            (
                await self.session.execute(
                    select(Memory)
                    .where(Memory.org_id == org_id, Memory.superseded_by == row.id)
                    .order_by(Memory.created_at.desc(), Memory.id)
                )
            )
            .scalars()
            .all()
        )
        successor = row.superseded_by
        if successor is not None:
            await self.session.execute(
                update(Memory)
                .where(Memory.org_id == org_id, Memory.superseded_by == row.id)
                .values(superseded_by=successor, updated_at=func.now())
            )
            await self.add_relations(
                org_id, [(successor, p.id, "supersedes") for p in predecessors if p.id != successor]
            )
        await self.session.execute(
            delete(Artifact).where(Artifact.org_id == org_id, Artifact.memory_id == row.id)
        )
        result = await self.session.execute(
            delete(Memory).where(Memory.org_id == org_id, Memory.id == row.id)
        )
        if successor is None:
            for pred in predecessors:
                content: ContentKey = (
                    pred.namespace,
                    pred.project,
                    pred.agent_id,
                    pred.content_hash,
                )
                holder = (await self.current_by_key(org_id, [content])).get(content)
                if holder is None and pred.key is not None:
                    named = await self.current_by_keys(org_id, [(pred.namespace, pred.key)])
                    held = named.get((pred.namespace, pred.key))
                    holder = held.id if held is not None else None
                await self.session.execute(
                    update(Memory)
                    .where(Memory.org_id == org_id, Memory.id == pred.id)
                    .values(superseded_by=holder, updated_at=func.now())
                )
        return bool(result.rowcount)  # type: ignore[attr-defined]
