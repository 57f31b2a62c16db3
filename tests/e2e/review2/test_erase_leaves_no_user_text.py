"""Review 2: erasing a namespace left user text in the audit trail: the tag filters of list
calls, the keys of lookups that found nothing, and the keys of rejected and conflicting keyed
writes. Every free-text field the calls made at the subtree recorded is now erased."""

from __future__ import annotations

import httpx

from tests.conftest import KeyFactory, SqlRows

TAG = "tag-about-zoe-9f2"
MISSING_KEY = "zoe-missing-key-77a"
REJECTED_KEY = "zoe-rejected-key-31c"
CONFLICT_KEY = "zoe-conflict-key-5d0"
FIELD = "zoe_field_c4e"
TEXT = "Zoe prefers the dark theme and keyboard shortcuts in every tool she uses daily."


async def test_erase_scrubs_tags_keys_and_names_of_every_call(
    client: httpx.AsyncClient, make_key: KeyFactory, sql: SqlRows
) -> None:
    key = await make_key()
    h = key.headers
    ns = "zoe:s1"
    await client.get("/v1/memories", params={"namespace": ns, "tag": TAG}, headers=h)
    missing = await client.get(
        "/v1/memories", params={"namespace": ns, "key": MISSING_KEY}, headers=h
    )
    assert missing.status_code in (200, 404)
    rejected = await client.post(
        "/v1/remember", json={"namespace": ns, "content": "ok", "key": REJECTED_KEY}, headers=h
    )
    assert rejected.status_code == 422
    first = await client.post(
        "/v1/remember", json={"namespace": ns, "content": TEXT, "key": CONFLICT_KEY}, headers=h
    )
    assert first.status_code == 201, first.text
    conflict = await client.post(
        "/v1/remember",
        json={"namespace": ns, "content": TEXT + " Also light mode at noon.",
              "key": CONFLICT_KEY, "agent_id": "helper"},
        headers=h,
    )
    assert conflict.status_code == 409, conflict.text
    art = await client.post(
        "/v1/artifacts", json={"namespace": ns, "name": "Prefs", "body": {FIELD: 1}}, headers=h
    )
    await client.get(
        f"/v1/artifacts/{art.json()['artifact_id']}", params={"fields": FIELD}, headers=h
    )
    before = await sql(
        "SELECT request::text FROM audit_events WHERE org_id = :o", o=key.org_id
    )
    joined = " ".join(r[0] for r in before)
    for word in (TAG, MISSING_KEY, REJECTED_KEY, CONFLICT_KEY, FIELD):
        assert word in joined, word  # recorded while the namespace lived

    erased = await client.delete("/v1/namespaces/zoe", headers=h)
    assert erased.status_code == 200, erased.text
    after = await sql(
        "SELECT request::text || ' ' || details::text FROM audit_events WHERE org_id = :o",
        o=key.org_id,
    )
    joined = " ".join(r[0] for r in after)
    for word in (TAG, MISSING_KEY, REJECTED_KEY, CONFLICT_KEY, FIELD):
        assert word not in joined, word


async def test_erase_scrubs_the_missing_field_names_of_artifact_reads(
    client: httpx.AsyncClient, make_key: KeyFactory, sql: SqlRows
) -> None:
    """review29: the audit row's ``details.fields_missing`` kept the field names a read asked
    for and did not find after the namespace was erased (``request.fields`` was scrubbed)."""
    key = await make_key()
    h = key.headers
    missing = "zoe_missing_field_e81"
    art = await client.post(
        "/v1/artifacts", json={"namespace": "zoe:s2", "name": "Prefs", "body": {"a": 1}}, headers=h
    )
    read = await client.get(
        f"/v1/artifacts/{art.json()['artifact_id']}", params={"fields": ["a", missing]}, headers=h
    )
    assert read.status_code == 200 and read.json()["missing"] == [missing], read.text
    erased = await client.delete("/v1/namespaces/zoe", headers=h)
    assert erased.status_code == 200, erased.text
    after = await sql(
        "SELECT request::text || ' ' || details::text FROM audit_events WHERE org_id = :o",
        o=key.org_id,
    )
    assert not [r[0] for r in after if missing in r[0]]
