"""Finding 2: a key limited to p1 could supersede a shared (project-less) memory, re-project
it to p1 or delete it, so it vanished from p2's packs.

Rule now (docs/isolation.md): write reach is narrower than read reach. A key limited to
projects reads and links to shared memories but writes only into its projects: it cannot
create, change, supersede, re-project or erase a shared memory (403 project_access_denied).
A key without project limits can. Tested both ways."""

from __future__ import annotations

import httpx

from tests.e2e.redteam.conftest import PARAPHRASE, RATE_LIMIT, Org, created, memory, pack, pack_ids

GOAL = "public API rate limit requests per minute gateway"


def _denied(response: httpx.Response, field: str) -> None:
    assert response.status_code == 403, response.text
    assert response.json()["error"]["code"] == "project_access_denied"
    assert response.json()["error"]["field"] == field


async def test_project_key_cannot_supersede_a_shared_memory(
    client: httpx.AsyncClient, org: Org, sql
) -> None:
    shared = await created(client, org.admin)
    response = await client.post(
        "/v1/remember",
        json={
            "namespace": "alice",
            "project": "p1",
            "content": PARAPHRASE,
            "supersedes": shared["id"],
        },
        headers=org.p1.headers,
    )
    _denied(response, "supersedes")
    batch = await client.post(
        "/v1/remember/batch",
        json={
            "items": [
                {
                    "namespace": "alice",
                    "project": "p1",
                    "content": PARAPHRASE,
                    "supersedes": shared["id"],
                }
            ]
        },
        headers=org.p1.headers,
    )
    _denied(batch, "items.0.supersedes")
    assert (await memory(client, org.p2, shared["id"])).json()["superseded_by"] is None
    assert shared["id"] in {str(i) for i in pack_ids(await pack(client, org.p2, GOAL))}
    assert await sql("SELECT 1 FROM memories WHERE content = :c", c=PARAPHRASE) == []


async def test_project_key_cannot_reproject_change_or_delete_a_shared_memory(
    client: httpx.AsyncClient, org: Org
) -> None:
    shared = await created(client, org.admin)
    url = f"/v1/memories/{shared['id']}"
    _denied(await client.patch(url, json={"project": "p1"}, headers=org.p1.headers), "project")
    _denied(await client.patch(url, json={"tags": ["mine"]}, headers=org.p1.headers), "project")
    _denied(await client.delete(url, headers=org.p1.headers), "project")
    row = (await memory(client, org.p2, shared["id"])).json()
    assert (row["project"], row["tags"]) == (None, [])


async def test_project_key_cannot_forget_a_shared_memory_over_mcp(
    client: httpx.AsyncClient, org: Org, mcp_connect
) -> None:
    shared = await created(client, org.admin)
    async with mcp_connect(org.p1) as mcp:
        result = await mcp.call_tool("forget", {"id": shared["id"]})
    assert result.is_error
    assert result.structured_content["error"]["code"] == "project_access_denied"
    assert (await memory(client, org.p2, shared["id"])).status_code == 200


async def test_project_key_cannot_create_shared_memories_or_move_its_own_there(
    client: httpx.AsyncClient, org: Org
) -> None:
    _denied(
        await client.post(
            "/v1/remember",
            json={"namespace": "alice", "content": RATE_LIMIT},
            headers=org.p1.headers,
        ),
        "project",
    )
    _denied(
        await client.post(
            "/v1/artifacts",
            json={"namespace": "alice", "name": "hosts", "body": {"a": 1}},
            headers=org.p1.headers,
        ),
        "project",
    )
    mine = await created(client, org.p1, project="p1")
    _denied(
        await client.patch(
            f"/v1/memories/{mine['id']}", json={"project": None}, headers=org.p1.headers
        ),
        "project",
    )


async def test_project_key_still_links_to_shared_memories(
    client: httpx.AsyncClient, org: Org
) -> None:
    shared = await created(client, org.admin)
    linked = await created(
        client, org.p1, project="p1", content=PARAPHRASE, related=[{"id": shared["id"]}]
    )
    related = (await memory(client, org.p1, linked["id"])).json()["related"]
    assert [r["id"] for r in related] == [shared["id"]]


async def test_project_key_writes_its_own_project_freely(
    client: httpx.AsyncClient, org: Org
) -> None:
    old = await created(client, org.p1, project="p1")
    new = await created(client, org.p1, project="p1", content=PARAPHRASE, supersedes=old["id"])
    assert (await memory(client, org.p1, old["id"])).json()["superseded_by"] == new["id"]
    url = f"/v1/memories/{new['id']}"
    assert (
        await client.patch(url, json={"tags": ["x"]}, headers=org.p1.headers)
    ).status_code == 200
    assert (await client.delete(url, headers=org.p1.headers)).status_code == 200


async def test_unlimited_key_may_supersede_reproject_and_delete_shared_memories(
    client: httpx.AsyncClient, org: Org
) -> None:
    shared = await created(client, org.admin)
    new = await created(client, org.admin, content=PARAPHRASE, supersedes=shared["id"])
    assert (await memory(client, org.admin, shared["id"])).json()["superseded_by"] == new["id"]
    # Its successor may not leave the shared memory's readers (the supersedes rule).
    refused = await client.patch(
        f"/v1/memories/{new['id']}", json={"project": "p1"}, headers=org.admin.headers
    )
    assert refused.status_code == 422 and refused.json()["error"]["field"] == "project"
    other = await created(
        client, org.admin, content="The gateway answers 429 with a Retry-After header in seconds."
    )
    new = other
    url = f"/v1/memories/{new['id']}"
    moved = await client.patch(url, json={"project": "p1"}, headers=org.admin.headers)
    assert moved.status_code == 200 and moved.json()["project"] == "p1"
    # Now in p1: p2 no longer reads it, p1 may change it.
    assert (await memory(client, org.p2, new["id"])).status_code == 404
    assert (await client.delete(url, headers=org.p1.headers)).status_code == 200


async def test_project_key_gets_404_not_403_for_another_projects_memory(
    client: httpx.AsyncClient, org: Org
) -> None:
    p2 = await created(client, org.p2, project="p2")
    url = f"/v1/memories/{p2['id']}"
    for response in (
        await client.patch(url, json={"tags": ["x"]}, headers=org.p1.headers),
        await client.delete(url, headers=org.p1.headers),
    ):
        assert response.status_code == 404
    sup = await client.post(
        "/v1/remember",
        json={"namespace": "alice", "project": "p1", "content": PARAPHRASE, "supersedes": p2["id"]},
        headers=org.p1.headers,
    )
    assert sup.status_code == 422 and "out of reach" in sup.text
