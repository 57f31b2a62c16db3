"""Request and response models of POST /v1/assemble: the messages of one model call within one
token budget (shared by HTTP and MCP)."""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from service.schemas.context import ContextRequest
from service.schemas.tool_results import (
    CALL_ID,
    MAX_FIELDS,
    TOOL_NAME,
    RedactionCount,
    Strategy,
    ToolResultCut,
    ToolResultRequest,
)

Layer = Literal["system", "user", "history", "memory", "task_state", "tool_results"]
MAX_TEXT_CHARS = 400_000
MAX_MESSAGES = 500
MAX_TOOL_RESULTS = 64
MAX_TASK_STATE = 20


class ToolCallFunction(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=TOOL_NAME)
    arguments: str = Field(
        "{}", max_length=MAX_TEXT_CHARS, description="JSON text, as the model wrote it"
    )


class ToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=CALL_ID)
    type: Literal["function"] = "function"
    function: ToolCallFunction


class ChatMessage(BaseModel):
    """One message of the conversation so far, in OpenAI chat format."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = Field(None, max_length=MAX_TEXT_CHARS)
    name: str | None = Field(None, pattern=r"^[A-Za-z0-9_\-]{1,64}$")
    tool_calls: list[ToolCall] | None = Field(None, max_length=128)
    tool_call_id: str | None = Field(None, pattern=CALL_ID)

    @model_validator(mode="after")
    def _shape(self) -> ChatMessage:
        if self.role == "tool" and self.tool_call_id is None:
            raise ValueError("a tool message needs tool_call_id")
        if self.role != "tool" and self.tool_call_id is not None:
            raise ValueError("only a tool message has tool_call_id")
        if self.role != "assistant" and self.tool_calls:
            raise ValueError("only an assistant message has tool_calls")
        return self


class TaskStateRef(BaseModel):
    """An artifact of the task's state and the fields this call needs from it."""

    model_config = ConfigDict(extra="forbid")

    artifact_id: uuid.UUID
    fields: list[str] | None = Field(
        None,
        max_length=MAX_FIELDS,
        description="Top-level fields to resolve, as GET /v1/artifacts/{id}?fields=a,b does; "
        "absent: the whole body.",
    )
    namespace: str | None = Field(
        None,
        max_length=200,
        description="The reader's namespace: the artifact must live there or in an ancestor.",
    )


class AssembleRequest(BaseModel):
    """What one model call should see; ctxpack fits it into `budget_tokens`."""

    model_config = ConfigDict(extra="forbid")

    budget_tokens: int = Field(
        ge=64, le=1_000_000, description="The most tokens the messages may take, all layers"
    )
    system: str | None = Field(
        None, max_length=MAX_TEXT_CHARS, description="The system prompt: never cut (redacted)"
    )
    user_message: str | None = Field(
        None,
        max_length=MAX_TEXT_CHARS,
        description="The current user message: never cut (redacted)",
    )
    memory: ContextRequest | None = Field(
        None,
        description="The context pack to include: `goal` and `namespace` (and any option) as "
        "POST /v1/context takes them; its markdown budget is what is left.",
    )
    task_state: list[TaskStateRef] = Field(default_factory=list, max_length=MAX_TASK_STATE)
    tool_results: list[ToolResultRequest] = Field(
        default_factory=list,
        max_length=MAX_TOOL_RESULTS,
        description="Tool results, each through the envelope of POST /v1/tool-results",
    )
    messages: list[ChatMessage] = Field(
        default_factory=list,
        max_length=MAX_MESSAGES,
        description="The conversation so far, oldest first, including the assistant message "
        "whose `tool_calls` the tool results answer (its last message)",
    )


class LayerReport(BaseModel):
    layer: Layer
    tokens: int = Field(description="Tokens the layer takes in `messages`")
    requested_tokens: int = Field(description="Tokens it would have taken uncut")
    messages: int
    status: Literal["kept", "trimmed", "dropped", "absent", "empty"]


class AssembleCut(BaseModel):
    layer: Layer
    action: Literal["dropped", "trimmed"]
    what: str
    tokens_saved: int
    reason: str


class ToolResultReport(BaseModel):
    """What the envelope did to one tool result (its content is in `messages`)."""

    tool_call_id: str
    tool_name: str
    strategy: Strategy
    budget_tokens: int = Field(description="The budget it was trimmed to")
    tokens_before: int
    tokens_after: int
    cuts: list[ToolResultCut]
    missing_fields: list[str]
    redactions: list[RedactionCount]


class AssembleResponse(BaseModel):
    messages: list[dict[str, Any]] = Field(description="The messages, in OpenAI chat format")
    budget_tokens: int
    used_tokens: int = Field(
        description="Tokens of all messages: contents, tool calls, and `message_overhead` each"
    )
    utilisation: float = Field(description="used_tokens / budget_tokens")
    tokenizer: str
    message_overhead: int = Field(description="Tokens counted per message for the chat format")
    layers: list[LayerReport]
    cuts: list[AssembleCut] = Field(description="What was dropped or trimmed, and why")
    cut_order: list[Layer] = Field(description="The order layers are cut in when over budget")
    tool_results: list[ToolResultReport]
    redactions: list[RedactionCount] = Field(
        description="Secrets and PII replaced in every layer, by label (never the value)"
    )
    synthesized_tool_call: bool = Field(
        False,
        description="True when no message called the tool results, and an assistant message "
        "calling them was added so the sequence stays valid",
    )
    memory_audit_id: uuid.UUID | None = Field(
        None, description="The audit row of the context pack (replayable)"
    )
    audit_id: uuid.UUID | None = None
