"""cache.py: ``TtlLru`` keeps at most ``max_entries`` values (the least recently used leaves
first), each for ``ttl_seconds``; a TTL of 0 or less keeps nothing."""

from __future__ import annotations

import pytest

from service import cache
from service.cache import TtlLru


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(cache.time, "monotonic", fake)
    return fake


def test_the_least_recently_used_entry_leaves_first(clock: Clock) -> None:
    lru: TtlLru[str, int] = TtlLru(ttl_seconds=60, max_entries=2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.get("a") == 1  # now "b" is the least recently used
    lru.put("c", 3)
    assert (lru.get("a"), lru.get("b"), lru.get("c")) == (1, None, 3)
    assert len(lru) == 2


def test_an_entry_expires_after_its_ttl(clock: Clock) -> None:
    lru: TtlLru[str, int] = TtlLru(ttl_seconds=60, max_entries=10)
    lru.put("a", 1)
    clock.now += 60
    assert lru.get("a") == 1
    clock.now += 0.001
    assert lru.get("a") is None and len(lru) == 0


def test_no_ttl_keeps_nothing_and_entries_can_be_dropped(clock: Clock) -> None:
    off: TtlLru[str, int] = TtlLru(ttl_seconds=0, max_entries=10)
    off.put("a", 1)
    assert off.get("a") is None and len(off) == 0
    lru: TtlLru[str, int] = TtlLru(ttl_seconds=60, max_entries=10)
    lru.put("a", 1)
    lru.put("b", 2)
    lru.pop("a")
    lru.pop("missing")
    assert lru.get("a") is None and lru.get("b") == 2
    lru.clear()
    assert len(lru) == 0


def test_an_entry_may_be_kept_for_less_than_the_ttl(clock: Clock) -> None:
    lru: TtlLru[str, int] = TtlLru(ttl_seconds=60, max_entries=10)
    lru.put("short", 1, ttl=10)
    lru.put("capped", 2, ttl=600)  # never longer than the cache's own TTL
    clock.now += 10.001
    assert lru.get("short") is None and lru.get("capped") == 2
    clock.now += 50
    assert lru.get("capped") is None
