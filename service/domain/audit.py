"""The audit trail: writing it, reading it, replaying it, and pruning it.

Writing. Every API call writes exactly one row: inside the call's own transaction when it
succeeds (so an acknowledged write is always audited), in a fresh one when it fails (the failed
call's work is rolled back, its audit row is not). Reads of the trail itself (``GET
/v1/audit``) are not audited: a dashboard polling the trail would otherwise flood it.

Reading. A key with the read (or admin) scope sees its org's rows. A key limited to namespace
prefixes sees only rows at namespaces within them; a key limited to projects sees only rows
whose recorded ``request.project`` is one of them (calls made without a project, such as get,
list and batch calls, may hold ids of any project, so they are not shown). Either way a key
always sees the rows it wrote itself. Rows hold no memory content and no redacted secret: only
names, ids, counts and labels. (A row at a key's namespace may list ids of memories in that
namespace's ancestors, which a key limited below them cannot read: ids only, never content.)

Tombstones. Deleting a memory erases it, but its id stays in the ``memory_ids`` of the rows
that wrote or returned it, so ``memory_id=<deleted id>`` still lists its history.

Retention. Rows older than the org's ``audit_retention_days`` (else the default setting) are
deleted by ``prune_audit``, which the server runs every ``audit_prune_interval_seconds``.
A retention of 0 days or less keeps the org's rows forever.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from service.domain import namespaces
from service.domain.auth import Caller
from service.errors import InvalidInput, NotFound, PermissionDenied
from service.schemas.audit import (
    AuditEvent,
    AuditEventSummary,
    AuditPage,
    AuditQuery,
    PackDiff,
    RankChange,
    RankedItem,
)
from service.store import models
from service.store.audit import AuditFilter, AuditRepository

log = logging.getLogger("ctxpack.audit")


class AuditAction(StrEnum):
    """What a call did, as the trail records it (the same name over HTTP, MCP and the CLI)."""

    REMEMBER = "remember"
    REMEMBER_BATCH = "remember_batch"
    CONTEXT = "context"
    ARTIFACT = "artifact"
    LIST = "list"
    MEMORY_GET = "memory_get"
    MEMORY_UPDATE = "memory_update"
    DELETE = "delete"
    REPLAY = "replay"
    RATE_LIMITED = "rate_limited"


@dataclass
class AuditContext:
    """What a call will be audited as; filled in by the route as the call proceeds."""

    action: AuditAction
    caller: Caller | None = None
    namespace: str | None = None
    request: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)
    audit_id: uuid.UUID = field(default_factory=uuid.uuid4)
    # Merged into the row's details by record(): lets a caller annotate a row written by a
    # domain function it calls (a replay marks the context call it re-ran: replay_of).
    details_extra: dict[str, Any] = field(default_factory=dict)

    def elapsed_ms(self) -> float:
        return round((time.perf_counter() - self.started) * 1000, 3)


async def record(
    session: AsyncSession,
    ctx: AuditContext,
    *,
    outcome: str,
    status_code: int,
    memory_ids: list[uuid.UUID] | None = None,
    details: dict[str, Any] | None = None,
    redaction_count: int = 0,
    rejection_count: int = 0,
) -> uuid.UUID | None:
    """Write the call's audit row (no row for calls with no authenticated org).

    Call it after the call's last write. A call that wrote nothing (context, get, list, a
    refusal) commits its row asynchronously, so the row never waits for a WAL flush; a write
    call's row commits with the write, synchronously. See ``scripts/audit_overhead.py``.
    """
    if ctx.caller is None:
        return None
    await AuditRepository(session).record_call(
        id=ctx.audit_id,
        org_id=ctx.caller.org_id,
        key_id=ctx.caller.key_id,
        caller=ctx.caller.key_name,
        action=str(ctx.action),
        namespace=ctx.namespace,
        request=ctx.request,
        outcome=outcome,
        status_code=status_code,
        memory_ids=memory_ids or [],
        details={**(details or {}), **ctx.details_extra},
        redaction_count=redaction_count,
        rejection_count=rejection_count,
        latency_ms=ctx.elapsed_ms(),
    )
    return ctx.audit_id


ERASED = "[erased]"


async def erase_from_trail(
    session: AsyncSession, org_id: uuid.UUID, memory_id: uuid.UUID, names: list[str | None]
) -> int:
    """Leave only a tombstone of an erased memory in the trail: its id stays in the rows that
    wrote, changed or returned it, but its name (which may have been derived from its
    content) is replaced by ``[erased]`` wherever those rows hold it as a whole string.

    Args:
        session: the deleting call's unit of work (call it there, so both commit together).
        org_id: the memory's org.
        memory_id: the erased memory.
        names: the names it had (current and former); empty ones are ignored.

    Returns:
        The number of rows rewritten.
    """
    wanted = sorted({n for n in names if n and n != ERASED})
    if not wanted:
        return 0
    return await AuditRepository(session).erase_strings(org_id, memory_id, wanted, ERASED)


# --- reading ----------------------------------------------------------------------------


def encode_cursor(created_at: datetime, audit_id: uuid.UUID) -> str:
    """An opaque keyset position: the (created_at, id) of the last row of a page."""
    raw = json.dumps([created_at.isoformat(), str(audit_id)], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, field_name: str = "cursor") -> tuple[datetime, uuid.UUID]:
    """The position a cursor stands for. Raises ``InvalidInput`` naming ``field_name``."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        when, audit_id = json.loads(raw)
        position = datetime.fromisoformat(when), uuid.UUID(audit_id)
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError) as exc:
        raise InvalidInput(field_name, "cursor is not one this service returned") from exc
    if position[0].tzinfo is None:
        raise InvalidInput(field_name, "cursor is not one this service returned")
    return position


def visibility(caller: Caller) -> AuditFilter:
    """The rows ``caller`` may read: its org's, within its key's namespaces and projects."""
    return AuditFilter(
        org_id=caller.org_id,
        own_key_id=caller.key_id,
        key_namespaces=tuple(caller.namespace_prefixes),
        key_projects=tuple(caller.projects),
    )


def _namespace_prefix(value: str | None) -> str | None:
    if value is None or value == namespaces.SUBTREE:
        return None
    if value.endswith(":" + namespaces.SUBTREE):
        value = value[: -len(namespaces.SUBTREE) - 1]
    return namespaces.parse_namespace(value, "namespace")


def _filter(caller: Caller, query: AuditQuery) -> AuditFilter:
    if query.since and query.until and query.until <= query.since:
        raise InvalidInput("until", "until must be later than since")
    base = visibility(caller)
    return AuditFilter(
        org_id=base.org_id,
        own_key_id=base.own_key_id,
        key_namespaces=base.key_namespaces,
        key_projects=base.key_projects,
        action=query.action,
        key_id=query.key_id,
        namespace_prefix=_namespace_prefix(query.namespace),
        memory_id=query.memory_id,
        outcome=query.outcome,
        since=query.since,
        until=query.until,
    )


def summary_of(row: models.AuditEvent) -> AuditEventSummary:
    return AuditEventSummary.model_validate(row, from_attributes=True)


def event_of(row: models.AuditEvent) -> AuditEvent:
    return AuditEvent.model_validate(row, from_attributes=True)


async def list_audit(session: AsyncSession, caller: Caller, query: AuditQuery) -> AuditPage:
    """A page of the caller's org's trail, newest first.

    Args:
        session: the call's unit of work.
        caller: needs the read or admin scope; its key's limits narrow the rows.
        query: filters, and either offset paging or a cursor from a previous page.

    Returns:
        The page: ``total`` counts every row matching the filters; ``next_cursor`` continues
        after the page's last row.

    Raises:
        ScopeDenied: the key has neither read nor admin.
        InvalidInput: naming the field, for a bad namespace, cursor or time range.
    """
    caller.require("read")
    f = _filter(caller, query)
    after = decode_cursor(query.cursor) if query.cursor else None
    if after is not None and query.offset:
        raise InvalidInput("offset", "use either offset or cursor, not both")
    repo = AuditRepository(session)
    rows = await repo.list(f, limit=query.limit + 1, offset=query.offset, after=after)
    has_more = len(rows) > query.limit
    rows = rows[: query.limit]
    total = await repo.count(f)
    convert = event_of if query.full else summary_of
    last = rows[-1] if rows else None
    return AuditPage(
        offset=query.offset,
        limit=query.limit,
        total=total,
        has_more=has_more,
        items=[convert(r) for r in rows],
        next_cursor=encode_cursor(last.created_at, last.id) if has_more and last else None,
    )


async def get_audit(session: AsyncSession, caller: Caller, audit_id: uuid.UUID) -> AuditEvent:
    """One call whole. Raises ``NotFound`` for an id of another org or outside the key's
    limits, exactly as for an id that does not exist."""
    caller.require("read")
    row = await AuditRepository(session).get(visibility(caller), audit_id)
    if row is None:
        raise NotFound(f"No audit event {audit_id}")
    return event_of(row)


# --- replay -----------------------------------------------------------------------------


def narrow_prefixes(a: Sequence[str], b: Sequence[str]) -> tuple[str, ...] | None:
    """The namespaces both prefix lists allow, as a prefix list (empty list: unlimited).

    Returns None when the two lists share no namespace at all.
    """
    if not a or not b:
        return tuple(a or b)
    both = {p for p in a for q in b if namespaces.within_prefix(p, q)}
    both |= {q for p in a for q in b if namespaces.within_prefix(q, p)}
    return tuple(sorted(both)) or None


def narrow_projects(a: Sequence[str], b: Sequence[str]) -> tuple[str, ...] | None:
    """The projects both lists allow (empty list: unlimited); None when they share none."""
    if not a or not b:
        return tuple(a or b)
    return tuple(sorted(set(a) & set(b))) or None


async def replay_scope(session: AsyncSession, caller: Caller, row: models.AuditEvent) -> Caller:
    """The caller a replay runs as: the current key, limited to what both it and the key
    that made the recorded call may see (a key's limits as they are now)."""
    recorded = None
    if row.key_id is not None:
        recorded = await AuditRepository(session).key_limits(caller.org_id, row.key_id)
    if recorded is None:
        return caller
    prefixes = narrow_prefixes(caller.namespace_prefixes, recorded[0])
    if prefixes is None:
        raise PermissionDenied(
            "This key and the key that made the recorded call share no namespace"
        )
    projects = narrow_projects(caller.projects, recorded[1])
    if projects is None:
        raise PermissionDenied("This key and the key that made the recorded call share no project")
    return dataclasses.replace(caller, namespace_prefixes=prefixes, projects=projects)


# --- replay diff ------------------------------------------------------------------------


def diff_packs(before: Sequence[RankedItem], after: Sequence[RankedItem]) -> PackDiff:
    """Compare two packs by item id and rank.

    Args:
        before: the recorded pack's items, in the order they were returned (``rank`` 1 first).
        after: the replayed pack's items, likewise.

    Returns:
        ``added`` (new pack only, at their new rank, in new-rank order), ``dropped`` (recorded
        pack only, at their old rank, in old-rank order), ``rank_changes`` (in both at a
        different rank, in new-rank order) and the count of items unchanged.
    """
    old = {item.id: item for item in before}
    new = {item.id: item for item in after}
    added = [item for item in after if item.id not in old]
    dropped = [item for item in before if item.id not in new]
    changes = [
        RankChange(id=item.id, before=old[item.id].rank, after=item.rank)
        for item in after
        if item.id in old and old[item.id].rank != item.rank
    ]
    unchanged = sum(1 for item in after if item.id in old and old[item.id].rank == item.rank)
    return PackDiff(
        added=sorted(added, key=lambda i: i.rank),
        dropped=sorted(dropped, key=lambda i: i.rank),
        rank_changes=sorted(changes, key=lambda c: c.after),
        unchanged=unchanged,
    )


# --- retention --------------------------------------------------------------------------


PRUNE_BATCH = 10_000


@dataclass(frozen=True)
class PruneResult:
    """What one retention pass did: rows deleted per org; ``more`` when it stopped at its
    batch size with rows left; ``skipped`` when another process was pruning at that moment."""

    by_org: dict[uuid.UUID, int] = field(default_factory=dict)
    skipped: bool = False
    more: bool = False

    @property
    def deleted(self) -> int:
        return sum(self.by_org.values())


async def prune_audit(
    session: AsyncSession,
    now: datetime,
    *,
    default_days: int,
    batch_size: int = PRUNE_BATCH,
) -> PruneResult:
    """Delete audit rows older than their org's retention, as of ``now``: at most
    ``batch_size`` of them, so that one transaction stays short.

    Args:
        session: a unit of work; the caller commits.
        now: the reference time (rows created before ``now - retention`` go).
        default_days: retention of orgs without ``audit_retention_days`` (0 or less: forever).
        batch_size: most rows deleted by this pass.

    Returns:
        The rows deleted per org; ``more`` when rows are left for another pass; ``skipped``
        when another process holds the prune lock.
    """
    repo = AuditRepository(session)
    if not await repo.try_prune_lock():
        return PruneResult(skipped=True)
    by_org = await repo.prune(now, default_days, limit=batch_size)
    return PruneResult(by_org=by_org, more=sum(by_org.values()) >= batch_size)


async def run_retention(
    sessionmaker: async_sessionmaker[AsyncSession],
    *,
    interval_seconds: float,
    default_days: int,
    batch_size: int = PRUNE_BATCH,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> None:
    """Prune now and then every ``interval_seconds``, until cancelled: batch after batch, one
    short transaction each, until nothing is left. A failed pass is logged and retried at the
    next interval: the job must outlive a database restart."""
    while True:
        try:
            deleted, more = 0, True
            now = clock()
            while more:
                async with sessionmaker() as session:
                    result = await prune_audit(
                        session, now, default_days=default_days, batch_size=batch_size
                    )
                    await session.commit()
                deleted += result.deleted
                more = result.more
            if deleted:
                log.info("audit_pruned", extra={"deleted": deleted})
        except Exception:  # logged, and retried at the next interval
            log.exception("audit_prune_failed")
        await asyncio.sleep(interval_seconds)


# --- operator tools (the CLI) -------------------------------------------------------------


async def resolve_org(session: AsyncSession, name: str | None) -> models.Org:
    """The org named ``name``, or the only org when ``name`` is None.

    Raises:
        NotFound: no org has that name (or there is no org at all).
        InvalidInput: naming ``org``, when ``name`` is None and there are several orgs.
    """
    orgs = await AuditRepository(session).orgs()
    if name is not None:
        for org in orgs:
            if org.name == name:
                return org
        raise NotFound(f"No org named {name!r}")
    if len(orgs) == 1:
        return orgs[0]
    if not orgs:
        raise NotFound("There is no org yet")
    raise InvalidInput("org", f"{len(orgs)} orgs exist; choose one with --org")


async def export_audit(
    session: AsyncSession,
    org_id: uuid.UUID,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    action: str | None = None,
    page_size: int = 500,
) -> AsyncIterator[AuditEvent]:
    """Every row of the org in ``[since, until)``, oldest first, read page by page with a
    keyset cursor so rows recorded meanwhile never shift or repeat a page."""
    f = AuditFilter(org_id=org_id, since=since, until=until, action=action)
    repo = AuditRepository(session)
    after: tuple[datetime, uuid.UUID] | None = None
    while True:
        rows = await repo.list(f, limit=page_size, after=after, ascending=True)
        for row in rows:
            yield event_of(row)
        if len(rows) < page_size:
            return
        after = (rows[-1].created_at, rows[-1].id)


async def tail_audit(
    sessionmaker: async_sessionmaker[AsyncSession],
    org_id: uuid.UUID,
    *,
    action: str | None = None,
    backlog: int = 10,
    poll_seconds: float = 1.0,
    lag_seconds: float = 30.0,
) -> AsyncIterator[AuditEvent]:
    """Follow the org's trail: the last ``backlog`` rows, then each new row as it commits.

    A row is stamped with its transaction's start time but becomes visible at commit, so a
    row may appear with a time before one already shown. Each poll therefore re-reads the
    last ``lag_seconds`` of ids and yields only those not yet seen. One short transaction per
    poll, so no snapshot is held open while following.
    """
    f = AuditFilter(org_id=org_id, action=action)
    seen: dict[uuid.UUID, datetime] = {}
    async with sessionmaker() as session:
        repo = AuditRepository(session)
        rows = await repo.list(f, limit=backlog) if backlog > 0 else []
        mark = rows[0].created_at if rows else await repo.db_now()
    for row in reversed(rows):
        seen[row.id] = row.created_at
        yield event_of(row)
    while True:
        await asyncio.sleep(poll_seconds)
        async with sessionmaker() as session:
            repo = AuditRepository(session)
            window = mark - timedelta(seconds=lag_seconds)
            fresh = [
                (audit_id, at)
                for audit_id, at in await repo.positions_since(f, window)
                if audit_id not in seen
            ]
            new_rows = await repo.get_many(f, [audit_id for audit_id, _ in fresh])
        for row in new_rows:
            seen[row.id] = row.created_at
            mark = max(mark, row.created_at)
            yield event_of(row)
        horizon = mark - timedelta(seconds=lag_seconds)
        for audit_id in [i for i, at in seen.items() if at < horizon]:
            del seen[audit_id]
