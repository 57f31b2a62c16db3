"""Memories and their relations: the write path and the management reads. (The ranked
retrieval of context packs lives in store/retrieval.py.)"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
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

from service.store.models import Memory, Project, Relation


@dataclass(frozen=True)
class Holder:
    """A stored memory as the keyed-write rules see it (domain/keyed_writes.py)."""

    id: uuid.UUID
    key: str | None
    content_hash: str
    superseded_by: uuid.UUID | None
    project: str | None


def namespace_scope(prefixes: Sequence[str]) -> ColumnElement[bool]:
    """SQL predicate: the memory's namespace lies within one of ``prefixes`` (segment-wise).

    ``starts_with`` rather than LIKE, because ``_`` is legal in namespaces and a LIKE
    wildcard."""
    if not prefixes:
        return true()
    return or_(
        *[
            or_(Memory.namespace == p, func.starts_with(Memory.namespace, p + ":"))
            for p in prefixes
        ]
    )


def project_scope(key_projects: Sequence[str]) -> ColumnElement[bool]:
    """SQL predicate: a key limited to projects sees those projects and project-less memories."""
    if not key_projects:
        return true()
    return or_(Memory.project.is_(None), Memory.project.in_(list(key_projects)))


class MemoryRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    # --- write path ------------------------------------------------------------------

    async def existing_by_hash(
        self, org_id: uuid.UUID, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], uuid.UUID]:
        """``{(namespace, content_hash): id}`` for the given pairs that already exist."""
        if not keys:
            return {}
        stmt = select(Memory.namespace, Memory.content_hash, Memory.id).where(
            Memory.org_id == org_id,
            tuple_(Memory.namespace, Memory.content_hash).in_(list(keys)),
        )
        rows = await self.session.execute(stmt)
        return {(ns, h): mid for ns, h, mid in rows.all()}

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
        )
        return set((await self.session.execute(stmt)).scalars().all())

    async def near_duplicates(
        self,
        org_id: uuid.UUID,
        probes: Sequence[tuple[int, str, str, list[float]]],
        threshold: float,
        limit: int,
    ) -> dict[int, list[tuple[uuid.UUID, str, float]]]:
        """For each probe ``(index, namespace, type, vector)``, the live memories of the same
        namespace and type whose cosine is at least ``threshold``, best first.

        One round trip for the whole batch: a LATERAL nearest-neighbour query per probe,
        ordered by the bare ``<=>`` operator."""
        if not probes:
            return {}
        sql = text(
            """
            SELECT p.idx, m.id, m.name, 1 - m.dist AS score
            FROM (
                -- Parse each probe vector once, not once per compared row.
                SELECT idx, namespace, type, CAST(vec AS vector) AS vec
                FROM unnest(CAST(:idxs AS int[]), CAST(:namespaces AS text[]),
                            CAST(:types AS text[]), CAST(:vecs AS text[]))
                     AS u(idx, namespace, type, vec)
                OFFSET 0  -- a fence: keeps Postgres from inlining the cast into the scan
            ) p
            CROSS JOIN LATERAL (
                SELECT id, name, embedding <=> p.vec AS dist
                FROM memories
                WHERE org_id = :org AND namespace = p.namespace AND type = p.type
                  AND superseded_by IS NULL
                -- "+ 0": an exact scan of the namespace behind the btree, never HNSW. With a
                -- selective namespace filter HNSW walks most of the graph to fill the limit.
                ORDER BY (embedding <=> p.vec) + 0
                LIMIT :lim
            ) m
            WHERE 1 - m.dist >= :threshold
            ORDER BY p.idx, score DESC
            """
        )
        params = {
            "idxs": [p[0] for p in probes],
            "namespaces": [p[1] for p in probes],
            "types": [p[2] for p in probes],
            "vecs": [_vector_literal(p[3]) for p in probes],
            "org": org_id,
            "lim": limit,
            "threshold": threshold,
        }
        out: dict[int, list[tuple[uuid.UUID, str, float]]] = {}
        for idx, mid, name, score in (await self.session.execute(sql, params)).all():
            out.setdefault(idx, []).append((mid, name, float(score)))
        return out

    async def probe_one(
        self,
        org_id: uuid.UUID,
        namespace: str,
        type_: str,
        content_hash: str,
        vector: list[float],
        threshold: float,
        limit: int,
    ) -> tuple[uuid.UUID | None, list[tuple[uuid.UUID, str, float]]]:
        """A single write's checks in one round trip: the id of an exact duplicate (same
        namespace and content hash) if there is one, and the near duplicates as in
        ``near_duplicates``."""
        sql = text(
            """
            (SELECT true AS exact, id, NULL::text AS name, NULL::float8 AS score
             FROM memories
             WHERE org_id = :org AND namespace = :namespace AND content_hash = :hash
             LIMIT 1)
            UNION ALL
            (SELECT false, m.id, m.name, 1 - m.dist
             FROM (SELECT CAST(:vec AS vector) AS vec OFFSET 0) p
             CROSS JOIN LATERAL (
                 SELECT id, name, embedding <=> p.vec AS dist
                 FROM memories
                 WHERE org_id = :org AND namespace = :namespace AND type = :type
                   AND superseded_by IS NULL
                 ORDER BY (embedding <=> p.vec) + 0  -- exact, see near_duplicates
                 LIMIT :lim
             ) m
             WHERE 1 - m.dist >= :threshold)
            """
        )
        params = {
            "org": org_id,
            "namespace": namespace,
            "type": type_,
            "hash": content_hash,
            "vec": _vector_literal(vector),
            "lim": limit,
            "threshold": threshold,
        }
        exact: uuid.UUID | None = None
        near: list[tuple[uuid.UUID, str, float]] = []
        for is_exact, mid, name, score in (await self.session.execute(sql, params)).all():
            if is_exact:
                exact = mid
            else:
                near.append((mid, name, float(score)))
        near.sort(key=lambda n: -n[2])
        return exact, near

    async def insert_many(self, rows: list[dict[str, Any]]) -> dict[tuple[str, str], uuid.UUID]:
        """Insert memories, skipping exact duplicates that raced in.
        Returns ``{(namespace, content_hash): id}`` of the rows actually inserted."""
        if not rows:
            return {}
        stmt = (
            insert(Memory)
            .values(rows)
            .on_conflict_do_nothing(index_elements=["org_id", "namespace", "content_hash"])
            .returning(Memory.namespace, Memory.content_hash, Memory.id)
        )
        result = await self.session.execute(stmt)
        return {(ns, h): mid for ns, h, mid in result.all()}

    async def add_relations(self, org_id: uuid.UUID, edges: Sequence[tuple[uuid.UUID, uuid.UUID, str]]) -> None:
        if not edges:
            return
        stmt = insert(Relation).values(
            [
                {"org_id": org_id, "id": uuid.uuid4(), "source_id": s, "target_id": t, "relationship": r}
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

    # --- keyed writes (domain/keyed_writes.py) --------------------------------------------

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
        """``{(namespace, key): holder}`` of the current memories holding these keys."""
        found = await self._holders(org_id, Memory.key, pairs, Memory.superseded_by.is_(None))
        return {(h_ns, str(h.key)): h for h_ns, h in found}

    async def by_hashes(
        self, org_id: uuid.UUID, pairs: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], Holder]:
        """``{(namespace, content_hash): holder}`` for the pairs already stored."""
        found = await self._holders(org_id, Memory.content_hash, pairs, true())
        return {(h_ns, h.content_hash): h for h_ns, h in found}

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
            Memory.namespace, Memory.id, Memory.key, Memory.content_hash,
            Memory.superseded_by, Memory.project,
        ).where(
            Memory.org_id == org_id, tuple_(Memory.namespace, column).in_(list(pairs)), condition
        )
        return [
            (ns, Holder(id=i, key=k, content_hash=h, superseded_by=s, project=p))
            for ns, i, k, h, s, p in (await self.session.execute(stmt)).all()
        ]

    async def claim_key(self, org_id: uuid.UUID, memory_id: uuid.UUID, key: str) -> None:
        """Give ``key`` to an existing memory and make it current again."""
        await self.session.execute(
            update(Memory)
            .where(Memory.org_id == org_id, Memory.id == memory_id)
            .values(key=key, superseded_by=None, updated_at=func.now())
        )

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
            .where(namespace_scope(prefixes), project_scope(key_projects))
        )
        in_stmt = (
            select(Memory.id, Memory.type, Memory.name, Relation.relationship)
            .join(Relation, and_(Relation.org_id == Memory.org_id, Relation.source_id == Memory.id))
            .where(Relation.org_id == org_id, Relation.target_id == memory_id)
            .where(namespace_scope(prefixes), project_scope(key_projects))
        )
        rows = [(*r, "outgoing") for r in (await self.session.execute(out_stmt)).all()]
        rows += [(*r, "incoming") for r in (await self.session.execute(in_stmt)).all()]
        return rows  # type: ignore[return-value]

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
        key: str | None = None,
    ) -> Select[Any]:
        stmt = select(Memory).where(
            Memory.org_id == org_id, namespace_scope(prefixes), project_scope(key_projects)
        )
        if namespace is not None:
            stmt = stmt.where(
                or_(Memory.namespace == namespace, func.starts_with(Memory.namespace, namespace + ":"))
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
        values = {**values, "updated_at": datetime.now(UTC)}
        await self.session.execute(
            update(Memory).where(Memory.org_id == org_id, Memory.id == memory_id).values(**values)
        )

    async def hash_taken(
        self, org_id: uuid.UUID, namespace: str, content_hash: str, except_id: uuid.UUID
    ) -> uuid.UUID | None:
        stmt = select(Memory.id).where(
            Memory.org_id == org_id,
            Memory.namespace == namespace,
            Memory.content_hash == content_hash,
            Memory.id != except_id,
        )
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def erase(self, org_id: uuid.UUID, memory_id: uuid.UUID) -> bool:
        """Delete the row (content, embedding) and, by cascade, its edges; memories it had
        superseded become current again, except a keyed one whose key another current memory
        holds (of several with one key, the newest comes back). The row goes first: until then
        it holds its key."""
        result = await self.session.execute(
            delete(Memory).where(Memory.org_id == org_id, Memory.id == memory_id)
        )
        await self.session.execute(
            text(
                """
                UPDATE memories m SET superseded_by = NULL
                WHERE m.org_id = :org AND m.superseded_by = :id
                  AND (m.key IS NULL OR (
                    NOT EXISTS (SELECT 1 FROM memories o
                                WHERE o.org_id = m.org_id AND o.namespace = m.namespace
                                  AND o.key = m.key AND o.superseded_by IS NULL)
                    AND m.id = (SELECT s.id FROM memories s
                                WHERE s.org_id = m.org_id AND s.namespace = m.namespace
                                  AND s.key = m.key AND s.superseded_by = :id
                                ORDER BY s.created_at DESC, s.id LIMIT 1)))
                """
            ),
            {"org": org_id, "id": memory_id},
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]


def _vector_literal(vec: list[float]) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in vec) + "]"

