"""The envelope's request model (schemas/tool_results.py): ids and names as chat APIs and MCP
issue them, a budget within bounds, field paths without empty segments."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from service.schemas.tool_results import ToolResultRequest, ToolResultResponse


def test_valid_requests_and_their_defaults() -> None:
    req = ToolResultRequest(
        tool_call_id="toolu_01A09q90qw90lq917835lq9", tool_name="mcp/github.list", result=None
    )
    assert (req.budget_tokens, req.strategy, req.fields) == (800, "auto", None)
    fields = ToolResultRequest(
        tool_call_id="c", tool_name="t", result={}, fields=[" a.b ", "a.b", "c"]
    )
    assert fields.fields == ["a.b", "c"]


@pytest.mark.parametrize(
    "bad",
    [
        {"tool_call_id": "has space"},
        {"tool_call_id": ""},
        {"tool_name": "a b"},
        {"budget_tokens": 31},
        {"budget_tokens": 100_001},
        {"fields": []},
        {"fields": ["a..b"]},
        {"fields": ["x" * 301]},
        {"strategy": "head"},
        {"extra": 1},
    ],
)
def test_invalid_requests_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        ToolResultRequest.model_validate(
            {"tool_call_id": "c", "tool_name": "t", "result": "x", **bad}
        )


def test_the_tool_message() -> None:
    out = ToolResultResponse(
        tool_call_id="c",
        content="hi",
        tool_name="t",
        strategy="text",
        content_type="text",
        tokenizer="x",
        budget_tokens=800,
        tokens_before=1,
        tokens_after=1,
        bytes_before=2,
        bytes_after=2,
        trimmed=False,
    )
    assert out.message() == {"role": "tool", "tool_call_id": "c", "content": "hi"}
