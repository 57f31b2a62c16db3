"""Finding 3: a content PATCH kept the old, content-derived name, so packs went on showing
the old first sentence, even one holding a secret the new content removed; and after a
DELETE the remember audit row still held the original derived name.

Rule now: a content change re-derives a derived name, keeps an explicit one, and redacts
both; erasing a memory erases every name it had from the audit trail."""

from __future__ import annotations

import httpx

from tests.e2e.redteam.conftest import Org, created, memory, pack

TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
OLD = "Deploys use the staging runner pool. Each deploy takes about four minutes end to end."
NEW = "Deploys use the production runner pool now. The staging pool was retired in June."


async def test_content_patch_rederives_a_derived_name(client: httpx.AsyncClient, org: Org) -> None:
    row = await created(client, org.admin, content=OLD)
    assert row["name"] == "Deploys use the staging runner pool"
    patched = await client.patch(
        f"/v1/memories/{row['id']}", json={"content": NEW}, headers=org.admin.headers
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["name"] == "Deploys use the production runner pool now"
    result = await pack(client, org.admin, "deploys runner pool production")
    assert "Deploys use the production runner pool now" in result["markdown"]
    assert "Deploys use the staging runner pool" not in result["markdown"]


async def test_content_patch_keeps_an_explicit_name(client: httpx.AsyncClient, org: Org) -> None:
    row = await created(client, org.admin, content=OLD, name="Deploy runner pool")
    patched = await client.patch(
        f"/v1/memories/{row['id']}", json={"content": NEW}, headers=org.admin.headers
    )
    assert patched.json()["name"] == "Deploy runner pool"


async def test_a_secret_in_the_old_derived_name_goes_with_the_content(
    client: httpx.AsyncClient, org: Org, sql
) -> None:
    # The derived name of a redacted content holds the placeholder, never the token, and a
    # content change takes the placeholder name away too.
    row = await created(
        client, org.admin, content=f"CI needs GITHUB_TOKEN={TOKEN} to publish. It runs nightly."
    )
    assert TOKEN not in row["name"]
    patched = await client.patch(
        f"/v1/memories/{row['id']}",
        json={
            "content": "CI publishes with the deploy bot's own credentials now. It runs nightly."
        },
        headers=org.admin.headers,
    )
    assert patched.json()["name"] == "CI publishes with the deploy bot's own credentials now"
    assert "GITHUB_TOKEN" not in patched.text


async def test_an_explicit_name_is_redacted_when_set(client: httpx.AsyncClient, org: Org) -> None:
    row = await created(client, org.admin, content=OLD)
    patched = await client.patch(
        f"/v1/memories/{row['id']}",
        json={"name": f"pool token {TOKEN}", "content": NEW},
        headers=org.admin.headers,
    )
    assert patched.status_code == 200
    assert TOKEN not in patched.text


async def test_delete_erases_current_and_former_names_from_the_audit_trail(
    client: httpx.AsyncClient, org: Org, sql
) -> None:
    row = await created(client, org.admin, content=OLD)
    await client.patch(
        f"/v1/memories/{row['id']}", json={"content": NEW}, headers=org.admin.headers
    )
    current = (await memory(client, org.admin, row["id"])).json()["name"]
    assert (
        await client.delete(f"/v1/memories/{row['id']}", headers=org.admin.headers)
    ).status_code == 200
    trail = await sql(
        "SELECT request::text || details::text AS txt FROM audit_events "
        "WHERE org_id = :org AND :id = ANY(memory_ids)",
        org=org.admin.org_id,
        id=row["id"],
    )
    assert len(trail) >= 3  # remember, patch, get, delete: the ids remain
    text = " ".join(r.txt for r in trail)
    for name in (row["name"], current):
        assert name not in text
    assert "[erased]" in text


async def test_a_refused_write_of_the_same_text_keeps_no_name_in_the_trail(
    client: httpx.AsyncClient, org: Org, sql
) -> None:
    # A write refused as a conflict (its text held under another key) named no memory: its
    # row must not keep the first sentence the erased memory's name was derived from.
    body = {"namespace": "alice", "content": OLD}
    row = (await client.post("/v1/remember", json={**body, "key": "k1"}, headers=org.admin.headers)).json()
    refused = await client.post("/v1/remember", json={**body, "key": "k2"}, headers=org.admin.headers)
    assert refused.status_code == 409, refused.text
    assert (
        await client.delete(f"/v1/memories/{row['id']}", headers=org.admin.headers)
    ).status_code == 200
    trail = await sql(
        "SELECT request::text || details::text AS txt FROM audit_events WHERE org_id = :org",
        org=org.admin.org_id,
    )
    assert row["name"] not in " ".join(r.txt for r in trail)
