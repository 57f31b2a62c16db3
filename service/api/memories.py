"""remember and the memory endpoints. Thin: validate, call one domain function, return."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Query, status

from service.api.deps import (
    CallerDep,
    EmbedderDep,
    ReadSessionDep,
    SessionDep,
    StateDep,
    audited,
)
from service.domain import memories as memory_service
from service.domain import remember as remember_service
from service.domain.audit import AuditAction, AuditContext
from service.schemas.common import ErrorResponse
from service.schemas.memories import (
    DeleteResponse,
    MemoryOut,
    MemoryPage,
    MemoryPatch,
    MemoryType,
    RememberBatchRequest,
    RememberBatchResponse,
    RememberRequest,
    RememberResponse,
)

ERRORS = {
    401: {"model": ErrorResponse, "description": "Missing or bad API key"},
    403: {"model": ErrorResponse, "description": "Outside the key's scopes, projects or namespaces"},
    404: {"model": ErrorResponse, "description": "No such memory within the key's reach"},
    409: {"model": ErrorResponse, "description": "Another memory in the namespace has this content"},
    422: {"model": ErrorResponse, "description": "Invalid input (the field is named) or rejected by the write gate"},
}

router = APIRouter(prefix="/v1", tags=["memories"], responses=ERRORS)  # type: ignore[arg-type]


@router.post("/remember", status_code=status.HTTP_201_CREATED, response_model=RememberResponse)
async def remember(
    body: RememberRequest,
    session: SessionDep,
    embedder: EmbedderDep,
    state: StateDep,
    caller: CallerDep,
    ctx: Annotated[AuditContext, Depends(audited(AuditAction.REMEMBER))],
) -> RememberResponse:
    """Store what a future agent should not have to relearn.

    Secrets and PII are redacted first; the write gate then refuses fragments, raw tool
    output, logs and reasoning chains (422 with reason codes and hints). An exact duplicate
    in the namespace, of the same project or shared and the same agent diary or none,
    returns the existing id with status `duplicate`; similar memories within that reach are
    listed in `near_duplicates`. A key limited to projects must name one of them (shared
    memories are read-only to it)."""
    return await remember_service.remember(session, embedder, state.settings, caller, body, ctx)


@router.post("/remember/batch", response_model=RememberBatchResponse)
async def remember_batch(
    body: RememberBatchRequest,
    session: SessionDep,
    embedder: EmbedderDep,
    state: StateDep,
    caller: CallerDep,
    ctx: Annotated[AuditContext, Depends(audited(AuditAction.REMEMBER_BATCH))],
) -> RememberBatchResponse:
    """Store up to 500 memories in one call, embedded in one batch. Each item answers
    `{index, status: created|duplicate|rejected, id | reasons}`; a rejected item never fails
    the others."""
    return await remember_service.remember_batch(session, embedder, state.settings, caller, body, ctx)


@router.get("/memories", response_model=MemoryPage)
async def list_memories(
    session: ReadSessionDep,
    caller: CallerDep,
    ctx: Annotated[AuditContext, Depends(audited(AuditAction.LIST))],
    namespace: Annotated[
        str | None,
        Query(max_length=210, description="`u:s` exactly, `u:s:*` the subtree, `*` everything"),
    ] = None,
    type: Annotated[MemoryType | None, Query()] = None,
    project: Annotated[str | None, Query(max_length=128)] = None,
    agent_id: Annotated[str | None, Query(max_length=128)] = None,
    tag: Annotated[str | None, Query(max_length=64)] = None,
    key: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=256,
            description="The current memory written under this key (with an exact `namespace`)",
        ),
    ] = None,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> MemoryPage:
    """List memories within the key's reach, newest first, with `{offset, limit, total, has_more}`.
    With `key` (and an exact `namespace`), the current memory written under that key, if any.
    With a read replica configured, the list is read there: send `X-Ctxpack-Consistency:
    primary` to read your own write at once."""
    return await memory_service.list_memories(
        session, caller, ctx, namespace=namespace, type_=type, project=project,
        agent_id=agent_id, tag=tag, offset=offset, limit=limit, key=key,
    )


@router.get("/memories/{memory_id}", response_model=MemoryOut)
async def get_memory(
    memory_id: uuid.UUID,
    session: SessionDep,
    caller: CallerDep,
    ctx: Annotated[AuditContext, Depends(audited(AuditAction.MEMORY_GET))],
) -> MemoryOut:
    """One memory with its one-hop relations. 404 when it does not exist or is out of reach."""
    return await memory_service.get_memory(session, caller, memory_id, ctx)


@router.patch("/memories/{memory_id}", response_model=MemoryOut)
async def update_memory(
    memory_id: uuid.UUID,
    body: MemoryPatch,
    session: SessionDep,
    embedder: EmbedderDep,
    state: StateDep,
    caller: CallerDep,
    ctx: Annotated[AuditContext, Depends(audited(AuditAction.MEMORY_UPDATE))],
) -> MemoryOut:
    """Change fields of a memory; new content is redacted, gated and re-embedded."""
    return await memory_service.update_memory(
        session, embedder, state.settings, caller, memory_id, body, ctx
    )


@router.delete("/memories/{memory_id}", response_model=DeleteResponse)
async def delete_memory(
    memory_id: uuid.UUID,
    session: SessionDep,
    caller: CallerDep,
    ctx: Annotated[AuditContext, Depends(audited(AuditAction.DELETE))],
) -> DeleteResponse:
    """Erase a memory: content, embedding, edges, an artifact's body and its names in the
    audit trail are deleted; only its id remains, as a tombstone. 403 when the key may read
    it but not write it (a shared memory, for a key limited to projects)."""
    return await memory_service.delete_memory(session, caller, memory_id, ctx)
