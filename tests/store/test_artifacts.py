"""store/artifacts.py: an artifact read in SQL. Declared fields are extracted in the database
(the object's value, or the first object item of a list that has the key; a key holding null
is present), the body never leaves it unless asked; the key's prefixes and projects bound
what it finds, and an artifact whose memory expired is gone for every read."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text

from service.store.artifacts import ArtifactRepository
from tests.conftest import Key

LIST_BODY = [{"id": 1}, "note", {"id": 2, "tries": None, "codes": [502]}, {"codes": [503]}]


@pytest.fixture
async def repo(app: FastAPI) -> AsyncIterator[ArtifactRepository]:
    async with app.state.ctx.sessionmaker() as session:
        yield ArtifactRepository(session)
        await session.rollback()


async def stored(client: httpx.AsyncClient, key: Key, **fields: Any) -> uuid.UUID:
    body = {"namespace": "alice:s1", "name": "retries", "body": LIST_BODY, **fields}
    response = await client.post("/v1/artifacts", json=body, headers=key.headers)
    assert response.status_code == 201, response.text
    return uuid.UUID(response.json()["artifact_id"])


async def get(repo: ArtifactRepository, key: Key, artifact: uuid.UUID, **bounds: Any) -> dict[str, Any] | None:
    values: dict[str, Any] = {"namespaces": None, "prefixes": [], "key_projects": [], "fields": None, **bounds}
    return await repo.get(key.org_id, artifact, **values)


async def test_declared_fields_come_from_the_first_list_item_having_them(
    client: httpx.AsyncClient, key: Key, repo: ArtifactRepository
) -> None:
    artifact = await stored(client, key)
    row = await get(repo, key, artifact, fields=["codes", "tries", "absent"])
    assert row is not None and row["body"] is None
    assert row["fields"] == {"codes": [502], "tries": None}
    whole = await get(repo, key, artifact)
    assert whole is not None and whole["body"] == LIST_BODY and whole["fields"] is None


async def test_the_keys_limits_and_the_readers_namespaces_bound_it(
    client: httpx.AsyncClient, key: Key, repo: ArtifactRepository
) -> None:
    shared = await stored(client, key)
    billing = await stored(client, key, project="billing")
    assert await get(repo, key, shared, namespaces=["alice", "alice:s1"]) is not None
    assert await get(repo, key, shared, namespaces=["alice:s2"]) is None
    assert await get(repo, key, shared, prefixes=["alice"]) is not None
    assert await get(repo, key, shared, prefixes=["alicex", "bob"]) is None
    assert await get(repo, key, shared, key_projects=["search"]) is not None  # shared: readable
    assert await get(repo, key, billing, key_projects=["search"]) is None
    assert await repo.get(uuid.uuid4(), shared, namespaces=None, prefixes=[], key_projects=[],
                          fields=None) is None  # fmt: skip


async def test_an_artifact_whose_memory_expired_is_gone(
    client: httpx.AsyncClient, key: Key, repo: ArtifactRepository
) -> None:
    artifact = await stored(client, key)
    owner = await repo.owner(key.org_id, artifact, prefixes=[], key_projects=[])
    assert owner is not None
    memory_id, project = owner
    assert memory_id is not None and project is None
    await repo.session.execute(
        text(
            "UPDATE memories SET expires_at = now() - interval '1 second' "
            "WHERE org_id = :o AND id = :i"
        ),
        {"o": key.org_id, "i": memory_id},
    )
    assert await get(repo, key, artifact) is None
    assert await repo.owner(key.org_id, artifact, prefixes=[], key_projects=[]) is None
    assert await repo.delete(key.org_id, artifact)
    assert not await repo.delete(key.org_id, artifact)
