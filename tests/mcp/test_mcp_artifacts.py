"""recall_artifact: declared fields of an artifact, with byte and line limits."""

from __future__ import annotations

import json
import uuid

import httpx

from tests.conftest import Key, KeyFactory
from tests.mcp.conftest import Connect, structured

REPORT = {
    "suite": "auth",
    "passed": 41,
    "failed": 2,
    "failures": [
        {"test": f"test_refresh_{i}", "error": "AssertionError: " + "expected 200 got 400 " * 5}
        for i in range(40)
    ],
    "duration_s": 12.5,
}


async def store(client: httpx.AsyncClient, key: Key, namespace: str = "alice") -> str:
    response = await client.post(
        "/v1/artifacts",
        json={"namespace": namespace, "name": "auth test report", "body": REPORT},
        headers=key.headers,
    )
    assert response.status_code == 201, response.text
    artifact_id: str = response.json()["artifact_id"]
    return artifact_id


async def test_recall_declared_fields(
    connect: Connect, key: Key, client: httpx.AsyncClient
) -> None:
    artifact_id = await store(client, key)
    async with connect(key) as mcp:
        result = await mcp.call_tool(
            "recall_artifact",
            {"artifact_id": artifact_id, "fields": ["passed", "failed", "coverage"]},
        )
    assert not result.is_error, result
    body = structured(result)
    assert body["fields"] == {"passed": 41, "failed": 2}
    assert body["missing"] == ["coverage"]
    assert body["truncated"] is False
    assert "body" not in body
    assert json.loads(result.content[0].text)["fields"] == {"passed": 41, "failed": 2}
    assert result.meta is None or "context" not in result.meta


async def test_whole_body_is_cut_to_max_bytes(
    connect: Connect, key: Key, client: httpx.AsyncClient
) -> None:
    artifact_id = await store(client, key)
    async with connect(key) as mcp:
        default = await mcp.call_tool("recall_artifact", {"artifact_id": artifact_id})
        small = await mcp.call_tool(
            "recall_artifact", {"artifact_id": artifact_id, "max_bytes": 1000}
        )
        unlimited = await mcp.call_tool(
            "recall_artifact", {"artifact_id": artifact_id, "max_bytes": None}
        )
        head = await mcp.call_tool("recall_artifact", {"artifact_id": artifact_id, "head": 5})
    whole = structured(unlimited)
    assert whole["truncated"] is False
    assert whole["body"] == REPORT
    full_text = unlimited.content[0].text
    assert len(full_text.encode()) > 1000
    assert not structured(default)["truncated"]  # under the 20000-byte default
    cut = structured(small)
    text = small.content[0].text
    assert len(text.encode()) <= 1000
    assert cut["truncated"] is True
    assert cut["truncation"]["original_bytes"] == len(full_text.encode())
    assert cut["text"] == text
    assert "body" not in cut
    assert cut["name"] == "auth test report"
    assert text.splitlines()[-1].startswith("[truncated: kept the first")
    assert head.content[0].text.splitlines()[:5] == full_text.splitlines()[:5]


async def test_artifact_errors(
    connect: Connect, key: Key, make_key: KeyFactory, client: httpx.AsyncClient
) -> None:
    artifact_id = await store(client, key, namespace="alice:s1")
    other_org = await make_key()
    async with connect(other_org) as mcp:
        foreign = await mcp.call_tool("recall_artifact", {"artifact_id": artifact_id})
    async with connect(key) as mcp:
        unknown = await mcp.call_tool("recall_artifact", {"artifact_id": str(uuid.uuid4())})
        sibling = await mcp.call_tool(
            "recall_artifact", {"artifact_id": artifact_id, "namespace": "alice:s2"}
        )
        comma = await mcp.call_tool(
            "recall_artifact", {"artifact_id": artifact_id, "fields": ["a,b"]}
        )
        not_id = await mcp.call_tool("recall_artifact", {"artifact_id": "report"})
    for result in (foreign, unknown, sibling):
        assert result.is_error
        assert structured(result)["error"]["code"] == "not_found"
        assert structured(result)["error"]["status"] == 404
    assert structured(comma)["error"]["field"] == "fields"
    assert structured(not_id)["error"]["field"] == "artifact_id"
    rows = (
        await client.get("/v1/audit", params={"action": "artifact"}, headers=key.headers)
    ).json()["items"]
    outcomes = sorted((r["outcome"], r["status_code"]) for r in rows)
    assert outcomes == [
        ("ok", 201),
        ("refused", 404),
        ("refused", 404),
        ("rejected", 422),
        ("rejected", 422),
    ]
