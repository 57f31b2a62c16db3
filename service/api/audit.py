"""The audit trail over HTTP: GET /v1/audit, GET /v1/audit/{id}, POST /v1/audit/{id}/replay.
(The retention job runs in the app's lifespan, service/app.py.)

Reading the trail is not itself audited (a dashboard polling it would flood it); a replay is,
as action ``replay``."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from service import operations
from service.api.deps import (
    CallerDep,
    EmbedderDep,
    SessionDep,
    StateDep,
    audited,
)
from service.domain import audit as audit_service
from service.domain.audit import AuditContext
from service.domain.audit import replay as audit_replay
from service.schemas.audit import AuditEvent, AuditPage, AuditQuery, ReplayResponse
from service.schemas.common import ErrorResponse

router = APIRouter(prefix="/v1/audit", tags=["audit"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorResponse},
    403: {"model": ErrorResponse},
    422: {"model": ErrorResponse},
}


@router.get(
    "",
    response_model=AuditPage,
    summary="List audited calls, newest first",
    responses=_ERRORS,
)
async def list_audit(
    session: SessionDep, caller: CallerDep, query: Annotated[AuditQuery, Query()]
) -> AuditPage:
    """The calls made in the caller's org, newest first: who called, the action, namespace,
    outcome, status, the memory ids written or returned, counts of redactions and rejections,
    and the latency. Needs the read or admin scope. A key limited to namespaces or projects
    sees the calls within its limits, and its own.

    Filter by `action`, `key_id`, `namespace` (a prefix: `alice` covers `alice:s1`),
    `memory_id` (also for deleted memories), `outcome`, and `since`/`until`. Page with
    `offset`/`limit`, or follow `next_cursor` for a stable export. `full=true` adds each
    row's `request` and `details`. A bad filter gets 422 naming the field."""
    return await audit_service.list_audit(session, caller, query)


@router.get(
    "/{audit_id}",
    response_model=AuditEvent,
    summary="One audited call, whole",
    responses={**_ERRORS, 404: {"model": ErrorResponse}},
)
async def get_audit(session: SessionDep, caller: CallerDep, audit_id: uuid.UUID) -> AuditEvent:
    """One call whole: its inputs after redaction (`request`), and in `details` what it did:
    for a context call the ids returned with scores, facets and reasons, `gated_out` and the
    markdown's token count; for a write the outcome per item, the redaction labels and counts
    and the gate's reason codes. 404 when the id is unknown or belongs to another org."""
    return await audit_service.get_audit(session, caller, audit_id)


@router.post(
    "/{audit_id}/replay",
    response_model=ReplayResponse,
    summary="Run a recorded context call again and diff the packs",
    responses={**_ERRORS, 404: {"model": ErrorResponse}},
)
async def replay(
    session: SessionDep,
    embedder: EmbedderDep,
    state: StateDep,
    caller: CallerDep,
    ctx: Annotated[AuditContext, Depends(audited(operations.REPLAY))],
    audit_id: uuid.UUID,
) -> ReplayResponse:
    """Run a recorded `context` call again, with its recorded inputs, against the store as
    it is now, and compare the new pack with the one returned then: `diff.added` (new items,
    at their new rank), `diff.dropped` (items no longer in the pack, at their old rank) and
    `diff.rank_changes` (`{id, before, after}`; rank 1 is the pack's first item). The replay
    sees only what both this key and the recorded call's key may see, and is audited itself
    (action `replay`). 422 for a row that is not a completed context call."""
    return await audit_replay.replay_context(
        session, embedder, state.settings, caller, ctx, audit_id
    )
