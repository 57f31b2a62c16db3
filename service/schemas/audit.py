"""Audit trail schemas: the listing query, rows (summary and whole), pages, and replay."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from service.schemas.common import Page
from service.schemas.context import ContextResponse

MAX_PAGE = 500


def as_utc(value: datetime | None) -> datetime | None:
    """Times without a zone are taken as UTC."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


_NUMBER = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*")


def iso_only(value: Any) -> Any:
    """Refuse numbers, which pydantic would otherwise read as unix seconds: times are ISO 8601
    dates or date-times only."""
    if isinstance(value, int | float) or (isinstance(value, str) and _NUMBER.fullmatch(value)):
        raise ValueError("expected an ISO 8601 date or date-time, e.g. 2026-11-01T12:00:00Z")
    return value


class AuditQuery(BaseModel):
    """Filters and paging of ``GET /v1/audit``."""

    model_config = ConfigDict(extra="forbid")

    action: str | None = Field(
        None,
        max_length=32,
        description="Only this action: remember, remember_batch, context, artifact, delete, "
        "list, replay, auth_refused, ...",
    )
    key_id: uuid.UUID | None = Field(None, description="Only calls made with this API key.")
    namespace: str | None = Field(
        None,
        description="Only calls at this namespace or under it, segment-wise: `alice` matches "
        "`alice` and `alice:s1`, not `alicex`. `alice:*` means the same; `*` means all.",
    )
    memory_id: uuid.UUID | None = Field(
        None,
        description="Only calls that wrote, changed, deleted or returned this memory. Works for "
        "deleted memories too: their ids stay in the trail as tombstones.",
    )
    outcome: str | None = Field(
        None, max_length=32, description="Only this outcome: ok, partial, rejected, refused, error."
    )
    since: datetime | None = Field(
        None, description="Only calls at or after this time (ISO 8601; no zone means UTC)."
    )
    until: datetime | None = Field(
        None, description="Only calls before this time (ISO 8601; no zone means UTC)."
    )
    offset: int = Field(0, ge=0, le=1_000_000, description="Rows to skip (offset paging).")
    limit: int = Field(50, ge=1, le=MAX_PAGE, description=f"Rows per page, 1-{MAX_PAGE}.")
    cursor: str | None = Field(
        None,
        max_length=200,
        description="Opaque position from a previous page's `next_cursor` (keyset paging, for "
        "exports: stable while new calls are recorded). Use it with offset 0.",
    )
    full: bool = Field(
        False, description="Include each row's `request` and `details` (as GET /v1/audit/{id})."
    )

    @field_validator("since", "until", mode="before")
    @classmethod
    def _iso_only(cls, value: Any) -> Any:
        return iso_only(value)

    @field_validator("since", "until")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        return as_utc(value)


class AuditEventSummary(BaseModel):
    """One audited call: who, what, where, the outcome, the memory ids touched, the latency."""

    id: uuid.UUID
    created_at: datetime
    key_id: uuid.UUID | None = Field(description="The API key that made the call.")
    caller: str | None = Field(description="That key's name.")
    action: str
    namespace: str | None
    outcome: str = Field(description="ok, partial, rejected, refused or error.")
    status_code: int
    memory_ids: list[uuid.UUID] = Field(
        description="Memories written, changed, deleted or returned. Ids of deleted memories "
        "remain here as tombstones; no content is kept anywhere in the trail."
    )
    redaction_count: int = Field(description="Secrets and PII redacted from the inputs.")
    rejection_count: int = Field(description="Items the write gate or validation rejected.")
    latency_ms: float


class AuditEvent(AuditEventSummary):
    """One call whole: its inputs after redaction (``request``) and what it did (``details``).

    For a context call, ``details`` holds the ids returned with their scores, facets and
    reasons, ``gated_out`` and the token count of the markdown; for a write, the outcome per
    item, the redaction labels and counts and the gate's reason codes.
    """

    request: dict[str, Any] = Field(description="The inputs after redaction, without content.")
    details: dict[str, Any]


class AuditPage(Page):
    """A page of the trail, newest first."""

    items: list[AuditEventSummary | AuditEvent]
    next_cursor: str | None = Field(
        None, description="Pass as `cursor` for the next page; null on the last page."
    )


class RankedItem(BaseModel):
    """An item of a pack at a rank (1 = first)."""

    id: uuid.UUID
    rank: int
    score: float | None = None


class RankChange(BaseModel):
    id: uuid.UUID
    before: int = Field(description="Rank in the recorded pack (1 = first).")
    after: int = Field(description="Rank in the replayed pack.")


class PackDiff(BaseModel):
    """How a replayed pack differs from the recorded one, by item id and rank."""

    added: list[RankedItem] = Field(description="In the new pack only, with their new rank.")
    dropped: list[RankedItem] = Field(description="In the recorded pack only, with their old rank.")
    rank_changes: list[RankChange] = Field(description="In both, at a different rank.")
    unchanged: int = Field(description="Items in both at the same rank.")


class ReplayResponse(BaseModel):
    """A recorded context call run again against the store as it is now."""

    replayed: uuid.UUID = Field(description="The audit id of the recorded call.")
    audit_id: uuid.UUID | None = Field(None, description="The audit id of this replay.")
    pack: ContextResponse = Field(description="The new pack, as POST /v1/context answers it.")
    diff: PackDiff = Field(description="The new pack against the recorded one, by id and rank.")
    warnings: list[str] = Field(
        default_factory=list,
        description="Ways the replayed inputs may differ from the original call's: the audit "
        "row keeps the goal redacted and at most 500 characters long.",
    )
