"""Audit rows named memories a limited key cannot read (review E): a key limited to
``alice:s1`` read, in the trail, another key's pack at ``alice:s1`` with the id, facet, score
and reason of a memory at ``alice`` (a GET of that id answers 404 to the same key). The
standard is "not even an id": another key's rows lose those ids for a limited key, in the
list, a single row and a replay, and asking the trail for such an id shows only the key's
own rows."""

from __future__ import annotations

import httpx

from tests.conftest import KeyFactory

DECISION = "We sign service tokens with RS256 and rotate the signing keys every ninety days."
GOTCHA = "The token refresh job fails when the signing key rotation overlaps a deploy window."


async def test_a_limited_key_sees_no_id_it_cannot_read_in_the_trail(
    client: httpx.AsyncClient, make_key: KeyFactory
) -> None:
    admin = await make_key()
    limited = await make_key(org=admin.org, scopes=["read", "write"], namespaces=["alice:s1"])
    up = await client.post(
        "/v1/remember",
        json={"namespace": "alice", "type": "decision", "content": DECISION},
        headers=admin.headers,
    )
    below = await client.post(
        "/v1/remember",
        json={"namespace": "alice:s1", "type": "gotcha", "content": GOTCHA},
        headers=admin.headers,
    )
    hidden, seen = up.json()["id"], below.json()["id"]
    packed = await client.post(
        "/v1/context",
        json={"goal": "signing key rotation for service tokens", "namespace": "alice:s1"},
        headers=admin.headers,
    )
    ids = {i["id"] for s in packed.json()["sections"] for i in s["items"]}
    assert {hidden, seen} <= ids  # the admin's pack drew on alice
    assert (await client.get(f"/v1/memories/{hidden}", headers=limited.headers)).status_code == 404

    listed = await client.get(
        "/v1/audit",
        params={"namespace": "alice:s1", "action": "context", "full": "true"},
        headers=limited.headers,
    )
    assert listed.status_code == 200, listed.text
    assert hidden not in listed.text
    (row,) = listed.json()["items"]
    assert [str(i) for i in row["memory_ids"]] == [seen] or seen in row["memory_ids"]
    assert seen in listed.text  # what the key can read stays
    one = await client.get(f"/v1/audit/{row['id']}", headers=limited.headers)
    assert one.status_code == 200 and hidden not in one.text and seen in one.text
    replay = await client.post(f"/v1/audit/{row['id']}/replay", headers=limited.headers)
    assert replay.status_code == 200, replay.text
    assert hidden not in replay.text
    # Which calls touched the hidden memory is not the limited key's to learn.
    about = await client.get(
        "/v1/audit", params={"memory_id": hidden, "full": "true"}, headers=limited.headers
    )
    assert about.status_code == 200 and about.json()["items"] == []
    # The unrestricted admin still sees everything.
    full = await client.get(f"/v1/audit/{row['id']}", headers=admin.headers)
    assert hidden in full.text
