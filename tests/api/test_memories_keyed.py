"""Keyed writes (remember with ``key``): created, updated with history, duplicate, found by
key, in batches, and the refusals (domain/writes/keyed.py)."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import psycopg

from tests.conftest import Key, KeyFactory

V1 = "The staging database lives on port 5433, not the default 5432."
V2 = "The staging database moved to port 6543 after the November migration."
V3 = "Staging uses pgbouncer in transaction mode, so prepared statements must be off."


async def remember(client: httpx.AsyncClient, auth: dict[str, str], **body: object) -> httpx.Response:
    body.setdefault("namespace", "alice")
    return await client.post("/v1/remember", json=body, headers=auth)


async def by_key(client: httpx.AsyncClient, auth: dict[str, str], key: str, ns: str = "alice") -> list[dict]:
    response = await client.get("/v1/memories", params={"namespace": ns, "key": key}, headers=auth)
    assert response.status_code == 200, response.text
    return response.json()["items"]


async def test_key_created_updated_duplicate(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    first = await remember(client, auth, content=V1, key="staging-db", type="gotcha")
    assert first.status_code == 201, first.text
    assert first.json()["status"] == "created"
    assert first.json()["key"] == "staging-db"
    assert first.json()["superseded_id"] is None

    same = (await remember(client, auth, content=V1, key="staging-db", type="gotcha")).json()
    assert same["status"] == "duplicate"
    assert same["id"] == first.json()["id"]

    second = (await remember(client, auth, content=V2, key="staging-db", type="gotcha")).json()
    assert second["status"] == "updated"
    assert second["superseded_id"] == first.json()["id"]

    found = await by_key(client, auth, "staging-db")
    assert [m["id"] for m in found] == [second["id"]]
    assert found[0]["key"] == "staging-db"
    # History kept: the old one is there, superseded by the new one, and linked.
    old = (await client.get(f"/v1/memories/{first.json()['id']}", headers=auth)).json()
    assert old["superseded_by"] == second["id"]
    new = (await client.get(f"/v1/memories/{second['id']}", headers=auth)).json()
    assert {(r["id"], r["relationship"]) for r in new["related"]} == {(first.json()["id"], "supersedes")}


async def test_superseded_version_is_out_of_packs(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    await remember(client, auth, content=V1, key="staging-db", type="gotcha")
    new = (await remember(client, auth, content=V2, key="staging-db", type="gotcha")).json()
    pack = await client.post(
        "/v1/context", json={"goal": "which port is the staging database on", "namespace": "alice"},
        headers=auth,
    )
    ids = [i["id"] for s in pack.json()["sections"] for i in s["items"]]
    assert new["id"] in ids
    assert len(ids) == 1


async def test_back_to_an_old_version_revives_it(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    a = (await remember(client, auth, content=V1, key="k")).json()
    b = (await remember(client, auth, content=V2, key="k")).json()
    back = (await remember(client, auth, content=V1, key="k")).json()
    assert back["status"] == "updated"
    assert back["id"] == a["id"]
    assert back["superseded_id"] == b["id"]
    assert [m["id"] for m in await by_key(client, auth, "k")] == [a["id"]]


async def test_key_claims_an_identical_unkeyed_memory(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    plain = (await remember(client, auth, content=V3)).json()
    keyed = (await remember(client, auth, content=V3, key="pgbouncer")).json()
    assert keyed["status"] == "duplicate"
    assert keyed["id"] == plain["id"]
    assert [m["id"] for m in await by_key(client, auth, "pgbouncer")] == [plain["id"]]


async def test_content_held_under_another_key_is_a_conflict(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    await remember(client, auth, content=V3, key="one")
    before = await remember(client, auth, content=V1, key="two")
    response = await remember(client, auth, content=V3, key="two")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "conflict"
    assert response.json()["error"]["field"] == "content"
    # Nothing changed under "two".
    assert [m["id"] for m in await by_key(client, auth, "two")] == [before.json()["id"]]


async def test_keys_are_per_namespace(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    a = (await remember(client, auth, content=V1, key="k")).json()
    b = (await remember(client, auth, content=V2, key="k", namespace="alice:s1")).json()
    assert a["status"] == b["status"] == "created"
    assert [m["id"] for m in await by_key(client, auth, "k", "alice:s1")] == [b["id"]]
    assert await by_key(client, auth, "absent") == []


async def test_key_lookup_needs_an_exact_namespace(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    response = await client.get("/v1/memories", params={"namespace": "alice:*", "key": "k"}, headers=auth)
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "namespace"


async def test_bad_keys_refused(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    for bad in ("", " padded", "line\nbreak", "x" * 257):
        response = await remember(client, auth, content=V1, key=bad)
        assert response.status_code == 422, bad
        assert response.json()["error"]["field"] == "key"
    secret = await remember(client, auth, content=V1, key="ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2)
    assert secret.status_code == 422
    assert secret.json()["error"]["field"] == "key"
    assert "ghp_" not in secret.text


async def test_batch_with_keys(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    await remember(client, auth, content=V1, key="a")
    response = await client.post(
        "/v1/remember/batch",
        json={"items": [
            {"namespace": "alice", "content": V2, "key": "a"},
            {"namespace": "alice", "content": V3, "key": "b"},
            {"namespace": "alice", "content": V3, "key": "b2", "type": "gotcha"}
            | {"content": "Deploys need the VPN up first, or the SSH step hangs silently."},
            {"namespace": "alice", "content": "ok", "key": "c"},
        ]},
        headers=auth,
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert [i["status"] for i in body["items"]] == ["updated", "created", "created", "rejected"]
    assert body["updated"] == 1 and body["created"] == 2 and body["rejected"] == 1
    assert body["items"][0]["superseded_id"] is not None
    again = await client.post(
        "/v1/remember/batch",
        json={"items": [{"namespace": "alice", "content": V2, "key": "a"}, {"namespace": "alice", "content": V3, "key": "b"}]},
        headers=auth,
    )
    assert [i["status"] for i in again.json()["items"]] == ["duplicate", "duplicate"]


async def test_batch_conflict_names_the_item(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    await remember(client, auth, content=V3, key="one")
    response = await client.post(
        "/v1/remember/batch",
        json={"items": [{"namespace": "alice", "content": V1, "key": "x"}, {"namespace": "alice", "content": V3, "key": "y"}]},
        headers=auth,
    )
    assert response.status_code == 409
    assert response.json()["error"]["field"] == "items.1.content"
    assert await by_key(client, auth, "x") == []


async def test_batch_repeating_a_key_is_refused(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    response = await client.post(
        "/v1/remember/batch",
        json={"items": [{"namespace": "alice", "content": V1, "key": "a"}, {"namespace": "alice", "content": V2, "key": "a"}]},
        headers=auth,
    )
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "items.1.key"
    assert await by_key(client, auth, "a") == []


async def test_concurrent_writers_of_one_key_leave_one_current(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    contents = [f"Release train {n} ships on Thursdays after the integration suite passes." for n in range(6)]
    responses = await asyncio.gather(*(remember(client, auth, content=c, key="release") for c in contents))
    assert all(r.status_code == 201 for r in responses), [r.text for r in responses]
    assert sorted(r.json()["status"] for r in responses) == ["created"] + ["updated"] * 5
    assert len(await by_key(client, auth, "release")) == 1


async def test_forgetting_the_current_version_brings_back_the_previous(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    a = (await remember(client, auth, content=V1, key="k")).json()
    b = (await remember(client, auth, content=V2, key="k")).json()
    assert (await client.delete(f"/v1/memories/{b['id']}", headers=auth)).status_code == 200
    assert [m["id"] for m in await by_key(client, auth, "k")] == [a["id"]]


async def test_key_outside_the_api_keys_projects_is_a_conflict(
    client: httpx.AsyncClient, auth: dict[str, str], make_key: KeyFactory, key
) -> None:
    await remember(client, auth, content=V1, key="k", project="secret-project")
    limited = await make_key(org=key.org, projects=["public"])
    response = await remember(client, limited.headers, content=V2, key="k", project="public")
    assert response.status_code == 409
    assert response.json()["error"]["field"] == "key"
    assert "secret-project" not in response.text


# --- keyed writes within the duplicate reach (issue-16's project-scoped dedup) ----------------


async def test_a_copy_in_another_project_is_not_claimed(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    other = (await remember(client, auth, content=V3, project="p1")).json()
    keyed = await remember(client, auth, content=V3, key="pool", project="p2")
    assert keyed.status_code == 201, keyed.text
    assert keyed.json()["status"] == "created"
    assert keyed.json()["id"] != other["id"]
    [found] = await by_key(client, auth, "pool")
    assert (found["id"], found["project"]) == (keyed.json()["id"], "p2")


async def test_content_under_a_key_in_another_project_is_neither_a_conflict_nor_named(
    client: httpx.AsyncClient, auth: dict[str, str], make_key: KeyFactory, key
) -> None:
    hidden = (await remember(client, auth, content=V3, key="one", project="secret-project")).json()
    limited = await make_key(org=key.org, projects=["public"])
    response = await remember(client, limited.headers, content=V3, key="two", project="public")
    assert response.status_code == 201, response.text
    assert response.json()["status"] == "created"
    assert hidden["id"] not in response.text and "secret-project" not in response.text


async def test_a_shared_copy_is_not_taken_by_a_key_limited_to_projects(
    client: httpx.AsyncClient, auth: dict[str, str], make_key: KeyFactory, key
) -> None:
    shared = (await remember(client, auth, content=V3)).json()
    limited = await make_key(org=key.org, projects=["public"])
    response = await remember(client, limited.headers, content=V3, key="pool", project="public")
    assert response.status_code == 201, response.text
    assert response.json()["status"] == "created"
    assert response.json()["id"] != shared["id"]
    # The shared memory was not changed: it has no key.
    got = await client.get(f"/v1/memories/{shared['id']}", headers=auth)
    assert got.status_code == 200 and "key" in got.json() and got.json()["key"] is None


async def test_a_shared_keyed_memory_is_read_only_to_a_key_limited_to_projects(
    client: httpx.AsyncClient, auth: dict[str, str], make_key: KeyFactory, key
) -> None:
    shared = (await remember(client, auth, content=V1, key="k")).json()
    limited = await make_key(org=key.org, projects=["public"])
    same = await remember(client, limited.headers, content=V1, key="k", project="public")
    assert same.status_code == 201 and same.json()["status"] == "duplicate"
    changed = await remember(client, limited.headers, content=V2, key="k", project="public")
    assert changed.status_code == 403, changed.text
    assert changed.json()["error"]["field"] == "key"
    assert [m["id"] for m in await by_key(client, auth, "k")] == [shared["id"]]


async def test_a_superseded_copy_is_history_not_a_conflict(
    client: httpx.AsyncClient, auth: dict[str, str]
) -> None:
    # Content uniqueness covers current memories only (migration 0003): the text of a
    # superseded un-keyed memory can be stored again under a key.
    old = (await remember(client, auth, content=V1)).json()
    await remember(client, auth, content=V2, supersedes=old["id"])
    keyed = await remember(client, auth, content=V1, key="k")
    assert keyed.status_code == 201, keyed.text
    assert keyed.json()["status"] == "created"
    assert keyed.json()["id"] != old["id"]


# --- an expired memory holds no key and no content (domain/expiry.py) ------------------------


def expire_now(url: str, memory_id: str) -> None:
    """Move a memory's expiry into the past, as time passing would (not purged yet)."""
    with psycopg.connect(url) as conn:
        conn.execute(
            "UPDATE memories SET expires_at = now() - interval '1 second' WHERE id = %s",
            (uuid.UUID(memory_id),),
        )


async def test_an_expired_key_is_written_anew(client: httpx.AsyncClient, key: Key, pg_url: str) -> None:
    auth = key.headers
    old = (await remember(client, auth, content=V1, key="k", ttl_seconds=60)).json()
    expire_now(pg_url, old["id"])
    assert await by_key(client, auth, "k") == []
    # The same content again: stored (not a "duplicate" of a memory nobody can read).
    again = await remember(client, auth, content=V1, key="k")
    assert again.status_code == 201, again.text
    assert again.json()["status"] == "created" and again.json()["id"] != old["id"]
    assert [m["id"] for m in await by_key(client, auth, "k")] == [again.json()["id"]]
    # Other content under an expired key: created, superseding nothing.
    gone = (await remember(client, auth, content=V2, key="k2", ttl_seconds=60)).json()
    expire_now(pg_url, gone["id"])
    other = (await remember(client, auth, content=V3, key="k2")).json()
    assert (other["status"], other["superseded_id"]) == ("created", None)
    audit = (await client.get("/v1/audit", params={"memory_id": old["id"]}, headers=auth)).json()
    assert "expire" in {row["action"] for row in audit["items"]}


async def test_an_expired_copy_does_not_block_a_keyed_write(
    client: httpx.AsyncClient, key: Key, pg_url: str
) -> None:
    auth = key.headers
    old = (await remember(client, auth, content=V1, ttl_seconds=60)).json()
    expire_now(pg_url, old["id"])
    keyed = await remember(client, auth, content=V1, key="k")
    assert keyed.status_code == 201, keyed.text
    assert keyed.json()["status"] == "created" and keyed.json()["id"] != old["id"]
    batch = await client.post(
        "/v1/remember/batch",
        json={"items": [{"namespace": "alice", "content": V2, "key": "b", "ttl_seconds": 60}]},
        headers=auth,
    )
    expire_now(pg_url, batch.json()["items"][0]["id"])
    again = await client.post(
        "/v1/remember/batch", json={"items": [{"namespace": "alice", "content": V2, "key": "b"}]},
        headers=auth,
    )
    assert again.json()["items"][0]["status"] == "created", again.text


async def test_two_keys_never_claim_one_copy(
    client: httpx.AsyncClient, key: Key, session_factory
) -> None:
    """Two keyed writes of one content under two keys, racing for its unkeyed copy: the
    second claim re-checks the row once the first commits and finds it taken (the write
    then fails with 409 and its retry names the other key), so no key is silently lost."""
    from service.store.memories import MemoryRepository

    copy = uuid.UUID((await remember(client, key.headers, content=V3)).json()["id"])
    async with session_factory() as first, session_factory() as second:
        assert await MemoryRepository(first).claim_key(key.org_id, copy, "k1")
        racing = asyncio.create_task(MemoryRepository(second).claim_key(key.org_id, copy, "k2"))
        await asyncio.sleep(0.2)
        assert not racing.done()  # waiting on the first claim's row lock
        await first.commit()
        assert await racing is False
        await second.rollback()
    assert [m["id"] for m in await by_key(client, key.headers, "k1")] == [str(copy)]
    retry = await remember(client, key.headers, content=V3, key="k2")
    assert retry.status_code == 409 and retry.json()["error"]["existing_id"] == str(copy)


async def test_a_key_held_in_another_project_or_diary_is_not_taken_over(
    client: httpx.AsyncClient, auth: dict[str, str], make_key: KeyFactory, key
) -> None:
    # Replacing a key's holder supersedes it (review G): as for ``supersedes``, every reader
    # of the holder must read its successor, so a write in another project or diary is
    # refused instead of hiding the holder from its project's readers.
    held = (await remember(client, auth, content=V1, key="k", project="p")).json()
    reader = await make_key(org=key.org, projects=["p"])
    moved = await remember(client, auth, content=V2, key="k", project="q")
    assert moved.status_code == 409, moved.text
    assert moved.json()["error"]["field"] == "key"
    diary = await remember(client, auth, content=V2, key="k", project="p", agent_id="bot")
    assert diary.status_code == 409, diary.text
    assert [m["id"] for m in await by_key(client, reader.headers, "k")] == [held["id"]]
    # Shared, or in its project, the successor reads along: updated.
    shared = await remember(client, auth, content=V2, key="k")
    assert shared.status_code == 201 and shared.json()["status"] == "updated", shared.text
    assert [m["id"] for m in await by_key(client, reader.headers, "k")] == [shared.json()["id"]]
