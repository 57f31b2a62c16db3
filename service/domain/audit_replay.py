"""Replaying a recorded context call against the store as it is now.

The recorded row keeps the call's inputs (after redaction), its namespace and the ids it
returned in pack order with their scores. A replay rebuilds the request from them, compiles a
new pack through the same domain function as ``POST /v1/context`` (which writes the replay's
own audit row, action ``replay``, marked ``replay_of``) and compares the two packs by id and
rank: what was added, what dropped out, what moved. A user can then see why an agent was shown
something yesterday and is not today.

Kept apart from ``domain.audit`` because ``domain.context`` imports that module.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from service.config import Settings
from service.domain import context as context_service
from service.domain.audit import (
    AuditContext,
    diff_packs,
    replay_scope,
    visibility,
)
from service.domain.auth import Caller
from service.embedding import AsyncEmbedder
from service.errors import InvalidInput, NotFound
from service.schemas.audit import RankedItem, ReplayResponse
from service.schemas.context import ContextRequest, ContextResponse
from service.store import models
from service.store.audit import AuditRepository

# domain.context keeps this much of the goal in the audit row.
RECORDED_GOAL_CHARS = context_service.AUDIT_GOAL_CHARS
REDACTED_MARK = ":REDACTED]"


def recorded_pack(row: models.AuditEvent) -> list[RankedItem]:
    """The recorded call's pack: its item ids in pack order, with their scores.

    Raises:
        InvalidInput: naming ``audit_id``, when the row is no completed context call.
    """
    if row.action != "context":
        raise InvalidInput(
            "audit_id", f"Only context calls can be replayed; this is a {row.action} call"
        )
    items = row.details.get("items") if row.outcome == "ok" else None
    if not isinstance(items, list):
        raise InvalidInput("audit_id", "The recorded context call returned no pack to compare")
    try:
        return [
            RankedItem(id=uuid.UUID(str(item["id"])), rank=rank, score=item.get("score"))
            for rank, item in enumerate(items, start=1)
        ]
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInput("audit_id", "The recorded pack is not in a known format") from exc


def recorded_request(row: models.AuditEvent) -> tuple[ContextRequest, list[str]]:
    """The request the recorded call is replayed with, and warnings on how it may differ.

    Raises:
        InvalidInput: naming ``audit_id``, when the recorded inputs no longer validate.
    """
    known = ContextRequest.model_fields
    values: dict[str, Any] = {k: v for k, v in row.request.items() if k in known}
    values["namespace"] = row.namespace
    try:
        req = ContextRequest.model_validate(values)
    except ValidationError as exc:
        raise InvalidInput(
            "audit_id", "The recorded inputs are no longer a valid context request"
        ) from exc
    warnings = []
    if REDACTED_MARK in (req.goal or ""):
        warnings.append("The goal was recorded with secrets redacted; it is replayed as recorded.")
    if len(str(row.request.get("goal", ""))) >= RECORDED_GOAL_CHARS:
        warnings.append(
            f"The goal was recorded cut to {RECORDED_GOAL_CHARS} characters; "
            "it is replayed as recorded."
        )
    return req, warnings


def _new_pack(pack: ContextResponse) -> list[RankedItem]:
    ordered = [item for section in pack.sections for item in section.items]
    return [
        RankedItem(id=item.id, rank=rank, score=item.score)
        for rank, item in enumerate(ordered, start=1)
    ]


async def replay_context(
    session: AsyncSession,
    embedder: AsyncEmbedder,
    settings: Settings,
    caller: Caller,
    ctx: AuditContext,
    audit_id: uuid.UUID,
) -> ReplayResponse:
    """Run a recorded context call again and diff the new pack against the recorded one.

    Args:
        session: the call's unit of work; the replay's audit row is written in it.
        embedder: embeds the replayed query.
        settings: ranking settings, as for ``POST /v1/context``.
        caller: needs the read scope and must see the recorded row; the replay sees only what
            both this key and the recorded call's key may see now.
        ctx: the replay's audit context (action ``replay``).
        audit_id: the recorded context call.

    Returns:
        The new pack, the diff (added, dropped, rank_changes), and warnings when the recorded
        inputs may differ from the original ones.

    Raises:
        NotFound: no such row in the caller's org, or outside the key's limits.
        InvalidInput: naming ``audit_id``, when the row is not a completed context call.
        PermissionDenied: the keys share no namespace or project, or the recorded namespace
            or project is outside them now.
    """
    caller.require("read")
    row = await AuditRepository(session).get(visibility(caller), audit_id)
    if row is None:
        raise NotFound(f"No audit event {audit_id}")
    before = recorded_pack(row)
    req, warnings = recorded_request(row)
    scope = await replay_scope(session, caller, row)
    ctx.details_extra["replay_of"] = str(row.id)
    pack = await context_service.compile_context(session, embedder, settings, scope, ctx, req)
    return ReplayResponse(
        replayed=row.id,
        audit_id=pack.audit_id,
        pack=pack,
        diff=diff_packs(before, _new_pack(pack)),
        warnings=warnings,
    )
