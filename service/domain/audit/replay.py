"""Replaying a recorded context call against the store as it is now.

The recorded row keeps the call's inputs (after redaction), its namespace and the ids it
returned in pack order with their scores. A replay rebuilds the request from them, compiles a
new pack through the same domain function as ``POST /v1/context`` (which writes the replay's
own audit row, action ``replay``, marked ``replay_of``) and compares the two packs by id and
rank: what was added, what dropped out, what moved. A user can then see why an agent was shown
something yesterday and is not today.

A replay sees only what both the replaying key and the recorded call's key may see
(``replay_scope``). This module is not re-exported by ``service.domain.audit``: it compiles
packs through ``domain.context``, which itself records through ``audit.record``.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from service.config import Settings
from service.domain import context as context_service
from service.domain import namespaces
from service.domain.audit.read_queue import settle
from service.domain.audit.record import AuditAction, AuditContext
from service.domain.audit.trail import limited, reachable, visibility
from service.domain.auth import Caller
from service.embedding import AsyncEmbedder
from service.errors import InvalidInput, NotFound, PermissionDenied
from service.schemas.audit import (
    PackDiff,
    RankChange,
    RankedItem,
    ReplayResponse,
)
from service.schemas.context import ContextRequest, ContextResponse
from service.store import models
from service.store.audit import AuditRepository

log = logging.getLogger("ctxpack.audit")

# --- replay -----------------------------------------------------------------------------


def narrow_prefixes(a: Sequence[str], b: Sequence[str]) -> tuple[str, ...] | None:
    """The namespaces both prefix lists allow, as a prefix list (empty list: unlimited).

    Returns None when the two lists share no namespace at all.
    """
    if not a or not b:
        return tuple(a or b)
    both = {p for p in a for q in b if namespaces.within_prefix(p, q)}
    both |= {q for p in a for q in b if namespaces.within_prefix(q, p)}
    return tuple(sorted(both)) or None


def narrow_projects(a: Sequence[str], b: Sequence[str]) -> tuple[str, ...] | None:
    """The projects both lists allow (empty list: unlimited); None when they share none."""
    if not a or not b:
        return tuple(a or b)
    return tuple(sorted(set(a) & set(b))) or None


async def replay_scope(session: AsyncSession, caller: Caller, row: models.AuditEvent) -> Caller:
    """The caller a replay runs as: the current key, limited to what both it and the key
    that made the recorded call may see (a key's limits as they are now)."""
    recorded = None
    if row.key_id is not None:
        recorded = await AuditRepository(session).key_limits(caller.org_id, row.key_id)
    if recorded is None:
        return caller
    prefixes = narrow_prefixes(caller.namespace_prefixes, recorded[0])
    if prefixes is None:
        raise PermissionDenied(
            "This key and the key that made the recorded call share no namespace"
        )
    projects = narrow_projects(caller.projects, recorded[1])
    if projects is None:
        raise PermissionDenied("This key and the key that made the recorded call share no project")
    return dataclasses.replace(caller, namespace_prefixes=prefixes, projects=projects)


# --- replay diff ------------------------------------------------------------------------


def diff_packs(before: Sequence[RankedItem], after: Sequence[RankedItem]) -> PackDiff:
    """Compare two packs by item id and rank.

    Args:
        before: the recorded pack's items, in the order they were returned (``rank`` 1 first).
        after: the replayed pack's items, likewise.

    Returns:
        ``added`` (new pack only, at their new rank, in new-rank order), ``dropped`` (recorded
        pack only, at their old rank, in old-rank order), ``rank_changes`` (in both at a
        different rank, in new-rank order) and the count of items unchanged.
    """
    old = {item.id: item for item in before}
    new = {item.id: item for item in after}
    added = [item for item in after if item.id not in old]
    dropped = [item for item in before if item.id not in new]
    changes = [
        RankChange(id=item.id, before=old[item.id].rank, after=item.rank)
        for item in after
        if item.id in old and old[item.id].rank != item.rank
    ]
    unchanged = sum(1 for item in after if item.id in old and old[item.id].rank == item.rank)
    return PackDiff(
        added=sorted(added, key=lambda i: i.rank),
        dropped=sorted(dropped, key=lambda i: i.rank),
        rank_changes=sorted(changes, key=lambda c: c.after),
        unchanged=unchanged,
    )


# domain.context keeps this much of the goal in the audit row.
RECORDED_GOAL_CHARS = context_service.AUDIT_GOAL_CHARS
REDACTED_MARK = ":REDACTED]"


def replayable(action: str, outcome: str) -> bool:
    """A row that can be replayed: a completed context call (a pack to compare)."""
    return action == AuditAction.CONTEXT and outcome == "ok"


def recorded_pack(row: models.AuditEvent) -> list[RankedItem]:
    """The recorded call's pack: its item ids in pack order, with their scores.

    Raises:
        InvalidInput: naming ``audit_id``, when the row is no completed context call.
    """
    if row.action != AuditAction.CONTEXT:
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
    await settle(session)  # a context call just made in this process can be replayed
    row = await AuditRepository(session).get(visibility(caller), audit_id)
    if row is None:
        raise NotFound(f"No audit event {audit_id}")
    before = recorded_pack(row)
    if row.key_id != caller.key_id and limited(caller) and before:
        # Another key's pack may hold memories this key cannot read: not even their ids.
        reach = await reachable(session, caller, {item.id for item in before})
        before = [item for item in before if item.id in reach]
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
