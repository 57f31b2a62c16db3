"""POST /v1/context: the goal-shaped context pack. Thin: validate, call the domain, return."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from service import operations
from service.api.deps import CallerDep, PackSessionDep, StateDep, audited
from service.domain.audit import AuditContext
from service.schemas.common import ErrorResponse
from service.schemas.context import ContextRequest, ContextResponse

ERRORS = {
    401: {"model": ErrorResponse, "description": "Missing or bad API key"},
    403: {
        "model": ErrorResponse,
        "description": "Outside the key's scopes, namespaces or projects "
        "(`Project access denied: <id>`)",
    },
    422: {"model": ErrorResponse, "description": "Invalid input; `field` names it"},
}

router = APIRouter(prefix="/v1", tags=["context"], responses=ERRORS)  # type: ignore[arg-type]


@router.post("/context", response_model=ContextResponse)
async def context(
    body: ContextRequest,
    session: PackSessionDep,
    state: StateDep,
    caller: CallerDep,
    ctx: Annotated[AuditContext, Depends(audited(operations.CONTEXT))],
) -> ContextResponse:
    """Compile the context pack for a goal: the memories that matter, grouped by facet
    (decisions, constraints, gotchas, artifacts...) with the intent's facets first.

    Draws on the namespace and its ancestors only, within the key's projects. Candidates
    from vector and full-text search are fused, and those below the relevance floor are
    left out and counted in `gated_out`: when nothing is relevant the pack is empty and
    `usage_hint` says so. Each item says why it was chosen (`reason`) and lists its
    related memories. `markdown` renders the pack for a prompt within
    `markdown_token_budget`. `layer: wake` is the session-start working set: `goal` is
    optional, nothing is gated out, and the same store gives the same bytes. Every call
    is audited (`audit_id`)."""
    return await operations.CONTEXT.answer(state, session, caller, ctx, body)
