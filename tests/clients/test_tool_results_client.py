"""ctxpack-client's ``tool_result`` and ``assemble``, sync and async, against a live
``ctxpack serve``; and ``enveloped`` LangChain tools in LangGraph's prebuilt ReAct agent driven
by the scripted fake chat model: the model only ever sees the enveloped output."""

from __future__ import annotations

import json
from typing import Any

from ctxpack_client import AsyncClient, Client
from ctxpack_client.integrations.langchain import enveloped
from ctxpack_client.models import ChatMessage, ToolResultRequest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent

from tests.clients.test_langchain_tools import ScriptedChatModel, script

SECRET = "ghp_" + "T1y2U3i4O5p6A7s8D9f0G1h2J3k4L5z6X7c8"
LOG = "\n".join(
    [f"curl -H 'Authorization: Bearer {SECRET}' https://ci.internal/api/jobs/42/log"]
    + [f"2026-11-26 10:{i // 60 % 60:02d}:{i % 60:02d} INFO step {i} ok" for i in range(3000)]
    + ["FAILED tests/test_billing.py::test_refund_rounding - AssertionError", "exit code 1"]
)
PODS = {
    "items": [
        {"metadata": {"name": f"web-{i}"}, "status": {"phase": "Running" if i != 33 else "Failed"}}
        for i in range(200)
    ]
}


def test_tool_result_and_assemble_sync(cx: Client) -> None:
    env = cx.tool_result("call_1", "ci_log", LOG, budget_tokens=300)
    assert env.tool_call_id == "call_1" and env.tokens_after <= 300 < env.tokens_before
    assert SECRET not in env.content and env.redactions[0].label == "GITHUB_TOKEN"
    assert env.message() == {"role": "tool", "tool_call_id": "call_1", "content": env.content}
    nan = cx.tool_result("call_2", "metrics", {"loss": float("nan")})
    assert json.loads(nan.content) == {"loss": "NaN"}
    picked = cx.tool_result(ToolResultRequest(
        tool_call_id="call_3", tool_name="kubectl", result=PODS, fields=["items.metadata.name"]
    ))
    assert picked.strategy == "fields" and "phase" not in picked.content

    out = cx.assemble(
        2000,
        system="You fix CI.",
        user_message="Why did the build fail?",
        messages=[ChatMessage(role="assistant", tool_calls=[
            {"id": "call_9", "function": {"name": "ci_log", "arguments": "{}"}}
        ])],
        tool_results=[ToolResultRequest(tool_call_id="call_9", tool_name="ci_log", result=LOG)],
    )
    assert [m["role"] for m in out.messages] == ["system", "user", "assistant", "tool"]
    assert "FAILED tests/test_billing.py::test_refund_rounding" in out.messages[-1]["content"]
    assert out.used_tokens <= 2000 and SECRET not in json.dumps(out.messages)


async def test_tool_result_and_assemble_async(ctxpack_env: str) -> None:
    async with AsyncClient() as client:
        env = await client.tool_result("call_1", "ci_log", LOG, budget_tokens=200)
        assert env.tokens_after <= 200 and SECRET not in env.content
        out = await client.assemble(1000, user_message="go", tool_results=[
            {"tool_call_id": "c1", "tool_name": "ci_log", "result": LOG, "budget_tokens": 200}
        ])
        assert out.synthesized_tool_call and out.messages[-1]["tool_call_id"] == "c1"


@tool
def ci_log(job: int) -> str:
    """The log of a CI job."""
    return LOG


@tool
def list_pods(namespace: str) -> dict[str, Any]:
    """The pods of a Kubernetes namespace, as kubectl get pods -o json prints them."""
    return PODS


def _call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])


def _tool_messages(result: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in result["messages"] if isinstance(m, ToolMessage)]


def test_react_agent_sees_only_the_enveloped_output(cx: Client) -> None:
    model = ScriptedChatModel(messages=script(
        AIMessage(content="", tool_calls=[
            {"name": "ci_log", "args": {"job": 42}, "id": "call_a"},
            {"name": "list_pods", "args": {"namespace": "prod"}, "id": "call_b"},
        ]),
        AIMessage(content="test_refund_rounding fails; web-33 is down."),
    ))
    agent = create_react_agent(model, enveloped([ci_log, list_pods], cx, budget_tokens=400))
    result = agent.invoke({"messages": [("user", "Why is prod broken?")]})
    log_msg, pods_msg = _tool_messages(result)
    assert (log_msg.tool_call_id, pods_msg.tool_call_id) == ("call_a", "call_b")
    assert "FAILED tests/test_billing.py::test_refund_rounding - AssertionError" in log_msg.content
    assert log_msg.response_metadata["ctxpack"]["tokens_after"] <= 400
    assert log_msg.response_metadata["ctxpack"]["redactions"] == [{"label": "GITHUB_TOKEN", "count": 1}]
    pods = json.loads(pods_msg.content)  # still JSON, the failed pod kept
    assert any(isinstance(p, dict) and p["metadata"]["name"] == "web-33" for p in pods["items"])
    assert len(str(result["messages"])) < len(LOG)  # the raw log is nowhere in the state
    assert SECRET not in str(result["messages"])


async def test_async_agent_with_fields(cx: Client) -> None:
    model = ScriptedChatModel(messages=script(
        _call("list_pods", {"namespace": "prod"}, "call_c"),
        AIMessage(content="done"),
    ))
    async with AsyncClient() as aclient:
        tools = enveloped(
            [list_pods], cx, async_client=aclient, fields={"list_pods": ["items.status.phase"]}
        )
        result = await create_react_agent(model, tools).ainvoke({"messages": [("user", "pods?")]})
    [msg] = _tool_messages(result)
    assert msg.tool_call_id == "call_c"
    assert "web-" not in msg.content and "Failed" in msg.content
