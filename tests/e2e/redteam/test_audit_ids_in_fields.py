"""Audit rows name memory ids outside ``memory_ids`` too (review G): a write's
``request.related`` and ``request.supersedes``, ``details.superseded_id``. A key limited to
namespaces or projects must not read, in another key's row, an id it cannot read."""

from __future__ import annotations

import httpx

from tests.conftest import KeyFactory

UP = "We sign service tokens with RS256 and rotate the signing keys every ninety days."
BELOW = "The token refresh job fails when the signing key rotation overlaps a deploy window."


async def test_related_ids_out_of_reach_are_not_shown(
    client: httpx.AsyncClient, make_key: KeyFactory
) -> None:
    admin = await make_key()
    limited = await make_key(org=admin.org, scopes=["read"], namespaces=["alice:s1"])
    up = await client.post(
        "/v1/remember",
        json={"namespace": "alice", "type": "decision", "content": UP},
        headers=admin.headers,
    )
    hidden = up.json()["id"]
    below = await client.post(
        "/v1/remember",
        json={"namespace": "alice:s1", "type": "gotcha", "content": BELOW,
              "related": [{"id": hidden, "relationship": "depends_on"}]},
        headers=admin.headers,
    )
    assert below.status_code == 201, below.text
    seen = below.json()["id"]
    assert (await client.get(f"/v1/memories/{hidden}", headers=limited.headers)).status_code == 404
    listed = await client.get(
        "/v1/audit",
        params={"namespace": "alice:s1", "action": "remember", "full": "true"},
        headers=limited.headers,
    )
    assert listed.status_code == 200, listed.text
    (row,) = listed.json()["items"]
    assert seen in listed.text
    assert hidden not in listed.text
    one = await client.get(f"/v1/audit/{row['id']}", headers=limited.headers)
    assert one.status_code == 200 and hidden not in one.text and seen in one.text
    page = await client.get(f"/v1/audit/{row['id']}", headers=admin.headers)
    assert hidden in page.text


async def test_related_ids_of_another_project_are_not_shown(
    client: httpx.AsyncClient, make_key: KeyFactory
) -> None:
    admin = await make_key()
    limited = await make_key(org=admin.org, scopes=["read"], projects=["q"])
    first = await client.post(
        "/v1/remember",
        json={"namespace": "team", "type": "decision", "content": UP, "project": "p"},
        headers=admin.headers,
    )
    hidden = first.json()["id"]
    second = await client.post(
        "/v1/remember",
        json={"namespace": "team", "type": "gotcha", "content": BELOW, "project": "q",
              "related": [{"id": hidden, "relationship": "depends_on"}]},
        headers=admin.headers,
    )
    assert second.status_code == 201, second.text
    listed = await client.get(
        "/v1/audit", params={"action": "remember", "full": "true"}, headers=limited.headers
    )
    assert listed.status_code == 200, listed.text
    assert second.json()["id"] in listed.text
    assert hidden not in listed.text, listed.text
