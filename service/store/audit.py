"""Audit rows: one per API call. Writing, listing (filters, offset and keyset paging), and
pruning by per-org retention."""

from __future__ import annotations

import builtins
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from typing import cast as cast_type

from sqlalchemy import (
    ColumnElement,
    Table,
    Text,
    bindparam,
    case,
    cast,
    column,
    delete,
    false,
    func,
    literal,
    or_,
    select,
    text,
    tuple_,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB, UUID, array, insert
from sqlalchemy.ext.asyncio import AsyncSession

from service.store.models import ApiKey, AuditEvent, Memory, Org

# pg_try_advisory_xact_lock key for the retention job, so that several server processes
# sharing a database do not prune the same rows at once. ("ctxaudit" as a big-endian int64.)
PRUNE_LOCK_KEY = 0x6374786175646974

_CALL_COLUMNS = (
    "org_id",
    "id",
    "key_id",
    "caller",
    "action",
    "namespace",
    "request",
    "outcome",
    "status_code",
    "memory_ids",
    "details",
    "redaction_count",
    "rejection_count",
    "latency_ms",
)

# The hot path of every call, built once (so compiled once). It reads
#   INSERT INTO audit_events (...) SELECT :org_id, ... FROM (SELECT CASE WHEN
#     pg_current_xact_id_if_assigned() IS NULL THEN set_config('synchronous_commit', 'off',
#     true) END) AS relax
# When the call wrote nothing before its audit row (no transaction id yet: a context, get or
# list call, or a refused one), the row alone would make the commit wait for a WAL flush,
# several ms on ordinary disks; such a transaction commits asynchronously instead (SET LOCAL:
# this transaction only). The row is still atomic; a server crash can lose the last few
# hundred ms of such rows, never a write's row, which commits synchronously with the write.
# set_config is volatile, so Postgres evaluates it even though no column of relax is used.
_relax = select(
    case(
        (
            func.pg_current_xact_id_if_assigned().is_(None),
            func.set_config("synchronous_commit", "off", True),
        )
    ).label("relaxed")
).subquery("relax")
_table = cast_type(Table, AuditEvent.__table__)
_RECORD_CALL = insert(_table).from_select(
    list(_CALL_COLUMNS),
    select(
        *(cast(bindparam(c, type_=_table.c[c].type), _table.c[c].type) for c in _CALL_COLUMNS)
    ).select_from(_relax),
)

# A batch of queued rows (domain/audit/read_queue.py), one statement whatever its size: each
# column arrives as one array (memory_ids as the text of a uuid[] and request/details as
# JSON text, since a parameter cannot be an array of arrays or of jsonb), so the statement
# text never changes and is prepared once. created_at is the database's clock minus each
# row's age: the time the call recorded it, on the clock every other row is stamped with.
_QUEUED_TYPES = {
    "org_id": "uuid",
    "id": "uuid",
    "key_id": "uuid",
    "caller": "text",
    "action": "text",
    "namespace": "text",
    "request": "text",
    "outcome": "text",
    "status_code": "int",
    "memory_ids": "text",
    "details": "text",
    "redaction_count": "int",
    "rejection_count": "int",
    "latency_ms": "float8",
    "age_seconds": "float8",
}
_QUEUED_VALUES = {
    **{c: f"r.{c}" for c in _CALL_COLUMNS},
    "caller": "CAST(r.caller AS varchar)",
    "action": "CAST(r.action AS varchar)",
    "namespace": "CAST(r.namespace AS varchar)",
    "outcome": "CAST(r.outcome AS varchar)",
    "request": "CAST(r.request AS jsonb)",
    "details": "CAST(r.details AS jsonb)",
    "memory_ids": "CAST(r.memory_ids AS uuid[])",
}
_RECORD_QUEUED = insert(_table).from_select(
    ["created_at", *_CALL_COLUMNS],
    # An INSERT statement (not bare text), so that a replica session
    # (store/database.py:ReplicaSession) sends it to the primary like any write.
    text(
        "SELECT now() - make_interval(secs => r.age_seconds), "
        + ", ".join(_QUEUED_VALUES[c] for c in _CALL_COLUMNS)
        + " FROM unnest("
        + ", ".join(f"CAST(:{c} AS {t}[])" for c, t in _QUEUED_TYPES.items())
        + ") AS r("
        + ", ".join(_QUEUED_TYPES)
        + ")"
    ).columns(*(column(c) for c in ("created_at", *_CALL_COLUMNS))),
)


def uuid_array_text(ids: list[uuid.UUID]) -> str:
    """``ids`` as the text of a Postgres ``uuid[]`` (``{a,b}``)."""
    return "{" + ",".join(str(i) for i in ids) + "}"


@dataclass(frozen=True)
class AuditFilter:
    """Which audit rows a listing covers. Every field but ``org_id`` is optional.

    ``namespace_prefix`` matches a namespace and everything under it, segment-wise (``alice``
    matches ``alice`` and ``alice:s1``, not ``alicex``). ``key_namespaces``, ``key_projects``
    and ``own_key_id`` carry the calling key's limits: when the key has namespace prefixes,
    only rows in them are visible; when it has projects, only rows whose recorded project is
    one of them (a row without one may hold ids of any project). Rows the key wrote itself
    are always visible to it.
    """

    org_id: uuid.UUID
    action: str | None = None
    key_id: uuid.UUID | None = None
    namespace_prefix: str | None = None
    memory_id: uuid.UUID | None = None
    outcome: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    own_key_id: uuid.UUID | None = None
    key_namespaces: tuple[str, ...] = ()
    key_projects: tuple[str, ...] = ()


def _like_escape(value: str) -> str:
    # Namespace segments may hold "_", a LIKE wildcard.
    return value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _under(prefix: str) -> ColumnElement[bool]:
    """``namespace`` is ``prefix`` or lies under it, segment-wise. Written as ``=`` or
    ``LIKE 'p:%'`` so the varchar_pattern_ops index can serve it."""
    return or_(
        AuditEvent.namespace == prefix,
        AuditEvent.namespace.like(_like_escape(prefix) + ":%", escape="\\"),
    )


def filter_conditions(f: AuditFilter) -> list[ColumnElement[bool]]:
    conds: list[ColumnElement[bool]] = [AuditEvent.org_id == f.org_id]
    if f.action is not None:
        conds.append(AuditEvent.action == f.action)
    if f.key_id is not None:
        conds.append(AuditEvent.key_id == f.key_id)
    if f.namespace_prefix is not None:
        conds.append(_under(f.namespace_prefix))
    if f.memory_id is not None:
        # @> on the array uses the GIN index, tombstoned (deleted) ids included.
        conds.append(AuditEvent.memory_ids.op("@>")(array([f.memory_id], type_=UUID(as_uuid=True))))
    if f.outcome is not None:
        conds.append(AuditEvent.outcome == f.outcome)
    if f.since is not None:
        conds.append(AuditEvent.created_at >= f.since)
    if f.until is not None:
        conds.append(AuditEvent.created_at < f.until)
    own = AuditEvent.key_id == f.own_key_id if f.own_key_id is not None else false()
    if f.key_namespaces:
        conds.append(or_(own, *(_under(p) for p in f.key_namespaces)))
    if f.key_projects:
        project = AuditEvent.request["project"].astext
        conds.append(or_(own, project.in_(f.key_projects)))
    return conds


class AuditRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def record_call(self, **values: Any) -> None:
        """Insert a call's row (every column of ``_CALL_COLUMNS``; ``created_at`` is the
        transaction's start). Must be the call's last write: a transaction that had written
        nothing before it commits asynchronously (see ``_RECORD_CALL``)."""
        # Pending ORM changes go first, so that they count as the call's writes.
        await self.session.flush()
        await self.session.execute(_RECORD_CALL, values)

    async def commit_asynchronously(self) -> None:
        """Let this transaction commit without waiting for the WAL flush (``SET LOCAL``), as
        a read call's own row does (see ``_RECORD_CALL``): for a transaction that writes
        only rows of read calls."""
        await self.session.execute(text("SELECT set_config('synchronous_commit', 'off', true)"))

    async def record_queued(self, rows: builtins.list[dict[str, Any]]) -> None:
        """Insert queued rows of read calls with one statement (``_RECORD_QUEUED``).

        Each row holds every column of ``_CALL_COLUMNS`` as ``record_call`` takes them (JSON
        columns as JSON text, ``memory_ids`` as ``uuid_array_text``), plus ``age_seconds``:
        how long ago the call recorded it."""
        await self.session.execute(
            _RECORD_QUEUED, {c: [row[c] for row in rows] for c in _QUEUED_TYPES}
        )

    async def add(self, **values: Any) -> uuid.UUID:
        """Insert a row with any columns given (``created_at`` included), synchronously."""
        audit_id = values.pop("id", None) or uuid.uuid4()
        await self.session.execute(insert(AuditEvent).values(id=audit_id, **values))
        return audit_id

    async def get(self, f: AuditFilter, audit_id: uuid.UUID) -> AuditEvent | None:
        """One row by id, or None when it does not exist or ``f`` does not cover it."""
        stmt = select(AuditEvent).where(*filter_conditions(f), AuditEvent.id == audit_id)
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def count(self, f: AuditFilter) -> int:
        stmt = select(func.count()).select_from(AuditEvent).where(*filter_conditions(f))
        return int((await self.session.execute(stmt)).scalar_one())

    async def list(
        self,
        f: AuditFilter,
        *,
        limit: int,
        offset: int = 0,
        after: tuple[datetime, uuid.UUID] | None = None,
        ascending: bool = False,
    ) -> list[AuditEvent]:
        """Rows matching ``f``, newest first (or oldest first with ``ascending``).

        ``after`` is a keyset position ``(created_at, id)``: only rows strictly beyond it in
        the listing order are returned, so concurrent inserts never shift a page.
        """
        stmt = select(AuditEvent).where(*filter_conditions(f))
        key = tuple_(AuditEvent.created_at, AuditEvent.id)
        if after is not None:
            position = tuple_(literal(after[0]), literal(after[1]))
            stmt = stmt.where(key > position if ascending else key < position)
        if ascending:
            stmt = stmt.order_by(AuditEvent.created_at.asc(), AuditEvent.id.asc())
        else:
            stmt = stmt.order_by(AuditEvent.created_at.desc(), AuditEvent.id.desc())
        stmt = stmt.offset(offset).limit(limit)
        return builtins.list((await self.session.execute(stmt)).scalars())

    async def get_many(
        self, f: AuditFilter, ids: builtins.list[uuid.UUID]
    ) -> builtins.list[AuditEvent]:
        """The rows with these ids that ``f`` covers, oldest first."""
        if not ids:
            return []
        stmt = (
            select(AuditEvent)
            .where(*filter_conditions(f), AuditEvent.id.in_(ids))
            .order_by(AuditEvent.created_at.asc(), AuditEvent.id.asc())
        )
        return builtins.list((await self.session.execute(stmt)).scalars())

    async def positions_since(
        self, f: AuditFilter, since: datetime
    ) -> builtins.list[tuple[uuid.UUID, datetime]]:
        """``(id, created_at)`` of the rows ``f`` covers created at or after ``since``."""
        stmt = (
            select(AuditEvent.id, AuditEvent.created_at)
            .where(*filter_conditions(f), AuditEvent.created_at >= since)
            .order_by(AuditEvent.created_at.asc(), AuditEvent.id.asc())
        )
        return [(i, at) for i, at in (await self.session.execute(stmt)).all()]

    async def db_now(self) -> datetime:
        """The database's clock (rows are stamped with it, not with this process's)."""
        return (await self.session.execute(select(func.now()))).scalar_one()

    async def recorded_names(self, org_id: uuid.UUID, memory_id: uuid.UUID) -> builtins.list[str]:
        """The names and keys recorded (``request.name``, ``request.key``) in the rows naming
        ``memory_id``: the name each remember or artifact call gave or derived, which a later
        PATCH may have changed (erasing the current name alone would leave the former ones
        behind), and the caller's key for the memory."""
        stmt = select(AuditEvent.request["name"].astext, AuditEvent.request["key"].astext).where(
            AuditEvent.org_id == org_id,
            AuditEvent.memory_ids.op("@>")(array([memory_id], type_=UUID(as_uuid=True))),
        )
        rows = (await self.session.execute(stmt)).tuples()
        return sorted({value for row in rows for value in row if value})

    async def erase_strings(
        self, org_id: uuid.UUID, memory_id: uuid.UUID, values: builtins.list[str], replacement: str
    ) -> int:
        """In the rows naming ``memory_id``, replace every JSON string (value or key) of
        ``request`` and ``details`` equal to one of ``values``; return the rows changed."""
        changed = 0
        for value in values:
            # Matching the JSON-encoded string, quotes included, matches whole strings only:
            # a quote inside another string is escaped.
            needle = func.to_jsonb(cast(literal(value), Text)).cast(Text)
            repl = func.to_jsonb(cast(literal(replacement), Text)).cast(Text)
            request_text = AuditEvent.request.cast(Text)
            details_text = AuditEvent.details.cast(Text)
            stmt = (
                update(AuditEvent)
                .where(
                    AuditEvent.org_id == org_id,
                    AuditEvent.memory_ids.op("@>")(array([memory_id], type_=UUID(as_uuid=True))),
                    or_(
                        func.strpos(request_text, needle) > 0, func.strpos(details_text, needle) > 0
                    ),
                )
                .values(
                    request=func.replace(request_text, needle, repl).cast(JSONB),
                    details=func.replace(details_text, needle, repl).cast(JSONB),
                )
            )
            result = await self.session.execute(stmt)
            changed += int(result.rowcount)  # type: ignore[attr-defined]
        return changed

    async def memory_ids_among(
        self, org_id: uuid.UUID, ids: builtins.list[uuid.UUID]
    ) -> set[uuid.UUID]:
        """Those of ``ids`` that name a memory of the org: stored, in any state, or erased and
        left as a tombstone in some row's ``memory_ids``. (An API key, artifact or audit id
        is none of them.)"""
        if not ids:
            return set()
        stored = select(Memory.id).where(Memory.org_id == org_id, Memory.id.in_(ids))
        found = set((await self.session.execute(stored)).scalars())
        rest = [i for i in ids if i not in found]
        if rest:
            traced = text(
                "SELECT u FROM unnest(CAST(:ids AS uuid[])) AS u WHERE EXISTS ("
                " SELECT 1 FROM audit_events a WHERE a.org_id = :org"
                " AND a.memory_ids @> ARRAY[u])"
            ).bindparams(ids=[str(i) for i in rest], org=org_id)
            found.update(uuid.UUID(str(u)) for u in (await self.session.execute(traced)).scalars())
        return found

    async def key_limits(
        self, org_id: uuid.UUID, key_id: uuid.UUID
    ) -> tuple[builtins.list[str], builtins.list[str]] | None:
        """A key's (namespace prefixes, projects), revoked or not; None if it is gone."""
        stmt = select(ApiKey.namespace_prefixes, ApiKey.projects).where(
            ApiKey.org_id == org_id, ApiKey.id == key_id
        )
        row = (await self.session.execute(stmt)).first()
        return None if row is None else (list(row[0]), list(row[1]))

    async def orgs(self) -> builtins.list[Org]:
        return builtins.list((await self.session.execute(select(Org).order_by(Org.name))).scalars())

    async def try_prune_lock(self) -> bool:
        """Take the retention job's transaction-scoped advisory lock, if nobody holds it."""
        stmt = text("SELECT pg_try_advisory_xact_lock(:key)").bindparams(key=PRUNE_LOCK_KEY)
        return bool((await self.session.execute(stmt)).scalar_one())

    async def prune(
        self, now: datetime, default_days: int, limit: int | None = None
    ) -> dict[uuid.UUID, int]:
        """Delete rows older than their org's retention (at most ``limit`` of them); return
        the count deleted per org.

        An org's retention is ``orgs.audit_retention_days``, else ``default_days``; a value of
        0 or less keeps that org's rows forever. Rows of orgs that no longer exist follow the
        default.
        """
        days = func.coalesce(Org.audit_retention_days, default_days)
        cutoff = literal(now) - days * literal(timedelta(days=1))
        doomed = (
            select(AuditEvent.org_id, AuditEvent.id)
            .outerjoin(Org, Org.org_id == AuditEvent.org_id)
            .where(days > 0, AuditEvent.created_at < cutoff)
            .limit(limit)
        )
        deleted = (
            delete(AuditEvent)
            .where(tuple_(AuditEvent.org_id, AuditEvent.id).in_(doomed))
            .returning(AuditEvent.org_id)
            .cte("deleted")
        )
        stmt = select(deleted.c.org_id, func.count()).group_by(deleted.c.org_id)
        rows = (await self.session.execute(stmt)).all()
        return {org_id: int(n) for org_id, n in rows}
