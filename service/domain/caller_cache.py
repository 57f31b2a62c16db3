"""Authenticated callers, cached per process, with revocation that takes effect at once.

Looking a key up costs a pool checkout and a round trip on every call (about 1.5 ms of a
context call's 10). The cache keeps ``Caller`` objects by key hash, and stays exact:

- A revoked key leaves every process's cache when the revocation commits: the revoking
  transaction sends ``NOTIFY ctxpack_keys`` (delivered on commit) and each server LISTENs on
  its own connection; the revoking process also drops the key itself, synchronously, at
  commit.
- The cache only answers while the listener is connected. When that connection drops, the
  cache is emptied and bypassed (every call reads the database) until it is back.
- A lookup that raced with a revocation is not cached: every invalidation bumps a
  generation number, and a lookup is kept only if the generation did not move meanwhile.
- Entries also expire after ``auth_cache_seconds`` (0 turns the cache off).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncSession

from service.cache import TtlLru
from service.domain import auth
from service.domain import keys as key_service

log = logging.getLogger(__name__)

CHANNEL = "ctxpack_keys"
MAX_ENTRIES = 10_000
_RECONNECT_SECONDS = 1.0
_POLL_SECONDS = 0.5  # how often the listener looks at the stop flag


class CallerCache:
    """Key hash -> Caller, bounded, expiring, and live only while revocations can reach it."""

    def __init__(self, ttl_seconds: float, max_entries: int = MAX_ENTRIES) -> None:
        self.generation = 0
        self.live = False  # set by the listener while it is connected
        self.connecting = False
        self._entries: TtlLru[str, auth.Caller] = TtlLru(ttl_seconds, max_entries)

    @property
    def ttl(self) -> float:
        return self._entries.ttl

    @property
    def enabled(self) -> bool:
        return self.ttl > 0 and self.live

    def get(self, key_hash: str) -> auth.Caller | None:
        return self._entries.get(key_hash) if self.enabled else None

    def put(self, key_hash: str, caller: auth.Caller, generation: int) -> None:
        """Keep ``caller`` unless an invalidation happened since ``generation`` was read."""
        if self.enabled and generation == self.generation:
            self._entries.put(key_hash, caller)

    def invalidate(self, key_hash: str | None = None) -> None:
        """Drop one key (or all, with None); lookups in flight will not be cached."""
        self.generation += 1
        if key_hash is None:
            self._entries.clear()
        else:
            self._entries.pop(key_hash)

    def __len__(self) -> int:
        return len(self._entries)


# One per process: a revocation committed by this process drops the key here at once.
_CACHES: list[CallerCache] = []


def register(cache: CallerCache) -> None:
    _CACHES.append(cache)


def unregister(cache: CallerCache) -> None:
    with contextlib.suppress(ValueError):
        _CACHES.remove(cache)


def _invalidate_everywhere(key_hash: str | None) -> None:
    for cache in _CACHES:
        cache.invalidate(key_hash)


async def authenticate(
    cache: CallerCache | None, session_factory: Any, token: str
) -> auth.Caller | None:
    """The caller behind ``token`` (None when unknown or revoked), from the cache when it
    can answer, else from the database through a session of ``session_factory``."""
    if not token.startswith(auth.KEY_PREFIX) or len(token) > 200:
        return None
    key_hash = auth.hash_key(token)
    if cache is not None:
        hit = cache.get(key_hash)
        if hit is not None:
            return hit
        generation = cache.generation
    async with session_factory() as session:
        caller = await key_service.authenticate(session, token)
    if caller is not None and cache is not None:
        cache.put(key_hash, caller, generation)
    return caller


async def announce_revocation(session: AsyncSession, key_hash: str) -> None:
    """Tell every server that ``key_hash`` is revoked, when ``session`` commits."""
    await session.execute(
        text("SELECT pg_notify(:channel, :hash)"), {"channel": CHANNEL, "hash": key_hash}
    )

    def after_commit(_session: Any) -> None:
        _invalidate_everywhere(key_hash)

    event.listen(session.sync_session, "after_commit", after_commit, once=True)


async def listen(cache: CallerCache, libpq_url: str, stop: asyncio.Event) -> None:
    """Keep a LISTEN connection open and apply revocations until ``stop`` is set. The cache
    is live only while this connection is up."""
    import psycopg

    while not stop.is_set():
        try:
            cache.connecting = True
            try:
                conn = await psycopg.AsyncConnection.connect(libpq_url, autocommit=True)
            finally:
                cache.connecting = False
            async with conn:
                await conn.execute(f"LISTEN {CHANNEL}")
                cache.invalidate()  # anything revoked while we were away
                cache.live = True
                log.info("auth_cache_live")
                while not stop.is_set():
                    async for notify in conn.notifies(timeout=_POLL_SECONDS):
                        cache.invalidate(notify.payload or None)
        except (OSError, psycopg.Error) as exc:
            log.warning("auth_cache_listener_down", extra={"error": type(exc).__name__})
        finally:
            cache.live = False
            cache.invalidate()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), _RECONNECT_SECONDS)


@contextlib.asynccontextmanager
async def run_caller_cache(app: Any, state: Any) -> AsyncIterator[None]:
    """Lifespan hook: the process's caller cache and its revocation listener."""
    from service.store.database import libpq_url

    cache = CallerCache(state.settings.auth_cache_seconds)
    state.extras["caller_cache"] = cache
    if cache.ttl <= 0:
        yield
        return
    register(cache)
    stop = asyncio.Event()
    task = asyncio.create_task(listen(cache, libpq_url(state.database_url), stop))
    try:
        yield
    finally:
        stop.set()
        unregister(cache)
        # Never cancel a connect half-way (it would leave the connection open): a connecting
        # listener sees the stop flag as soon as it is connected, and closes.
        if not cache.connecting:
            task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(task, 10)
