"""The replay diff: items added, dropped and moved between a recorded pack and a new one."""

from __future__ import annotations

import uuid

from service.domain.audit.replay import diff_packs
from service.schemas.audit import RankedItem


def _pack(*ids: uuid.UUID) -> list[RankedItem]:
    return [RankedItem(id=i, rank=n, score=1 - n / 100) for n, i in enumerate(ids, start=1)]


A, B, C, D, E = (uuid.uuid4() for _ in range(5))


def test_identical_packs_have_no_diff() -> None:
    diff = diff_packs(_pack(A, B, C), _pack(A, B, C))
    assert diff.added == []
    assert diff.dropped == []
    assert diff.rank_changes == []
    assert diff.unchanged == 3


def test_memory_added_after_the_recorded_call() -> None:
    diff = diff_packs(_pack(A, B), _pack(D, A, B))
    assert [(i.id, i.rank) for i in diff.added] == [(D, 1)]
    assert [(c.id, c.before, c.after) for c in diff.rank_changes] == [(A, 1, 2), (B, 2, 3)]
    assert diff.dropped == []
    assert diff.unchanged == 0


def test_added_dropped_and_moved_together() -> None:
    before = _pack(A, B, C, D)
    after = _pack(C, A, E)
    diff = diff_packs(before, after)
    assert [(i.id, i.rank) for i in diff.added] == [(E, 3)]
    # Dropped items keep their old rank and score, in old-rank order.
    assert [(i.id, i.rank) for i in diff.dropped] == [(B, 2), (D, 4)]
    assert diff.dropped[0].score == before[1].score
    assert [(c.id, c.before, c.after) for c in diff.rank_changes] == [(C, 3, 1), (A, 1, 2)]
    assert diff.unchanged == 0


def test_empty_packs() -> None:
    assert diff_packs([], []).model_dump() == {
        "added": [],
        "dropped": [],
        "rank_changes": [],
        "unchanged": 0,
    }
    everything_new = diff_packs([], _pack(A, B))
    assert [i.id for i in everything_new.added] == [A, B]
    everything_gone = diff_packs(_pack(A, B), [])
    assert [i.id for i in everything_gone.dropped] == [A, B]


def test_diff_serialises_as_json() -> None:
    diff = diff_packs(_pack(A), _pack(B, A))
    body = diff.model_dump(mode="json")
    assert body["added"] == [{"id": str(B), "rank": 1, "score": 0.99}]
    assert body["rank_changes"] == [{"id": str(A), "before": 1, "after": 2}]
