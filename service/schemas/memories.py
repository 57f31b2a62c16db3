"""Request and response models of remember and the memory endpoints (shared by HTTP and MCP)."""

from __future__ import annotations

import re
import unicodedata
import uuid
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from service.schemas.common import finite_json
from service.schemas.namespaces import namespace_field

MemoryType = Literal[
    "decision",
    "plan",
    "task",
    "idea",
    "claim",
    "constraint",
    "rule",
    "artifact",
    "procedure",
    "pattern",
    "gotcha",
    "verification",
    "domain",
    "session",
    "episode",
]

SLUG = r"^[A-Za-z0-9_.\-]{1,128}$"
NAMESPACE_HELP = (
    "Where the memory lives: `user[:session[:task]]`, each segment 1-64 characters of "
    "[A-Za-z0-9_.-]. A task sees its own memories, its session's and its user's."
)


KEY_MAX = 256
_KEY_BAD = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def check_key(value: str) -> str:
    """A memory key: 1-256 characters, no control characters, no surrounding whitespace."""
    if value != value.strip() or not value:
        raise ValueError("key must not be empty or start or end with whitespace")
    if _KEY_BAD.search(value):
        raise ValueError("key must not contain control characters or lone surrogates")
    if any(unicodedata.category(ch) in ("Cf", "Zl", "Zp") for ch in value):
        # Bidi overrides, zero-width joiners and other format characters make two keys that
        # look alike differ (and a key shown in a console or a log read backwards); the line
        # and paragraph separators (U+2028, U+2029) break a key's line like a newline.
        raise ValueError(
            "key must not contain Unicode format characters (bidi overrides, zero-width)"
        )
    return value


def _check_tags(value: list[str]) -> list[str]:
    """The tag limits of every write (remember, batch, PATCH): each 1-64 characters, no NUL."""
    for tag in value:
        if not tag or len(tag) > 64 or "\x00" in tag:
            raise ValueError("each tag must be 1-64 characters")
    return value


def storable_time(value: datetime | None) -> datetime | None:
    """A stored date-time must be one the database can give back: 9999-12-31T23:00-05:00
    is stored as 10000-01-01 UTC, which no read could return (every list and pack holding
    the memory would fail)."""
    if value is not None and value.tzinfo is not None:
        try:
            value.astimezone(UTC)
        except OverflowError:
            raise ValueError("date-time is outside the years 1-9999 in UTC") from None
    return value


class RelatedRef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: uuid.UUID = Field(description="An existing memory of the same org")
    relationship: str = Field(
        "related_to",
        pattern=r"^[a-z][a-z0-9_]{0,63}$",
        description="Edge type, e.g. depends_on, derived_from, contradicts, related_to",
    )


class RememberRequest(BaseModel):
    """One memory to store. Content is redacted, gated and deduplicated before it is kept."""

    model_config = ConfigDict(extra="forbid")

    content: str = Field(description="What a future agent should not have to relearn")
    namespace: str = Field(description=NAMESPACE_HELP, max_length=200)
    name: str | None = Field(
        None, max_length=300, description="Short title; derived from the content when absent"
    )
    type: MemoryType = Field("episode", description="What kind of memory this is")
    project: str | None = Field(None, pattern=SLUG, description="Project id")
    domain: str | None = Field(None, max_length=128, description="Domain or topic")
    agent_id: str | None = Field(
        None, pattern=SLUG, description="The agent's diary this belongs to"
    )
    tags: list[str] = Field(default_factory=list, max_length=32)
    source: str | None = Field(None, max_length=2000, description="Where it came from")
    origin: str | None = Field(None, max_length=200, description="Who or what produced it")
    url: str | None = Field(None, max_length=2000)
    valid_at: datetime | None = Field(None, description="When the fact became true")
    related: list[RelatedRef] = Field(default_factory=list, max_length=50)
    supersedes: uuid.UUID | None = Field(
        None,
        description="A memory this one replaces. Its readers must see the replacement: it lives "
        "in this memory's namespace, in its project (or this one is shared), in its diary (or "
        "this one is in none).",
    )
    metadata: dict[str, Any] = Field(default_factory=dict, description="Bounded JSON object")
    expires_at: datetime | None = Field(
        None,
        description="When the memory expires (ISO 8601, in the future): from then on it is in "
        "no pack, list or read, and it is purged soon after. Not with ttl_seconds.",
    )
    ttl_seconds: int | None = Field(
        None,
        ge=1,
        le=100 * 366 * 86400,
        description="Expire this many seconds from now (instead of expires_at). Unset: the "
        "type's default TTL, if the server sets one, else never.",
    )
    key: str | None = Field(
        None,
        min_length=1,
        max_length=KEY_MAX,
        description="Your name for this memory, unique in the namespace: writing a key again "
        "replaces its memory (status `updated`, the old one kept as history, out of packs); "
        "the same content again is `duplicate`. Find it with GET /v1/memories?namespace=&key=.",
    )

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        return namespace_field(value)

    @field_validator("valid_at", "expires_at")
    @classmethod
    def _storable(cls, value: datetime | None) -> datetime | None:
        return storable_time(value)

    @field_validator("key")
    @classmethod
    def _key(cls, value: str | None) -> str | None:
        return None if value is None else check_key(value)

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: list[str]) -> list[str]:
        return _check_tags(value)

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, Any]) -> dict[str, Any]:
        return finite_json(value)  # type: ignore[no-any-return]


class NearDuplicate(BaseModel):
    id: uuid.UUID
    name: str
    score: float = Field(description="Cosine similarity to the new memory")


class Redaction(BaseModel):
    label: str
    count: int


class GateReasonOut(BaseModel):
    code: str
    hint: str


class RememberResponse(BaseModel):
    id: uuid.UUID
    status: Literal["created", "updated", "duplicate"]
    namespace: str
    type: str
    facet: str
    name: str
    redactions: list[Redaction]
    near_duplicates: list[NearDuplicate]
    warnings: list[str]
    audit_id: uuid.UUID | None = None
    expires_at: datetime | None = Field(None, description="When it expires; null: never")
    key: str | None = Field(None, description="The memory's key, when written with one")
    superseded_id: uuid.UUID | None = Field(
        None, description="With status `updated`: the memory the key named before this write"
    )


class RememberBatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[RememberRequest] = Field(min_length=1, description="Up to 500 memories")


class BatchItemResult(BaseModel):
    index: int
    status: Literal["created", "updated", "duplicate", "rejected"]
    id: uuid.UUID | None = None
    superseded_id: uuid.UUID | None = None
    reasons: list[GateReasonOut] | None = None
    redactions: list[Redaction] = Field(default_factory=list)
    near_duplicates: list[NearDuplicate] = Field(default_factory=list)
    expires_at: datetime | None = None


class RememberBatchResponse(BaseModel):
    items: list[BatchItemResult]
    created: int
    duplicates: int
    rejected: int
    audit_id: uuid.UUID | None = None
    updated: int = Field(0, description="Keyed items that replaced the memory under their key")


class RelatedOut(BaseModel):
    id: uuid.UUID
    type: str
    name: str
    relationship: str
    direction: Literal["outgoing", "incoming"]


class MemoryOut(BaseModel):
    id: uuid.UUID
    namespace: str
    type: str
    facet: str
    name: str
    content: str
    project: str | None
    domain: str | None
    agent_id: str | None
    tags: list[str]
    source: str | None
    origin: str | None
    url: str | None
    valid_at: datetime | None
    created_at: datetime
    updated_at: datetime
    superseded_by: uuid.UUID | None
    metadata: dict[str, Any]
    related: list[RelatedOut] = Field(default_factory=list)
    expires_at: datetime | None = Field(None, description="When it expires; null: never")
    key: str | None = None


class MemoryPage(BaseModel):
    items: list[MemoryOut]
    offset: int
    limit: int
    total: int
    has_more: bool


class MemoryPatch(BaseModel):
    """Fields to change. Content is redacted and gated again, and re-embedded."""

    model_config = ConfigDict(extra="forbid")

    content: str | None = None
    name: str | None = Field(None, max_length=300)
    type: MemoryType | None = None
    project: str | None = Field(None, pattern=SLUG)
    domain: str | None = Field(None, max_length=128)
    tags: list[str] | None = Field(None, max_length=32)
    source: str | None = Field(None, max_length=2000)
    origin: str | None = Field(None, max_length=200)
    url: str | None = Field(None, max_length=2000)
    valid_at: datetime | None = None
    metadata: dict[str, Any] | None = None
    expires_at: datetime | None = Field(
        None,
        description="A new expiry (ISO 8601, in the future), or null: never expires. Not with "
        "ttl_seconds.",
    )
    ttl_seconds: int | None = Field(
        None,
        ge=1,
        le=100 * 366 * 86400,
        description="Expire this many seconds from now (a TTL refreshed on read, for one). Not "
        "with expires_at.",
    )

    @field_validator("valid_at", "expires_at")
    @classmethod
    def _storable(cls, value: datetime | None) -> datetime | None:
        return storable_time(value)

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else _check_tags(value)

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return finite_json(value)  # type: ignore[no-any-return]


class DeleteResponse(BaseModel):
    id: uuid.UUID
    deleted: bool
    audit_id: uuid.UUID | None = None


class MemoryRef(BaseModel):
    """One memory, by id (the path of ``/v1/memories/{memory_id}``)."""

    memory_id: uuid.UUID


class MemoryQuery(BaseModel):
    """The filters and paging of a memory listing (the query of GET /v1/memories)."""

    namespace: str | None = None
    type: MemoryType | None = None
    project: str | None = None
    agent_id: str | None = None
    tag: str | None = None
    key: str | None = None
    offset: int = 0
    limit: int = 50
