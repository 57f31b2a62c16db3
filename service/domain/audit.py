"""Writing the audit trail. Every API call writes exactly one row: inside the call's own
transaction when it succeeds (so an acknowledged write is always audited), in a fresh one
when it fails (the failed call's work is rolled back, its audit row is not)."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from service.domain.auth import Caller
from service.store.audit import AuditRepository


@dataclass
class AuditContext:
    """What a call will be audited as; filled in by the route as the call proceeds."""

    action: str
    caller: Caller | None = None
    namespace: str | None = None
    request: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)
    audit_id: uuid.UUID = field(default_factory=uuid.uuid4)

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
    """Write the call's audit row (no row for calls with no authenticated org)."""
    if ctx.caller is None:
        return None
    return await AuditRepository(session).add(
        id=ctx.audit_id,
        org_id=ctx.caller.org_id,
        key_id=ctx.caller.key_id,
        caller=ctx.caller.key_name,
        action=ctx.action,
        namespace=ctx.namespace,
        request=ctx.request,
        outcome=outcome,
        status_code=status_code,
        memory_ids=memory_ids or [],
        details=details or {},
        redaction_count=redaction_count,
        rejection_count=rejection_count,
        latency_ms=ctx.elapsed_ms(),
    )
