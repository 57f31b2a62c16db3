"""Finding 5: with x1 <- x2 <- x3, deleting x2 made x1 current again (the pack showed the old
rate limit beside the new one); remembering y1's text after y2 superseded it answered y1's
id as `duplicate` and kept y1 superseded, so a re-asserted fact stayed invisible.

Rule now (docs/isolation.md): supersession is a history. Deleting a middle link points its
predecessors at its successor; deleting the newest makes its predecessor current again.
Re-asserting a superseded text stores a new memory that supersedes the chain's current end."""

from __future__ import annotations

import httpx

from tests.e2e.redteam.conftest import Org, created, memory, pack, pack_ids

LIMITS = [
    f"The public API rate limit is {n} requests per minute per key, set at the gateway."
    for n in (100, 200, 300)
]
GOAL = "public API rate limit requests per minute"


async def _chain(client: httpx.AsyncClient, org: Org, **body: object) -> list[str]:
    ids: list[str] = []
    for text in LIMITS:
        extra = {"supersedes": ids[-1]} if ids else {}
        ids.append((await created(client, org.admin, content=text, **body, **extra))["id"])
    return ids


async def test_deleting_a_middle_link_keeps_the_newest_current(
    client: httpx.AsyncClient, org: Org
) -> None:
    x1, x2, x3 = await _chain(client, org)
    assert (await client.delete(f"/v1/memories/{x2}", headers=org.admin.headers)).status_code == 200
    old = (await memory(client, org.admin, x1)).json()
    assert old["superseded_by"] == x3
    assert (x3, "supersedes", "incoming") in {
        (r["id"], r["relationship"], r["direction"]) for r in old["related"]
    }
    assert (await memory(client, org.admin, x3)).json()["superseded_by"] is None
    ids = {str(i) for i in pack_ids(await pack(client, org.admin, GOAL))}
    assert x3 in ids and x1 not in ids


async def test_deleting_the_newest_makes_its_predecessor_current(
    client: httpx.AsyncClient, org: Org
) -> None:
    x1, x2, x3 = await _chain(client, org)
    assert (await client.delete(f"/v1/memories/{x3}", headers=org.admin.headers)).status_code == 200
    assert (await memory(client, org.admin, x2)).json()["superseded_by"] is None
    assert (await memory(client, org.admin, x1)).json()["superseded_by"] == x2


async def test_reasserting_a_superseded_text_makes_it_current(
    client: httpx.AsyncClient, org: Org
) -> None:
    y1, y2, y3 = await _chain(client, org)
    await client.delete(f"/v1/memories/{y3}", headers=org.admin.headers)
    again = await created(client, org.admin, content=LIMITS[0])
    assert again["id"] not in (y1, y2)
    assert any("superseded" in w for w in again["warnings"])
    assert (await memory(client, org.admin, y2)).json()["superseded_by"] == again["id"]
    assert (await memory(client, org.admin, y1)).json()["superseded_by"] == y2
    ids = {str(i) for i in pack_ids(await pack(client, org.admin, GOAL))}
    assert again["id"] in ids and y2 not in ids and y1 not in ids
    # Now current, the same text is a plain duplicate again.
    dup = await client.post(
        "/v1/remember", json={"namespace": "alice", "content": LIMITS[0]}, headers=org.admin.headers
    )
    assert (dup.json()["status"], dup.json()["id"]) == ("duplicate", again["id"])


async def test_reasserting_in_a_batch_makes_it_current(client: httpx.AsyncClient, org: Org) -> None:
    _y1, y2, y3 = await _chain(client, org)
    batch = await client.post(
        "/v1/remember/batch",
        json={
            "items": [
                {"namespace": "alice", "content": LIMITS[1]},
                {"namespace": "alice", "content": LIMITS[2]},
            ]
        },
        headers=org.admin.headers,
    )
    items = batch.json()["items"]
    assert items[1] == items[1] | {"status": "duplicate", "id": y3}
    assert items[0]["status"] == "created" and items[0]["id"] != y2
    assert (await memory(client, org.admin, y3)).json()["superseded_by"] == items[0]["id"]


async def test_reassertion_never_supersedes_outside_write_reach(
    client: httpx.AsyncClient, org: Org
) -> None:
    # p1 wrote y1; an unlimited key replaced it with a shared y2. p1 says y1 again: stored,
    # current, visible; y2 is shared, so p1 cannot hide it.
    y1 = await created(client, org.p1, project="p1", content=LIMITS[0])
    y2 = await created(client, org.admin, content=LIMITS[1], supersedes=y1["id"])
    again = await created(client, org.p1, project="p1", content=LIMITS[0])
    assert (await memory(client, org.p1, again["id"])).json()["superseded_by"] is None
    assert (await memory(client, org.admin, y2["id"])).json()["superseded_by"] is None
    assert y2["id"] not in str(again["warnings"])


async def test_reviving_never_breaks_the_content_key(client: httpx.AsyncClient, org: Org) -> None:
    # y1 superseded by y2; y1's text re-asserted as y3 (supersedes y2); y3 deleted: y2 is
    # current again. Delete y2 too: y1 would revive, and does, since nothing holds its text.
    y1 = await created(client, org.admin, content=LIMITS[0])
    y2 = await created(client, org.admin, content=LIMITS[1], supersedes=y1["id"])
    y3 = await created(client, org.admin, content=LIMITS[0])
    for gone in (y3, y2):
        response = await client.delete(f"/v1/memories/{gone['id']}", headers=org.admin.headers)
        assert response.status_code == 200
    assert (await memory(client, org.admin, y1["id"])).json()["superseded_by"] is None


async def test_a_revived_text_already_current_points_at_the_current_copy(
    client: httpx.AsyncClient, org: Org
) -> None:
    y1 = await created(client, org.p1, project="p1", content=LIMITS[0])
    y2 = await created(client, org.admin, content=LIMITS[1], supersedes=y1["id"])
    y3 = await created(client, org.p1, project="p1", content=LIMITS[0])
    response = await client.delete(f"/v1/memories/{y2['id']}", headers=org.admin.headers)
    assert response.status_code == 200, response.text
    assert (await memory(client, org.p1, y1["id"])).json()["superseded_by"] == y3["id"]
    assert (await memory(client, org.p1, y3["id"])).json()["superseded_by"] is None


async def test_reassertion_in_a_narrower_scope_never_hides_the_end(
    client: httpx.AsyncClient, org: Org
) -> None:
    # y2 is read by every agent and by p2; y1's text said again in agent-a's diary, or in p1,
    # must not hide y2 from agent-b or from p2, who cannot read the new memory.
    y1 = await created(client, org.admin, content=LIMITS[0])
    y2 = await created(client, org.admin, content=LIMITS[1], supersedes=y1["id"])
    in_diary = await created(client, org.admin, content=LIMITS[0], agent_id="agent-a")
    in_p1 = await created(client, org.admin, content=LIMITS[0], project="p1")
    for again in (in_diary, in_p1):
        assert y2["id"] not in str(again["warnings"])
    assert (await memory(client, org.admin, y2["id"])).json()["superseded_by"] is None
    assert y2["id"] in {str(i) for i in pack_ids(await pack(client, org.p2, GOAL))}
    assert y2["id"] in {
        str(i) for i in pack_ids(await pack(client, org.admin, GOAL, agent_id="agent-b"))
    }
