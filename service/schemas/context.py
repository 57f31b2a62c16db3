"""Request and response models of POST /v1/context (shared by HTTP and MCP)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from service.schemas.namespaces import namespace_field

Intent = Literal["build", "plan", "ideate", "research", "debug", "decide", "learn", "general"]
Layer = Literal["recall", "wake", "deep_search"]
Retrieval = Literal["hybrid", "lexical", "vector"]

SLUG = r"^[A-Za-z0-9_.\-]{1,128}$"
MAX_LIMIT = 50
MAX_RELATED_LIMIT = 10
MAX_MARKDOWN_TOKENS = 32000


def _storable(value: str) -> str:
    """Text Postgres can take: no NUL, no lone surrogate."""
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode (no lone surrogates)") from None
    return value


class ContextRequest(BaseModel):
    """What an agent is about to do, and where it works."""

    model_config = ConfigDict(extra="forbid")

    goal: str | None = Field(
        None,
        max_length=4000,
        description="What the agent is trying to accomplish, in words. Required, except for "
        "`layer: wake`, where it only re-ranks the session-start working set.",
    )
    namespace: str = Field(
        max_length=200,
        description="Where the agent works: `user[:session[:task]]`. The pack draws on this "
        "namespace and its ancestors, never on siblings.",
    )
    intent: Intent = Field(
        "build", description="The goal's mode; decides which facets come first and get more room."
    )
    layer: Layer = Field(
        "recall",
        description="`wake`: the session-start working set (8 items by default): in-flight "
        "tasks, binding rules, standing decisions, gotchas, procedures, user preferences and "
        "recent work, never gated into emptiness; byte-stable; the goal is optional. "
        "`recall`: the working set. `deep_search`: broad, more candidates, related memories "
        "pulled in through the graph.",
    )
    domain: str | None = Field(
        None,
        max_length=128,
        description="Domain or topic: added to the query, and memories "
        "of this domain are ranked slightly higher.",
    )
    project: str | None = Field(
        None, pattern=SLUG, description="This project's memories plus those with no project."
    )
    agent_id: str | None = Field(
        None, pattern=SLUG, description="Include this agent's diary memories (other diaries never)."
    )
    limit: int | None = Field(
        None,
        description="Most items in the pack, clamped to 1-50. Default: 24 (wake: 8, "
        "deep_search: 50).",
    )
    include_related: bool = Field(
        True, description="List each item's one-hop neighbours from the relation graph."
    )
    related_limit: int = Field(3, description="Neighbours listed per item, clamped to 0-10.")
    markdown_token_budget: int = Field(
        4000,
        ge=1,
        le=MAX_MARKDOWN_TOKENS,
        description="Tokens the `markdown` view may take (the embedder's tokenizer); the "
        "lowest-ranked items are left out of the markdown first.",
    )
    include_superseded: bool = Field(False, description="Also consider superseded memories.")
    retrieval: Retrieval = Field(
        "hybrid",
        description="Evaluation knob: `hybrid` (vector + full text, the default), `lexical` "
        "(full-text BM25 only) or `vector` (cosine only). Use hybrid outside benchmarks.",
    )

    @field_validator("goal")
    @classmethod
    def _goal(cls, value: str | None) -> str | None:
        return None if value is None else _storable(value).strip()

    @model_validator(mode="after")
    def _goal_unless_wake(self) -> ContextRequest:
        """A goal is required, and must not be blank, except at the wake layer, where a
        missing or blank goal means "no goal"."""
        if self.goal:
            return self
        if self.layer == "wake":
            self.goal = None
            return self
        message = (
            "goal is required unless layer is `wake`"
            if self.goal is None
            else "goal must not be empty"
        )
        raise ValidationError.from_exception_data(
            type(self).__name__,
            [
                InitErrorDetails(
                    type=PydanticCustomError("goal_required", message),
                    loc=("goal",),
                    input=self.goal,
                )
            ],
        )

    @field_validator("domain")
    @classmethod
    def _domain(cls, value: str | None) -> str | None:
        return None if value is None else _storable(value).strip() or None

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        return namespace_field(value)

    @field_validator("limit")
    @classmethod
    def _limit(cls, value: int | None) -> int | None:
        return None if value is None else max(1, min(MAX_LIMIT, value))

    @field_validator("related_limit")
    @classmethod
    def _related_limit(cls, value: int) -> int:
        return max(0, min(MAX_RELATED_LIMIT, value))


class ContextQuality(BaseModel):
    """Where an item came from and how fresh it is, to judge how far to trust it."""

    origin: str | None
    source: str | None
    url: str | None
    created_at: datetime | None
    updated_at: datetime | None
    valid_at: datetime | None
    project_id: str | None
    expires_at: datetime | None = None


class ContextRelated(BaseModel):
    """A one-hop neighbour of an item in the relation graph (same scope rules as items)."""

    id: uuid.UUID
    type: str
    name: str
    relationship: str
    direction: Literal["outgoing", "incoming"]
    distance: int = 1


class ContextItem(BaseModel):
    id: uuid.UUID
    type: str
    name: str
    content: str = Field(description="The memory; for an artifact, its summary (never the body).")
    score: float = Field(
        description="Rank score: relevance x intent prior x recency (wake: the goal's "
        "relevance when the goal matched the item, else 0)."
    )
    facet: str
    reason: str = Field(description="Why it was chosen, in words.")
    source: str | None
    namespace: str
    quality: ContextQuality
    metadata: dict[str, Any]
    related: list[ContextRelated] = Field(default_factory=list)


class ContextSection(BaseModel):
    facet: str
    title: str
    items: list[ContextItem]


class ContextResponse(BaseModel):
    goal: str | None = Field(description="The goal as given; null for a wake pack without one.")
    intent: str
    query: str = Field(description="The retrieval query derived from the goal (and domain).")
    domain: str | None
    project: str | None
    layer: str
    namespace: str
    retrieval: str
    sections: list[ContextSection] = Field(
        description="Facet sections, the intent's facets first (wake: the fixed wake order: "
        "active_work, constraints, decisions, gotchas, procedures, preferences, recent_memory)."
    )
    total_items: int
    gated_out: int = Field(
        description="Candidates left out because they fell below the relevance floor."
    )
    usage_hint: str
    markdown: str = Field(description="The pack rendered for a prompt, within the token budget.")
    markdown_tokens: int
    audit_id: uuid.UUID | None = None
