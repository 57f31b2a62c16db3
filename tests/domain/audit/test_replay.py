"""POST /v1/audit/{id}/replay: a recorded context call run again, diffed against the store
as it is now."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import select

from service.store.models import AuditEvent
from tests.conftest import Key, KeyFactory
from tests.domain.audit.conftest import Seed

DEPLOY = "blue green deploy pipeline: switch traffic only after the health checks pass"
GOAL = "Fix the blue green deploy pipeline health checks"


async def _remember(client: httpx.AsyncClient, key: Key, content: str, namespace: str) -> str:
    response = await client.post(
        "/v1/remember",
        headers=key.headers,
        json={"content": content, "namespace": namespace, "type": "decision"},
    )
    assert response.status_code == 201, response.text
    memory_id: str = response.json()["id"]
    return memory_id


async def _context(client: httpx.AsyncClient, key: Key, **body: Any) -> dict[str, Any]:
    body.setdefault("goal", GOAL)
    body.setdefault("namespace", "alice")
    response = await client.post("/v1/context", headers=key.headers, json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


async def _replay(client: httpx.AsyncClient, key: Key, audit_id: str) -> httpx.Response:
    return await client.post(f"/v1/audit/{audit_id}/replay", headers=key.headers)


def _ids(pack: dict[str, Any]) -> list[str]:
    return [item["id"] for section in pack["sections"] for item in section["items"]]


async def test_replay_shows_a_memory_added_after_the_call(
    app: FastAPI, client: httpx.AsyncClient, key: Key
) -> None:
    first = await _remember(client, key, f"{DEPLOY}, decided in the March review", "alice")
    second = await _remember(client, key, f"Rollback of the {DEPLOY} takes one command", "alice")
    recorded = await _context(client, key)
    assert set(_ids(recorded)) == {first, second}

    newer = await _remember(
        client, key, f"Canary step added to the {DEPLOY}: five percent first", "alice:s1"
    )
    # Not visible from the recorded namespace, and not in the replay either.
    assert newer not in _ids(await _context(client, key))
    added = await _remember(
        client, key, f"Health checks of the {DEPLOY} now probe the database too", "alice"
    )

    response = await _replay(client, key, recorded["audit_id"])
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["replayed"] == recorded["audit_id"]
    assert added in _ids(body["pack"])
    assert [i["id"] for i in body["diff"]["added"]] == [added]
    new_rank = _ids(body["pack"]).index(added) + 1
    assert body["diff"]["added"][0]["rank"] == new_rank
    assert body["diff"]["dropped"] == []
    moved = {c["id"]: (c["before"], c["after"]) for c in body["diff"]["rank_changes"]}
    for memory_id in (first, second):
        before = _ids(recorded).index(memory_id) + 1
        after = _ids(body["pack"]).index(memory_id) + 1
        assert moved.get(memory_id, (before, before)) == (before, after)
    assert body["warnings"] == []

    # The replay is audited once, as a replay of the recorded call.
    async with app.state.ctx.sessionmaker() as session:
        rows = (
            (
                await session.execute(
                    select(AuditEvent).where(
                        AuditEvent.org_id == key.org_id, AuditEvent.action == "replay"
                    )
                )
            )
            .scalars()
            .all()
        )
    assert len(rows) == 1
    assert str(rows[0].id) == body["audit_id"]
    assert rows[0].details["replay_of"] == recorded["audit_id"]
    assert rows[0].namespace == "alice"
    assert str(rows[0].memory_ids[new_rank - 1]) == added


async def test_replay_shows_a_deleted_memory_as_dropped(
    client: httpx.AsyncClient, key: Key
) -> None:
    kept = await _remember(client, key, f"{DEPLOY}, decided in the March review", "alice")
    gone = await _remember(client, key, f"Rollback of the {DEPLOY} takes one command", "alice")
    recorded = await _context(client, key)
    old_rank = _ids(recorded).index(gone) + 1
    assert (await client.delete(f"/v1/memories/{gone}", headers=key.headers)).status_code == 200

    body = (await _replay(client, key, recorded["audit_id"])).json()
    assert _ids(body["pack"]) == [kept]
    assert [(i["id"], i["rank"]) for i in body["diff"]["dropped"]] == [(gone, old_rank)]
    assert body["diff"]["added"] == []


async def test_replay_sees_only_what_the_recorded_key_could(
    client: httpx.AsyncClient, key: Key, make_key: KeyFactory
) -> None:
    session_key = await make_key(org=key.org, namespaces=["alice:s1"])
    await _remember(client, key, f"{DEPLOY}, for every session of alice", "alice")
    in_session = await _remember(client, key, f"{DEPLOY}, for this session only", "alice:s1")
    recorded = await _context(client, session_key, namespace="alice:s1")
    # A key limited to alice:s1 does not see alice's own memories.
    assert _ids(recorded) == [in_session]

    # The admin key could see both; its replay of the limited key's call could not.
    body = (await _replay(client, key, recorded["audit_id"])).json()
    assert _ids(body["pack"]) == [in_session]
    assert body["diff"]["added"] == []


async def test_replay_warns_when_the_goal_was_redacted(client: httpx.AsyncClient, key: Key) -> None:
    await _remember(client, key, f"{DEPLOY}, decided in the March review", "alice")
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    recorded = await _context(client, key, goal=f"{GOAL} with token {token}")
    response = await _replay(client, key, recorded["audit_id"])
    assert response.status_code == 200
    assert token not in response.text
    assert any("redacted" in w for w in response.json()["warnings"])


async def test_only_completed_context_calls_replay(
    client: httpx.AsyncClient, key: Key, make_key: KeyFactory, seed: Seed
) -> None:
    remembered = await seed(key.org_id, action="remember")
    refused = await seed(
        key.org_id, action="context", outcome="refused", status_code=403, namespace="alice"
    )
    for audit_id in (remembered, refused):
        response = await _replay(client, key, str(audit_id))
        assert response.status_code == 422
        assert response.json()["error"]["field"] == "audit_id"

    recorded = await _context(client, key)
    other = await make_key()
    assert (await _replay(client, other, recorded["audit_id"])).status_code == 404
    assert (await _replay(client, key, str(uuid.uuid4()))).status_code == 404
    writer = await make_key(org=key.org, scopes=["write"])
    denied = await _replay(client, writer, recorded["audit_id"])
    assert denied.status_code == 403
    # A key limited elsewhere does not even see the row.
    bob = await make_key(org=key.org, namespaces=["bob"])
    assert (await _replay(client, bob, recorded["audit_id"])).status_code == 404


async def test_project_limited_keys_replay_calls_of_their_projects(
    client: httpx.AsyncClient, key: Key, make_key: KeyFactory
) -> None:
    await _remember(client, key, f"{DEPLOY}, decided in the March review", "alice")
    both = await make_key(org=key.org, projects=["p1", "p2"])
    p1 = await make_key(org=key.org, projects=["p1"])
    p2 = await make_key(org=key.org, projects=["p2"])
    in_p2 = await _context(client, both, project="p2")
    assert (await _replay(client, p2, in_p2["audit_id"])).status_code == 200
    # A call of another project, or made without one (its pack may span projects), is not
    # even visible to a project-limited key.
    assert (await _replay(client, p1, in_p2["audit_id"])).status_code == 404
    unscoped = await _context(client, both)
    assert (await _replay(client, p1, unscoped["audit_id"])).status_code == 404
    assert (await _replay(client, both, unscoped["audit_id"])).status_code == 200
