"""Artifacts: stored JSON, resolved field by field, referenced (never inlined) by packs."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import select

from service.store.models import AuditEvent, Memory
from tests.conftest import Key, KeyFactory

REPORTS = [
    {"title": "Cloud forecast A", "url": "https://a.example/r", "cagr": "18.4%"},
    {"title": "Cloud forecast B", "url": "https://b.example/r", "market_size": "$832B"},
    {"title": "Cloud forecast C", "url": "https://c.example/r", "market_size": "$900B"},
]


async def create(client: httpx.AsyncClient, key: Key, **body: Any) -> dict[str, Any]:
    body.setdefault("namespace", "alice:s1")
    body.setdefault("name", "cloud market search results")
    response = await client.post("/v1/artifacts", json=body, headers=key.headers)
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


async def test_store_object_and_declare_fields(client: httpx.AsyncClient, key: Key) -> None:
    body = {"market_size": "$832B", "cagr": "18.4% CAGR", "regions": {"emea": 0.3}, "none": None}
    created = await create(client, key, body=body, summary="2026 cloud market statistics")
    assert created["summary"] == "2026 cloud market statistics"
    assert created["schema_keys"] == ["market_size", "cagr", "regions", "none"]
    assert created["size_bytes"] == len(
        b'{"market_size":"$832B","cagr":"18.4% CAGR","regions":{"emea":0.3},"none":null}'
    )
    url = f"/v1/artifacts/{created['artifact_id']}"
    got = (
        await client.get(
            url, params={"fields": "cagr,market_size,absent,none"}, headers=key.headers
        )
    ).json()
    assert got["fields"] == {"cagr": "18.4% CAGR", "market_size": "$832B", "none": None}
    assert list(got["fields"]) == ["cagr", "market_size", "none"]
    assert got["missing"] == ["absent"]
    assert got["body"] is None
    whole = (await client.get(url, headers=key.headers)).json()
    assert whole["body"] == body
    assert whole["fields"] == {}


async def test_list_fields_come_from_the_first_item_having_them(
    client: httpx.AsyncClient, key: Key
) -> None:
    created = await create(client, key, body=[1, "x", *REPORTS])
    assert created["schema_keys"] == ["title", "url", "cagr", "market_size"]
    assert created["summary"].startswith("cloud market search results: JSON list of 5 items")
    got = (
        await client.get(
            f"/v1/artifacts/{created['artifact_id']}",
            params={"fields": "market_size, url,cagr"},
            headers=key.headers,
        )
    ).json()
    assert got["fields"] == {
        "market_size": "$832B",
        "url": "https://a.example/r",
        "cagr": "18.4%",
    }
    assert got["missing"] == []


async def test_artifact_is_scoped_and_404_outside(
    client: httpx.AsyncClient, key: Key, make_key: KeyFactory
) -> None:
    created = await create(client, key, body={"a": 1}, project="p1")
    url = f"/v1/artifacts/{created['artifact_id']}"
    other_org = await make_key()
    wrong_prefix = await make_key(org=key.org, namespaces=["bob"])
    wrong_project = await make_key(org=key.org, projects=["p2"])
    right_project = await make_key(org=key.org, scopes=["read"], projects=["p1"])
    for outsider in (other_org, wrong_prefix, wrong_project):
        response = await client.get(url, params={"fields": "a"}, headers=outsider.headers)
        assert response.status_code == 404, outsider
        assert response.json()["error"]["code"] == "not_found"
    assert (await client.get(url, params={"fields": "a"}, headers=right_project.headers)).json()[
        "fields"
    ] == {"a": 1}
    missing = await client.get(f"/v1/artifacts/{uuid.uuid4()}", headers=key.headers)
    assert missing.status_code == 404
    # A reader's namespace: the artifact must be there or in an ancestor.
    below = await client.get(url, params={"namespace": "alice:s1:t9"}, headers=key.headers)
    assert below.status_code == 200
    sibling = await client.get(url, params={"namespace": "alice:s2"}, headers=key.headers)
    assert sibling.status_code == 404


async def test_packs_reference_artifacts_never_their_body(
    client: httpx.AsyncClient, key: Key
) -> None:
    created = await create(
        client,
        key,
        body={"reports": REPORTS, "secret_sauce": "SHOULD-NOT-APPEAR"},
        summary="Analyst reports on the cloud market: forecasts, market size and CAGR",
    )
    response = await client.post(
        "/v1/context",
        json={
            "goal": "Summarise the cloud market forecasts and CAGR",
            "namespace": "alice:s1:t1",
            "intent": "research",
        },
        headers=key.headers,
    )
    pack = response.json()
    assert pack["sections"][0]["facet"] == "artifacts"
    item = pack["sections"][0]["items"][0]
    assert item["type"] == "artifact"
    assert item["content"] == created["summary"]
    assert item["metadata"]["artifact_id"] == created["artifact_id"]
    assert item["metadata"]["schema_keys"] == ["reports", "secret_sauce"]
    assert "SHOULD-NOT-APPEAR" not in response.text
    assert f"GET /v1/artifacts/{created['artifact_id']}?fields=" in pack["markdown"]
    assert "Artifacts are references" in pack["usage_hint"]


async def test_artifacts_are_redacted_and_audited(
    client: httpx.AsyncClient, key: Key, app: FastAPI
) -> None:
    created = await create(
        client, key, body={"config": {"password": "hunter2-very-secret"}, "ok": "fine"}
    )
    assert created["redactions"] >= 1
    got = await client.get(
        f"/v1/artifacts/{created['artifact_id']}", params={"fields": "config"}, headers=key.headers
    )
    assert "hunter2" not in got.text
    async with app.state.ctx.sessionmaker() as session:
        rows = (
            (
                await session.execute(
                    select(AuditEvent)
                    .where(AuditEvent.org_id == key.org_id, AuditEvent.action == "artifact")
                    .order_by(AuditEvent.created_at)
                )
            )
            .scalars()
            .all()
        )
        memory = (
            await session.execute(
                select(Memory).where(
                    Memory.org_id == key.org_id, Memory.id == uuid.UUID(created["memory_id"])
                )
            )
        ).scalar_one()
    assert [r.status_code for r in rows] == [201, 200]
    assert rows[0].redaction_count >= 1
    assert rows[0].memory_ids == [uuid.UUID(created["memory_id"])]
    assert "hunter2" not in str(rows[0].details) + str(rows[0].request)
    assert memory.type == "artifact"
    assert memory.meta["artifact_id"] == created["artifact_id"]
    assert memory.content == created["summary"]


async def test_artifact_bad_input(
    client: httpx.AsyncClient, key: Key, make_key: KeyFactory
) -> None:
    cases = [
        ({"namespace": "a::b", "name": "x", "body": {}}, "namespace"),
        ({"namespace": "alice", "name": "x", "body": "text"}, "body"),
        ({"namespace": "alice", "name": "", "body": {}}, "name"),
        ({"namespace": "alice", "body": {}}, "name"),
    ]
    for body, field in cases:
        response = await client.post("/v1/artifacts", json=body, headers=key.headers)
        assert response.status_code == 422, body
        assert response.json()["error"]["field"] == field
    created = await create(client, key, body={"a": 1})
    blank = await client.get(
        f"/v1/artifacts/{created['artifact_id']}", params={"fields": " , "}, headers=key.headers
    )
    assert blank.status_code == 422
    assert blank.json()["error"]["field"] == "fields"
    reader = await make_key(org=key.org, scopes=["read"])
    denied = await client.post(
        "/v1/artifacts",
        json={"namespace": "alice", "name": "x", "body": {}},
        headers=reader.headers,
    )
    assert denied.status_code == 403
    limited = await make_key(org=key.org, projects=["p2"])
    project = await client.post(
        "/v1/artifacts",
        json={"namespace": "alice", "name": "x", "body": {}, "project": "p1"},
        headers=limited.headers,
    )
    assert project.status_code == 403
    assert project.json()["error"]["message"] == "Project access denied: p1"
