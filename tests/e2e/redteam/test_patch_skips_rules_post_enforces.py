"""Finding 6: PATCH accepted content that is only a secret (POST rejects it as a fragment),
tags of 500 characters or empty tags, and a type change that bypassed the gate (a shell
transcript stored as a `decision`).

Rule now: a PATCH's outcome matches a POST's for the same input. Each case is fed to both."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.e2e.redteam.conftest import RATE_LIMIT, Org, created, memory

TOKEN = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
SHELL = """$ ls -la /srv/ctxpack
total 16
drwxr-xr-x 4 app app 4096 May  1 10:00 .
drwxr-xr-x 3 root root 4096 May  1 09:58 ..
-rw-r--r-- 1 app app  812 May  1 10:00 settings.toml"""


@pytest.mark.parametrize(
    ("change", "code", "field"),
    [
        pytest.param({"content": TOKEN}, "gate_rejected", "content", id="only-a-secret"),
        pytest.param(
            {"content": f"  {TOKEN}\n"}, "gate_rejected", "content", id="only-a-secret-ws"
        ),
        pytest.param({"tags": ["x" * 500]}, "validation_error", "tags", id="long-tag"),
        pytest.param({"tags": [""]}, "validation_error", "tags", id="empty-tag"),
        pytest.param({"tags": ["a\u0000b"]}, "validation_error", "tags", id="nul-tag"),
    ],
)
async def test_patch_refuses_what_post_refuses(
    client: httpx.AsyncClient, org: Org, change: dict[str, Any], code: str, field: str
) -> None:
    row = await created(client, org.admin)
    post = await client.post(
        "/v1/remember",
        json={
            "namespace": "alice",
            "content": "Runner pools are per region, with a cache each.",
            **change,
        },
        headers=org.admin.headers,
    )
    patch = await client.patch(f"/v1/memories/{row['id']}", json=change, headers=org.admin.headers)
    for response in (post, patch):
        assert response.status_code == 422, response.text
        assert response.json()["error"]["code"] == code
        assert field in str(response.json()["error"].get("field", response.json()["error"]))
        assert TOKEN not in response.text
    assert (await memory(client, org.admin, row["id"])).json()["content"] == RATE_LIMIT


async def test_a_type_change_goes_through_the_gate(client: httpx.AsyncClient, org: Org) -> None:
    # A shell transcript is fine as a procedure (code types), not as a decision.
    post = await client.post(
        "/v1/remember",
        json={"namespace": "alice", "content": SHELL, "type": "decision"},
        headers=org.admin.headers,
    )
    assert post.status_code == 422
    row = await created(client, org.admin, content=SHELL, type="procedure")
    patch = await client.patch(
        f"/v1/memories/{row['id']}", json={"type": "decision"}, headers=org.admin.headers
    )
    assert patch.status_code == 422, patch.text
    error = patch.json()["error"]
    assert (error["code"], error["field"]) == ("gate_rejected", "type")
    assert error["reasons"][0]["code"] == post.json()["error"]["reasons"][0]["code"]
    assert (await memory(client, org.admin, row["id"])).json()["type"] == "procedure"


async def test_a_content_and_type_change_together_is_gated_as_the_new_type(
    client: httpx.AsyncClient, org: Org
) -> None:
    row = await created(client, org.admin)
    ok = await client.patch(
        f"/v1/memories/{row['id']}",
        json={"content": SHELL, "type": "procedure"},
        headers=org.admin.headers,
    )
    assert ok.status_code == 200, ok.text
    bad = await client.patch(
        f"/v1/memories/{row['id']}", json={"type": "decision"}, headers=org.admin.headers
    )
    assert bad.status_code == 422
