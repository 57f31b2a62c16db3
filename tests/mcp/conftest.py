"""MCP fixtures: an in-memory MCP client bound to a key, against the session's app resources."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from mcp import Client

from service.mcp.backends import LocalBackend, bearer_key
from service.mcp.server import build_server
from tests.conftest import Key

Connect = Callable[[Key | str], AbstractAsyncContextManager[Client]]


@pytest.fixture
def connect(app: FastAPI) -> Connect:
    """``async with connect(key) as client``: an MCP client talking in memory to a server
    built on the app's resources (built once, in the app lifespan), acting as ``key``.

    Open it inside the test, not in a fixture: the client's task group must be entered and
    left in the same task."""
    state = app.state.ctx

    @asynccontextmanager
    async def open_client(key: Key | str) -> AsyncIterator[Client]:
        secret: str = getattr(key, "key", key)
        server = build_server(LocalBackend(state, bearer_key(secret)))
        async with Client(server, raise_exceptions=True) as client:
            yield client

    return open_client


def structured(result: Any) -> dict[str, Any]:
    assert isinstance(result.structured_content, dict), result
    return result.structured_content


ALL_TOOLS = {
    "wake", "context", "remember", "recall_artifact", "list_memories", "forget", "erase_namespace",
    "tool_result", "assemble",
}


async def exercise_every_tool(client: Client, base_url: str, key: str, namespace: str) -> None:
    """Call each tool once through ``client`` and check what a client relies on: the results,
    the transient-context ``_meta``, and tool errors with the HTTP codes. The artifact is
    stored over HTTP at ``base_url`` (a running server)."""
    assert {t.name for t in (await client.list_tools()).tools} == ALL_TOOLS
    fact = f"The {namespace} service retries webhooks three times with exponential backoff."
    stored = await client.call_tool(
        "remember", {"content": fact, "namespace": namespace, "type": "procedure"}
    )
    assert not stored.is_error, stored
    assert stored.meta is not None
    assert stored.meta["context"] == {"consumed": True}
    memory_id = structured(stored)["id"]

    goal = {"goal": "how are webhooks retried", "namespace": namespace}
    pack = await client.call_tool("context", goal)
    assert not pack.is_error, pack
    assert pack.meta is not None
    assert pack.meta["context"]["lifecycle"] == "transient"
    assert memory_id in pack.meta["context"]["summary"]
    assert memory_id in pack.content[0].text
    woken = await client.call_tool("wake", goal)
    assert not woken.is_error, woken
    assert woken.meta is not None
    assert {h["tool"] for h in woken.meta["contextHints"]} == {"context", "wake"}

    async with httpx.AsyncClient(base_url=base_url) as http:
        created = await http.post(
            "/v1/artifacts",
            json={"namespace": namespace, "name": "retry table", "body": {"tries": 3, "base_s": 2}},
            headers={"Authorization": f"Bearer {key}"},
        )
    assert created.status_code == 201, created.text
    artifact_id = created.json()["artifact_id"]
    fields = await client.call_tool(
        "recall_artifact", {"artifact_id": artifact_id, "fields": ["tries"]}
    )
    assert structured(fields)["fields"] == {"tries": 3}

    secret = "ghp_" + "M1n2B3v4C5x6Z7l8K9j0H1g2F3d4S5a6P7o8"
    log = "\n".join(
        [f"curl -H 'Authorization: Bearer {secret}' https://api.internal/x"]
        + [f"INFO request {i} served" for i in range(400)]
        + ["ERROR ledger refused the write", "exit code 1"]
    )
    trimmed = await client.call_tool(
        "tool_result",
        {"tool_call_id": "call_1", "tool_name": "logs", "result": log, "budget_tokens": 120},
    )
    assert not trimmed.is_error, trimmed
    envelope = structured(trimmed)
    assert envelope["role"] == "tool" and envelope["tool_call_id"] == "call_1"
    assert envelope["tokens_after"] <= 120 and secret not in str(envelope)
    assert "ERROR ledger refused the write" in trimmed.content[0].text
    assembled = await client.call_tool(
        "assemble",
        {
            "budget_tokens": 2000,
            "user_message": "why did the write fail?",
            "memory": goal,
            "tool_results": [{"tool_call_id": "call_2", "tool_name": "logs", "result": log}],
        },
    )
    assert not assembled.is_error, assembled
    messages = structured(assembled)["messages"]
    assert [m["role"] for m in messages][-2:] == ["assistant", "tool"]
    assert secret not in str(messages)

    listed = structured(await client.call_tool("list_memories", {"namespace": namespace}))
    assert memory_id in [m["id"] for m in listed["items"]]
    assert {"offset", "limit", "total", "has_more"} <= set(listed)
    gone = await client.call_tool("forget", {"id": memory_id})
    assert structured(gone)["deleted"] is True
    again = await client.call_tool("forget", {"id": memory_id})
    assert again.is_error
    assert structured(again)["error"]["code"] == "not_found"
    gated = await client.call_tool("remember", {"content": "ok", "namespace": namespace})
    assert structured(gated)["error"]["code"] == "gate_rejected"
    assert "context" not in (gated.meta or {})
