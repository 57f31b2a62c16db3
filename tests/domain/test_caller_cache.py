"""The caller cache: keys are looked up once, yet a revocation applies at once, in this
process (at commit) and in every other one (LISTEN/NOTIFY); without the listener the
cache does not answer."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import psycopg
from fastapi import FastAPI

from service.domain import auth
from service.domain.caller_cache import CHANNEL, CallerCache
from service.store.database import libpq_url
from tests.conftest import Key


def _cache(app: FastAPI) -> CallerCache:
    cache: CallerCache = app.state.ctx.callers
    return cache


async def _wait_live(cache: CallerCache) -> None:
    for _ in range(100):
        if cache.live:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the revocation listener never connected")


def _revoke_elsewhere(pg_url: str, key: Key, *, notify: bool) -> None:
    """What `ctxpack keys revoke` in another process does (or a bare UPDATE, without
    the NOTIFY, to show the cache really answers from memory)."""
    with psycopg.connect(libpq_url(pg_url)) as conn:
        conn.execute("UPDATE api_keys SET revoked_at = now() WHERE id = %s", (key.key_id,))
        if notify:
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, auth.hash_key(key.key)))


async def test_second_call_is_served_from_the_cache(
    app: FastAPI, client: httpx.AsyncClient, key: Key, pg_url: str
) -> None:
    cache = _cache(app)
    await _wait_live(cache)
    assert (await client.get("/v1/whoami", headers=key.headers)).status_code == 200
    assert cache.get(auth.hash_key(key.key)) is not None
    # Revoked behind the service's back (no NOTIFY): the cache still answers, proving the
    # second call did not read the database.
    await asyncio.to_thread(_revoke_elsewhere, pg_url, key, notify=False)
    assert (await client.get("/v1/whoami", headers=key.headers)).status_code == 200
    cache.invalidate(auth.hash_key(key.key))
    assert (await client.get("/v1/whoami", headers=key.headers)).status_code == 401


async def test_revocation_in_another_process_applies_at_once(
    app: FastAPI, client: httpx.AsyncClient, key: Key, pg_url: str
) -> None:
    cache = _cache(app)
    await _wait_live(cache)
    assert (await client.get("/v1/whoami", headers=key.headers)).status_code == 200
    await asyncio.to_thread(_revoke_elsewhere, pg_url, key, notify=True)
    statuses = []
    for _ in range(50):  # the notification is delivered within milliseconds
        statuses.append((await client.get("/v1/whoami", headers=key.headers)).status_code)
        if statuses[-1] == 401:
            break
        await asyncio.sleep(0.02)
    assert statuses[-1] == 401, statuses
    assert cache.get(auth.hash_key(key.key)) is None


async def test_without_the_listener_every_call_reads_the_database(
    app: FastAPI, client: httpx.AsyncClient, key: Key, pg_url: str
) -> None:
    cache = _cache(app)
    await _wait_live(cache)
    assert (await client.get("/v1/whoami", headers=key.headers)).status_code == 200
    cache.live = False  # what a dropped LISTEN connection does
    try:
        await asyncio.to_thread(_revoke_elsewhere, pg_url, key, notify=False)
        assert (await client.get("/v1/whoami", headers=key.headers)).status_code == 401
    finally:
        cache.live = True
        cache.invalidate()


def test_a_lookup_that_raced_a_revocation_is_not_kept() -> None:
    cache = CallerCache(ttl_seconds=60)
    cache.live = True
    caller = auth.Caller(
        org_id=uuid.uuid4(), key_id=uuid.uuid4(), key_name="k", scopes=frozenset({"read"})
    )
    generation = cache.generation  # a lookup starts...
    cache.invalidate("h")  # ...a revocation lands meanwhile...
    cache.put("h", caller, generation)  # ...and the stale answer is dropped
    assert cache.get("h") is None
    cache.put("h", caller, cache.generation)
    assert cache.get("h") is caller


def test_entries_expire_and_the_cache_is_bounded() -> None:
    cache = CallerCache(ttl_seconds=60, max_entries=2)
    cache.live = True
    callers = [
        auth.Caller(org_id=uuid.uuid4(), key_id=uuid.uuid4(), key_name=str(i), scopes=frozenset())
        for i in range(3)
    ]
    for i, caller in enumerate(callers):
        cache.put(str(i), caller, cache.generation)
    assert len(cache) == 2 and cache.get("0") is None and cache.get("2") is callers[2]
    cache._entries._entries["2"] = (0.0, callers[2])  # expired long ago
    assert cache.get("2") is None
