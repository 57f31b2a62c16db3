"""Request and response models of POST /v1/tool-results, the tool-result envelope (shared by
HTTP, MCP and POST /v1/assemble, whose ``tool_results`` are a list of these requests)."""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Strategy = Literal["auto", "text", "json", "fields", "summary", "first_n"]

MIN_BUDGET_TOKENS = 32
MAX_BUDGET_TOKENS = 100_000
MAX_FIELDS = 100
# A tool call id as the chat APIs issue them (``call_7a3f``, ``toolu_01…``), and a tool name
# as function-calling and MCP name them.
CALL_ID = r"^[A-Za-z0-9_.:\-]{1,200}$"
TOOL_NAME = r"^[A-Za-z0-9_.:/\-]{1,128}$"


class ToolResultRequest(BaseModel):
    """One tool's raw output, to pass through the envelope before a model sees it: redacted
    first, then trimmed to a token budget, routed to its ``tool_call_id``."""

    model_config = ConfigDict(extra="forbid")

    tool_call_id: str = Field(
        pattern=CALL_ID, description="The id of the tool call this result answers"
    )
    tool_name: str = Field(pattern=TOOL_NAME, description="The tool that produced it")
    result: Any = Field(
        description="The tool's output: text, or any JSON value (a JSON text is read as JSON). "
        'NaN and Infinity are rendered as the strings "NaN", "Infinity", "-Infinity".'
    )
    budget_tokens: int = Field(
        800,
        ge=MIN_BUDGET_TOKENS,
        le=MAX_BUDGET_TOKENS,
        description="The most tokens `content` may take (the context pack's tokenizer).",
    )
    strategy: Strategy = Field(
        "auto",
        description="`auto` (default): `fields` when fields are given, `json` for JSON, "
        "`text` for text. `text`: head, tail and the lines that carry errors (tracebacks, "
        "ERROR, FAILED, exit codes), with a marker where lines were dropped. `json`: long "
        "arrays keep their first items (and items that carry errors) and say how many were "
        "dropped; long strings are shortened; keys are kept. `fields`: only the named paths. "
        "`summary`: the shape (types, sizes, keys). `first_n`: the first tokens only.",
    )
    fields: list[str] | None = Field(
        None,
        max_length=MAX_FIELDS,
        description="Paths to keep from a JSON result, dotted: `status.phase`; on a list a "
        "name applies to every item (`items.metadata.name`) and a number picks one "
        "(`items.0.name`); `*` matches every key.",
    )

    @field_validator("fields")
    @classmethod
    def _fields(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        names = list(dict.fromkeys(f.strip() for f in value if f.strip()))
        if not names:
            raise ValueError("fields must name at least one path")
        for name in names:
            if len(name) > 300:
                raise ValueError("a field path is at most 300 characters")
            if any(not part for part in name.split(".")):
                raise ValueError(f"empty segment in field path {name!r}")
        return names


class ToolResultCut(BaseModel):
    """One kind of cut the envelope made."""

    what: Literal["lines", "items", "chars", "keys", "fields", "values", "tokens"] = Field(
        description="What was dropped: lines of text, array items, characters of strings, "
        "object keys, unrequested fields, nested values summarised to their shape, or tokens "
        "past a first-n cut"
    )
    dropped: int = Field(description="How many")
    detail: str = Field(description="Where and why, in words")


class RedactionCount(BaseModel):
    label: str
    count: int


class ToolResultResponse(BaseModel):
    """The OpenAI-style tool message (`role`, `tool_call_id`, `content`), and what the
    envelope did to get it there."""

    role: Literal["tool"] = "tool"
    tool_call_id: str
    content: str = Field(description="What the model should see: redacted, within the budget")
    tool_name: str
    strategy: Strategy = Field(description="The strategy applied")
    content_type: Literal["json", "text"] = Field(
        description="`json`: `content` is valid JSON; `text`: plain text"
    )
    tokenizer: str = Field(description="The tokenizer the budget and the counts use")
    budget_tokens: int
    tokens_before: int = Field(description="Tokens of the whole result, redacted, untrimmed")
    tokens_after: int = Field(description="Tokens of `content`")
    bytes_before: int
    bytes_after: int
    trimmed: bool
    cuts: list[ToolResultCut] = Field(default_factory=list)
    missing_fields: list[str] = Field(
        default_factory=list, description="Requested paths the result does not have"
    )
    redactions: list[RedactionCount] = Field(
        default_factory=list, description="Secrets and PII replaced, by label (never the value)"
    )
    audit_id: uuid.UUID | None = None

    def message(self) -> dict[str, str]:
        """The tool message alone, ready for a chat API's ``messages``."""
        return {"role": "tool", "tool_call_id": self.tool_call_id, "content": self.content}
