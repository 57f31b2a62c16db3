"""Erasing a namespace subtree: a user (``alice``), a session (``alice:s1``) or a task.

Rules:

- The key needs the write scope, its namespace prefixes must cover the namespace, and it
  must not be limited to projects (a subtree may hold memories of any project, and an erase
  that skipped some would not be one).
- Everything of the subtree goes, in one transaction (all or nothing, even on kill -9):
  memories (content, name, metadata, embedding), relations in and out (so no surviving
  memory lists an erased one as related), artifacts stored in the subtree or attached to its
  memories, and the API keys limited to namespaces inside it. Memories elsewhere that an
  erased memory had superseded become current again.
- The audit trail keeps only ids: every row naming an erased memory has the memory's names,
  current and former (which may be derived from its content), replaced by ``[erased]``
  wherever it holds them as a whole string, as a single delete does; the free text the calls
  made at the subtree recorded (``FREE_TEXT``: goals, domains, tag filters, keys, including
  those of lookups that found nothing and of rejected or conflicting writes, names of
  rejected writes, artifact field names) becomes ``[erased]`` too, whatever the outcome. The erase itself
  is audited (action ``erase``) with the erased ids and the counts.
- The answer is a receipt: counts per kind, the time, the audit id.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import anyio.to_thread
from sqlalchemy.ext.asyncio import AsyncSession

from service.domain import audit as audit_service
from service.domain.audit import ERASED, AuditContext
from service.domain.auth import Caller
from service.domain.namespaces import parse_namespace
from service.domain.redaction.fields import redact_fields
from service.errors import PermissionDenied
from service.schemas.lifecycle import ErasedCounts, EraseReceipt
from service.store.lifecycle import LifecycleRepository
from service.store.revocations import notify_revocation

FREE_TEXT = ("goal", "domain", "tag", "key", "name", "fields")
"""The ``request`` fields of an audit row that hold the caller's words, not ids or counts."""
FREE_TEXT_DETAILS = ("fields_missing",)
"""The ``details`` fields that do: the field names an artifact read asked for and did not find."""


def _scrub(value: Any, names: frozenset[str]) -> tuple[Any, bool]:
    """``value`` with every string (value or key) in ``names`` replaced by ``[erased]``."""
    if isinstance(value, str):
        return (ERASED, True) if value in names else (value, False)
    if isinstance(value, list):
        out, changed = [], False
        for v in value:
            new, c = _scrub(v, names)
            out.append(new)
            changed |= c
        return out, changed
    if isinstance(value, dict):
        result: dict[str, Any] = {}
        changed = False
        for k, v in value.items():
            new, c = _scrub(v, names)
            key = ERASED if k in names else k
            result[key] = new
            changed |= c or key != k
        return result, changed
    return value, False


def _scrub_rows(
    rows: list[tuple[uuid.UUID, dict[str, Any], dict[str, Any]]], names: frozenset[str]
) -> list[tuple[uuid.UUID, dict[str, Any], dict[str, Any]]]:
    changed = []
    for audit_id, request, details in rows:
        new_request, c1 = _scrub(request, names)
        new_details, c2 = _scrub(details, names)
        if c1 or c2:
            changed.append((audit_id, new_request, new_details))
    return changed


async def scrub_trail(
    session: AsyncSession, org_id: uuid.UUID, ids: Sequence[uuid.UUID], names: Sequence[str]
) -> int:
    """Leave only the ids of erased memories in the audit trail (see the module docstring):
    their current ``names`` and the former ones the trail recorded (``request.name`` of the
    rows naming them, which a later PATCH may have changed), and the keys those rows recorded
    (``request.key``), as a single delete does. The
    JSON walk runs off the event loop. Returns the rows rewritten."""
    # Rows of read calls still queued in this process are in the table before the rewrite.
    await audit_service.settle(session)
    if not ids:
        return 0
    repo = LifecycleRepository(session)
    rows = await repo.trail_rows(org_id, ids)
    # The names (and keys: a key is the caller's name for the memory) the rows recorded.
    recorded = [r.get(f) for _, r, _ in rows for f in ("name", "key") if isinstance(r.get(f), str)]
    wanted = frozenset(n for n in [*names, *recorded] if n and n != ERASED)
    if not wanted:
        return 0
    changed = await anyio.to_thread.run_sync(_scrub_rows, rows, wanted)
    for audit_id, request, details in changed:
        await repo.rewrite_trail_row(org_id, audit_id, request, details)
    return len(changed)


async def erase_namespace(
    session: AsyncSession, caller: Caller, namespace: str, ctx: AuditContext
) -> EraseReceipt:
    """Erase ``namespace`` and everything under it (see the module docstring).

    Args:
        session: the call's unit of work; the whole erase commits or rolls back with it.
        caller: a key with the write scope whose prefixes cover ``namespace``.
        namespace: ``user[:session[:task]]``.
        ctx: the call's audit context.

    Returns:
        The deletion receipt.

    Raises:
        InvalidInput: a malformed namespace (422, field ``namespace``).
        PermissionDenied: no write scope, namespace outside the key's prefixes, or a key
            limited to projects (403).
    """
    caller.require("write")
    # A namespace stored before secrets in namespaces were refused can still be erased.
    namespace = parse_namespace(namespace, refuse_secrets=False)
    # Such a namespace is erased, but the trail (and the receipt) keep it redacted.
    shown = redact_fields({"namespace": namespace})[0]["namespace"]
    ctx.namespace = shown
    ctx.request = {"namespace": shown}
    caller.check_namespace(namespace)
    if caller.projects:
        raise PermissionDenied(
            "A key limited to projects cannot erase a namespace (it may hold memories of "
            "other projects)",
            field="namespace",
        )
    repo = LifecycleRepository(session)
    doomed = await repo.lock_subtree(caller.org_id, namespace)
    ids = [mid for mid, _ in doomed]
    relations = await repo.count_relations(caller.org_id, ids)
    scrubbed = await scrub_trail(session, caller.org_id, ids, [name for _, name in doomed])
    await repo.unsupersede(caller.org_id, ids)
    artifacts = await repo.delete_artifacts(caller.org_id, namespace, ids)
    scrubbed += await repo.erase_free_text(
        caller.org_id, namespace, artifacts, FREE_TEXT, ERASED, FREE_TEXT_DETAILS
    )
    memories = await repo.delete_memories(caller.org_id, ids)
    key_hashes = await repo.delete_keys_within(caller.org_id, namespace)
    for key_hash in key_hashes:
        await notify_revocation(session, key_hash)
    counts = ErasedCounts(
        memories=memories,
        relations=relations,
        artifacts=len(artifacts),
        keys=len(key_hashes),
        audit_rows_scrubbed=scrubbed,
    )
    erased_at = await repo.db_now()
    audit_id = await audit_service.record(
        session,
        ctx,
        outcome="erased",
        status_code=200,
        memory_ids=ids,
        details={"counts": counts.model_dump()},
    )
    return EraseReceipt(namespace=shown, erased=counts, erased_at=erased_at, audit_id=audit_id)
