"""Typed requests and responses of the ctxpack HTTP API.

Each class mirrors the server's schema of the same name in ``/openapi.json`` (a contract test
compares the two: property names, which are required, and the enums). Requests forbid unknown
fields, as the server does; responses allow them, so a newer server does not break an older
client.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MemoryType = Literal[
    "decision", "plan", "task", "idea", "claim", "constraint", "rule", "artifact",
    "procedure", "pattern", "gotcha", "verification", "domain", "session", "episode",
]
Intent = Literal["build", "plan", "ideate", "research", "debug", "decide", "learn", "general"]
Layer = Literal["recall", "wake", "deep_search"]
Retrieval = Literal["hybrid", "lexical", "vector"]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Response(BaseModel):
    model_config = ConfigDict(extra="allow")


# --- remember ---------------------------------------------------------------------------------


class RelatedRef(_Request):
    id: uuid.UUID
    relationship: str = "related_to"


class RememberRequest(_Request):
    """One memory to store. ``key`` makes the write idempotent: writing a key again replaces
    its memory (``updated``) or changes nothing (``duplicate``)."""

    content: str
    namespace: str
    name: str | None = None
    type: MemoryType = "episode"
    project: str | None = None
    domain: str | None = None
    agent_id: str | None = None
    tags: list[str] = Field(default_factory=list)
    source: str | None = None
    origin: str | None = None
    url: str | None = None
    valid_at: datetime | None = None
    related: list[RelatedRef] = Field(default_factory=list)
    supersedes: uuid.UUID | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    key: str | None = None
    # When it expires (in the future), or after how many seconds; never both. Unset: the
    # server's default TTL for the type, if any, else never.
    expires_at: datetime | None = None
    ttl_seconds: int | None = None


class RememberBatchRequest(_Request):
    items: list[RememberRequest]


class NearDuplicate(_Response):
    id: uuid.UUID
    name: str
    score: float


class Redaction(_Response):
    label: str
    count: int


class GateReasonOut(_Response):
    code: str
    hint: str


class RememberResponse(_Response):
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
    key: str | None = None
    superseded_id: uuid.UUID | None = None
    expires_at: datetime | None = None


class BatchItemResult(_Response):
    index: int
    status: Literal["created", "updated", "duplicate", "rejected"]
    id: uuid.UUID | None = None
    superseded_id: uuid.UUID | None = None
    reasons: list[GateReasonOut] | None = None
    redactions: list[Redaction] = Field(default_factory=list)
    near_duplicates: list[NearDuplicate] = Field(default_factory=list)
    expires_at: datetime | None = None


class RememberBatchResponse(_Response):
    items: list[BatchItemResult]
    created: int
    duplicates: int
    rejected: int
    audit_id: uuid.UUID | None = None
    updated: int = 0


class RememberManyResult(BaseModel):
    """What ``remember_many`` did: one outcome per input item, in input order (``index`` is
    the item's position in the input), and the counts. ``audit_ids``: one per batch call."""

    items: list[BatchItemResult]
    created: int = 0
    updated: int = 0
    duplicates: int = 0
    rejected: int = 0
    audit_ids: list[uuid.UUID] = Field(default_factory=list)


# --- memories ---------------------------------------------------------------------------------


class RelatedOut(_Response):
    id: uuid.UUID
    type: str
    name: str
    relationship: str
    direction: Literal["outgoing", "incoming"]


class MemoryOut(_Response):
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
    key: str | None = None
    expires_at: datetime | None = None


class MemoryPage(_Response):
    items: list[MemoryOut]
    offset: int
    limit: int
    total: int
    has_more: bool


class MemoryPatch(_Request):
    content: str | None = None
    name: str | None = None
    type: MemoryType | None = None
    project: str | None = None
    domain: str | None = None
    tags: list[str] | None = None
    source: str | None = None
    origin: str | None = None
    url: str | None = None
    valid_at: datetime | None = None
    metadata: dict[str, Any] | None = None
    # A new expiry (None, when set: never expires), or a TTL from now; not both.
    expires_at: datetime | None = None
    ttl_seconds: int | None = None


class DeleteResponse(_Response):
    id: uuid.UUID
    deleted: bool
    audit_id: uuid.UUID | None = None


# --- context ----------------------------------------------------------------------------------


class ContextRequest(_Request):
    goal: str | None = None  # optional at layer="wake" only
    namespace: str
    intent: Intent = "build"
    layer: Layer = "recall"
    domain: str | None = None
    project: str | None = None
    agent_id: str | None = None
    limit: int | None = None
    include_related: bool = True
    related_limit: int = 3
    markdown_token_budget: int = 4000
    include_superseded: bool = False
    retrieval: Retrieval = "hybrid"


class ContextQuality(_Response):
    origin: str | None
    source: str | None
    url: str | None
    created_at: datetime | None
    updated_at: datetime | None
    valid_at: datetime | None
    project_id: str | None
    expires_at: datetime | None = None


class ContextRelated(_Response):
    id: uuid.UUID
    type: str
    name: str
    relationship: str
    direction: Literal["outgoing", "incoming"]
    distance: int = 1


class ContextItem(_Response):
    id: uuid.UUID
    type: str
    name: str
    content: str
    score: float
    facet: str
    reason: str
    source: str | None
    namespace: str
    quality: ContextQuality
    metadata: dict[str, Any]
    related: list[ContextRelated] = Field(default_factory=list)


class ContextSection(_Response):
    facet: str
    title: str
    items: list[ContextItem]


class ContextResponse(_Response):
    goal: str | None
    intent: str
    query: str
    domain: str | None
    project: str | None
    layer: str
    namespace: str
    retrieval: str
    sections: list[ContextSection]
    total_items: int
    gated_out: int
    usage_hint: str
    markdown: str
    markdown_tokens: int
    audit_id: uuid.UUID | None = None

    @property
    def items(self) -> list[ContextItem]:
        """Every item of the pack, section by section."""
        return [item for section in self.sections for item in section.items]


# --- artifacts --------------------------------------------------------------------------------


class ArtifactCreate(_Request):
    namespace: str
    name: str
    body: dict[str, Any] | list[Any]
    project: str | None = None
    summary: str | None = None


class ArtifactCreated(_Response):
    artifact_id: uuid.UUID
    memory_id: uuid.UUID
    namespace: str
    name: str
    summary: str
    size_bytes: int
    schema_keys: list[str]
    redactions: int = 0
    audit_id: uuid.UUID | None = None


class ArtifactFields(_Response):
    artifact_id: uuid.UUID
    namespace: str
    name: str
    summary: str
    size_bytes: int
    schema_keys: list[str]
    project: str | None
    created_at: datetime
    fields: dict[str, Any]
    missing: list[str]
    body: dict[str, Any] | list[Any] | None = None


class ArtifactDeleted(_Response):
    artifact_id: uuid.UUID
    memory_id: uuid.UUID | None
    deleted: bool
    audit_id: uuid.UUID | None = None


# --- audit ------------------------------------------------------------------------------------


class AuditEventSummary(_Response):
    id: uuid.UUID
    created_at: datetime
    key_id: uuid.UUID | None
    caller: str | None
    action: str
    namespace: str | None
    outcome: str
    status_code: int
    memory_ids: list[uuid.UUID]
    redaction_count: int
    rejection_count: int
    latency_ms: float


class AuditEvent(AuditEventSummary):
    request: dict[str, Any]
    details: dict[str, Any]


class AuditPage(_Response):
    offset: int
    limit: int
    total: int
    has_more: bool
    items: list[AuditEvent | AuditEventSummary]
    next_cursor: str | None = None


class RankedItem(_Response):
    id: uuid.UUID
    rank: int
    score: float | None = None


class RankChange(_Response):
    id: uuid.UUID
    before: int
    after: int


class PackDiff(_Response):
    added: list[RankedItem]
    dropped: list[RankedItem]
    rank_changes: list[RankChange]
    unchanged: int


class ReplayResponse(_Response):
    replayed: uuid.UUID
    audit_id: uuid.UUID | None = None
    pack: ContextResponse
    diff: PackDiff
    warnings: list[str] = Field(default_factory=list)


# --- keys -------------------------------------------------------------------------------------


class WhoAmI(_Response):
    org_id: str
    key_id: str
    key_name: str
    scopes: list[str]
    projects: list[str]
    namespace_prefixes: list[str]
    max_batch_items: int | None = None
    max_body_bytes: int | None = None


class ErrorBody(_Response):
    code: str
    message: str
    field: str | None = None


class ErrorResponse(_Response):
    error: ErrorBody


# --- tool results and assemble ----------------------------------------------------------------

Strategy = Literal["auto", "text", "json", "fields", "summary", "first_n"]
AssembleLayer = Literal["system", "user", "history", "memory", "task_state", "tool_results"]


class ToolResultRequest(_Request):
    """One tool's raw output for the envelope: redacted, then trimmed to ``budget_tokens``."""

    tool_call_id: str
    tool_name: str
    result: Any
    budget_tokens: int = 800
    strategy: Strategy = "auto"
    fields: list[str] | None = None


class ToolResultCut(_Response):
    what: Literal["lines", "items", "chars", "keys", "fields", "values", "tokens"]
    dropped: int
    detail: str


class RedactionCount(_Response):
    label: str
    count: int


class ToolResultResponse(_Response):
    """The tool message (``role``, ``tool_call_id``, ``content``) and what the envelope did."""

    role: Literal["tool"] = "tool"
    tool_call_id: str
    content: str
    tool_name: str
    strategy: Strategy
    content_type: Literal["json", "text"]
    tokenizer: str
    budget_tokens: int
    tokens_before: int
    tokens_after: int
    bytes_before: int
    bytes_after: int
    trimmed: bool
    cuts: list[ToolResultCut] = Field(default_factory=list)
    missing_fields: list[str] = Field(default_factory=list)
    redactions: list[RedactionCount] = Field(default_factory=list)
    audit_id: uuid.UUID | None = None

    def message(self) -> dict[str, str]:
        """The tool message alone, ready for a chat API's ``messages``."""
        return {"role": "tool", "tool_call_id": self.tool_call_id, "content": self.content}


class ToolCallFunction(_Request):
    name: str
    arguments: str = "{}"


class ToolCall(_Request):
    id: str
    type: Literal["function"] = "function"
    function: ToolCallFunction


class ChatMessage(_Request):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None


class TaskStateRef(_Request):
    artifact_id: uuid.UUID
    fields: list[str] | None = None
    namespace: str | None = None


class AssembleRequest(_Request):
    budget_tokens: int
    system: str | None = None
    user_message: str | None = None
    memory: ContextRequest | None = None
    task_state: list[TaskStateRef] = Field(default_factory=list)
    tool_results: list[ToolResultRequest] = Field(default_factory=list)
    messages: list[ChatMessage] = Field(default_factory=list)


class LayerReport(_Response):
    layer: AssembleLayer
    tokens: int
    requested_tokens: int
    messages: int
    status: Literal["kept", "trimmed", "dropped", "absent", "empty"]


class AssembleCut(_Response):
    layer: AssembleLayer
    action: Literal["dropped", "trimmed"]
    what: str
    tokens_saved: int
    reason: str


class ToolResultReport(_Response):
    tool_call_id: str
    tool_name: str
    strategy: Strategy
    budget_tokens: int
    tokens_before: int
    tokens_after: int
    cuts: list[ToolResultCut]
    missing_fields: list[str]
    redactions: list[RedactionCount]


class AssembleResponse(_Response):
    """The messages of one model call (OpenAI chat format) and the budget report."""

    messages: list[dict[str, Any]]
    budget_tokens: int
    used_tokens: int
    utilisation: float
    tokenizer: str
    message_overhead: int
    layers: list[LayerReport]
    cuts: list[AssembleCut]
    cut_order: list[AssembleLayer]
    tool_results: list[ToolResultReport]
    redactions: list[RedactionCount]
    synthesized_tool_call: bool = False
    memory_audit_id: uuid.UUID | None = None
    audit_id: uuid.UUID | None = None


# The server's component name for each model, for the contract test.
SCHEMAS: dict[str, type[BaseModel]] = {
    cls.__name__: cls
    for cls in (
        RelatedRef, RememberRequest, RememberBatchRequest, NearDuplicate, Redaction,
        GateReasonOut, RememberResponse, BatchItemResult, RememberBatchResponse, RelatedOut,
        MemoryOut, MemoryPage, MemoryPatch, DeleteResponse, ContextRequest, ContextQuality,
        ContextRelated, ContextItem, ContextSection, ContextResponse, ArtifactCreate,
        ArtifactCreated, ArtifactFields, ArtifactDeleted, AuditEventSummary, AuditEvent, AuditPage, RankedItem,
        RankChange, PackDiff, ReplayResponse, WhoAmI, ErrorBody, ErrorResponse,
        ToolResultRequest, ToolResultCut, RedactionCount, ToolResultResponse, ToolCallFunction,
        ToolCall, ChatMessage, TaskStateRef, AssembleRequest, LayerReport, AssembleCut,
        ToolResultReport, AssembleResponse,
    )
}
