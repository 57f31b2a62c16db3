"""The wake plan (domain/wake.py): groups, levels and type ranks as the SQL receives them."""

from __future__ import annotations

import uuid

from service.domain import wake
from service.domain.facets import FACET_OF_TYPE, WAKE_FACETS


def test_groups_are_the_wake_facets_in_order() -> None:
    assert tuple(g.facet for g in wake.WAKE_GROUPS) == WAKE_FACETS


def test_every_wake_type_is_a_known_memory_type_and_ideas_stay_out() -> None:
    types = wake.wake_types()
    assert set(types) <= set(FACET_OF_TYPE)
    assert "idea" not in types


def test_plan_levels_and_ranks() -> None:
    plan = wake.build_wake_plan("alice:s1:t1", 8, {})
    assert plan.user_namespace == "alice"
    groups = [g.facet for g in wake.WAKE_GROUPS]
    i = plan.types.index
    # An episode at the user level is a preference, below it recent work.
    assert plan.group_at_user[i("episode")] == groups.index("preferences")
    assert plan.group_below_user[i("episode")] == groups.index("recent_memory")
    # Claims and domain notes count only at the user level; artifacts only below it.
    assert plan.group_below_user[i("claim")] is None
    assert plan.group_at_user[i("artifact")] is None
    # Among preferences, lasting statements before events; among recent work, all equal.
    assert plan.type_rank_at_user[i("claim")] < plan.type_rank_at_user[i("episode")]
    assert plan.type_rank_below_user[i("episode")] == plan.type_rank_below_user[i("artifact")]
    assert plan.type_rank_at_user[i("task")] < plan.type_rank_at_user[i("plan")]


def test_goal_matches_are_passed_best_first() -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    plan = wake.build_wake_plan("alice", 8, {a: 0.2, b: 0.5})
    assert plan.boost_ids == [b, a]
    assert plan.boost_relevance == [0.5, 0.2]


def test_levels() -> None:
    assert [wake.level_of(ns) for ns in ("u", "u:s", "u:s:t")] == ["user", "session", "task"]
