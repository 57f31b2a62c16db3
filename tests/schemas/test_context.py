"""schemas/context.py: a pack request's own rules. A goal is required and not blank except at
the wake layer (where a blank goal is no goal); goal and domain are stripped and storable (no
NUL, no lone surrogate); ``limit`` and ``related_limit`` are clamped, not refused."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from service.schemas.context import MAX_RELATED_LIMIT, ContextRequest


def request(**fields: Any) -> ContextRequest:
    return ContextRequest.model_validate({"namespace": "alice", **fields})


@pytest.mark.parametrize("goal", [None, "", "   "])
def test_a_goal_is_required_outside_wake(goal: str | None) -> None:
    fields = {} if goal is None else {"goal": goal}
    with pytest.raises(ValidationError) as raised:
        request(**fields)
    assert raised.value.errors()[0]["loc"] == ("goal",)


@pytest.mark.parametrize("goal", [None, "", "   "])
def test_at_wake_a_blank_goal_is_no_goal(goal: str | None) -> None:
    fields = {} if goal is None else {"goal": goal}
    assert request(layer="wake", **fields).goal is None


def test_goal_and_domain_are_stripped_and_storable() -> None:
    made = request(goal="  fix the deploy  ", domain="  ")
    assert (made.goal, made.domain) == ("fix the deploy", None)
    for bad in ({"goal": "deploy\x00"}, {"goal": "x", "domain": "ops\ud800"}):
        with pytest.raises(ValidationError):
            request(**bad)


def test_limits_are_clamped_not_refused() -> None:
    assert request(goal="g", limit=0).limit == 1
    assert request(goal="g", limit=None).limit is None
    assert request(goal="g", related_limit=-3).related_limit == 0
    assert request(goal="g", related_limit=99).related_limit == MAX_RELATED_LIMIT
    clamped = request(goal="g", limit=10**6).limit
    assert clamped is not None and clamped < 10**6
