"""api/lifecycle.py: DELETE /v1/namespaces/{namespace} answers the erasure's receipt (counts
per kind, the time, the audit row's id), 422 for a malformed namespace, 403 without write scope
or outside the key's prefixes. What an erasure erases is tests/domain/test_erase.py."""

from __future__ import annotations

import httpx

from tests.conftest import Key, KeyFactory, SqlRows

FACT = "The staging database listens on port 5433; the default 5432 is the legacy cluster."


async def test_the_receipt_counts_what_went_and_names_its_audit_row(
    client: httpx.AsyncClient, key: Key, sql: SqlRows
) -> None:
    stored = await client.post(
        "/v1/remember", json={"namespace": "alice:s1", "content": FACT}, headers=key.headers
    )
    assert stored.status_code == 201
    response = await client.delete("/v1/namespaces/alice", headers=key.headers)
    assert response.status_code == 200, response.text
    receipt = response.json()
    assert receipt["namespace"] == "alice"
    assert receipt["erased"] == {
        "memories": 1, "relations": 0, "artifacts": 0, "keys": 0, "audit_rows_scrubbed": 1
    }
    (row,) = await sql("SELECT action, outcome FROM audit_events WHERE id = :i", i=receipt["audit_id"])
    assert row[0] == "erase"


async def test_a_malformed_namespace_or_a_key_without_reach_is_refused(
    client: httpx.AsyncClient, make_key: KeyFactory
) -> None:
    writer = await make_key()
    assert (await client.delete("/v1/namespaces/a:b:c:d", headers=writer.headers)).status_code == 422
    reader = await make_key(scopes=["read"])
    refused = await client.delete("/v1/namespaces/alice", headers=reader.headers)
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "scope_denied")
    narrow = await make_key(namespaces=["alice:s1"])
    outside = await client.delete("/v1/namespaces/alice", headers=narrow.headers)
    assert (outside.status_code, outside.json()["error"]["code"]) == (403, "namespace_access_denied")
