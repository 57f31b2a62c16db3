"""The SQL of the lifecycle operations: erasing a namespace subtree, purging expired memories,
scrubbing the audit trail of what they erased, and streaming a store out and back in
(export/import).

Every method runs in the caller's session (one unit of work): an erase is one transaction,
whatever it touches.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Text,
    bindparam,
    delete,
    func,
    or_,
    select,
    text,
    tuple_,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, aggregate_order_by, insert
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from service.store.memories import MemoryRepository
from service.store.models import Artifact, AuditEvent, Memory, Relation

# Rows fetched per round trip when streaming (server-side cursor).
STREAM_CHUNK = 1000


def _unexpired() -> ColumnElement[bool]:
    """A memory not expired (an expired one awaits the purge and is never exported)."""
    return or_(Memory.expires_at.is_(None), Memory.expires_at > func.now())


def subtree(column: Any, namespace: str) -> ColumnElement[bool]:
    """``column`` is ``namespace`` or lies under it (segment-wise; ``starts_with``, not LIKE,
    since ``_`` is legal in namespaces)."""
    return or_(column == namespace, func.starts_with(column, namespace + ":"))


def pair_in(a: Any, b: Any, pairs: Sequence[tuple[str, str]], name: str) -> ColumnElement[bool]:
    """``(a, b)`` is one of ``pairs``, bound as two text arrays (``:<name>_a``, ``:<name>_b``)
    and unnested: one statement whatever the number of pairs, where an IN list of a
    500-item batch's pairs was 1,000 parameters to compile and plan (30-40 ms a batch)."""
    table = func.unnest(
        bindparam(f"{name}_a", [p[0] for p in pairs], type_=ARRAY(Text)),
        bindparam(f"{name}_b", [p[1] for p in pairs], type_=ARRAY(Text)),
    ).table_valued("a", "b").render_derived()
    return tuple_(a, b).in_(select(table.c.a, table.c.b))


class LifecycleRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    # --- erase ------------------------------------------------------------------------

    async def lock_subtree(self, org_id: uuid.UUID, namespace: str) -> list[tuple[uuid.UUID, str]]:
        """Lock and return ``(id, name)`` of every memory of the subtree, so no concurrent
        write can link to one of them while the erase runs."""
        stmt = (
            select(Memory.id, Memory.name)
            .where(Memory.org_id == org_id, subtree(Memory.namespace, namespace))
            .with_for_update()
        )
        return [(mid, name) for mid, name in (await self.session.execute(stmt)).all()]

    async def count_relations(self, org_id: uuid.UUID, ids: Sequence[uuid.UUID]) -> int:
        """Edges with either end in ``ids`` (each counted once)."""
        if not ids:
            return 0
        id_list = list(ids)
        stmt = select(func.count()).where(
            Relation.org_id == org_id,
            or_(Relation.source_id.in_(id_list), Relation.target_id.in_(id_list)),
        )
        return int((await self.session.execute(stmt)).scalar_one())

    async def unsupersede(self, org_id: uuid.UUID, ids: Sequence[uuid.UUID]) -> None:
        """Memories superseded by one of ``ids`` (which are going) become current again."""
        if ids:
            await self.session.execute(
                update(Memory)
                .where(Memory.org_id == org_id, Memory.superseded_by.in_(list(ids)))
                .values(superseded_by=None, updated_at=func.now())
            )

    async def delete_memories(self, org_id: uuid.UUID, ids: Sequence[uuid.UUID]) -> int:
        """Delete the rows (content, embedding); their edges, in and out, go by cascade."""
        if not ids:
            return 0
        result = await self.session.execute(
            delete(Memory).where(Memory.org_id == org_id, Memory.id.in_(list(ids)))
        )
        return int(result.rowcount)  # type: ignore[attr-defined]

    async def delete_artifacts(
        self, org_id: uuid.UUID, namespace: str, memory_ids: Sequence[uuid.UUID]
    ) -> list[uuid.UUID]:
        """Delete the artifacts stored in the subtree or attached to one of ``memory_ids``;
        their ids."""
        cond = subtree(Artifact.namespace, namespace)
        if memory_ids:
            cond = or_(cond, Artifact.memory_id.in_(list(memory_ids)))
        result = await self.session.execute(
            delete(Artifact).where(Artifact.org_id == org_id, cond).returning(Artifact.id)
        )
        return list(result.scalars())

    async def delete_artifacts_of(self, org_id: uuid.UUID, memory_ids: Sequence[uuid.UUID]) -> int:
        """Artifacts attached to one of ``memory_ids`` (their bodies with them)."""
        if not memory_ids:
            return 0
        result = await self.session.execute(
            delete(Artifact).where(
                Artifact.org_id == org_id, Artifact.memory_id.in_(list(memory_ids))
            )
        )
        return int(result.rowcount)  # type: ignore[attr-defined]

    async def delete_keys_within(self, org_id: uuid.UUID, namespace: str) -> list[str]:
        """Delete the keys limited to namespaces inside the subtree (every prefix of theirs
        within it); return their hashes, for the caller caches. Unlimited keys and keys that
        also reach elsewhere stay."""
        stmt = text(
            """
            DELETE FROM api_keys k
            WHERE k.org_id = :org AND cardinality(k.namespace_prefixes) > 0
              AND NOT EXISTS (SELECT 1 FROM unnest(k.namespace_prefixes) AS p(prefix)
                              WHERE p.prefix <> :ns AND NOT starts_with(p.prefix, :under))
            RETURNING k.key_hash
            """
        )
        params = {"org": org_id, "ns": namespace, "under": namespace + ":"}
        result = await self.session.execute(stmt, params)
        return [h for (h,) in result.all()]

    # --- the audit trail --------------------------------------------------------------

    async def trail_rows(
        self, org_id: uuid.UUID, ids: Sequence[uuid.UUID]
    ) -> list[tuple[uuid.UUID, dict[str, Any], dict[str, Any]]]:
        """``(id, request, details)`` of the audit rows naming one of ``ids`` (GIN index)."""
        if not ids:
            return []
        stmt = select(AuditEvent.id, AuditEvent.request, AuditEvent.details).where(
            AuditEvent.org_id == org_id, AuditEvent.memory_ids.overlap(list(ids))
        )
        return [(a, dict(r or {}), dict(d or {})) for a, r, d in (await self.session.execute(stmt)).all()]

    async def rewrite_trail_row(
        self, org_id: uuid.UUID, audit_id: uuid.UUID, request: dict[str, Any], details: dict[str, Any]
    ) -> None:
        await self.session.execute(
            update(AuditEvent)
            .where(AuditEvent.org_id == org_id, AuditEvent.id == audit_id)
            .values(request=request, details=details)
        )

    async def erase_free_text(
        self,
        org_id: uuid.UUID,
        namespace: str,
        artifact_ids: Sequence[uuid.UUID],
        fields: Sequence[str],
        replacement: str,
        detail_fields: Sequence[str] = (),
    ) -> int:
        """Replace the free text (``fields`` of ``request``: goals, tag filters, keys, names;
        ``detail_fields`` of ``details``: the field names an artifact read did not find) the
        calls made at the subtree, or about one of its ``artifact_ids``, recorded, whatever
        their outcome. Returns the rows rewritten."""
        params = {
            "org": org_id, "ns": namespace, "under": namespace + ":", "repl": replacement,
            "artifacts": [str(a) for a in artifact_ids],
        }
        changed: set[Any] = set()
        for column, names in (("request", fields), ("details", detail_fields)):
            if not names:
                continue
            stmt = text(
                f"""
                UPDATE audit_events
                SET {column} = (
                    SELECT jsonb_object_agg(e.key, CASE
                        WHEN e.key <> ALL(CAST(:fields AS text[])) THEN e.value
                        WHEN jsonb_typeof(e.value) = 'string' THEN to_jsonb(CAST(:repl AS text))
                        WHEN jsonb_typeof(e.value) = 'array' THEN (
                            SELECT coalesce(jsonb_agg(to_jsonb(CAST(:repl AS text))), '[]'::jsonb)
                            FROM jsonb_array_elements(e.value))
                        ELSE e.value END)
                    FROM jsonb_each({column}) AS e)
                WHERE org_id = :org
                  AND (namespace = :ns OR starts_with(namespace, :under)
                       OR request->>'artifact_id' = ANY(CAST(:artifacts AS text[]))
                       OR details->>'artifact_id' = ANY(CAST(:artifacts AS text[])))
                  AND jsonb_typeof({column}) = 'object'
                  AND EXISTS (
                    SELECT 1 FROM jsonb_each({column}) AS e
                    WHERE e.key = ANY(CAST(:fields AS text[]))
                      AND (
                        (jsonb_typeof(e.value) = 'string' AND e.value <> to_jsonb(CAST(:repl AS text)))
                        OR (jsonb_typeof(e.value) = 'array' AND EXISTS (
                            SELECT 1 FROM jsonb_array_elements(e.value) AS x
                            WHERE x <> to_jsonb(CAST(:repl AS text))))))
                RETURNING id
                """
            )
            result = await self.session.execute(stmt, {**params, "fields": list(names)})
            changed.update(r[0] for r in result)
        return len(changed)

    # --- expiry -----------------------------------------------------------------------

    async def expired(
        self, now: datetime | None, limit: int, org_id: uuid.UUID | None = None,
        keys: Sequence[tuple[str, str]] | None = None,
        named: Sequence[tuple[str, str]] = (),
    ) -> list[tuple[uuid.UUID, uuid.UUID, str, str]]:
        """Lock and return ``(org_id, id, namespace, name)`` of memories expired at ``now``
        (None: the database's clock; oldest expiry first, by the partial index), optionally
        only those of ``org_id`` with one of the ``(namespace, content_hash)`` pairs ``keys``
        or one of the ``(namespace, key)`` pairs ``named``.
        Rows another transaction holds are skipped, so two purgers never wait on each other;
        a write's purge of its own copies (``keys`` or ``named``) waits for them instead.

        Across every org (``org_id`` None: the expiry job), the oldest expiries are found
        first without a lock, then locked org by org: a locking statement names one org,
        so on Citus each is routed to the node holding that org (Citus runs no FOR UPDATE
        over several shards)."""
        expired_at = func.now() if now is None else now
        stmt = select(Memory.org_id, Memory.id, Memory.namespace, Memory.name).where(
            Memory.expires_at.is_not(None), Memory.expires_at <= expired_at
        )
        if org_id is None:
            found = (
                await self.session.execute(
                    select(Memory.org_id, Memory.id, Memory.expires_at)
                    .where(Memory.expires_at.is_not(None), Memory.expires_at <= expired_at)
                    .order_by(Memory.expires_at, Memory.org_id, Memory.id)
                    .limit(limit)
                )
            ).all()
            by_org: dict[uuid.UUID, list[uuid.UUID]] = {}
            for org, memory_id, _ in found:
                by_org.setdefault(org, []).append(memory_id)
            locked: list[tuple[uuid.UUID, uuid.UUID, str, str]] = []
            for org, ids in by_org.items():
                rows = await self.session.execute(
                    stmt.where(Memory.org_id == org, Memory.id.in_(ids))
                    .order_by(Memory.expires_at)
                    .with_for_update(skip_locked=True)
                )
                locked.extend(tuple(r) for r in rows.all())  # type: ignore[misc]
            return locked
        stmt = stmt.where(Memory.org_id == org_id)
        if keys is not None or named:
            wanted = [pair_in(Memory.namespace, Memory.content_hash, keys or [], "hash")]
            if named:
                wanted.append(pair_in(Memory.namespace, Memory.key, named, "key"))
            stmt = stmt.where(or_(*wanted))
        # A write that names its copies waits for a holder (the expiry job, purging the same
        # row) instead of skipping the row: skipped, the copy was still there for the write's
        # duplicate check and its unique index, and the write got a 409 naming an expired row.
        targeted = keys is not None or bool(named)
        stmt = stmt.order_by(Memory.expires_at).limit(limit).with_for_update(skip_locked=not targeted)
        return [tuple(r) for r in (await self.session.execute(stmt)).all()]  # type: ignore[misc]

    async def db_now(self) -> datetime:
        return (await self.session.execute(select(func.now()))).scalar_one()

    # --- export / import --------------------------------------------------------------

    async def stream_memories(
        self,
        org_id: uuid.UUID,
        *,
        namespace: str | None,
        since: datetime | None,
        with_vectors: bool,
    ) -> AsyncGenerator[dict[str, Any], None]:
        """Every memory of the org (optionally of a subtree, created or updated since a time),
        in (created_at, id) order, through a server-side cursor: memory use stays flat at any
        size. Each row comes with its outgoing edges and the ids of its artifacts."""
        cols = [c for c in Memory.__table__.columns if c.name not in ("tsv", "embedding")]
        if with_vectors:
            cols.append(Memory.__table__.c.embedding)
        edges = (
            select(
                func.coalesce(
                    func.jsonb_agg(
                        aggregate_order_by(
                            func.jsonb_build_object(
                                "id", Relation.id,
                                "target_id", Relation.target_id,
                                "relationship", Relation.relationship,
                                "created_at", Relation.created_at,
                            ),
                            Relation.created_at,
                            Relation.id,
                        )
                    ),
                    text("'[]'::jsonb"),
                )
            )
            .where(Relation.org_id == Memory.org_id, Relation.source_id == Memory.id)
            .scalar_subquery()
            .label("relations")
        )
        artifacts = (
            select(func.coalesce(func.array_agg(Artifact.id), text("'{}'::uuid[]")))
            .where(Artifact.org_id == Memory.org_id, Artifact.memory_id == Memory.id)
            .scalar_subquery()
            .label("artifact_ids")
        )
        stmt = select(*cols, edges, artifacts).where(Memory.org_id == org_id, _unexpired())
        if namespace is not None:
            stmt = stmt.where(subtree(Memory.namespace, namespace))
        if since is not None:
            stmt = stmt.where(or_(Memory.created_at >= since, Memory.updated_at >= since))
        stmt = stmt.order_by(Memory.created_at, Memory.id)
        result = await self.session.stream(stmt.execution_options(yield_per=STREAM_CHUNK))
        try:
            async for row in result.mappings():
                yield dict(row)
        finally:  # a reader that stops early (a failed export) closes the server-side cursor
            await result.close()

    async def stream_artifacts(
        self, org_id: uuid.UUID, *, namespace: str | None, since: datetime | None
    ) -> AsyncGenerator[dict[str, Any], None]:
        # An artifact dies with its memory's expiry (finding 4): an expired one is not exported.
        expired = (
            select(Memory.id)
            .where(
                Memory.org_id == Artifact.org_id,
                Memory.id == Artifact.memory_id,
                Memory.expires_at.is_not(None),
                Memory.expires_at <= func.now(),
            )
            .exists()
        )
        stmt = select(*Artifact.__table__.columns).where(Artifact.org_id == org_id, ~expired)
        if namespace is not None:
            stmt = stmt.where(subtree(Artifact.namespace, namespace))
        if since is not None:
            stmt = stmt.where(Artifact.created_at >= since)
        stmt = stmt.order_by(Artifact.created_at, Artifact.id)
        result = await self.session.stream(stmt.execution_options(yield_per=STREAM_CHUNK))
        try:
            async for row in result.mappings():
                yield dict(row)
        finally:  # a reader that stops early (a failed export) closes the server-side cursor
            await result.close()

    async def count_memories(
        self, org_id: uuid.UUID, *, namespace: str | None, since: datetime | None
    ) -> int:
        stmt = select(func.count()).select_from(Memory).where(Memory.org_id == org_id, _unexpired())
        if namespace is not None:
            stmt = stmt.where(subtree(Memory.namespace, namespace))
        if since is not None:
            stmt = stmt.where(or_(Memory.created_at >= since, Memory.updated_at >= since))
        return int((await self.session.execute(stmt)).scalar_one())

    async def existing_ids(self, org_id: uuid.UUID, ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
        if not ids:
            return set()
        stmt = select(Memory.id).where(Memory.org_id == org_id, Memory.id.in_(list(ids)))
        return set((await self.session.execute(stmt)).scalars().all())

    async def insert_memories(self, rows: list[dict[str, Any]]) -> set[uuid.UUID]:
        """Insert imported memories as they are (ids and times kept); a row whose id or
        content is already in its namespace is skipped. Returns the ids inserted."""
        inserted = await MemoryRepository(self.session).insert_rows(rows, skip="existing")
        return {mid for mid, _ in inserted}

    async def insert_relations(self, org_id: uuid.UUID, edges: list[dict[str, Any]]) -> int:
        """Edges whose both ends exist; an edge already there (same id or same triple) is
        skipped. Returns how many were inserted."""
        if not edges:
            return 0
        ends = {e["source_id"] for e in edges} | {e["target_id"] for e in edges}
        present = await self.existing_ids(org_id, list(ends))
        rows = [
            {**e, "org_id": org_id}
            for e in edges
            if e["source_id"] in present and e["target_id"] in present
        ]
        if not rows:
            return 0
        stmt = insert(Relation).values(rows).on_conflict_do_nothing().returning(Relation.id)
        return len((await self.session.execute(stmt)).all())

    async def set_superseded(
        self, org_id: uuid.UUID, pairs: Sequence[tuple[uuid.UUID, uuid.UUID]]
    ) -> None:
        """``(old, new)`` pairs, where both exist, are two memories, and the replacement lives
        in the old memory's namespace (as remember's ``supersedes`` requires: a key limited to
        that namespace must be able to read what replaced it)."""
        newer = aliased(Memory)
        for old, new in pairs:
            if old == new:
                continue
            await self.session.execute(
                update(Memory)
                .where(
                    Memory.org_id == org_id,
                    Memory.id == old,
                    select(newer.id)
                    .where(
                        newer.org_id == org_id,
                        newer.id == new,
                        newer.namespace == Memory.namespace,
                    )
                    .exists(),
                )
                .values(superseded_by=new)
            )

    async def set_keys(self, org_id: uuid.UUID, pairs: Sequence[tuple[uuid.UUID, str]]) -> int:
        """Give each ``(id, key)`` memory without a key its key, when it is superseded (history
        keeps its key) or no current memory of its namespace holds that key (the key is
        unique among current memories). Returns how many were set."""
        if not pairs:
            return 0
        stmt = text(
            """
            UPDATE memories m SET key = v.key
            FROM unnest(CAST(:ids AS uuid[]), CAST(:keys AS text[])) AS v(id, key)
            WHERE m.org_id = :org AND m.id = v.id AND m.key IS NULL
              AND (m.superseded_by IS NOT NULL OR NOT EXISTS (
                    SELECT 1 FROM memories h
                    WHERE h.org_id = m.org_id AND h.namespace = m.namespace
                      AND h.key = v.key AND h.superseded_by IS NULL))
            """
        )
        params = {"org": org_id, "ids": [i for i, _ in pairs], "keys": [k for _, k in pairs]}
        result = await self.session.execute(stmt, params)
        return int(result.rowcount)  # type: ignore[attr-defined]

    async def insert_artifacts(self, rows: list[dict[str, Any]]) -> set[uuid.UUID]:
        """Insert imported artifacts; a ``memory_id`` that is not an artifact memory of the
        same org and namespace is dropped (a forged one tied the artifact's life and erasure
        to another namespace's memory). An artifact whose id is already there is skipped.
        Returns the ids inserted."""
        if not rows:
            return set()
        wanted = {r["memory_id"] for r in rows if r.get("memory_id") is not None}
        found: set[tuple[uuid.UUID, str]] = set()
        if wanted:
            result = await self.session.execute(
                select(Memory.id, Memory.namespace).where(
                    Memory.org_id == rows[0]["org_id"],
                    Memory.id.in_(wanted),
                    Memory.type == "artifact",
                )
            )
            found = {(mid, ns) for mid, ns in result.all()}
        for r in rows:
            if r.get("memory_id") is not None and (r["memory_id"], r["namespace"]) not in found:
                r["memory_id"] = None
        stmt = insert(Artifact).values(rows).on_conflict_do_nothing().returning(Artifact.id)
        return {aid for (aid,) in (await self.session.execute(stmt)).all()}
