"""Review 2, findings 2-5:

2. a ``remember`` whose ``related`` names a memory being deleted at that moment answered 500
   (a foreign-key failure at the link's INSERT): now the target is locked while the write
   links it, so the write either waits and gets a 422 naming the id, or links a live row;
3. a write without a TTL answered ``duplicate`` of a copy with a TTL said ``expires_at: null``
   and vanished with the copy: now the longer life wins, and the answer says the copy's;
4. an artifact whose memory expired was still served, and the purge left its body: now it is
   gone for reads at expiry and the purge deletes it;
5. tokenizing and rendering a pack ran on the event loop: now in a worker thread.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import httpx
import psycopg
from fastapi import FastAPI

from service.domain.expiry import purge_expired
from tests.conftest import KeyFactory, tokenizing_threads

TEXT = "The nightly backup of the billing database runs at 02:00 UTC and takes forty minutes."
OTHER = "Staging certificates are renewed by cert-manager thirty days before they expire."


async def _made(client: httpx.AsyncClient, headers: dict[str, str], **body: object) -> dict:
    body.setdefault("namespace", "n")
    response = await client.post("/v1/remember", json=body, headers=headers)
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


async def test_related_target_deleted_concurrently_is_a_clean_422(
    client: httpx.AsyncClient, make_key: KeyFactory, pg_url: str
) -> None:
    key = await make_key()
    target = await _made(client, key.headers, content=OTHER)
    # Another transaction deletes the target and commits while the remember is linking it.
    conn = await psycopg.AsyncConnection.connect(pg_url)
    try:
        await conn.execute(
            "DELETE FROM memories WHERE org_id = %s AND id = %s",
            (key.org_id, uuid.UUID(target["id"])),
        )

        async def commit_later() -> None:
            await asyncio.sleep(0.5)
            await conn.commit()

        committer = asyncio.create_task(commit_later())
        response = await client.post(
            "/v1/remember",
            json={"namespace": "n", "content": TEXT, "related": [{"id": target["id"]}]},
            headers=key.headers,
        )
        await committer
    finally:
        await conn.close()
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == "related.0.id"
    listed = await client.get("/v1/memories", params={"namespace": "n"}, headers=key.headers)
    assert listed.json()["items"] == []  # nothing half-stored


async def test_a_duplicate_without_ttl_keeps_the_copy_alive(
    client: httpx.AsyncClient, make_key: KeyFactory, pg_url: str
) -> None:
    key = await make_key()
    soon = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    first = await _made(client, key.headers, content=TEXT, expires_at=soon)
    assert first["expires_at"] is not None
    again = await _made(client, key.headers, content=TEXT)
    assert again["status"] == "duplicate" and again["id"] == first["id"]
    assert again["expires_at"] is None
    got = await client.get(f"/v1/memories/{first['id']}", headers=key.headers)
    assert got.json()["expires_at"] is None  # the store keeps what the answer promised

    # A shorter TTL never shortens the copy's life: the answer says the longer one.
    later = (datetime.now(UTC) + timedelta(days=30)).isoformat()
    copy = await _made(client, key.headers, content=OTHER, expires_at=later)
    shorter = await _made(client, key.headers, content=OTHER, ttl_seconds=60)
    assert shorter["status"] == "duplicate"
    assert datetime.fromisoformat(shorter["expires_at"]) == datetime.fromisoformat(
        copy["expires_at"]
    )

    # Batches and keyed writes follow the same rule.
    keyed = await _made(client, key.headers, content="Use poetry, not pipenv, here.",
                        key="tooling", ttl_seconds=60)
    batch = await client.post(
        "/v1/remember/batch",
        json={"items": [{"namespace": "n", "content": "Use poetry, not pipenv, here.",
                         "key": "tooling"}]},
        headers=key.headers,
    )
    item = batch.json()["items"][0]
    assert item["status"] == "duplicate" and item["id"] == keyed["id"]
    assert item["expires_at"] is None
    with psycopg.connect(pg_url) as conn:
        row = conn.execute(
            "SELECT expires_at FROM memories WHERE id = %s", (uuid.UUID(keyed["id"]),)
        ).fetchone()
    assert row is not None and row[0] is None


async def test_an_expired_artifact_is_gone_and_purged(
    client: httpx.AsyncClient, make_key: KeyFactory, pg_url: str, app: FastAPI
) -> None:
    key = await make_key()
    made = await client.post(
        "/v1/artifacts",
        json={"namespace": "n", "name": "Runner inventory",
              "body": {"hosts": [{"name": "r1", "disk": "nvme-7f3a"}]}},
        headers=key.headers,
    )
    assert made.status_code == 201, made.text
    art = made.json()
    url = f"/v1/artifacts/{art['artifact_id']}"
    assert (await client.get(url, headers=key.headers)).status_code == 200
    with psycopg.connect(pg_url) as conn:
        conn.execute(
            "UPDATE memories SET expires_at = now() - interval '1 second' WHERE id = %s",
            (uuid.UUID(art["memory_id"]),),
        )
    assert (await client.get(url, headers=key.headers)).status_code == 404
    async with app.state.ctx.sessionmaker() as session:
        await purge_expired(session)
        await session.commit()
    with psycopg.connect(pg_url) as conn:
        left = conn.execute(
            "SELECT count(*) FROM artifacts WHERE org_id = %s", (key.org_id,)
        ).fetchone()
    assert left is not None and left[0] == 0


async def test_pack_rendering_runs_off_the_event_loop(
    client: httpx.AsyncClient, make_key: KeyFactory, app: FastAPI
) -> None:
    key = await make_key()
    body = " ".join(f"The billing export step {n} writes shard {n} to the archive bucket." for n in range(40))
    await _made(client, key.headers, content=body, type="procedure")
    sync = app.state.ctx.embedder.sync
    with tokenizing_threads(sync) as seen:
        for layer in ("recall", "wake"):
            response = await client.post(
                "/v1/context",
                json={"namespace": "n", "goal": "billing export archive", "layer": layer,
                      "markdown_token_budget": 200},
                headers=key.headers,
            )
            assert response.status_code == 200, response.text
    assert seen and not any(seen), "a pack was tokenized on the event loop's thread"
