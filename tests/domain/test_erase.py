"""DELETE /v1/namespaces/{namespace}: erase a subtree, all of it, and nothing else."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import psycopg
from fastapi import FastAPI

from tests.conftest import KeyFactory

SECRET_WORD = "zanzibarquokka"


def dump_tables(url: str) -> str:
    """Every row of every table of the database, as text (what a dump would show)."""
    chunks: list[str] = []
    with psycopg.connect(url) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            ).fetchall()
        ]
        for table in tables:
            for (row,) in conn.execute(f'SELECT row_to_json(t)::text FROM "{table}" t'):
                chunks.append(row)
    return "\n".join(chunks)


async def seed_user(client: httpx.AsyncClient, auth: dict[str, str], user: str, word: str) -> dict[str, Any]:
    """A user with memories in its root and a session, linked to one another, an artifact,
    and a memory of another user related to one of them."""
    async def remember(**body: Any) -> dict[str, Any]:
        r = await client.post("/v1/remember", json=body, headers=auth)
        assert r.status_code == 201, r.text
        return r.json()  # type: ignore[no-any-return]

    a = await remember(
        namespace=user, type="decision",
        content=f"We store {word} invoices in Postgres because the auditors require one datastore.",
        metadata={"note": f"{word} metadata"},
    )
    b = await remember(
        namespace=f"{user}:s1", type="gotcha",
        content=f"The {word} importer times out when the CSV has more than ten thousand rows.",
        related=[{"id": a["id"], "relationship": "depends_on"}],
    )
    art = await client.post(
        "/v1/artifacts",
        json={"namespace": f"{user}:s1", "name": f"{word} report", "body": {"rows": [word, 1, 2]}},
        headers=auth,
    )
    assert art.status_code == 201, art.text
    await client.post("/v1/context", json={"goal": f"{word} importer", "namespace": f"{user}:s1"}, headers=auth)
    return {"a": a["id"], "b": b["id"], "artifact": art.json()["artifact_id"]}


async def test_erase_user_removes_everything(
    client: httpx.AsyncClient, make_key: KeyFactory, pg_url: str, app: FastAPI
) -> None:
    admin = await make_key()
    word = SECRET_WORD + uuid.uuid4().hex[:6]
    ids = await seed_user(client, admin.headers, "alice", word)
    # A survivor in another user's namespace, related to and superseding an erased memory.
    survivor = await client.post(
        "/v1/remember",
        json={
            "namespace": "bob", "type": "decision",
            "content": "Bob keeps his notes in plain text files under version control.",
            "related": [{"id": ids["b"], "relationship": "related_to"}],
        },
        headers=admin.headers,
    )
    assert survivor.status_code == 201, survivor.text
    survivor_id = survivor.json()["id"]
    alice_key = await make_key(org=admin.org, namespaces=["alice"])
    alice_session_key = await make_key(org=admin.org, namespaces=["alice:s1"])
    wide_key = await make_key(org=admin.org, namespaces=["alice", "bob"])

    response = await client.delete("/v1/namespaces/alice", headers=alice_key.headers)
    assert response.status_code == 200, response.text
    receipt = response.json()
    assert receipt["namespace"] == "alice"
    assert receipt["erased"]["memories"] == 3  # a, b and the artifact's memory
    assert receipt["erased"]["relations"] == 2  # b -> a and survivor -> b
    assert receipt["erased"]["artifacts"] == 1
    assert receipt["erased"]["keys"] == 2  # alice_key (the caller's own) and alice_session_key
    assert receipt["erased"]["audit_rows_scrubbed"] >= 2
    assert receipt["audit_id"] and receipt["erased_at"]

    # The erased keys no longer authenticate; the wider key survives.
    assert (await client.get("/v1/whoami", headers=alice_session_key.headers)).status_code == 401
    assert (await client.get("/v1/whoami", headers=wide_key.headers)).status_code == 200

    auth = admin.headers
    for mid in (ids["a"], ids["b"]):
        assert (await client.get(f"/v1/memories/{mid}", headers=auth)).status_code == 404
    listed = await client.get("/v1/memories", params={"namespace": "*"}, headers=auth)
    assert [m["id"] for m in listed.json()["items"]] == [survivor_id]
    got = (await client.get(f"/v1/memories/{survivor_id}", headers=auth)).json()
    assert got["related"] == []
    pack = await client.post("/v1/context", json={"goal": "importer invoices auditors datastore", "namespace": "alice:s1"}, headers=auth)
    assert pack.json()["sections"] == []
    assert (await client.get(f"/v1/artifacts/{ids['artifact']}", headers=auth)).status_code == 404

    # Nothing erased is anywhere in the database; the audit trail still holds the ids.
    dump = dump_tables(pg_url)
    assert word not in dump
    assert ids["a"] in dump and ids["b"] in dump
    audit = await client.get("/v1/audit", params={"memory_id": ids["b"]}, headers=auth)
    assert audit.status_code == 200
    actions = {row["action"] for row in audit.json()["items"]}
    assert {"remember", "erase"} <= actions


async def test_erase_session_keeps_the_user(client: httpx.AsyncClient, key: Any) -> None:
    ids = await seed_user(client, key.headers, "carol", "pelican")
    response = await client.delete("/v1/namespaces/carol:s1", headers=key.headers)
    assert response.status_code == 200, response.text
    assert response.json()["erased"]["memories"] == 2  # b and the artifact's memory
    assert (await client.get(f"/v1/memories/{ids['a']}", headers=key.headers)).status_code == 200
    assert (await client.get(f"/v1/memories/{ids['b']}", headers=key.headers)).status_code == 404
    # A namespace that merely starts with the same letters is another namespace.
    again = await client.delete("/v1/namespaces/caro", headers=key.headers)
    assert again.json()["erased"]["memories"] == 0


async def test_erase_needs_write_key_covering_the_namespace(
    client: httpx.AsyncClient, make_key: KeyFactory
) -> None:
    admin = await make_key()
    await seed_user(client, admin.headers, "dave", "walrus")
    read_only = await make_key(org=admin.org, scopes=["read"])
    below = await make_key(org=admin.org, namespaces=["dave:s1"])
    projects = await make_key(org=admin.org, projects=["p1"])
    other_org = await make_key()
    r = await client.delete("/v1/namespaces/dave", headers=read_only.headers)
    assert r.status_code == 403 and r.json()["error"]["code"] == "scope_denied"
    r = await client.delete("/v1/namespaces/dave", headers=below.headers)
    assert r.status_code == 403 and r.json()["error"]["field"] == "namespace"
    r = await client.delete("/v1/namespaces/dave", headers=projects.headers)
    assert r.status_code == 403
    r = await client.delete("/v1/namespaces/dave", headers=other_org.headers)
    assert r.status_code == 200 and r.json()["erased"]["memories"] == 0
    r = await client.delete("/v1/namespaces/bad%20name", headers=admin.headers)
    assert r.status_code == 422 and r.json()["error"]["field"] == "namespace"
    listed = await client.get("/v1/memories", params={"namespace": "dave:*"}, headers=admin.headers)
    assert listed.json()["total"] == 3


async def test_erase_scrubs_a_renamed_memorys_former_name(
    client: httpx.AsyncClient, make_key: KeyFactory, pg_url: str
) -> None:
    admin = await make_key()
    word = "okapiwombat" + uuid.uuid4().hex[:6]
    r = await client.post(
        "/v1/remember",
        json={"namespace": "erin", "type": "gotcha",
              "content": f"The {word} exporter drops rows when the locale uses commas."},
        headers=admin.headers,
    )
    assert r.status_code == 201, r.text
    mid = r.json()["id"]
    renamed = await client.patch(
        f"/v1/memories/{mid}", json={"name": "Exporter locale gotcha"}, headers=admin.headers
    )
    assert renamed.status_code == 200, renamed.text
    erased = await client.delete("/v1/namespaces/erin", headers=admin.headers)
    assert erased.status_code == 200 and erased.json()["erased"]["memories"] == 1
    dump = dump_tables(pg_url)
    assert word not in dump and mid in dump


async def test_erase_scrubs_the_keys_the_trail_recorded(
    client: httpx.AsyncClient, make_key: KeyFactory, pg_url: str
) -> None:
    admin = await make_key()
    word = "quetzalnarwhal" + uuid.uuid4().hex[:6]
    ids = {}
    for ns in ("fay", "gus"):
        r = await client.post(
            "/v1/remember",
            json={"namespace": ns, "type": "gotcha", "key": f"{word}-{ns}-home",
                  "content": f"The {ns} laptop loses its VPN profile after every OS update."},
            headers=admin.headers,
        )
        assert r.status_code == 201, r.text
        ids[ns] = r.json()["id"]
    # A namespace erase and a single delete both leave only the id.
    assert (await client.delete("/v1/namespaces/fay", headers=admin.headers)).status_code == 200
    assert (await client.delete(f"/v1/memories/{ids['gus']}", headers=admin.headers)).status_code == 200
    dump = dump_tables(pg_url)
    assert word not in dump
    assert ids["fay"] in dump and ids["gus"] in dump
