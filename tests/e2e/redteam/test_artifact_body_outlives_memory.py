"""Finding 4: deleting an artifact's memory returned 200, but GET /v1/artifacts/{id} still
served the body, and DELETE /v1/artifacts/{id} answered 405.

Rule now: erasing either erases both, body and memory, names included in the audit trail;
DELETE /v1/artifacts/{id} exists and takes write reach."""

from __future__ import annotations

from typing import Any

import httpx

from tests.conftest import Key, KeyFactory
from tests.e2e.redteam.conftest import Org, memory

MARKER = "nvme-7f3a"


async def _artifact(client: httpx.AsyncClient, key: Key, **body: Any) -> dict[str, Any]:
    response = await client.post(
        "/v1/artifacts",
        json={
            "namespace": "alice",
            "name": "Runner inventory",
            "body": {"hosts": [{"name": "r1", "disk": MARKER}]},
            **body,
        },
        headers=key.headers,
    )
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


async def test_deleting_the_memory_erases_the_body(
    client: httpx.AsyncClient, org: Org, sql
) -> None:
    art = await _artifact(client, org.admin)
    url = f"/v1/artifacts/{art['artifact_id']}"
    assert (await client.get(url, headers=org.admin.headers)).status_code == 200
    deleted = await client.delete(f"/v1/memories/{art['memory_id']}", headers=org.admin.headers)
    assert deleted.status_code == 200
    assert (await client.get(url, headers=org.admin.headers)).status_code == 404
    assert await sql("SELECT 1 FROM artifacts WHERE id = :id", id=art["artifact_id"]) == []


async def test_delete_artifact_erases_body_memory_and_names(
    client: httpx.AsyncClient, org: Org, sql
) -> None:
    art = await _artifact(client, org.admin, name="Runner inventory of the r-7f3a hosts")
    url = f"/v1/artifacts/{art['artifact_id']}"
    response = await client.delete(url, headers=org.admin.headers)
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["artifact_id"], body["memory_id"], body["deleted"]) == (
        art["artifact_id"],
        art["memory_id"],
        True,
    )
    assert (await client.get(url, headers=org.admin.headers)).status_code == 404
    assert (await memory(client, org.admin, art["memory_id"])).status_code == 404
    assert (await client.delete(url, headers=org.admin.headers)).status_code == 404
    rows = await sql(
        "SELECT request::text || details::text AS txt FROM audit_events WHERE org_id = :org",
        org=org.admin.org_id,
    )
    text = " ".join(r.txt for r in rows)
    assert "r-7f3a" not in text and MARKER not in text
    assert art["artifact_id"] in text  # the ids remain


async def test_delete_artifact_takes_write_reach(
    client: httpx.AsyncClient, org: Org, make_key: KeyFactory
) -> None:
    shared = await _artifact(client, org.admin)
    p2 = await _artifact(client, org.p2, project="p2")
    reader = await make_key(org=org.admin.org, scopes=["read"])
    stranger = await make_key()
    shared_url = f"/v1/artifacts/{shared['artifact_id']}"
    p2_url = f"/v1/artifacts/{p2['artifact_id']}"
    denied = await client.delete(shared_url, headers=org.p1.headers)
    assert denied.status_code == 403
    assert denied.json()["error"]["code"] == "project_access_denied"
    assert (await client.delete(p2_url, headers=org.p1.headers)).status_code == 404
    assert (await client.delete(p2_url, headers=stranger.headers)).status_code == 404
    assert (await client.delete(p2_url, headers=reader.headers)).json()["error"][
        "code"
    ] == "scope_denied"
    for url in (shared_url, p2_url):
        assert (await client.get(url, headers=org.admin.headers)).status_code == 200
    assert (await client.delete(p2_url, headers=org.p2.headers)).status_code == 200


async def test_the_body_moves_with_its_memorys_project(client: httpx.AsyncClient, org: Org) -> None:
    # An artifact's memory moved from p2 to p1: p2 can no longer read the body, p1 can.
    art = await _artifact(client, org.admin, project="p2")
    moved = await client.patch(
        f"/v1/memories/{art['memory_id']}", json={"project": "p1"}, headers=org.admin.headers
    )
    assert moved.status_code == 200, moved.text
    url = f"/v1/artifacts/{art['artifact_id']}"
    assert (await memory(client, org.p2, art["memory_id"])).status_code == 404
    assert (await client.get(url, headers=org.p2.headers)).status_code == 404
    assert (await client.delete(url, headers=org.p2.headers)).status_code == 404
    assert (await client.get(url, headers=org.p1.headers)).json()["project"] == "p1"
