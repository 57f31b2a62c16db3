"""All SQL of the web console (service/console): its sessions, and the read-only aggregates
its pages show (overview counts and series, the namespace tree, supersession chains, nearest
misses of a pack, the org's keys). Every query is bound to the caller's org and limits: the
memory queries reuse ``namespace_scope``/``project_scope`` (store/memories.py), the audit
queries the trail's own visibility filter (store/audit.py)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Integer, case, cast, delete, func, literal, select, text, true, union_all
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncSession

from service.store.audit import AuditFilter, filter_conditions
from service.store.memories import live, namespace_scope, project_scope, under_namespace
from service.store.models import ApiKey, AuditEvent, ConsoleSession, Memory
from service.store.retrieval import Scope, scope_params, scope_sql
from service.store.vectors import vector_literal


class ConsoleSessionRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def create(
        self,
        *,
        org_id: uuid.UUID,
        key_id: uuid.UUID,
        token_hash: str,
        csrf_token: str,
        expires_at: datetime,
    ) -> ConsoleSession:
        row = ConsoleSession(
            org_id=org_id,
            id=uuid.uuid4(),
            key_id=key_id,
            token_hash=token_hash,
            csrf_token=csrf_token,
            expires_at=expires_at,
        )
        self.session.add(row)
        await self.session.flush()
        return row

    async def active(self, token_hash: str) -> tuple[ConsoleSession, ApiKey] | None:
        """The unexpired session with this token whose key is still active, with the key."""
        stmt = (
            select(ConsoleSession, ApiKey)
            .join(
                ApiKey,
                (ApiKey.org_id == ConsoleSession.org_id) & (ApiKey.id == ConsoleSession.key_id),
            )
            .where(
                ConsoleSession.token_hash == token_hash,
                ConsoleSession.expires_at > func.now(),
                ApiKey.revoked_at.is_(None),
            )
        )
        row = (await self.session.execute(stmt)).first()
        return None if row is None else (row[0], row[1])

    async def end(self, token_hash: str) -> None:
        await self.session.execute(
            delete(ConsoleSession).where(ConsoleSession.token_hash == token_hash)
        )

    async def end_for_key(self, org_id: uuid.UUID, key_id: uuid.UUID) -> None:
        await self.session.execute(
            delete(ConsoleSession).where(
                ConsoleSession.org_id == org_id, ConsoleSession.key_id == key_id
            )
        )

    async def prune_expired(self) -> None:
        await self.session.execute(
            delete(ConsoleSession).where(ConsoleSession.expires_at <= func.now())
        )


class ConsoleReadRepository:
    """The console's aggregates, each bound to an org and a key's limits."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    def _memories(
        self, org_id: uuid.UUID, prefixes: Sequence[str], key_projects: Sequence[str]
    ) -> list[Any]:
        # Expired memories leave the console's counts, lists and chains at once, as every read.
        return [
            Memory.org_id == org_id,
            namespace_scope(prefixes),
            project_scope(key_projects),
            live(),
        ]

    async def counts_by(
        self,
        column: str,
        org_id: uuid.UUID,
        prefixes: Sequence[str],
        key_projects: Sequence[str],
        limit: int,
    ) -> list[tuple[str, int]]:
        """Memory counts grouped by ``namespace`` or ``type``, largest first."""
        col = {"namespace": Memory.namespace, "type": Memory.type}[column]
        stmt = (
            select(col, func.count())
            .where(*self._memories(org_id, prefixes, key_projects))
            .group_by(col)
            .order_by(func.count().desc(), col)
            .limit(limit)
        )
        return [(str(k), int(n)) for k, n in (await self.session.execute(stmt)).all()]

    async def user_counts(
        self,
        org_id: uuid.UUID,
        prefixes: Sequence[str],
        key_projects: Sequence[str],
        offset: int,
        limit: int,
    ) -> tuple[list[tuple[str, int]], int]:
        """Memory counts per user (a namespace's first segment), by user name, paged; and
        how many users there are."""
        user = func.split_part(Memory.namespace, ":", 1)
        stmt = (
            select(user, func.count(), func.count().over())
            .where(*self._memories(org_id, prefixes, key_projects))
            .group_by(user)
            .order_by(user)
            .offset(offset)
            .limit(limit)
        )
        rows = (await self.session.execute(stmt)).all()
        if not rows and offset:
            # Past the last page: the window saw no rows; count from the first.
            return [], (await self.user_counts(org_id, prefixes, key_projects, 0, 1))[1]
        return [(str(u), int(n)) for u, n, _ in rows], int(rows[0][2]) if rows else 0

    async def subtree_counts(
        self,
        org_id: uuid.UUID,
        prefixes: Sequence[str],
        key_projects: Sequence[str],
        root: str,
    ) -> list[tuple[str, int]]:
        """Memory counts per namespace at ``root`` and under it."""
        stmt = (
            select(Memory.namespace, func.count())
            .where(
                *self._memories(org_id, prefixes, key_projects),
                (Memory.namespace == root) | under_namespace(root),
            )
            .group_by(Memory.namespace)
            .order_by(Memory.namespace)
        )
        return [(str(k), int(n)) for k, n in (await self.session.execute(stmt)).all()]

    async def recent(
        self, org_id: uuid.UUID, prefixes: Sequence[str], key_projects: Sequence[str], limit: int
    ) -> list[Memory]:
        stmt = (
            select(Memory)
            .where(*self._memories(org_id, prefixes, key_projects))
            .order_by(Memory.created_at.desc(), Memory.id)
            .limit(limit)
        )
        return list((await self.session.execute(stmt)).scalars().all())

    async def supersession(
        self,
        org_id: uuid.UUID,
        memory_id: uuid.UUID,
        prefixes: Sequence[str],
        key_projects: Sequence[str],
        depth: int = 20,
    ) -> list[tuple[uuid.UUID, str, uuid.UUID | None]]:
        """The chain through ``memory_id``, oldest first: (id, name, superseded_by). Only
        memories within the key's reach are followed."""
        scope = self._memories(org_id, prefixes, key_projects)
        chain: list[tuple[uuid.UUID, str, uuid.UUID | None]] = []
        seen = {memory_id}
        # Back: who did this one replace (and so on).
        current = memory_id
        for _ in range(depth):
            stmt = (
                select(Memory.id, Memory.name, Memory.superseded_by)
                .where(*scope, Memory.superseded_by == current)
                .order_by(Memory.created_at)
                .limit(1)
            )
            row = (await self.session.execute(stmt)).first()
            if row is None or row[0] in seen:
                break
            seen.add(row[0])
            chain.insert(0, (row[0], row[1], row[2]))
            current = row[0]
        stmt = select(Memory.id, Memory.name, Memory.superseded_by).where(
            *scope, Memory.id == memory_id
        )
        me = (await self.session.execute(stmt)).first()
        if me is None:
            return chain
        chain.append((me[0], me[1], me[2]))
        nxt = me[2]
        for _ in range(depth):
            if nxt is None or nxt in seen:
                break
            seen.add(nxt)
            stmt = select(Memory.id, Memory.name, Memory.superseded_by).where(
                *scope, Memory.id == nxt
            )
            row = (await self.session.execute(stmt)).first()
            if row is None:
                break
            chain.append((row[0], row[1], row[2]))
            nxt = row[2]
        return chain

    async def nearest_misses(
        self, scope: Scope, vector: list[float], exclude: Sequence[uuid.UUID], k: int
    ) -> list[tuple[uuid.UUID, str, str, float]]:
        """The ``k`` memories of ``scope`` closest to ``vector`` by cosine that are not in
        ``exclude``: (id, type, name, cosine)."""
        sql = (
            "SELECT m.id, m.type, m.name, 1 - (m.embedding <=> CAST(:q AS vector)) AS cosine "
            f"FROM memories m WHERE {scope_sql('m', scope)} "
            "AND NOT (m.id = ANY(CAST(:exclude AS uuid[]))) "
            "ORDER BY m.embedding <=> CAST(:q AS vector) LIMIT :k"
        )
        params = {
            **scope_params(scope),
            "q": vector_literal(vector),
            "exclude": [str(i) for i in exclude],
            "k": k,
        }
        rows = (await self.session.execute(text(sql), params)).all()
        return [(r[0], r[1], r[2], float(r[3])) for r in rows]

    async def pack_series(self, f: AuditFilter) -> list[tuple[datetime, int, int]]:
        """Context calls per day and the candidates they gated out: (day, calls, gated_out)."""
        day = func.date_trunc("day", AuditEvent.created_at)
        gated = func.coalesce(
            func.sum(func.coalesce(AuditEvent.details["gated_out"].astext.cast(Integer), 0)), 0
        )
        stmt = (
            select(day, func.count(), gated)
            .where(*filter_conditions(f), AuditEvent.action == "context")
            .group_by(day)
            .order_by(day)
        )
        return [(d, int(n), int(g)) for d, n, g in (await self.session.execute(stmt)).all()]

    async def rejection_series(self, f: AuditFilter) -> list[tuple[datetime, str, int]]:
        """Write-gate rejections per day and reason code: (day, reason, count). Single writes
        record their codes in ``details.reasons``, batches in ``details.rejections_by_reason``."""
        day = func.date_trunc("day", AuditEvent.created_at).label("day")
        single_src = case(
            (
                func.jsonb_typeof(AuditEvent.details["reasons"]) == "array",
                AuditEvent.details["reasons"],
            ),
            else_=cast(literal("[]"), JSONB),
        )
        single = func.jsonb_array_elements_text(single_src).table_valued("value").lateral("r")
        batch_src = case(
            (
                func.jsonb_typeof(AuditEvent.details["rejections_by_reason"]) == "object",
                AuditEvent.details["rejections_by_reason"],
            ),
            else_=cast(literal("{}"), JSONB),
        )
        batch = func.jsonb_each_text(batch_src).table_valued("key", "value").lateral("b")
        conds = [*filter_conditions(f), AuditEvent.rejection_count > 0]
        q1 = (
            select(day, single.c.value.label("reason"), literal(1).label("n"))
            .select_from(AuditEvent)
            .join(single, true())
            .where(*conds)
        )
        q2 = (
            select(day, batch.c.key.label("reason"), batch.c.value.cast(Integer).label("n"))
            .select_from(AuditEvent)
            .join(batch, true())
            .where(*conds)
        )
        u = union_all(q1, q2).subquery("u")
        stmt = (
            select(u.c.day, u.c.reason, func.sum(u.c.n))
            .group_by(u.c.day, u.c.reason)
            .order_by(u.c.day, u.c.reason)
        )
        rows = (await self.session.execute(stmt)).all()
        return [(r[0], str(r[1]), int(r[2])) for r in rows]

    async def redaction_series(self, f: AuditFilter) -> list[tuple[datetime, str, int]]:
        """Redactions per day and label, from the inputs' summaries: (day, label, count)."""
        day = func.date_trunc("day", AuditEvent.created_at)
        src = case(
            (
                func.jsonb_typeof(AuditEvent.request["redactions"]) == "array",
                AuditEvent.request["redactions"],
            ),
            else_=cast(literal("[]"), JSONB),
        )
        elems = func.jsonb_array_elements(src).table_valued("value").lateral("r")
        label = elems.c.value.op("->>")(literal("label"))
        count = func.coalesce(elems.c.value.op("->>")(literal("count")).cast(Integer), 0)
        stmt = (
            select(day, label, func.sum(count))
            .select_from(AuditEvent)
            .join(elems, true())
            .where(*filter_conditions(f), AuditEvent.redaction_count > 0)
            .group_by(day, label)
            .order_by(day, label)
        )
        rows = (await self.session.execute(stmt)).all()
        return [(r[0], str(r[1]), int(r[2])) for r in rows]

    async def names(
        self,
        org_id: uuid.UUID,
        ids: Sequence[uuid.UUID],
        prefixes: Sequence[str],
        key_projects: Sequence[str],
    ) -> dict[uuid.UUID, str]:
        if not ids:
            return {}
        stmt = select(Memory.id, Memory.name).where(
            *self._memories(org_id, prefixes, key_projects), Memory.id.in_(list(ids))
        )
        return dict((await self.session.execute(stmt)).all())

    async def keys(self, org_id: uuid.UUID) -> list[ApiKey]:
        stmt = select(ApiKey).where(ApiKey.org_id == org_id).order_by(ApiKey.created_at)
        return list((await self.session.execute(stmt)).scalars().all())

    async def key(self, org_id: uuid.UUID, key_id: uuid.UUID) -> ApiKey | None:
        stmt = select(ApiKey).where(ApiKey.org_id == org_id, ApiKey.id == key_id)
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def org_name(self, org_id: uuid.UUID) -> str:
        from service.store.models import Org

        stmt = select(Org.name).where(Org.org_id == org_id)
        return str((await self.session.execute(stmt)).scalar_one())
