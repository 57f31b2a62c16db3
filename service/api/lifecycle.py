"""Lifecycle routes (erase a namespace subtree) and the expiry job, started in the lifespan.
Thin: validate, call one domain function, return."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Path

from service.api.deps import AppState, CallerDep, SessionDep, audited
from service.config import Settings
from service.domain import erase as erase_service
from service.domain import expiry as expiry_service
from service.domain.audit import AuditContext
from service.schemas.common import ErrorResponse
from service.schemas.lifecycle import EraseReceipt

ERRORS = {
    401: {"model": ErrorResponse, "description": "Missing or bad API key"},
    403: {"model": ErrorResponse, "description": "No write scope, or the namespace is outside the key's prefixes"},
    422: {"model": ErrorResponse, "description": "Malformed namespace"},
}

router = APIRouter(prefix="/v1", tags=["lifecycle"], responses=ERRORS)  # type: ignore[arg-type]


@router.delete("/namespaces/{namespace}", response_model=EraseReceipt)
async def erase_namespace(
    namespace: Annotated[str, Path(max_length=200, description="`user[:session[:task]]`")],
    session: SessionDep,
    caller: CallerDep,
    ctx: Annotated[AuditContext, Depends(audited("erase"))],
) -> EraseReceipt:
    """Erase a namespace and everything under it (a whole user: `DELETE /v1/namespaces/alice`):
    memories with their embeddings, relations in and out, artifacts, and the keys limited to
    it. One transaction: all or nothing. Needs a write key whose prefixes cover the namespace.
    Answers a receipt: counts per kind, the time and the audit id. Audit rows of the erased
    memories keep only their ids."""
    return await erase_service.erase_namespace(session, caller, namespace, ctx)


@contextlib.asynccontextmanager
async def expiry_job(app: FastAPI, state: AppState) -> AsyncIterator[None]:
    """Run the expiry job in the background while the app is up."""
    interval = state.settings.expiry_purge_interval_seconds
    if interval <= 0:
        yield
        return
    task = asyncio.create_task(
        expiry_service.run_expiry(state.sessionmaker, interval_seconds=interval),
        name="memory-expiry",
    )
    state.extras["memory_expiry"] = task
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def install(app: FastAPI, settings: Settings) -> None:
    """Add the lifecycle routes and the expiry job."""
    app.include_router(router)
    app.state.lifespan_hooks.append(expiry_job)
