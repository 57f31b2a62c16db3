"""A small in-process cache: bounded (least recently used out first), entries expiring."""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class TtlLru(Generic[K, V]):
    """At most ``max_entries`` values, each for ``ttl_seconds`` (<= 0: nothing is kept).
    Not thread-safe: used from the event loop only."""

    def __init__(self, ttl_seconds: float, max_entries: int) -> None:
        self.ttl = ttl_seconds
        self.max_entries = max_entries
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, value = entry
        if expires < time.monotonic():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return value

    def put(self, key: K, value: V, ttl: float | None = None) -> None:
        """Keep ``value`` for ``ttl`` seconds (default: the cache's), at most the cache's."""
        if self.ttl <= 0:
            return
        kept = self.ttl if ttl is None else min(ttl, self.ttl)
        self._entries[key] = (time.monotonic() + kept, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def pop(self, key: K) -> None:
        self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
