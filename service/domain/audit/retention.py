"""Retention of the audit trail.

Rows older than the org's ``audit_retention_days`` (else the default setting) are deleted by
``prune_audit``, which the server runs every ``audit_prune_interval_seconds``
(``run_retention``, started in the app's lifespan). A retention of 0 days or less keeps the
org's rows forever.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from service.store.audit import AuditRepository

log = logging.getLogger("ctxpack.audit")

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
