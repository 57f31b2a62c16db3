"""LangChain tools ``remember`` / ``context`` in LangGraph's prebuilt ReAct agent, against a
live ``ctxpack serve``. The chat model is langchain-core's fake chat model, scripted to emit
tool calls: no LLM. Session 1's agent remembers a gotcha; session 2's agent, a new agent in a
new namespace, gets it back from ``context``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ctxpack_client import AsyncClient, Client
from ctxpack_client.integrations.langchain import ctxpack_tools
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.prebuilt import create_react_agent

GOTCHA = (
    "The integration tests hang when TMPDIR is on tmpfs: the upload fixture needs O_DIRECT, "
    "so set TMPDIR=/var/tmp before running them."
)


class ScriptedChatModel(GenericFakeChatModel):
    """The fake chat model, accepting the tools the agent binds (it answers from its script)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self


def script(*messages: AIMessage) -> Iterator[AIMessage]:
    return iter(messages)


def call(name: str, args: dict[str, Any], n: int) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call_{n}"}])


def tool_answers(result: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in result["messages"] if isinstance(m, ToolMessage)]


def test_react_agent_remembers_then_a_new_session_gets_it(cx: Client) -> None:
    client = cx
    first = create_react_agent(
        ScriptedChatModel(messages=script(
            call("remember", {"content": GOTCHA, "type": "gotcha", "key": "tests-tmpdir"}, 1),
            AIMessage(content="Noted for next time."),
        )),
        ctxpack_tools(client, namespace="dana:s1"),
    )
    done = first.invoke({"messages": [("user", "The tests hung again; figure out why and keep the lesson.")]})
    stored = tool_answers(done)
    assert stored[0].content.startswith("created memory "), stored[0].content
    assert "in dana" in stored[0].content  # scope "user": every later session of dana sees it

    second = create_react_agent(
        ScriptedChatModel(messages=script(
            call("context", {"goal": "run the integration tests"}, 2),
            AIMessage(content="Setting TMPDIR=/var/tmp first."),
        )),
        ctxpack_tools(client, namespace="dana:s2"),
    )
    result = second.invoke({"messages": [("user", "Run the integration tests.")]})
    pack = tool_answers(result)[0].content
    assert "TMPDIR=/var/tmp" in pack
    assert result["messages"][-1].content == "Setting TMPDIR=/var/tmp first."


async def test_async_agent_and_a_rejected_remember_goes_back_to_the_model(cx: Client) -> None:
    async with AsyncClient() as aclient:
        agent = create_react_agent(
            ScriptedChatModel(messages=script(
                call("remember", {"content": "ok"}, 1),
                call("remember", {"content": GOTCHA.replace("tmpfs", "a RAM disk"), "scope": "session"}, 2),
                AIMessage(content="Stored."),
            )),
            ctxpack_tools(cx, namespace="erin:s1", async_client=aclient),
        )
        result = await agent.ainvoke({"messages": [("user", "Keep the lesson.")]})
    rejected, stored = (m.content for m in tool_answers(result))
    assert rejected.startswith("Not stored, the write gate rejected it:"), rejected
    assert stored.startswith("created memory ") and "in erin:s1" in stored
