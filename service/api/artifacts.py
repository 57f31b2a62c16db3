"""POST /v1/artifacts, GET /v1/artifacts/{id}?fields=a,b and DELETE /v1/artifacts/{id}.
Thin: validate, call, return."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Query, status

from service import operations
from service.api.deps import CallerDep, SessionDep, StateDep, audited
from service.domain.audit import AuditContext
from service.schemas.artifacts import (
    ArtifactCreate,
    ArtifactCreated,
    ArtifactDeleted,
    ArtifactFields,
    ArtifactQuery,
    ArtifactRef,
)
from service.schemas.common import ErrorResponse

ERRORS = {
    401: {"model": ErrorResponse, "description": "Missing or bad API key"},
    403: {
        "model": ErrorResponse,
        "description": "Outside the key's scopes, projects or namespaces",
    },
    404: {"model": ErrorResponse, "description": "No such artifact within the key's reach"},
    422: {"model": ErrorResponse, "description": "Invalid input; `field` names it"},
}

router = APIRouter(prefix="/v1", tags=["artifacts"], responses=ERRORS)  # type: ignore[arg-type]


@router.post("/artifacts", status_code=status.HTTP_201_CREATED, response_model=ArtifactCreated)
async def create_artifact(
    body: ArtifactCreate,
    session: SessionDep,
    caller: CallerDep,
    ctx: Annotated[AuditContext, Depends(audited(operations.STORE_ARTIFACT))],
    state: StateDep,
) -> ArtifactCreated:
    """Store a JSON artifact (an object or a list) in a namespace.

    Context packs show it under `artifacts` as its summary plus a reference, never the
    body; fetch what you need with GET /v1/artifacts/{artifact_id}?fields=a,b. Returns the
    id, the summary (derived from the shape when you send none), the body's size and its
    top-level keys. Secrets and PII are redacted before storing."""
    return await operations.STORE_ARTIFACT.answer(state, session, caller, ctx, body)


@router.get("/artifacts/{artifact_id}", response_model=ArtifactFields)
async def get_artifact(
    artifact_id: uuid.UUID,
    session: SessionDep,
    state: StateDep,
    caller: CallerDep,
    ctx: Annotated[AuditContext, Depends(audited(operations.RECALL_ARTIFACT))],
    fields: Annotated[
        str | None,
        Query(
            max_length=4000,
            description="Comma-separated field names: only these are returned, from the "
            "object or, per field, from the first list item that has it. Absent: the "
            "whole body.",
        ),
    ] = None,
    namespace: Annotated[
        str | None,
        Query(
            max_length=200,
            description="The reader's namespace: the artifact must live there or in an "
            "ancestor, as in a pack.",
        ),
    ] = None,
) -> ArtifactFields:
    """Resolve an artifact's declared fields (`fields=a,b`); `missing` lists those it does
    not have. 404 when the artifact does not exist or lies outside the key's reach."""
    query = ArtifactQuery(artifact_id=artifact_id, fields=fields, namespace=namespace)
    return await operations.RECALL_ARTIFACT.answer(state, session, caller, ctx, query)


@router.delete("/artifacts/{artifact_id}", response_model=ArtifactDeleted)
async def delete_artifact(
    artifact_id: uuid.UUID,
    session: SessionDep,
    state: StateDep,
    caller: CallerDep,
    ctx: Annotated[AuditContext, Depends(audited(operations.DELETE_ARTIFACT))],
) -> ArtifactDeleted:
    """Erase an artifact: its body and the memory that references it in packs. Only the
    ids remain, as a tombstone in the audit trail. 404 when it does not exist or lies
    outside the key's reach; 403 when the key may read it but not write it."""
    ref = ArtifactRef(artifact_id=artifact_id)
    return await operations.DELETE_ARTIFACT.answer(state, session, caller, ctx, ref)
