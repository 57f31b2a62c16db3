"""Structured logs: one JSON record per request with its id, route, status and latency, and
never memory content, a secret or an API key, whatever the call and however it fails."""

from __future__ import annotations

import json
import logging
import traceback

import httpx
import pytest

from service.logs import JsonFormatter
from tests.conftest import Key, McpConnect

CONTENT = "Quillfeather deploys roll back automatically when the canary's p99 doubles."
SECRET = "ghp_" + "Qz8Wx7Vc6Bn5Ml4Kj3Hg2Fd1Sa0Po9Iu8Yt7R"
PASSWORD = "corr3ct-h0rse-battery"


def everything_in(record: logging.LogRecord) -> str:
    """All a handler could print of a record: message, extras, exception and formatted."""
    parts = [record.getMessage(), json.dumps(vars(record), default=str)]
    if record.exc_info and record.exc_info[1] is not None:
        parts.append("".join(traceback.format_exception(*record.exc_info)))
    parts.append(JsonFormatter().format(record))
    return "\n".join(parts)


async def test_logs_carry_no_content_secret_or_key(
    client: httpx.AsyncClient, key: Key, mcp_connect: McpConnect, caplog: pytest.LogCaptureFixture
) -> None:
    # As configure_logging: httpx (here the test client, logging its URLs) at WARNING. Each
    # set_level also sets the capture handler's level, so the lowest goes last.
    caplog.set_level(logging.WARNING, logger="httpx")
    caplog.set_level(logging.DEBUG)  # every logger, the MCP SDK's and SQLAlchemy's too
    h = key.headers
    text = f"{CONTENT} The deploy bot uses {SECRET} and password={PASSWORD}."
    stored = await client.post(
        "/v1/remember", json={"namespace": "alice", "content": text}, headers=h
    )
    assert stored.status_code == 201, stored.text
    memory_id = stored.json()["id"]
    calls = [
        # a gate rejection, a validation error quoting content, an unknown field
        client.post("/v1/remember", json={"namespace": "alice", "content": SECRET}, headers=h),
        client.post(
            "/v1/remember", json={"namespace": "alice", "content": text, "nope": text}, headers=h
        ),
        client.post(
            "/v1/remember", json={"namespace": f"bad ns {SECRET}", "content": text}, headers=h
        ),
        client.post(
            "/v1/remember/batch",
            json={
                "items": [
                    {"namespace": "bob", "content": text},
                    {"namespace": "bob", "content": SECRET},
                ]
            },
            headers=h,
        ),
        client.get(f"/v1/memories/{memory_id}", headers=h),
        client.get("/v1/memories", params={"namespace": "alice", "tag": SECRET[:60]}, headers=h),
        client.patch(f"/v1/memories/{memory_id}", json={"content": text + " Updated."}, headers=h),
        client.patch(f"/v1/memories/{memory_id}", json={"content": f"{CONTENT}\x00"}, headers=h),
        client.post(
            "/v1/remember",
            json={"namespace": "alice", "content": text},
            headers={"Authorization": f"Bearer {key.key}x"},
        ),
        client.delete(f"/v1/memories/{memory_id}", headers=h),
    ]
    for call in calls:
        response = await call
        assert response.status_code < 500, response.text
    async with mcp_connect(key) as mcp:
        await mcp.call_tool("remember", {"namespace": "carol", "content": text})
        await mcp.call_tool("remember", {"namespace": "carol", "content": SECRET})

    records = caplog.records
    assert records
    for record in records:
        seen = everything_in(record)
        for needle in (CONTENT[:30], SECRET, PASSWORD, key.key):
            assert needle not in seen, (record.name, record.getMessage())

    requests = [r for r in records if r.name == "ctxpack.http" and r.getMessage() == "request"]
    assert len(requests) >= len(calls) + 1
    one = json.loads(JsonFormatter().format(requests[0]))
    assert {"request_id", "method", "route", "status", "latency_ms", "key_id"} <= set(one)
    assert one["route"] == "/v1/remember"
    assert one["status"] == 201
    assert one["key_id"] == str(key.key_id)
    routes = {r.route for r in requests}  # type: ignore[attr-defined]
    assert "/v1/memories/{memory_id}" in routes
    assert not any(memory_id in r for r in routes)
