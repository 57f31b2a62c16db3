"""The trail as real calls write it: no secret in any row, tombstones after a delete."""

from __future__ import annotations

import uuid

import httpx
from fastapi import FastAPI
from sqlalchemy import text

from tests.conftest import Key

GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
PASSWORD = "hunter2xyz"
SECRETS = (GITHUB_TOKEN, PASSWORD, GITHUB_TOKEN[4:])
# The write gate refuses stack traces: a rejected call whose input carries the secrets.
TRACE = (
    "Traceback (most recent call last):\n"
    '  File "deploy.py", line 12, in <module>\n'
    f"    connect(password={PASSWORD})\n"
    f"ValueError: bad token {GITHUB_TOKEN}"
)


async def _dump(app: FastAPI, org_id: uuid.UUID) -> str:
    async with app.state.ctx.sessionmaker() as session:
        rows = await session.execute(
            text("SELECT t::text FROM audit_events t WHERE org_id = :org"), {"org": org_id}
        )
        return "\n".join(r[0] for r in rows)


async def test_no_secret_reaches_any_audit_row(
    app: FastAPI, client: httpx.AsyncClient, key: Key
) -> None:
    leaky = (
        f"Deploy notes: the CI uses token {GITHUB_TOKEN} and the staging db "
        f"password={PASSWORD} until the rotation on Friday."
    )
    calls = [
        client.post(
            "/v1/remember",
            headers=key.headers,
            json={
                "content": leaky,
                "namespace": "alice:s1",
                "name": f"ci token {GITHUB_TOKEN}",
                "type": "gotcha",
                "source": f"password={PASSWORD}",
                "metadata": {"note": f"password={PASSWORD}", "token": GITHUB_TOKEN},
            },
        ),
        client.post(
            "/v1/remember/batch",
            headers=key.headers,
            json={
                "items": [
                    {"content": leaky + " batch", "namespace": "alice"},
                    {"content": TRACE, "namespace": "alice"},
                ]
            },
        ),
        client.post(
            "/v1/context",
            headers=key.headers,
            json={"goal": f"rotate {GITHUB_TOKEN} and password={PASSWORD}", "namespace": "alice"},
        ),
        # Refused calls are audited too: by validation, and by the gate.
        client.post(
            "/v1/remember",
            headers=key.headers,
            json={"content": leaky, "namespace": "alice::bad"},
        ),
        client.post(
            "/v1/remember",
            headers=key.headers,
            json={"content": TRACE, "namespace": "alice"},
        ),
    ]
    statuses = [(await call).status_code for call in calls]
    assert statuses == [201, 200, 200, 422, 422]

    dump = await _dump(app, key.org_id)
    assert len(dump.splitlines()) == len(calls)  # one row per call, refused ones included
    for secret in SECRETS:
        assert secret not in dump
    # Nor the content itself: rows carry names, ids, counts and labels only.
    assert "rotation on Friday" not in dump

    listing = await client.get("/v1/audit", headers=key.headers, params={"full": "true"})
    for secret in SECRETS:
        assert secret not in listing.text


async def test_deleted_memory_stays_as_a_tombstone(
    app: FastAPI, client: httpx.AsyncClient, key: Key
) -> None:
    created = await client.post(
        "/v1/remember",
        headers=key.headers,
        json={
            "content": "Refresh tokens rotate on every use; reusing one revokes the family.",
            "namespace": "alice",
            "type": "decision",
        },
    )
    assert created.status_code == 201, created.text
    memory_id = created.json()["id"]
    deleted = await client.delete(f"/v1/memories/{memory_id}", headers=key.headers)
    assert deleted.status_code == 200, deleted.text
    assert (await client.get(f"/v1/memories/{memory_id}", headers=key.headers)).status_code == 404

    trail = await client.get("/v1/audit", headers=key.headers, params={"memory_id": memory_id})
    assert trail.status_code == 200
    actions = [item["action"] for item in trail.json()["items"]]
    assert "remember" in actions
    assert actions[0] == "delete"  # newest first
    for item in trail.json()["items"]:
        assert memory_id in item["memory_ids"]


async def test_delete_erases_the_name_from_the_trail(
    app: FastAPI, client: httpx.AsyncClient, key: Key
) -> None:
    # Without a name, remember derives one from the content: it must not outlive a delete.
    content = "Refresh tokens rotate on every use; reusing one revokes the family."
    created = await client.post(
        "/v1/remember", headers=key.headers, json={"content": content, "namespace": "alice"}
    )
    memory_id = created.json()["id"]
    await client.delete(f"/v1/memories/{memory_id}", headers=key.headers)
    dump = await _dump(app, key.org_id)
    assert memory_id in dump
    assert "revokes the family" not in dump
