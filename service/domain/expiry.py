"""Expiry: memories that stop being true (or useful) at a known time.

Rules:

- A write may set ``expires_at`` (a future instant) or ``ttl_seconds`` (from now), not both.
  Without either, the type's default TTL applies when the ``default_ttl_seconds`` setting
  names the type (empty by default: nothing expires unless asked).
- ``PATCH /v1/memories/{id}`` changes it: ``expires_at`` (a future instant, or null: never),
  or ``ttl_seconds`` (from now: how a client refreshes a TTL when it reads; see the LangGraph
  store of clients/python), not both.
- From ``expires_at`` on, the memory is in no pack, list, read, related list or duplicate
  check: every read filters ``expires_at > now()`` in SQL (store/retrieval.py's scope,
  store/memories.py's ``live()``).
- The expiry job (``run_expiry``, every ``expiry_purge_interval_seconds``) then deletes
  expired memories for good, in short batches, as an erase does (edges by cascade, names
  scrubbed from the audit trail), and writes one audit row per org and batch (action
  ``expire``, the purged ids). A write (remember, keyed or not, or a PATCH) whose content
  equals an expired, not yet purged memory purges that one first (audited the same way), so
  it is stored rather than called a duplicate of something nobody can read; so does a keyed
  write whose key an expired memory still holds (the key names nothing readable, so the
  write is ``created``).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from service.domain.audit.record import AuditAction
from service.errors import InvalidInput
from service.store.audit import AuditRepository
from service.store.lifecycle import LifecycleRepository

log = logging.getLogger("ctxpack.expiry")

PURGE_BATCH = 1000


def expiry_of(req: Any, settings: Any, prefix: str = "") -> datetime | None:
    """When a memory written by ``req`` (a RememberRequest) expires, or None.

    Raises:
        InvalidInput: both expires_at and ttl_seconds, or an expires_at not in the future.
    """
    now = datetime.now(UTC)
    if req.expires_at is not None and req.ttl_seconds is not None:
        raise InvalidInput(f"{prefix}ttl_seconds", "give expires_at or ttl_seconds, not both")
    if req.expires_at is not None:
        return _future_instant(req.expires_at, f"{prefix}expires_at", now)
    ttl = req.ttl_seconds
    if ttl is None:
        ttl = (settings.default_ttl_seconds or {}).get(req.type)
    if ttl is None or ttl <= 0:
        return None
    return now + timedelta(seconds=int(ttl))


def patched_expiry(changes: dict[str, Any]) -> tuple[bool, datetime | None]:
    """Whether a PATCH's ``changes`` (its set fields) change the expiry, and to what
    (None: never expires).

    Raises:
        InvalidInput: both expires_at and ttl_seconds, ttl_seconds null, or an expires_at
            not in the future.
    """
    if "expires_at" in changes and "ttl_seconds" in changes:
        raise InvalidInput("ttl_seconds", "give expires_at or ttl_seconds, not both")
    if "ttl_seconds" in changes:
        if changes["ttl_seconds"] is None:
            raise InvalidInput("ttl_seconds", "ttl_seconds cannot be null (expires_at: null clears)")
        return True, datetime.now(UTC) + timedelta(seconds=int(changes["ttl_seconds"]))
    if "expires_at" not in changes:
        return False, None
    when = changes["expires_at"]
    if when is None:
        return True, None
    return True, _future_instant(when, "expires_at", datetime.now(UTC))


def _future_instant(when: datetime, field: str, now: datetime) -> datetime:
    """``when`` (a naive time taken as UTC) if it is after ``now``; else 422 on ``field``."""
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    if when <= now:
        raise InvalidInput(field, "expires_at must be in the future")
    return when


async def _purge(
    session: AsyncSession, rows: Sequence[tuple[uuid.UUID, uuid.UUID, str, str]], reason: str
) -> dict[uuid.UUID, int]:
    """Delete ``rows`` (org_id, id, namespace, name), scrub their names from the trail and
    write one audit row per org. Returns the count per org."""
    from service.domain.erase import scrub_trail  # erase -> audit; kept out of remember's import

    repo = LifecycleRepository(session)
    by_org: dict[uuid.UUID, list[tuple[uuid.UUID, str, str]]] = defaultdict(list)
    for org_id, mid, namespace, name in rows:
        by_org[org_id].append((mid, namespace, name))
    counts: dict[uuid.UUID, int] = {}
    for org_id, items in by_org.items():
        ids = [mid for mid, _, _ in items]
        await scrub_trail(session, org_id, ids, [name for _, _, name in items])
        await repo.unsupersede(org_id, ids)
        # What erasure removes, expiry removes: an expired artifact memory takes its body.
        artifacts = await repo.delete_artifacts_of(org_id, ids)
        deleted = await repo.delete_memories(org_id, ids)
        namespaces = sorted({ns for _, ns, _ in items})
        await AuditRepository(session).add(
            org_id=org_id,
            caller="expiry",
            action=AuditAction.EXPIRE,
            namespace=namespaces[0] if len(namespaces) == 1 else None,
            request={"reason": reason, "namespaces": namespaces[:20]},
            outcome="purged",
            status_code=200,
            memory_ids=ids,
            details={"purged": deleted, "artifacts": artifacts},
            latency_ms=0.0,
        )
        counts[org_id] = deleted
    return counts


async def purge_colliding(
    session: AsyncSession,
    org_id: uuid.UUID,
    keys: Sequence[tuple[str, str]],
    named: Sequence[tuple[str, str]] = (),
) -> int:
    """Purge the expired memories of ``org_id`` with one of the ``(namespace, content_hash)``
    pairs about to be written, or holding one of the ``(namespace, key)`` pairs ``named`` of a
    keyed write (see the module docstring)."""
    if not keys and not named:
        return 0
    repo = LifecycleRepository(session)
    rows = await repo.expired(None, PURGE_BATCH, org_id=org_id, keys=keys, named=named)
    if not rows:
        return 0
    return sum((await _purge(session, rows, "rewritten")).values())


async def purge_expired(
    session: AsyncSession, now: datetime | None = None, batch_size: int = PURGE_BATCH
) -> dict[uuid.UUID, int]:
    """One batch of the expiry job: purge at most ``batch_size`` memories expired at ``now``
    (default: the database's clock). The caller commits. Returns the count per org."""
    repo = LifecycleRepository(session)
    rows = await repo.expired(now, batch_size)
    return await _purge(session, rows, "expired") if rows else {}


async def run_expiry(
    sessionmaker: async_sessionmaker[AsyncSession],
    *,
    interval_seconds: float,
    batch_size: int = PURGE_BATCH,
) -> None:
    """Purge now and then every ``interval_seconds`` until cancelled, batch after batch (one
    short transaction each). A failed pass is logged and retried at the next interval."""
    while True:
        try:
            total, more = 0, True
            while more:
                async with sessionmaker() as session:
                    counts = await purge_expired(session, batch_size=batch_size)
                    await session.commit()
                n = sum(counts.values())
                total += n
                more = n >= batch_size
            if total:
                log.info("memories_expired", extra={"purged": total})
        except Exception:  # logged, and retried at the next interval
            log.exception("expiry_purge_failed")
        await asyncio.sleep(interval_seconds)
