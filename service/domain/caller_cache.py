"""Authenticated callers, cached per process, with revocation that takes effect at once.

Looking a key up costs a pool checkout and a round trip on every call (about 1.5 ms of a
context call's 10). The cache keeps ``Caller`` objects by key hash, and stays exact:

- A revoked key leaves every process's cache when the revocation commits: the revoking
  transaction sends ``NOTIFY ctxpack_keys`` (delivered on commit; ``store/revocations.py``)
  and each server LISTENs on its own connection; a revocation made through a process's own
  resources also drops the key from its cache, synchronously, at commit
  (``domain.keys.revoke_key``).
- The cache only answers while the listener is connected. When that connection drops, the
  cache is emptied and bypassed (every call reads the database) until it is back.
- A lookup that raced with a revocation is not cached: every invalidation bumps a
  generation number, and a lookup is kept only if the generation did not move meanwhile.
- Entries also expire after ``auth_cache_seconds`` (0 turns the cache off).

This module is the cache alone: the lookup that fills it is ``service.calls`` (the call
runner), the listener is ``service.store.revocations``, and ``service.resources`` runs it.
"""

from __future__ import annotations

from service.cache import TtlLru
from service.domain import auth
from service.store.revocations import CHANNEL

__all__ = ["CHANNEL", "MAX_ENTRIES", "CallerCache"]

MAX_ENTRIES = 10_000


class CallerCache:
    """Key hash -> Caller, bounded, expiring, and live only while revocations can reach it."""

    def __init__(self, ttl_seconds: float, max_entries: int = MAX_ENTRIES) -> None:
        self.generation = 0
        self.live = False  # set by the listener while it is connected
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

    def set_live(self, live: bool) -> None:
        """The listener's connection went up (True) or down (False)."""
        self.live = live

    def __len__(self) -> int:
        return len(self._entries)
