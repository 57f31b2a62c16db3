"""Reading the audit trail: pages and single rows for a key, and the operator's export and
tail (``ctxpack audit``).

A key with the read (or admin) scope sees its org's rows. A key limited to namespace
prefixes sees only rows at namespaces within them; a key limited to projects sees only rows
whose recorded ``request.project`` is one of them (calls made without a project, such as get,
list and batch calls, may hold ids of any project, so they are not shown). Either way a key
always sees the rows it wrote itself. A row another key wrote at a limited key's namespace
may name memories the limited key cannot read (a pack at ``alice:s1`` drawing on ``alice``):
for a limited key those ids are left out of ``memory_ids``, and the entries naming them
(a pack's items with their scores and reasons) out of ``request`` and ``details``, so not
even an id of what a key cannot reach is shown; asked for such an id (``memory_id``), the
trail shows only the key's own rows. Reads of the trail itself (``GET /v1/audit``) are not audited: a dashboard polling
the trail would otherwise flood it.

Every reader here first settles the read-audit queue (``read_queue.settle``): a read call's
row queued in this process is in the table before the trail is read.

The operator tools see the whole org, whatever any key's limits.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from service.domain import namespaces
from service.domain.audit.read_queue import settle
from service.domain.auth import Caller
from service.errors import InvalidInput, NotFound
from service.schemas.audit import (
    AuditEvent,
    AuditEventSummary,
    AuditPage,
    AuditQuery,
)
from service.schemas.namespaces import SUBTREE
from service.store import models
from service.store.audit import AuditFilter, AuditRepository
from service.store.memories import MemoryRepository

log = logging.getLogger("ctxpack.audit")

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
    if value is None or value == SUBTREE:
        return None
    if value.endswith(":" + SUBTREE):
        value = value[: -len(SUBTREE) - 1]
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


def limited(caller: Caller) -> bool:
    return bool(caller.namespace_prefixes or caller.projects)


async def reachable(session: AsyncSession, caller: Caller, ids: set[uuid.UUID]) -> set[uuid.UUID]:
    return await MemoryRepository(session).accessible_ids(
        caller.org_id, list(ids), caller.namespace_prefixes, caller.projects
    )


OUT_OF_REACH = "[out of reach]"


def _names_hidden(value: Any, hidden: frozenset[str]) -> bool:
    """Whether ``value`` is a hidden id, or an object whose ``id`` is one."""
    if isinstance(value, dict):
        value = value.get("id")
    return isinstance(value, str) and value in hidden


def _without(value: Any, hidden: frozenset[str]) -> Any:
    """``value`` (a row's request or details) without the ids in ``hidden``: a list drops
    the entries that are one of them or an object whose ``id`` is one, an object the keys
    that are one; any other string equal to one reads ``[out of reach]``."""
    if isinstance(value, dict):
        return {k: _without(v, hidden) for k, v in value.items() if k not in hidden}
    if isinstance(value, list):
        return [_without(v, hidden) for v in value if not _names_hidden(v, hidden)]
    if isinstance(value, str) and value in hidden:
        return OUT_OF_REACH
    return value


def _uuid_strings(value: Any, found: set[uuid.UUID]) -> None:
    """Collect into ``found`` every string of ``value`` (keys too) that is a UUID."""
    if isinstance(value, dict):
        for k, v in value.items():
            _uuid_strings(k, found)
            _uuid_strings(v, found)
    elif isinstance(value, list):
        for v in value:
            _uuid_strings(v, found)
    elif isinstance(value, str) and len(value) == 36:
        try:
            found.add(uuid.UUID(value))
        except ValueError:
            pass


async def _within_reach(
    session: AsyncSession, caller: Caller, events: list[AuditEventSummary]
) -> list[AuditEventSummary]:
    """``events`` as a limited key may see them: other keys' rows without the memory ids
    it cannot read (see the module docstring). Besides ``memory_ids``, a row's request and
    details may name memories in fields of their own (a write's ``related`` and
    ``supersedes``, a keyed write's ``superseded_id``, a conflict's ``existing_id``): every
    UUID there that names a memory of the org (stored or a tombstone) is judged alike."""
    if not limited(caller):
        return events
    foreign = [e for e in events if e.key_id != caller.key_id]
    listed = {i for e in foreign for i in e.memory_ids}
    named: set[uuid.UUID] = set()
    for event in foreign:
        if isinstance(event, AuditEvent):
            _uuid_strings(event.request, named)
            _uuid_strings(event.details, named)
    named -= listed
    if not listed and not named:
        return events
    reach = await reachable(session, caller, listed | named)
    hidden_ids = listed - reach
    if named - reach:
        hidden_ids |= await AuditRepository(session).memory_ids_among(
            caller.org_id, sorted(named - reach)
        )
    if not hidden_ids:
        return events
    hidden = frozenset(str(i) for i in hidden_ids)
    for event in foreign:
        event.memory_ids = [i for i in event.memory_ids if i not in hidden_ids]
        if isinstance(event, AuditEvent):
            event.request = _without(event.request, hidden)
            event.details = _without(event.details, hidden)
    return events


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
    await settle(session)
    if (
        query.memory_id is not None
        and limited(caller)
        and not await reachable(session, caller, {query.memory_id})
    ):
        # Which other calls touched a memory out of reach is not the key's to learn.
        f = replace(f, key_id=caller.key_id)
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
        items=await _within_reach(session, caller, [convert(r) for r in rows]),
        next_cursor=encode_cursor(last.created_at, last.id) if has_more and last else None,
    )


async def get_audit(session: AsyncSession, caller: Caller, audit_id: uuid.UUID) -> AuditEvent:
    """One call whole. Raises ``NotFound`` for an id of another org or outside the key's
    limits, exactly as for an id that does not exist."""
    caller.require("read")
    await settle(session)
    row = await AuditRepository(session).get(visibility(caller), audit_id)
    if row is None:
        raise NotFound(f"No audit event {audit_id}")
    (event,) = await _within_reach(session, caller, [event_of(row)])
    assert isinstance(event, AuditEvent)
    return event


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
    await settle(session)
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
