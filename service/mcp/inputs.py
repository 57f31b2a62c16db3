"""Input models of the MCP tools that have no request body over HTTP.

``remember`` takes ``RememberRequest`` itself and ``context`` extends ``ContextRequest``: a
tool's schema is the HTTP body's schema. The list, delete and artifact endpoints take query
and path parameters, so their tools get a model here, with the same names, types and bounds.
"""

from __future__ import annotations

import re
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from service.errors import InvalidInput
from service.schemas.artifacts import ArtifactQuery
from service.schemas.context import ContextRequest
from service.schemas.lifecycle import NamespaceRef
from service.schemas.memories import MemoryQuery, MemoryRef, MemoryType

MIN_MAX_BYTES = 512
_BAD_TEXT = re.compile("[\x00\ud800-\udfff]")


def unstorable_text(arguments: Any) -> InvalidInput | None:
    """A 422 naming the first string (key or value) Postgres cannot store: a NUL or a lone
    surrogate. Over HTTP the app's JSON guard refuses these before any work; stdio and
    in-process clients reach the tools directly, so the tools check the same."""
    todo: list[tuple[tuple[str, ...], Any]] = [((), arguments)]
    while todo:
        path, item = todo.pop()
        texts = [(path, item)] if isinstance(item, str) else []
        if isinstance(item, dict):
            texts = [((*path, str(k)), k) for k in item if isinstance(k, str)]
            todo.extend(((*path, str(k)), v) for k, v in item.items())
        elif isinstance(item, list):
            todo.extend(((*path, str(i)), v) for i, v in enumerate(item))
        for where, text in texts:
            found = _BAD_TEXT.search(text)
            if found is not None:
                field = ".".join(where) or "arguments"
                what = "NUL characters" if found.group() == "\x00" else "lone surrogates"
                return InvalidInput(field, f"{field}: {what} are not allowed in text")
    return None


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
    key: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        description="The current memory written under this key (give `namespace` exactly).",
    )
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

    def request(self) -> MemoryQuery:
        """The query this call stands for."""
        return MemoryQuery.model_validate(self.model_dump(exclude={"max_bytes"}))


class ForgetInput(BaseModel):
    """The memory to erase (the path of DELETE /v1/memories/{id})."""

    model_config = ConfigDict(extra="forbid")

    id: uuid.UUID = Field(
        description="Id of the memory to erase, as returned by remember or context."
    )

    def request(self) -> MemoryRef:
        return MemoryRef(memory_id=self.id)


class EraseNamespaceInput(BaseModel):
    """The namespace subtree to erase (the path of DELETE /v1/namespaces/{namespace})."""

    model_config = ConfigDict(extra="forbid")

    namespace: str = Field(max_length=200, description="`user[:session[:task]]`: it and everything under it")
    confirm: str = Field(
        max_length=200,
        description="The same namespace again: a guard against erasing the wrong one.",
    )

    def request(self) -> NamespaceRef:
        """The namespace to erase, once ``confirm`` repeats it."""
        if self.confirm != self.namespace:
            raise InvalidInput("confirm", "confirm must repeat the namespace to erase")
        return NamespaceRef(namespace=self.namespace)


class ContextInput(TextLimits, ContextRequest):
    """``ContextRequest`` (the body of POST /v1/context) plus limits on the returned text.

    The ``context`` tool always takes a goal (its schema says so); ``wake`` does not."""

    goal: str = Field(
        max_length=4000, description="What the agent is trying to accomplish, in words."
    )

    def request(self) -> ContextRequest:
        """The HTTP body this call stands for."""
        return ContextRequest.model_validate(
            self.model_dump(exclude={"max_bytes", "head", "tail"}, exclude_unset=True)
        )


class WakeInput(ContextInput):
    """``context`` at the wake layer: the goal is optional."""

    goal: str | None = Field(  # type: ignore[assignment]
        None,
        max_length=4000,
        description="Optional: what the session is about (the user's first request). It "
        "pulls related items forward; without it you get the default working set.",
    )
    layer: Literal["wake"] = Field("wake", description="Always `wake`.")

    def request(self) -> ContextRequest:
        body = self.model_dump(exclude={"max_bytes", "head", "tail"}, exclude_unset=True)
        return ContextRequest.model_validate({**body, "layer": "wake"})


class RecallArtifactInput(TextLimits):
    """The artifact and the fields to read (GET /v1/artifacts/{id}?fields=a,b&namespace=)."""

    model_config = ConfigDict(extra="forbid")

    artifact_id: uuid.UUID = Field(
        description="The artifact's id, as a context pack shows it: `(artifact <id>)`."
    )
    fields: list[str] | None = Field(
        None,
        min_length=1,
        max_length=100,
        description="Top-level field names to read (the pack lists them as `Fields:`): from "
        "the object, or per field from the first list item that has it. Absent: the whole body.",
    )
    namespace: str | None = Field(
        None,
        max_length=200,
        description="Your namespace: the artifact must live there or in an ancestor, as in a pack.",
    )
    max_bytes: int | None = Field(
        20_000,
        ge=MIN_MAX_BYTES,
        le=4_000_000,
        description="Largest result to return, in UTF-8 bytes (default 20000; null: no limit). "
        "Lines are kept whole where possible and a closing `[truncated: ...]` line says what "
        "was cut.",
    )

    @field_validator("fields")
    @classmethod
    def _fields(cls, value: list[str] | None) -> list[str] | None:
        for name in value or []:
            if not name.strip() or "," in name or len(name) > 200:
                raise ValueError("each field is a name of 1-200 characters without commas")
        return value

    def fields_param(self) -> str | None:
        """The ``fields`` query parameter of the HTTP endpoint."""
        return ",".join(self.fields) if self.fields else None

    def request(self) -> ArtifactQuery:
        """The read this call stands for."""
        return ArtifactQuery(
            artifact_id=self.artifact_id, fields=self.fields_param(), namespace=self.namespace
        )
