"""The supersedes rule (every reader of the old memory reads the new one) held at write time
only (review G): a shared successor could then be PATCHed into another project, so the old
memory's readers lost both. Moving a successor out of its predecessors' projects is refused."""

from __future__ import annotations

import httpx

from tests.conftest import KeyFactory

OLD = "The staging database lives on port 5433, not the default 5432."
NEW = "The staging database moved to port 6543 after the November migration."


async def test_a_successor_does_not_move_away_from_its_predecessors_readers(
    client: httpx.AsyncClient, make_key: KeyFactory
) -> None:
    admin = await make_key()
    reader = await make_key(org=admin.org, scopes=["read"], projects=["p"])
    old = await client.post(
        "/v1/remember",
        json={"namespace": "team", "type": "gotcha", "content": OLD, "project": "p"},
        headers=admin.headers,
    )
    new = await client.post(
        "/v1/remember",
        json={"namespace": "team", "type": "gotcha", "content": NEW,
              "supersedes": old.json()["id"]},
        headers=admin.headers,
    )
    assert new.status_code == 201, new.text
    new_id = new.json()["id"]
    moved = await client.patch(
        f"/v1/memories/{new_id}", json={"project": "q"}, headers=admin.headers
    )
    assert moved.status_code == 422, moved.text
    assert moved.json()["error"]["field"] == "project"
    assert (await client.get(f"/v1/memories/{new_id}", headers=reader.headers)).status_code == 200
    # Into the predecessor's own project it may move: its readers still read it.
    back = await client.patch(f"/v1/memories/{new_id}", json={"project": "p"}, headers=admin.headers)
    assert back.status_code == 200, back.text
