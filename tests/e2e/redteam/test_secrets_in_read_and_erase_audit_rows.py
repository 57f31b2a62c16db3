"""Secrets a caller sends in an artifact read's ``fields`` or ``namespace``, or in the
namespace of an erase, reached the audit trail verbatim (review E): the artifact read kept
``fields`` and ``fields_missing`` as sent, stored a refused namespace in its failure row, and
the erase (which accepts a secret namespace, to erase one stored before such namespaces were
refused) kept it in the row's namespace and request."""

from __future__ import annotations

import httpx

from tests.e2e.redteam.conftest import Org

TOKEN = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"


async def trail(client: httpx.AsyncClient, org: Org) -> str:
    response = await client.get(
        "/v1/audit", params={"limit": 500, "full": "true"}, headers=org.admin.headers
    )
    assert response.status_code == 200, response.text
    return response.text


async def test_artifact_field_names_are_redacted_in_the_trail_and_the_answer(
    client: httpx.AsyncClient, org: Org
) -> None:
    made = await client.post(
        "/v1/artifacts",
        json={"namespace": "alice", "name": "deploy config", "body": {"region": "eu"}},
        headers=org.admin.headers,
    )
    assert made.status_code == 201, made.text
    artifact = made.json()["artifact_id"]
    read = await client.get(
        f"/v1/artifacts/{artifact}",
        params={"fields": f"region,{TOKEN}"},
        headers=org.admin.headers,
    )
    assert read.status_code == 200, read.text
    assert read.json()["fields"] == {"region": "eu"}
    assert read.json()["missing"] == ["[GITHUB_TOKEN:REDACTED]"]
    refused = await client.get(
        f"/v1/artifacts/{artifact}", params={"namespace": TOKEN}, headers=org.admin.headers
    )
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["field"] == "namespace"
    assert TOKEN not in await trail(client, org)


async def test_erasing_a_secret_namespace_keeps_it_out_of_the_trail(
    client: httpx.AsyncClient, org: Org
) -> None:
    erased = await client.delete(f"/v1/namespaces/{TOKEN}", headers=org.admin.headers)
    assert erased.status_code == 200, erased.text
    assert TOKEN not in erased.text
    text = await trail(client, org)
    assert '"action":"erase"' in text
    assert TOKEN not in text
