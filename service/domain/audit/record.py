"""Writing the audit trail: one row per call, and the tombstone an erased memory leaves.

Every call writes exactly one row: inside the call's own transaction when it succeeds (so an
acknowledged write is always audited), in a fresh one when it fails (the failed call's work
is rolled back, its audit row is not; the call runner, ``service/calls.py``, writes it).
Rows hold no memory content and no redacted secret: only names, ids, counts and labels.

With ``read_audit = queued``, a successful read call's row (``AuditContext.read_only``) goes
to the process's read-audit queue once the call commits, instead of into its transaction;
its id is the same (``AuditContext.audit_id``). See ``read_queue.py``.

Tombstones. Deleting a memory erases it, but its id stays in the ``memory_ids`` of the rows
that wrote or returned it, so ``memory_id=<deleted id>`` still lists its history.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from service.domain.audit.read_queue import deferred_of, queued_row, settle
from service.domain.auth import Caller
from service.store.audit import AuditRepository

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
    CONSOLE_LOGIN = "console_login"
    CONSOLE_LOGOUT = "console_logout"
    KEY_CREATE = "key_create"
    KEY_REVOKE = "key_revoke"
    ERASE = "erase"
    EXPIRE = "expire"
    TOOL_RESULT = "tool_result"
    ASSEMBLE = "assemble"
    IMPORT = "import"
    EXPORT = "export"


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
    # The call changes nothing stored but its audit row (the operation table's read_only):
    # with read_audit = queued, record() may queue its row (see read_queue.py).
    read_only: bool = False

    def elapsed_ms(self) -> float:
        return round((time.perf_counter() - self.started) * 1000, 3)

    def part(self, action: AuditAction) -> AuditContext:
        """The audit context of a call made as part of this one (an assemble call's pack
        and artifact reads): the same caller, read-only if this one is, its row marked
        ``part_of`` this call's id."""
        return AuditContext(
            action=action,
            caller=self.caller,
            read_only=self.read_only,
            details_extra={"part_of": str(self.audit_id)},
        )


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
    call's row commits with the write, synchronously. See ``bench/audit_overhead.py``.

    A read call (``ctx.read_only``) in a unit of work that defers rows (``read_audit =
    queued``) keeps its row for the read-audit queue, when the queue has room; else, and
    for every other call, the row is inserted here.

    Returns:
        The row's id (``ctx.audit_id``), or None for a call with no authenticated org.
    """
    if ctx.caller is None:
        return None
    values: dict[str, Any] = {
        "id": ctx.audit_id,
        "org_id": ctx.caller.org_id,
        "key_id": ctx.caller.key_id,
        "caller": ctx.caller.key_name,
        "action": str(ctx.action),
        "namespace": ctx.namespace,
        "request": ctx.request,
        "outcome": outcome,
        "status_code": status_code,
        "memory_ids": memory_ids or [],
        "details": {**(details or {}), **ctx.details_extra},
        "redaction_count": redaction_count,
        "rejection_count": rejection_count,
        "latency_ms": ctx.elapsed_ms(),
    }
    deferred = deferred_of(session) if ctx.read_only else None
    if deferred is not None and deferred.queue.reserve():
        deferred.rows.append(queued_row(values))
    else:
        await AuditRepository(session).record_call(**values)
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
    await settle(session)  # rows of read calls still queued in this process are rewritten too
    wanted = sorted({n for n in names if n and n != ERASED})
    if not wanted:
        return 0
    return await AuditRepository(session).erase_strings(org_id, memory_id, wanted, ERASED)
