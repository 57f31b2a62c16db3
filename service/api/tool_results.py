"""POST /v1/tool-results (the tool-result envelope) and POST /v1/assemble (one model call's
messages within one budget). Thin: validate, call the domain, return."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from service import operations
from service.api.deps import (
    CallerDep,
    PackSessionDep,
    SessionDep,
    StateDep,
    audited,
)
from service.domain.audit import AuditContext
from service.schemas.assemble import AssembleRequest, AssembleResponse
from service.schemas.common import ErrorResponse
from service.schemas.tool_results import ToolResultRequest, ToolResultResponse

ERRORS = {
    401: {"model": ErrorResponse, "description": "Missing or bad API key"},
    403: {
        "model": ErrorResponse,
        "description": "The key has no read scope, or (assemble) "
        "the memory or task state lies outside its reach",
    },
    404: {"model": ErrorResponse, "description": "(assemble) A task-state artifact is not found"},
    413: {
        "model": ErrorResponse,
        "description": "The body is over the server's body limit, or the text to scan is over "
        "max_scanned_bytes (`field` names the part, e.g. `result`, `tool_results.0.result`)",
    },
    422: {"model": ErrorResponse, "description": "Invalid input; `field` names it"},
}

router = APIRouter(prefix="/v1", tags=["tool results"], responses=ERRORS)  # type: ignore[arg-type]


@router.post("/tool-results", response_model=ToolResultResponse)
async def tool_result(
    body: ToolResultRequest,
    session: SessionDep,
    state: StateDep,
    caller: CallerDep,
    ctx: Annotated[AuditContext, Depends(audited(operations.TOOL_RESULT))],
) -> ToolResultResponse:
    """Pass one tool result through the envelope before a model sees it: secrets and PII
    are redacted first, then the result is trimmed to `budget_tokens` (text keeps its head,
    tail and error lines; JSON stays valid JSON: arrays shortened with a count of what was
    dropped, long strings shortened, keys kept; or only the `fields` named; or its shape).

    Returns the OpenAI-style tool message (`role`, `tool_call_id`, `content`), the tokens
    before and after, what was cut, the redactions by label (never the value) and the
    `audit_id`. The audit row keeps sizes, counts and labels, never the content."""
    return await operations.TOOL_RESULT.answer(state, session, caller, ctx, body)


@router.post("/assemble", response_model=AssembleResponse)
async def assemble(
    body: AssembleRequest,
    session: PackSessionDep,
    state: StateDep,
    caller: CallerDep,
    ctx: Annotated[AuditContext, Depends(audited(operations.ASSEMBLE))],
) -> AssembleResponse:
    """Build the messages of one model call within `budget_tokens`, in OpenAI chat format:
    the system prompt, the conversation so far, the user message, the context pack
    (`memory`: goal and namespace as POST /v1/context takes them), the task state (artifact
    ids and declared fields) and the tool results (each through the envelope of POST
    /v1/tool-results), each tool message right after the assistant message that called it.

    Over budget, the least valuable layer is cut first (`cut_order`: history, oldest turns
    first; memory; task state; tool results, trimmed and never dropped). The system prompt
    and the user message are never cut (422 when they alone exceed the budget) but are
    redacted like everything else. Returns the messages and a budget report: tokens per
    layer, utilisation, and what was dropped or trimmed and why."""
    return await operations.ASSEMBLE.answer(state, session, caller, ctx, body)
