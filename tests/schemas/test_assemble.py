"""The assemble request's messages (schemas/assemble.py): the OpenAI chat shapes, with tool
fields only where a chat API accepts them."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from service.schemas.assemble import AssembleRequest, ChatMessage


def test_chat_shapes() -> None:
    ChatMessage(role="tool", content="ok", tool_call_id="call_1")
    ChatMessage.model_validate(
        {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f"}}]}
    )
    req = AssembleRequest(budget_tokens=64, memory={"goal": "g", "namespace": "alice"})  # type: ignore[arg-type]
    assert req.memory is not None and req.memory.namespace == "alice"


@pytest.mark.parametrize(
    "bad",
    [
        {"role": "tool", "content": "x"},
        {"role": "user", "content": "x", "tool_call_id": "c"},
        {"role": "user", "tool_calls": [{"id": "c", "function": {"name": "f"}}]},
        {"role": "assistant", "tool_calls": [{"id": "c d", "function": {"name": "f"}}]},
        {"role": "developer", "content": "x"},
    ],
)
def test_shapes_a_chat_api_refuses(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        ChatMessage.model_validate(bad)


def test_budget_bounds() -> None:
    with pytest.raises(ValidationError):
        AssembleRequest(budget_tokens=63)
    with pytest.raises(ValidationError):
        AssembleRequest.model_validate(
            {"budget_tokens": 100, "memory": {"namespace": "a::b", "goal": "g"}}
        )
