"""Expiry: expires_at / ttl_seconds / per-type defaults; expired memories leave every read at
once (in SQL); the expiry job purges them with audit rows."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psycopg
import pytest
from fastapi import FastAPI

from service.domain.expiry import expiry_of, purge_expired
from service.schemas.memories import RememberRequest
from service.store.database import libpq_url
from tests.conftest import Key, make_settings

CONTENT = "The staging database is rebuilt from the nightly snapshot every Monday at 6am."


def expire_now(url: str, memory_id: str) -> None:
    """Move a memory's expiry into the past, as time passing would."""
    with psycopg.connect(url) as conn:
        conn.execute(
            "UPDATE memories SET expires_at = now() - interval '1 second' WHERE id = %s",
            (uuid.UUID(memory_id),),
        )


async def test_expiry_is_shown_and_expired_memories_vanish(
    client: httpx.AsyncClient, key: Key, pg_url: str
) -> None:
    auth = key.headers
    r = await client.post(
        "/v1/remember",
        json={"namespace": "frank", "type": "procedure", "content": CONTENT, "ttl_seconds": 3600},
        headers=auth,
    )
    assert r.status_code == 201, r.text
    body = r.json()
    expires = datetime.fromisoformat(body["expires_at"])
    assert timedelta(minutes=59) < expires - datetime.now(UTC) <= timedelta(hours=1)
    mid = body["id"]
    other = await client.post(
        "/v1/remember",
        json={"namespace": "frank", "type": "gotcha",
              "content": "The snapshot restore silently skips tables without a primary key.",
              "related": [{"id": mid}]},
        headers=auth,
    )
    assert other.json()["expires_at"] is None
    got = await client.get(f"/v1/memories/{mid}", headers=auth)
    assert got.json()["expires_at"] is not None
    goal = {"goal": "staging database nightly snapshot rebuild Monday", "namespace": "frank"}
    pack = (await client.post("/v1/context", json=goal, headers=auth)).json()
    shown = {i["id"]: i["quality"]["expires_at"] for s in pack["sections"] for i in s["items"]}
    assert shown[mid] is not None

    expire_now(pg_url, mid)
    assert (await client.get(f"/v1/memories/{mid}", headers=auth)).status_code == 404
    listed = (await client.get("/v1/memories", params={"namespace": "frank"}, headers=auth)).json()
    assert mid not in {m["id"] for m in listed["items"]} and listed["total"] == 1
    related = (await client.get(f"/v1/memories/{other.json()['id']}", headers=auth)).json()
    assert related["related"] == []
    pack = (await client.post("/v1/context", json=goal, headers=auth)).json()
    assert mid not in {i["id"] for s in pack["sections"] for i in s["items"]}
    # Linking to an expired memory is linking to an unknown one.
    r = await client.post(
        "/v1/remember",
        json={"namespace": "frank", "content": "Snapshots older than a week are deleted.",
              "related": [{"id": mid}]},
        headers=auth,
    )
    assert r.status_code == 422 and r.json()["error"]["field"] == "related.0.id"

    # Writing the same content again stores it anew (the expired one is purged, audited).
    again = await client.post(
        "/v1/remember", json={"namespace": "frank", "type": "procedure", "content": CONTENT}, headers=auth
    )
    assert again.json()["status"] == "created" and again.json()["id"] != mid
    audit = (await client.get("/v1/audit", params={"memory_id": mid}, headers=auth)).json()
    assert "expire" in {row["action"] for row in audit["items"]}


async def test_purge_job_deletes_expired_with_audit(
    client: httpx.AsyncClient, key: Key, pg_url: str, app: FastAPI
) -> None:
    auth = key.headers
    r = await client.post(
        "/v1/remember/batch",
        json={"items": [
            {"namespace": "gina", "content": CONTENT, "expires_at": (datetime.now(UTC) + timedelta(days=1)).isoformat()},
            {"namespace": "gina", "content": "Gina reviews every migration before it ships."},
        ]},
        headers=auth,
    )
    items = r.json()["items"]
    assert items[0]["expires_at"] is not None and items[1]["expires_at"] is None
    expire_now(pg_url, items[0]["id"])
    async with app.state.ctx.sessionmaker() as session:
        purged = await purge_expired(session)
        await session.commit()
    assert purged.get(key.org_id) == 1
    with psycopg.connect(pg_url) as conn:
        left = conn.execute("SELECT count(*) FROM memories WHERE org_id = %s", (key.org_id,)).fetchone()
        row = conn.execute(
            "SELECT outcome, memory_ids FROM audit_events WHERE org_id = %s AND action = 'expire'",
            (key.org_id,),
        ).fetchone()
    assert left is not None and left[0] == 1
    assert row is not None and row[0] == "purged" and [str(i) for i in row[1]] == [items[0]["id"]]


async def test_bad_expiry_input_is_named(client: httpx.AsyncClient, key: Key) -> None:
    base = {"namespace": "hal", "content": CONTENT}
    past = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    r = await client.post("/v1/remember", json={**base, "expires_at": past}, headers=key.headers)
    assert r.status_code == 422 and r.json()["error"]["field"] == "expires_at"
    both = {**base, "ttl_seconds": 10, "expires_at": (datetime.now(UTC) + timedelta(days=1)).isoformat()}
    r = await client.post("/v1/remember", json=both, headers=key.headers)
    assert r.status_code == 422 and r.json()["error"]["field"] == "ttl_seconds"
    r = await client.post("/v1/remember", json={**base, "ttl_seconds": 0}, headers=key.headers)
    assert r.status_code == 422
    r = await client.post(
        "/v1/remember/batch", json={"items": [base, {**base, "expires_at": past}]}, headers=key.headers
    )
    assert r.status_code == 422 and r.json()["error"]["field"] == "items.1.expires_at"


def test_default_ttl_per_type(pg_url: str) -> None:
    settings = make_settings(pg_url, default_ttl_seconds={"episode": 60})
    episode = RememberRequest(namespace="u", content=CONTENT, type="episode")
    decision = RememberRequest(namespace="u", content=CONTENT, type="decision")
    when = expiry_of(episode, settings)
    assert when is not None and timedelta(seconds=55) < when - datetime.now(UTC) <= timedelta(seconds=60)
    assert expiry_of(decision, settings) is None
    assert expiry_of(episode, make_settings(pg_url)) is None
    explicit = RememberRequest(namespace="u", content=CONTENT, type="episode", ttl_seconds=7200)
    assert (expiry_of(explicit, settings) or datetime.now(UTC)) - datetime.now(UTC) > timedelta(hours=1)


async def test_patch_sets_refreshes_and_clears_expiry(client: httpx.AsyncClient, key: Key) -> None:
    auth = key.headers
    r = await client.post(
        "/v1/remember", json={"namespace": "ivy", "content": CONTENT, "ttl_seconds": 60}, headers=auth
    )
    mid = r.json()["id"]
    first = datetime.fromisoformat(r.json()["expires_at"])
    # A TTL refreshed from now (what a client does when it reads an item with a TTL).
    r = await client.patch(f"/v1/memories/{mid}", json={"ttl_seconds": 7200}, headers=auth)
    assert r.status_code == 200, r.text
    refreshed = datetime.fromisoformat(r.json()["expires_at"])
    assert refreshed - first > timedelta(minutes=100)
    assert r.json()["content"] == CONTENT
    # An instant, then null: never expires.
    when = datetime.now(UTC) + timedelta(days=3)
    r = await client.patch(f"/v1/memories/{mid}", json={"expires_at": when.isoformat()}, headers=auth)
    assert abs(datetime.fromisoformat(r.json()["expires_at"]) - when) < timedelta(seconds=1)
    r = await client.patch(f"/v1/memories/{mid}", json={"expires_at": None}, headers=auth)
    assert r.status_code == 200 and r.json()["expires_at"] is None
    assert (await client.get(f"/v1/memories/{mid}", headers=auth)).json()["expires_at"] is None
    # Other fields leave the expiry alone.
    await client.patch(f"/v1/memories/{mid}", json={"ttl_seconds": 600}, headers=auth)
    r = await client.patch(f"/v1/memories/{mid}", json={"tags": ["ops"]}, headers=auth)
    assert r.json()["expires_at"] is not None


async def test_bad_patch_expiry_is_named_and_changes_nothing(
    client: httpx.AsyncClient, key: Key
) -> None:
    auth = key.headers
    r = await client.post("/v1/remember", json={"namespace": "jo", "content": CONTENT}, headers=auth)
    mid = r.json()["id"]
    past = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    future = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    cases = [
        ({"expires_at": past, "tags": ["x"]}, "expires_at"),
        ({"expires_at": future, "ttl_seconds": 5}, "ttl_seconds"),
        ({"ttl_seconds": None}, "ttl_seconds"),
        ({"ttl_seconds": 0}, "ttl_seconds"),
    ]
    for body, field in cases:
        r = await client.patch(f"/v1/memories/{mid}", json=body, headers=auth)
        assert r.status_code == 422, body
        assert r.json()["error"]["field"] == field, (body, r.json())
    got = (await client.get(f"/v1/memories/{mid}", headers=auth)).json()
    assert got["expires_at"] is None and got["tags"] == []


async def test_patch_and_keyed_writes_never_collide_with_an_expired_copy(
    client: httpx.AsyncClient, key: Key, pg_url: str
) -> None:
    # An expired copy is read by nobody: a PATCH to its content is no 409 naming it, and a
    # keyed write of its key and content is no "duplicate" of it (both purge it first).
    auth = key.headers
    for body in ({}, {"key": "staging-rebuild"}):
        gone = await client.post(
            "/v1/remember",
            json={"namespace": "gina", "content": CONTENT, "ttl_seconds": 3600, **body},
            headers=auth,
        )
        expire_now(pg_url, gone.json()["id"])
        if body:
            again = await client.post(
                "/v1/remember", json={"namespace": "gina", "content": CONTENT, **body}, headers=auth
            )
            assert again.json()["status"] == "created", again.text
        else:
            other = await client.post(
                "/v1/remember",
                json={"namespace": "gina", "content": "The staging cache is flushed on Fridays."},
                headers=auth,
            )
            again = await client.patch(
                f"/v1/memories/{other.json()['id']}", json={"content": CONTENT}, headers=auth
            )
            assert again.status_code == 200, again.text
        assert gone.json()["id"] not in again.text
        got = await client.get(f"/v1/memories/{again.json()['id']}", headers=auth)
        assert got.json()["content"] == CONTENT


async def wait_for_a_waiter(
    watcher: psycopg.AsyncConnection[Any], holder: int, write: asyncio.Task[httpx.Response],
    on_citus: bool,
) -> None:
    """Return once some backend waits for a lock ``holder`` holds (its pid; on Citus its
    global pid, as the row lock is taken on a worker), or once ``write`` is done (it never
    waited). Polls the lock table: no sleep stands for "the write has reached the lock"."""
    query = (
        "SELECT count(*) FROM citus_lock_waits WHERE blocking_gpid = %s"
        if on_citus
        else "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))"
    )
    for _ in range(1200):  # a bound, never reached unless the write hangs elsewhere
        if write.done():
            return
        row = await (await watcher.execute(query, (holder,))).fetchone()
        if row is not None and row[0]:
            return
        await asyncio.sleep(0.025)
    pytest.fail("the write neither waited for the held expired copy nor finished")


@pytest.mark.parametrize("write", ["patch", "keyed"])
@pytest.mark.parametrize("holder_ends", ["rollback", "delete"])
async def test_a_write_waits_for_a_held_expired_copy_instead_of_colliding_with_it(
    client: httpx.AsyncClient, key: Key, pg_url: str, on_citus: bool, write: str,
    holder_ends: str,
) -> None:
    # The race, forced: another transaction (the expiry job's sweep) holds the expired copy
    # FOR UPDATE while a write colliding with it purges its own copies. The write waits for
    # the holder (LifecycleRepository.expired: a targeted lock never skips): when the holder
    # lets go (rollback), the write purges the copy itself; when the holder deletes it (the
    # sweep purging), the copy is gone. Had the write skipped the locked row, the copy would
    # still hold the content (and the key) for the write's checks: a 409 naming it (all but
    # delete-keyed fail so, which waits on its unique index instead).
    auth = key.headers
    keyed = {"key": "staging-rebuild"} if write == "keyed" else {}
    gone = await client.post(
        "/v1/remember",
        json={"namespace": "gina", "content": CONTENT, "ttl_seconds": 3600, **keyed},
        headers=auth,
    )
    gone_id = uuid.UUID(gone.json()["id"])
    other = await client.post(
        "/v1/remember",
        json={"namespace": "gina", "content": "The staging cache is flushed on Fridays."},
        headers=auth,
    )
    url = libpq_url(pg_url)
    where = "WHERE org_id = %s AND id = %s"
    row = f"FROM memories {where}"
    async with (
        await psycopg.AsyncConnection.connect(url) as holder,
        await psycopg.AsyncConnection.connect(url, autocommit=True) as watcher,
    ):
        found = await (await holder.execute(
            "SELECT citus_backend_gpid()" if on_citus else "SELECT pg_backend_pid()"
        )).fetchone()
        assert found is not None
        holder_id = found[0]
        # FOR KEY SHARE first, so the expiry job running in the app cannot purge the copy
        # between its expiry and the holder's FOR UPDATE (the job skips locked rows); the
        # expiring UPDATE does not conflict with it.
        held = await holder.execute(f"SELECT id {row} FOR KEY SHARE", (key.org_id, gone_id))
        assert await held.fetchall() == [(gone_id,)]
        await watcher.execute(
            f"UPDATE memories SET expires_at = now() - interval '1 second' {where}",
            (key.org_id, gone_id),
        )
        held = await holder.execute(f"SELECT id {row} FOR UPDATE", (key.org_id, gone_id))
        assert await held.fetchall() == [(gone_id,)]
        if holder_ends == "delete":
            await holder.execute(f"DELETE {row}", (key.org_id, gone_id))

        if write == "keyed":
            body = {"namespace": "gina", "content": CONTENT, **keyed}
            call = client.post("/v1/remember", json=body, headers=auth)
        else:
            call = client.patch(
                f"/v1/memories/{other.json()['id']}", json={"content": CONTENT}, headers=auth
            )
        task = asyncio.create_task(call)
        try:
            await wait_for_a_waiter(watcher, holder_id, task, on_citus)
        finally:
            if holder_ends == "delete":
                await holder.commit()
            else:
                await holder.rollback()
        again = await task

        assert again.status_code == (201 if write == "keyed" else 200), again.text
        assert str(gone_id) not in again.text
        if write == "keyed":
            assert again.json()["status"] == "created"
        left = await watcher.execute(f"SELECT count(*) {row}", (key.org_id, gone_id))
        assert await left.fetchone() == (0,)
        if holder_ends == "rollback":
            # The write purged the copy itself, with the expiry job's audit row.
            purged = await (await watcher.execute(
                "SELECT request->>'reason' FROM audit_events WHERE org_id = %s AND action = 'expire'"
                " AND %s = ANY(memory_ids)",
                (key.org_id, gone_id),
            )).fetchall()
            assert purged == [("rewritten",)]
    got = await client.get(f"/v1/memories/{again.json()['id']}", headers=auth)
    assert got.json()["content"] == CONTENT
