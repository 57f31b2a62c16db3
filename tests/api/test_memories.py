"""POST /v1/remember, /v1/remember/batch and the memory endpoints, against real Postgres."""

from __future__ import annotations

import uuid

import httpx
import psycopg
import pytest

from tests.conftest import Key, KeyFactory

FACT = "We chose Postgres full-text search over Elasticsearch to keep one datastore."


async def remember(client: httpx.AsyncClient, auth: dict[str, str], **body: object) -> httpx.Response:
    body.setdefault("namespace", "alice")
    body.setdefault("content", FACT)
    return await client.post("/v1/remember", json=body, headers=auth)


async def test_remember_creates_and_reports(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    response = await remember(client, auth, type="decision", tags=["search"])
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["status"] == "created"
    assert body["type"] == "decision"
    assert body["facet"] == "decisions"
    assert body["namespace"] == "alice"
    assert body["name"].startswith("We chose Postgres")
    assert body["redactions"] == []
    got = await client.get(f"/v1/memories/{body['id']}", headers=auth)
    assert got.status_code == 200
    assert got.json()["content"] == FACT
    assert got.json()["tags"] == ["search"]


async def test_exact_duplicate_returns_existing_id(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    first = (await remember(client, auth)).json()
    again = await remember(client, auth, content="  we chose POSTGRES full-text search over Elasticsearch to keep one   datastore. ")
    assert again.json()["status"] == "duplicate"
    assert again.json()["id"] == first["id"]
    # Another namespace is not a duplicate.
    other = await remember(client, auth, namespace="bob")
    assert other.json()["status"] == "created"


async def test_near_duplicate_listed_with_score(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    first = (await remember(client, auth, type="decision")).json()
    near = await remember(
        client, auth, type="decision",
        content="We chose Postgres full-text search over Elasticsearch, to keep one datastore!",
    )
    body = near.json()
    assert body["status"] == "created"
    assert [d["id"] for d in body["near_duplicates"]] == [first["id"]]
    assert 0.8 <= body["near_duplicates"][0]["score"] <= 1.0
    # Different type: not compared.
    other_type = await remember(
        client, auth, type="gotcha",
        content="We chose Postgres full-text search over Elasticsearch, keeping one datastore.",
    )
    assert other_type.json()["near_duplicates"] == []


async def test_secrets_are_redacted_before_storage(
    client: httpx.AsyncClient, auth: dict[str, str], pg_url: str, key: Key
) -> None:
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    response = await remember(
        client, auth, type="gotcha",
        content=f"The deploy script needs GITHUB_TOKEN={token} and fails without it on CI runners.",
        metadata={"password": "hunter2hunter2", "note": "ok"},
        url="https://user:s3cretpass@example.com/path",
    )
    assert response.status_code == 201, response.text
    body = response.json()
    labels = {r["label"] for r in body["redactions"]}
    assert "GITHUB_TOKEN" in labels and "PASSWORD" in labels
    assert token not in response.text and "hunter2hunter2" not in response.text
    with psycopg.connect(pg_url) as conn:
        dump = conn.execute(
            "SELECT string_agg(t::text, ' ') FROM memories t WHERE org_id = %s", (key.org_id,)
        ).fetchone()[0]
        audit = conn.execute(
            "SELECT string_agg(t::text, ' ') FROM audit_events t WHERE org_id = %s", (key.org_id,)
        ).fetchone()[0]
    for secret in (token, "hunter2hunter2", "s3cretpass"):
        assert secret not in dump
        assert secret not in audit
    assert "[GITHUB_TOKEN:REDACTED]" in dump


async def test_gate_rejection_is_422_with_reasons_and_audited(
    client: httpx.AsyncClient, auth: dict[str, str], pg_url: str, key: Key
) -> None:
    response = await remember(client, auth, content="ok")
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "gate_rejected"
    assert error["field"] == "content"
    assert error["reasons"] and all(r["code"] and r["hint"] for r in error["reasons"])
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(
            "SELECT outcome, rejection_count, details FROM audit_events WHERE org_id = %s AND action = 'remember'",
            (key.org_id,),
        ).fetchall()
        stored = conn.execute("SELECT count(*) FROM memories WHERE org_id = %s", (key.org_id,)).fetchone()
    assert [(r[0], r[1]) for r in rows] == [("rejected", 1)]
    assert stored == (0,)


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"type": "opinion"}, "type"),
        ({"namespace": "a::b"}, "namespace"),
        ({"namespace": "a:b:c:d"}, "namespace"),
        ({"namespace": ":a"}, "namespace"),
        ({"namespace": "a%"}, "namespace"),
        ({"namespace": "*"}, "namespace"),
        ({"namespace": "x" * 65}, "namespace"),
        ({"metadata": {"k": "v" * 20000}}, "metadata"),
        ({"metadata": {"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {"i": 1}}}}}}}}}}, "metadata"),
        ({"related": [{"id": str(uuid.uuid4()), "relationship": "depends_on"}]}, "related.0.id"),
        ({"supersedes": str(uuid.uuid4())}, "supersedes"),
        ({"related": [{"id": "nope"}]}, "related.0.id"),
        ({"tags": [""]}, "tags"),
        ({"surprise": 1}, "surprise"),
        ({"content": None}, "content"),
    ],
    ids=[
        "unknown-type", "empty-segment", "four-segments", "leading-colon", "percent", "star",
        "long-segment", "big-metadata", "deep-metadata", "unknown-related", "unknown-supersedes",
        "bad-uuid", "empty-tag", "unknown-field", "null-content",
    ],
)
async def test_bad_input_names_the_field_and_stores_nothing(
    client: httpx.AsyncClient, auth: dict[str, str], key: Key, pg_url: str, patch: dict[str, object], field: str
) -> None:
    body: dict[str, object] = {"namespace": "alice", "content": FACT, **patch}
    response = await client.post("/v1/remember", json=body, headers=auth)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["field"] == field
    assert "Traceback" not in response.text
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM memories WHERE org_id = %s", (key.org_id,)).fetchone() == (0,)


async def test_related_in_another_org_is_unknown(client: httpx.AsyncClient, make_key: KeyFactory) -> None:
    a, b = await make_key(), await make_key()
    foreign = (await remember(client, a.headers)).json()["id"]
    response = await remember(client, b.headers, related=[{"id": foreign, "relationship": "depends_on"}])
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "related.0.id"
    # And it cannot be read either.
    assert (await client.get(f"/v1/memories/{foreign}", headers=b.headers)).status_code == 404


async def test_relations_and_supersedes(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    old = (await remember(client, auth, type="decision", content="Use pip-tools to pin dependencies for the API service.")).json()
    base = (await remember(client, auth, type="constraint", content="The API service must build offline in CI.")).json()
    new = await remember(
        client, auth, type="decision",
        content="Use uv lock files to pin dependencies for the API service; pip-tools is retired.",
        supersedes=old["id"], related=[{"id": base["id"], "relationship": "depends_on"}],
    )
    assert new.status_code == 201, new.text
    new_id = new.json()["id"]
    old_row = (await client.get(f"/v1/memories/{old['id']}", headers=auth)).json()
    assert old_row["superseded_by"] == new_id
    new_row = (await client.get(f"/v1/memories/{new_id}", headers=auth)).json()
    rels = {(r["id"], r["relationship"], r["direction"]) for r in new_row["related"]}
    assert (base["id"], "depends_on", "outgoing") in rels
    assert (old["id"], "supersedes", "outgoing") in rels


async def test_namespace_and_project_limits(client: httpx.AsyncClient, make_key: KeyFactory) -> None:
    limited = await make_key(scopes=["read", "write"], projects=["p1"], namespaces=["alice:s1"])
    ok = await remember(client, limited.headers, namespace="alice:s1:t1", project="p1")
    assert ok.status_code == 201, ok.text
    outside_ns = await remember(client, limited.headers, namespace="alice:s2")
    assert outside_ns.status_code == 403
    assert outside_ns.json()["error"]["code"] == "namespace_access_denied"
    above = await remember(client, limited.headers, namespace="alice")
    assert above.status_code == 403
    outside_project = await remember(client, limited.headers, namespace="alice:s1", project="p2")
    assert outside_project.status_code == 403
    assert outside_project.json()["error"]["message"] == "Project access denied: p2"


async def test_read_only_key_cannot_write(client: httpx.AsyncClient, make_key: KeyFactory) -> None:
    reader = await make_key(scopes=["read"])
    response = await remember(client, reader.headers)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "scope_denied"


async def test_batch_mixed_outcomes(client: httpx.AsyncClient, auth: dict[str, str], key: Key, pg_url: str) -> None:
    items = [
        {"namespace": "alice", "content": "The staging database is reset every Sunday at 02:00 UTC."},
        {"namespace": "alice", "content": "thanks!"},
        {"namespace": "alice", "content": "The staging database is reset every Sunday at 02:00 UTC."},
        {"namespace": "alice:s1", "type": "gotcha", "content": "Flaky test test_upload fails when TMPDIR is on tmpfs."},
    ]
    response = await client.post("/v1/remember/batch", json={"items": items}, headers=auth)
    assert response.status_code == 200, response.text
    body = response.json()
    statuses = [i["status"] for i in body["items"]]
    assert statuses == ["created", "rejected", "duplicate", "created"]
    assert body["items"][2]["id"] == body["items"][0]["id"]
    assert body["items"][1]["reasons"][0]["code"]
    assert (body["created"], body["duplicates"], body["rejected"]) == (2, 1, 1)
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(
            "SELECT action, rejection_count, details->'counts' FROM audit_events WHERE org_id = %s",
            (key.org_id,),
        ).fetchall()
    assert rows == [("remember_batch", 1, {"created": 2, "duplicate": 1, "rejected": 1})]


async def test_batch_invalid_item_refuses_whole_batch(client: httpx.AsyncClient, auth: dict[str, str], key: Key, pg_url: str) -> None:
    items = [
        {"namespace": "alice", "content": FACT},
        {"namespace": "alice", "content": FACT, "type": "nope"},
    ]
    response = await client.post("/v1/remember/batch", json={"items": items}, headers=auth)
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "items.1.type"
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM memories WHERE org_id = %s", (key.org_id,)).fetchone() == (0,)


async def test_batch_over_limit(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    items = [{"namespace": "alice", "content": f"Fact number {i} about the build cache."} for i in range(501)]
    response = await client.post("/v1/remember/batch", json={"items": items}, headers=auth)
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "items"


async def test_list_filters_and_paging(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    for i in range(5):
        await remember(client, auth, namespace="alice:s1", type="gotcha", tags=["ci"],
                       content=f"Gotcha {i}: the CI cache key must include the lockfile hash {i}.")
    await remember(client, auth, namespace="alice:s2", content="Session two notes that the build uses Bazel.")
    await remember(client, auth, namespace="alice_x", content="Another user whose name shares a prefix.")
    page = (await client.get("/v1/memories", params={"namespace": "alice:*", "limit": 2}, headers=auth)).json()
    assert (page["total"], page["limit"], page["offset"], page["has_more"]) == (6, 2, 0, True)
    last = (await client.get("/v1/memories", params={"namespace": "alice:*", "limit": 2, "offset": 4}, headers=auth)).json()
    assert last["has_more"] is False and len(last["items"]) == 2
    exact = (await client.get("/v1/memories", params={"namespace": "alice:s1"}, headers=auth)).json()
    assert exact["total"] == 5
    by_tag = (await client.get("/v1/memories", params={"tag": "ci", "type": "gotcha"}, headers=auth)).json()
    assert by_tag["total"] == 5
    everything = (await client.get("/v1/memories", params={"namespace": "*"}, headers=auth)).json()
    assert everything["total"] == 7
    bad = await client.get("/v1/memories", params={"namespace": "a::b"}, headers=auth)
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "namespace"


async def test_patch_regates_and_reembeds(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    mid = (await remember(client, auth)).json()["id"]
    ok = await client.patch(f"/v1/memories/{mid}", json={"content": "We chose Meilisearch after all, for typo tolerance.", "tags": ["search"]}, headers=auth)
    assert ok.status_code == 200, ok.text
    assert ok.json()["content"].startswith("We chose Meilisearch")
    bad = await client.patch(f"/v1/memories/{mid}", json={"content": "ok"}, headers=auth)
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "gate_rejected"
    empty = await client.patch(f"/v1/memories/{mid}", json={}, headers=auth)
    assert empty.status_code == 422


async def test_delete_erases_and_leaves_tombstone(
    client: httpx.AsyncClient, auth: dict[str, str], key: Key, pg_url: str
) -> None:
    a = (await remember(client, auth)).json()["id"]
    b = (await remember(client, auth, content="The nightly export job depends on the search index.", related=[{"id": a, "relationship": "depends_on"}])).json()["id"]
    response = await client.delete(f"/v1/memories/{a}", headers=auth)
    assert response.status_code == 200 and response.json()["deleted"] is True
    assert (await client.get(f"/v1/memories/{a}", headers=auth)).status_code == 404
    assert (await client.delete(f"/v1/memories/{a}", headers=auth)).status_code == 404
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM memories WHERE org_id=%s AND id=%s", (key.org_id, a)).fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM relations WHERE org_id=%s", (key.org_id,)).fetchone() == (0,)
        tomb = conn.execute(
            "SELECT action, details, request FROM audit_events WHERE org_id=%s AND %s = ANY(memory_ids) AND action='delete'",
            (key.org_id, a),
        ).fetchall()
        dump = conn.execute("SELECT string_agg(t::text, ' ') FROM audit_events t WHERE org_id = %s", (key.org_id,)).fetchone()[0]
    assert len(tomb) == 1
    assert FACT not in dump
    assert (await client.get(f"/v1/memories/{b}", headers=auth)).json()["related"] == []


async def test_other_org_cannot_touch(client: httpx.AsyncClient, make_key: KeyFactory) -> None:
    a, b = await make_key(), await make_key()
    mid = (await remember(client, a.headers)).json()["id"]
    assert (await client.patch(f"/v1/memories/{mid}", json={"tags": ["x"]}, headers=b.headers)).status_code == 404
    assert (await client.delete(f"/v1/memories/{mid}", headers=b.headers)).status_code == 404
    assert (await client.get("/v1/memories", headers=b.headers)).json()["total"] == 0


async def test_a_memory_that_is_only_a_secret_is_rejected(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    token = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
    response = await remember(client, auth, content=token)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "gate_rejected"
    assert token not in response.text


async def test_nul_in_name_names_the_name(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    response = await remember(client, auth, name="bad\u0000name")
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "name"
