"""The assembly rules that need no database (domain/assemble.py): the conversation split
into droppable turns and the call the tool results answer; a sequence a chat API would
refuse is a 422 naming the message; the budget's message counts."""

from __future__ import annotations

from typing import Any

import pytest

from service.domain.assemble import (
    CUT_ORDER,
    MESSAGE_OVERHEAD,
    _Budget,
    plan_conversation,
    scanned_parts,
)
from service.domain.scan_bound import check_scan_bound
from service.embedding.fake import FakeEmbedder
from service.errors import InvalidInput, PayloadTooLarge
from service.schemas.assemble import AssembleRequest, ChatMessage
from service.schemas.tool_results import ToolResultRequest


def msg(role: str, content: str | None = "x", **kw: Any) -> ChatMessage:
    return ChatMessage(role=role, content=content, **kw)  # type: ignore[arg-type]


def call(*ids: str) -> ChatMessage:
    return msg(
        "assistant",
        None,
        tool_calls=[{"id": i, "function": {"name": "run", "arguments": "{}"}} for i in ids],
    )


def answer(call_id: str) -> ChatMessage:
    return msg("tool", "ok", tool_call_id=call_id)


def result(call_id: str) -> ToolResultRequest:
    return ToolResultRequest(tool_call_id=call_id, tool_name="run", result="ok")


def test_turns_keep_each_call_with_its_answers_and_the_last_call_is_held_back() -> None:
    plan = plan_conversation(
        [msg("user"), call("a", "b"), answer("b"), answer("a"), msg("assistant"), call("c", "d")],
        [result("d"), result("c")],
    )
    assert [[m["role"] for m in t] for t in plan.turns] == [
        ["user"],
        ["assistant", "tool", "tool"],
        ["assistant"],
    ]
    assert plan.call is not None and [c["id"] for c in plan.call["tool_calls"]] == ["c", "d"]
    assert plan.order == ["c", "d"]  # the calls' order, not the results'
    assert not plan.synthesized


def test_some_calls_answered_in_messages_the_rest_by_tool_results() -> None:
    plan = plan_conversation([msg("user"), call("a", "b"), answer("a")], [result("b")])
    assert plan.answered[0]["tool_call_id"] == "a" and plan.order == ["b"]


def test_results_without_a_calling_message_get_one() -> None:
    plan = plan_conversation([msg("user")], [result("a"), result("b")])
    assert plan.synthesized and plan.order == ["a", "b"]
    assert plan.call is not None
    assert [c["function"]["name"] for c in plan.call["tool_calls"]] == ["run", "run"]


@pytest.mark.parametrize(
    ("messages", "results", "field"),
    [
        ([answer("a")], [], "messages.0.tool_call_id"),
        ([call("a"), answer("a"), answer("a")], [], "messages.2.tool_call_id"),
        ([call("a"), msg("user")], [], "messages.0.tool_calls"),
        ([call("a")], [], "messages.0.tool_calls"),
        ([call("a"), msg("user")], [result("a")], "messages.1"),
        ([call("a")], [result("a"), result("b")], "tool_results.1.tool_call_id"),
        ([call("a"), answer("a")], [result("a")], "tool_results.0.tool_call_id"),
        ([], [result("a"), result("a")], "tool_results.1.tool_call_id"),
    ],
)
def test_a_sequence_a_chat_api_refuses_is_422_naming_where(
    messages: list[ChatMessage], results: list[ToolResultRequest], field: str
) -> None:
    with pytest.raises(InvalidInput) as err:
        plan_conversation(messages, results)
    assert err.value.details["field"] == field


def test_a_message_costs_its_content_its_calls_and_the_overhead() -> None:
    count = FakeEmbedder().count_tokens
    budget = _Budget(count)
    plain = {"role": "user", "content": "hello there"}
    assert budget.tokens(plain) == count("hello there") + MESSAGE_OVERHEAD
    calling = {"role": "assistant", "content": None, "tool_calls": [{"id": "a"}]}
    assert budget.tokens(calling) > count("") + MESSAGE_OVERHEAD
    assert CUT_ORDER == ("history", "memory", "task_state", "tool_results")


def test_the_scanned_parts_name_every_text_the_call_redacts_or_checks() -> None:
    req = AssembleRequest(
        budget_tokens=1000,
        system="s",
        user_message="u",
        messages=[msg("user"), call("a")],
        tool_results=[result("a")],
        memory={"namespace": "n", "goal": "g"},  # type: ignore[arg-type]
    )
    paths = [path for path, _ in scanned_parts(req)]
    assert paths == [
        "system", "user_message", "messages.0.content", "messages.1.content",
        "messages.1.tool_calls.0.id", "messages.1.tool_calls.0.function.name",
        "messages.1.tool_calls.0.function.arguments",
        "tool_results.0.result", "tool_results.0.fields", "tool_results.0.tool_call_id",
        "tool_results.0.tool_name", "memory.goal", "memory.domain",
    ]
    # 128 calls with ids of about 200 characters: 25 KB of identifiers to check
    ids_only = AssembleRequest(
        budget_tokens=1000, messages=[call(*[f"{k}-" + "i" * 195 for k in range(128)])]
    )
    with pytest.raises(PayloadTooLarge) as over:
        check_scan_bound(scanned_parts(ids_only), 20_000, "less")
    assert over.value.details["field"] == "messages"
