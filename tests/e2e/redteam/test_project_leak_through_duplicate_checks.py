"""Finding 1: duplicate checks leaked other projects' (and diaries') ids and names, and an
exact copy of a p2 memory's text was never stored for p1.

Rule now: exact, near and hash checks see only what a reader of the new memory could read
(same namespace, its project or none, its diary or none). Two projects may hold the same
text; each is stored."""

from __future__ import annotations

import json
import uuid

import httpx

from tests.e2e.redteam.conftest import (
    PARAPHRASE,
    RATE_LIMIT,
    Org,
    created,
    memory,
    remember,
)


async def test_near_duplicates_never_name_another_projects_memory(
    client: httpx.AsyncClient, org: Org
) -> None:
    p2 = await created(client, org.p2, project="p2", content=RATE_LIMIT)
    write = await created(client, org.p1, project="p1", content=PARAPHRASE)
    assert write["near_duplicates"] == []
    assert p2["id"] not in json.dumps(write) and p2["name"] not in json.dumps(write)
    # The same paraphrase in p2 does see it: the check still works within reach.
    same = await created(client, org.p2, project="p2", content=PARAPHRASE)
    assert [d["id"] for d in same["near_duplicates"]] == [p2["id"]]


async def test_near_duplicates_see_shared_memories(client: httpx.AsyncClient, org: Org) -> None:
    shared = await created(client, org.admin, content=RATE_LIMIT)
    write = await created(client, org.p1, project="p1", content=PARAPHRASE)
    assert [d["id"] for d in write["near_duplicates"]] == [shared["id"]]


async def test_near_duplicates_never_name_another_diarys_memory(
    client: httpx.AsyncClient, org: Org
) -> None:
    diary = await created(client, org.admin, agent_id="scout", content=RATE_LIMIT)
    for body in ({}, {"agent_id": "other"}):
        write = await created(client, org.admin, content=PARAPHRASE, **body)
        assert write["near_duplicates"] == [], body
        assert diary["id"] not in json.dumps(write)
        await client.delete(f"/v1/memories/{write['id']}", headers=org.admin.headers)
    own = await created(client, org.admin, agent_id="scout", content=PARAPHRASE)
    assert [d["id"] for d in own["near_duplicates"]] == [diary["id"]]


async def test_near_duplicates_over_mcp_stay_in_the_project(
    client: httpx.AsyncClient, org: Org, mcp_connect
) -> None:
    p2 = await created(client, org.p2, project="p2", content=RATE_LIMIT)
    async with mcp_connect(org.p1) as mcp:
        result = await mcp.call_tool(
            "remember", {"namespace": "alice", "project": "p1", "content": PARAPHRASE}
        )
    assert not result.is_error, result
    text = json.dumps(result.structured_content)
    assert result.structured_content["near_duplicates"] == []
    assert p2["id"] not in text and p2["name"] not in text


async def test_exact_copy_in_another_project_is_stored_for_both(
    client: httpx.AsyncClient, org: Org
) -> None:
    p2 = await created(client, org.p2, project="p2")
    p1 = await created(client, org.p1, project="p1")
    assert p1["id"] != p2["id"]
    assert (await memory(client, org.p1, p1["id"])).json()["project"] == "p1"
    # Within one project it is still a duplicate.
    again = await remember(client, org.p1, project="p1")
    assert again.json()["status"] == "duplicate" and again.json()["id"] == p1["id"]


async def test_exact_copy_in_a_batch_never_answers_another_projects_id(
    client: httpx.AsyncClient, org: Org
) -> None:
    p2 = await created(client, org.p2, project="p2")
    batch = await client.post(
        "/v1/remember/batch",
        json={
            "items": [
                {"namespace": "alice", "project": "p1", "content": RATE_LIMIT},
                {"namespace": "alice", "project": "p1", "content": PARAPHRASE},
            ]
        },
        headers=org.p1.headers,
    )
    assert batch.status_code == 200, batch.text
    assert [i["status"] for i in batch.json()["items"]] == ["created", "created"]
    assert p2["id"] not in batch.text and p2["name"] not in batch.text


async def test_exact_copy_of_a_shared_memory_is_its_duplicate(
    client: httpx.AsyncClient, org: Org
) -> None:
    shared = await created(client, org.admin)
    again = await remember(client, org.p1, project="p1")
    assert again.status_code == 201
    assert again.json() | {"status": "duplicate", "id": shared["id"]} == again.json()


async def test_exact_copy_in_another_diary_is_stored(client: httpx.AsyncClient, org: Org) -> None:
    diary = await created(client, org.admin, agent_id="scout")
    plain = await created(client, org.admin)
    assert plain["id"] != diary["id"]


async def test_patch_conflict_never_names_another_projects_memory(
    client: httpx.AsyncClient, org: Org
) -> None:
    p2 = await created(client, org.p2, project="p2")
    mine = await created(client, org.p1, project="p1", content=PARAPHRASE)
    patched = await client.patch(
        f"/v1/memories/{mine['id']}", json={"content": RATE_LIMIT}, headers=org.p1.headers
    )
    assert patched.status_code == 200, patched.text
    assert p2["id"] not in patched.text
    # A conflict within the project names the memory, which the key can read.
    other = await created(client, org.p1, project="p1", content=PARAPHRASE)
    clash = await client.patch(
        f"/v1/memories/{other['id']}", json={"content": RATE_LIMIT}, headers=org.p1.headers
    )
    assert clash.status_code == 409
    assert clash.json()["error"]["existing_id"] == mine["id"]
    assert uuid.UUID(clash.json()["error"]["existing_id"]) != uuid.UUID(p2["id"])
