"""Near-duplicate probes (store/memories.py): the exact scan of a namespace without indexes
of its own, its own HNSW index otherwise (store/namespace_indexes.py); both find the same
duplicates, in single and
batch writes, within the same reach (namespace, type)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from service.store import memories, namespace_indexes
from tests.conftest import Key

FIRST = "We chose Postgres full-text search over Elasticsearch to keep one datastore."
NEAR = "We chose Postgres full-text search over Elasticsearch, to keep one datastore!"
OTHER = "The staging database is reset every Sunday at 02:00 UTC by the ops cron job."


@pytest.fixture(params=["exact", "hnsw"])
def probe_path(
    request: pytest.FixtureRequest, app: FastAPI, key: Key, monkeypatch: pytest.MonkeyPatch
) -> list[Any]:
    """The path under test, and the calls that switched to HNSW (``use_indexes``)."""
    calls: list[Any] = []
    real = memories.use_indexes

    async def spy(session: Any, ef_search: int) -> None:
        calls.append(ef_search)
        await real(session, ef_search)

    monkeypatch.setattr(memories, "use_indexes", spy)

    async def switch() -> None:
        """Called once the namespaces hold memories: on the HNSW path each of the org's
        namespaces then gets its own indexes (store/namespace_indexes.py), and probes go
        through them."""
        if request.param == "hnsw":
            await namespace_indexes.sync(app.state.ctx.engine, 0, org_id=key.org_id)

    return [request.param, calls, switch]


async def _remember(client: httpx.AsyncClient, auth: dict[str, str], **body: Any) -> dict[str, Any]:
    response = await client.post("/v1/remember", json={"type": "decision", **body}, headers=auth)
    assert response.status_code == 201, response.text
    return response.json()


async def test_single_write_lists_its_near_duplicate(
    client: httpx.AsyncClient, auth: dict[str, str], probe_path: list[Any]
) -> None:
    path, calls, switch = probe_path
    ns = f"nd-single-{path}"
    await _remember(client, auth, namespace=ns, content=OTHER)
    first = await _remember(client, auth, namespace=ns, content=FIRST)
    await _remember(client, auth, namespace=ns + "-b", content=OTHER)
    await switch()
    near = await _remember(client, auth, namespace=ns, content=NEAR)
    assert near["status"] == "created"
    assert [d["id"] for d in near["near_duplicates"]] == [first["id"]]
    other_type = await _remember(client, auth, namespace=ns, type="gotcha", content=NEAR + " Yes.")
    assert other_type["near_duplicates"] == []
    elsewhere = await _remember(client, auth, namespace=ns + "-b", content=NEAR)
    assert elsewhere["near_duplicates"] == []
    assert bool(calls) == (path == "hnsw")


async def test_batch_lists_near_duplicates_per_item(
    client: httpx.AsyncClient, auth: dict[str, str], probe_path: list[Any]
) -> None:
    path, calls, switch = probe_path
    ns = f"nd-batch-{path}"
    first = await _remember(client, auth, namespace=ns, content=FIRST)
    await _remember(client, auth, namespace=ns + "-b", content=OTHER)
    await switch()
    items = [
        {"namespace": ns, "type": "decision", "content": NEAR},
        {"namespace": ns, "type": "decision", "content": OTHER},
        {"namespace": ns + "-b", "type": "decision", "content": NEAR},
    ]
    response = await client.post("/v1/remember/batch", json={"items": items}, headers=auth)
    assert response.status_code == 200, response.text
    found = [[d["id"] for d in i["near_duplicates"]] for i in response.json()["items"]]
    assert found == [[first["id"]], [], []]
    assert bool(calls) == (path == "hnsw")
