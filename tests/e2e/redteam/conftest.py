"""The red-team regressions: one file per finding of the adversarial review (issue 16), each
named after the finding. Fixtures: two projects' keys in one org, helpers to write and read
through the API as clients do."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.conftest import Key, KeyFactory

RATE_LIMIT = (
    "The public API rate limit is 100 requests per minute per key, enforced at the gateway "
    "since the March outage."
)
PARAPHRASE = (
    "The public API rate limit is 100 requests per minute per key, enforced at the gateway "
    "since the March incident."
)


@dataclass
class Org:
    """One org: an unrestricted admin, and read-write keys limited to p1 and to p2."""

    admin: Key
    p1: Key
    p2: Key


@pytest.fixture
async def org(make_key: KeyFactory) -> Org:
    admin = await make_key()
    p1 = await make_key(org=admin.org, scopes=["read", "write"], projects=["p1"])
    p2 = await make_key(org=admin.org, scopes=["read", "write"], projects=["p2"])
    return Org(admin, p1, p2)


async def remember(client: httpx.AsyncClient, key: Key, **body: Any) -> httpx.Response:
    body.setdefault("namespace", "alice")
    body.setdefault("content", RATE_LIMIT)
    return await client.post("/v1/remember", json=body, headers=key.headers)


async def created(client: httpx.AsyncClient, key: Key, **body: Any) -> dict[str, Any]:
    response = await remember(client, key, **body)
    assert response.status_code == 201, response.text
    assert response.json()["status"] == "created", response.text
    return response.json()  # type: ignore[no-any-return]


async def pack(
    client: httpx.AsyncClient, key: Key, goal: str, namespace: str = "alice", **body: Any
) -> dict[str, Any]:
    response = await client.post(
        "/v1/context",
        json={"goal": goal, "namespace": namespace, "layer": "deep_search", **body},
        headers=key.headers,
    )
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def pack_ids(result: dict[str, Any]) -> set[uuid.UUID]:
    return {uuid.UUID(i["id"]) for s in result["sections"] for i in s["items"]}


async def memory(client: httpx.AsyncClient, key: Key, memory_id: Any) -> httpx.Response:
    return await client.get(f"/v1/memories/{memory_id}", headers=key.headers)
