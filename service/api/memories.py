"""remember and the memory endpoints. Thin: validate, call one domain function, return."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Query, status

from service import operations
from service.api.deps import (
    CallerDep,
    EmbedderDep,
    ReadSessionDep,
    SessionDep,
    StateDep,
    audited,
)
from service.domain import memories as memory_service
from service.domain.audit import AuditContext
from service.schemas.common import ErrorResponse
from service.schemas.memories import (
    DeleteResponse,
    MemoryOut,
    MemoryPage,
    MemoryPatch,
    MemoryQuery,
    MemoryRef,
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
    state: StateDep,
    caller: CallerDep,
    ctx: Annotated[AuditContext, Depends(audited(operations.REMEMBER))],
) -> RememberResponse:
    """Store what a future agent should not have to relearn.

    Secrets and PII are redacted first; the write gate then refuses fragments, raw tool
    output, logs and reasoning chains (422 with reason codes and hints). An exact duplicate
    in the namespace, of the same project or shared and the same agent diary or none,
    returns the existing id with status `duplicate`; similar memories within that reach are
    listed in `near_duplicates`. A key limited to projects must name one of them (shared
    memories are read-only to it)."""
    return await operations.REMEMBER.answer(state, session, caller, ctx, body)


@router.post("/remember/batch", response_model=RememberBatchResponse)
async def remember_batch(
    body: RememberBatchRequest,
    session: SessionDep,
    state: StateDep,
    caller: CallerDep,
    ctx: Annotated[AuditContext, Depends(audited(operations.REMEMBER_BATCH))],
) -> RememberBatchResponse:
    """Store up to 500 memories in one call, embedded in one batch. Each item answers
    `{index, status: created|duplicate|rejected, id | reasons}`; a rejected item never fails
    the others."""
    return await operations.REMEMBER_BATCH.answer(state, session, caller, ctx, body)


@router.get("/memories", response_model=MemoryPage)
async def list_memories(
    session: ReadSessionDep,
    state: StateDep,
    caller: CallerDep,
    ctx: Annotated[AuditContext, Depends(audited(operations.LIST_MEMORIES))],
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
    query = MemoryQuery(
        namespace=namespace, type=type, project=project, agent_id=agent_id, tag=tag, key=key,
        offset=offset, limit=limit,
    )
    return await operations.LIST_MEMORIES.answer(state, session, caller, ctx, query)


@router.get("/memories/{memory_id}", response_model=MemoryOut)
async def get_memory(
    memory_id: uuid.UUID,
    session: SessionDep,
    state: StateDep,
    caller: CallerDep,
    ctx: Annotated[AuditContext, Depends(audited(operations.GET_MEMORY))],
) -> MemoryOut:
    """One memory with its one-hop relations. 404 when it does not exist or is out of reach."""
    return await operations.GET_MEMORY.answer(state, session, caller, ctx, MemoryRef(memory_id=memory_id))


@router.patch("/memories/{memory_id}", response_model=MemoryOut)
async def update_memory(
    memory_id: uuid.UUID,
    body: MemoryPatch,
    session: SessionDep,
    embedder: EmbedderDep,
    state: StateDep,
    caller: CallerDep,
    ctx: Annotated[AuditContext, Depends(audited(operations.UPDATE_MEMORY))],
) -> MemoryOut:
    """Change fields of a memory; new content is redacted, gated and re-embedded."""
    return await memory_service.update_memory(
        session, embedder, state.settings, caller, memory_id, body, ctx
    )


@router.delete("/memories/{memory_id}", response_model=DeleteResponse)
async def delete_memory(
    memory_id: uuid.UUID,
    session: SessionDep,
    state: StateDep,
    caller: CallerDep,
    ctx: Annotated[AuditContext, Depends(audited(operations.FORGET))],
) -> DeleteResponse:
    """Erase a memory: content, embedding, edges, an artifact's body and its names in the
    audit trail are deleted; only its id remains, as a tombstone. 403 when the key may read
    it but not write it (a shared memory, for a key limited to projects)."""
    return await operations.FORGET.answer(state, session, caller, ctx, MemoryRef(memory_id=memory_id))
