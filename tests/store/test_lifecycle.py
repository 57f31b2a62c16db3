"""store/lifecycle.py: the SQL of erasing a namespace subtree. A subtree is the namespace and
what lies under it segment-wise (``_`` is a letter: ``starts_with``, not LIKE); its memories
are locked and deleted with their edges, the memories they superseded become current again,
artifacts stored in it or attached to its memories go, and so do the keys that reach nothing
outside it (a key that also reaches elsewhere stays)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text

from service.store.lifecycle import LifecycleRepository
from tests.conftest import Key, KeyFactory, Seeder, SqlRows


@pytest.fixture
async def repo(app: FastAPI) -> AsyncIterator[LifecycleRepository]:
    async with app.state.ctx.sessionmaker() as session:
        yield LifecycleRepository(session)
        await session.commit()


async def test_a_subtree_is_its_namespace_and_below_segment_wise(
    repo: LifecycleRepository, seed: Seeder, key: Key
) -> None:
    inside = {await seed.add(f"Note {ns}.", namespace=ns) for ns in ("a_b", "a_b:s1", "a_b:s1:t")}
    for ns in ("axb", "a_bx", "a_b_c", "a"):
        await seed.add(f"Note {ns}.", namespace=ns)
    assert {i for i, _ in await repo.lock_subtree(key.org_id, "a_b")} == inside


async def test_deleting_memories_takes_their_edges_and_frees_what_they_superseded(
    repo: LifecycleRepository, seed: Seeder, key: Key, sql: SqlRows
) -> None:
    old = await seed.add("The staging port was 5432.", namespace="bob")
    new = await seed.add("The staging port is 5433.", namespace="alice")
    other = await seed.add("Deploys freeze on Fridays.", namespace="bob")
    await seed.relate(new, old, "supersedes")
    await seed.relate(other, new)
    await repo.session.execute(
        text("UPDATE memories SET superseded_by = :n WHERE id = :o"),
        {"n": new, "o": old},
    )
    assert await repo.count_relations(key.org_id, [new]) == 2
    await repo.unsupersede(key.org_id, [new])
    assert await repo.delete_memories(key.org_id, [new]) == 1
    await repo.session.commit()
    assert await sql("SELECT superseded_by FROM memories WHERE id = :o", o=old) == [(None,)]
    assert await sql("SELECT 1 FROM relations WHERE org_id = :g", g=key.org_id) == []
    assert await repo.delete_memories(key.org_id, []) == 0
    assert await repo.count_relations(key.org_id, []) == 0


async def test_keys_reaching_only_inside_the_subtree_go(
    repo: LifecycleRepository, key: Key, make_key: KeyFactory, sql: SqlRows
) -> None:
    inside = await make_key(org=key.org, namespaces=["alice:s1", "alice"])
    below = await make_key(org=key.org, namespaces=["alice:s2:t1"])
    beyond = await make_key(org=key.org, namespaces=["alice", "bob"])
    similar = await make_key(org=key.org, namespaces=["alicex"])
    gone = await repo.delete_keys_within(key.org_id, "alice")
    await repo.session.commit()
    left = {r[0] for r in await sql("SELECT id FROM api_keys WHERE org_id = :o", o=key.org_id)}
    assert left == {key.key_id, beyond.key_id, similar.key_id}
    assert len(gone) == 2 and all(len(h) == 64 for h in gone)
    assert inside.key_id not in left and below.key_id not in left


async def test_artifacts_in_the_subtree_or_of_its_memories_go(
    client: httpx.AsyncClient, repo: LifecycleRepository, key: Key
) -> None:
    made = []
    for ns in ("alice:s1", "bob"):
        body = {"namespace": ns, "name": "t", "body": {"a": 1}}
        response = await client.post("/v1/artifacts", json=body, headers=key.headers)
        assert response.status_code == 201, response.text
        made.append(response.json())
    in_tree, elsewhere = made
    deleted = await repo.delete_artifacts(key.org_id, "alice", [uuid.UUID(elsewhere["memory_id"])])
    assert sorted(deleted) == sorted(uuid.UUID(m["artifact_id"]) for m in made)
    await repo.session.rollback()
    assert await repo.delete_artifacts_of(key.org_id, [uuid.UUID(in_tree["memory_id"])]) == 1
    assert await repo.delete_artifacts_of(key.org_id, []) == 0
