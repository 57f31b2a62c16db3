"""Lifecycle routes: erase a namespace subtree. Thin: validate, call one domain function,
return. (The expiry job runs in the app's lifespan, service/app.py.)"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path

from service import operations
from service.api.deps import CallerDep, SessionDep, StateDep, audited
from service.domain.audit import AuditContext
from service.schemas.common import ErrorResponse
from service.schemas.lifecycle import EraseReceipt, NamespaceRef

ERRORS = {
    401: {"model": ErrorResponse, "description": "Missing or bad API key"},
    403: {
        "model": ErrorResponse,
        "description": "No write scope, or the namespace is outside the key's prefixes",
    },
    422: {"model": ErrorResponse, "description": "Malformed namespace"},
}

router = APIRouter(prefix="/v1", tags=["lifecycle"], responses=ERRORS)  # type: ignore[arg-type]


@router.delete("/namespaces/{namespace}", response_model=EraseReceipt)
async def erase_namespace(
    namespace: Annotated[str, Path(max_length=200, description="`user[:session[:task]]`")],
    session: SessionDep,
    state: StateDep,
    caller: CallerDep,
    ctx: Annotated[AuditContext, Depends(audited(operations.ERASE_NAMESPACE))],
) -> EraseReceipt:
    """Erase a namespace and everything under it (a whole user: `DELETE /v1/namespaces/alice`):
    memories with their embeddings, relations in and out, artifacts, and the keys limited to
    it. One transaction: all or nothing. Needs a write key whose prefixes cover the namespace.
    Answers a receipt: counts per kind, the time and the audit id. Audit rows of the erased
    memories keep only their ids."""
    ref = NamespaceRef(namespace=namespace)
    return await operations.ERASE_NAMESPACE.answer(state, session, caller, ctx, ref)
