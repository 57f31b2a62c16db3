"""Input models of the MCP tools that have no request body over HTTP.

``remember`` takes ``RememberRequest`` itself and ``context`` extends ``ContextRequest``: a
tool's schema is the HTTP body's schema. The list, delete and artifact endpoints take query
and path parameters, so their tools get a model here, with the same names, types and bounds.
"""

from __future__ import annotations

import uuid

from pydantic import BaseModel, ConfigDict, Field

from service.schemas.memories import MemoryType

MIN_MAX_BYTES = 512


class TextLimits(BaseModel):
    """Limits on a text result; the result says when and how it was cut."""

    max_bytes: int | None = Field(
        None,
        ge=MIN_MAX_BYTES,
        le=4_000_000,
        description="Largest result to return, in UTF-8 bytes. Lines are kept whole where "
        "possible and a closing `[truncated: ...]` line says what was cut.",
    )
    head: int | None = Field(
        None, ge=0, le=100_000, description="Keep only the first N lines (wins over tail)."
    )
    tail: int | None = Field(None, ge=0, le=100_000, description="Keep only the last N lines.")


class ListMemoriesInput(BaseModel):
    """Filters and paging of ``list_memories`` (the query of GET /v1/memories)."""

    model_config = ConfigDict(extra="forbid")

    namespace: str | None = Field(
        None,
        max_length=210,
        description="`alice:s1` for exactly that namespace, `alice:*` for the subtree, "
        "`*` or absent for everything the key may see.",
    )
    type: MemoryType | None = Field(None, description="Only memories of this type.")
    project: str | None = Field(None, max_length=128, description="Only this project.")
    agent_id: str | None = Field(None, max_length=128, description="Only this agent's diary.")
    tag: str | None = Field(None, max_length=64, description="Only memories with this tag.")
    offset: int = Field(
        0, ge=0, le=1_000_000, description="Skip this many memories (newest first)."
    )
    limit: int = Field(20, ge=1, le=200, description="Return at most this many memories.")
    max_bytes: int | None = Field(
        20_000,
        ge=MIN_MAX_BYTES,
        le=4_000_000,
        description="Byte budget of the whole result; memories past it are left for the next "
        "page (`has_more`, `next_offset`). null: no budget.",
    )


class ForgetInput(BaseModel):
    """The memory to erase (the path of DELETE /v1/memories/{id})."""

    model_config = ConfigDict(extra="forbid")

    id: uuid.UUID = Field(
        description="Id of the memory to erase, as returned by remember or context."
    )
