"""The keyed-write rules (domain/writes/keyed.py), case by case, without a database."""

from __future__ import annotations

import uuid

import pytest

from service.domain.writes.keyed import plan_keyed_write
from service.errors import Conflict, SharedMemoryReadOnly
from service.store.memories import Holder


def holder(key: str | None, content_hash: str, *, superseded: bool = False, project: str | None = None) -> Holder:
    return Holder(uuid.uuid4(), key, content_hash, uuid.uuid4() if superseded else None, project)


def test_new_key_new_content_is_created() -> None:
    plan = plan_keyed_write("k", "h1", None, None, [])
    assert (plan.action, plan.status, plan.superseded_id) == ("insert", "created", None)


def test_same_content_under_the_key_is_duplicate() -> None:
    current = holder("k", "h1")
    plan = plan_keyed_write("k", "h1", current, current, [])
    assert (plan.status, plan.existing_id) == ("duplicate", current.id)


def test_other_content_under_the_key_is_updated() -> None:
    current = holder("k", "h0")
    plan = plan_keyed_write("k", "h1", current, None, [])
    assert (plan.action, plan.status, plan.superseded_id) == ("insert", "updated", current.id)


def test_an_earlier_version_comes_back() -> None:
    current, earlier = holder("k", "h0"), holder("k", "h1", superseded=True)
    plan = plan_keyed_write("k", "h1", current, earlier, [])
    assert (plan.action, plan.status, plan.existing_id, plan.superseded_id) == (
        "claim", "updated", earlier.id, current.id
    )


def test_an_unkeyed_copy_takes_the_key() -> None:
    plain = holder(None, "h1")
    assert plan_keyed_write("k", "h1", None, plain, []).status == "duplicate"
    current = holder("k", "h0")
    plan = plan_keyed_write("k", "h1", current, plain, [])
    assert (plan.action, plan.status, plan.superseded_id) == ("claim", "updated", current.id)


@pytest.mark.parametrize("other", [holder("j", "h1")])
def test_content_held_elsewhere_is_a_conflict(other: Holder) -> None:
    with pytest.raises(Conflict) as caught:
        plan_keyed_write("k", "h1", None, other, [], "items.2.")
    assert caught.value.details["field"] == "items.2.content"


@pytest.mark.parametrize("history", [holder(None, "h1", superseded=True), holder("j", "h1", superseded=True)])
def test_superseded_copies_hold_no_content(history: Holder) -> None:
    # Uniqueness of content covers current memories only (migration 0003): a superseded copy
    # that is not a version of the key is history, and the write stores a new memory.
    assert plan_keyed_write("k", "h1", None, history, []).status == "created"
    current = holder("k", "h0")
    plan = plan_keyed_write("k", "h1", current, history, [])
    assert (plan.action, plan.status, plan.superseded_id) == ("insert", "updated", current.id)


def test_a_shared_copy_a_limited_key_cannot_write_is_not_claimed() -> None:
    shared = holder(None, "h1")
    assert plan_keyed_write("k", "h1", None, shared, ["p1"]).action == "insert"
    assert plan_keyed_write("k", "h1", None, shared, []).action == "claim"


def test_a_shared_memory_under_the_key_is_read_only_to_a_limited_key() -> None:
    shared = holder("k", "h0")
    with pytest.raises(SharedMemoryReadOnly) as caught:
        plan_keyed_write("k", "h1", shared, None, ["p1"], "items.1.")
    assert caught.value.details["field"] == "items.1.key"
    # The same content under it is still a duplicate (reading it is within reach).
    assert plan_keyed_write("k", "h0", shared, shared, ["p1"]).status == "duplicate"


def test_out_of_reach_memories_are_conflicts_naming_no_id() -> None:
    hidden = holder("k", "h0", project="secret")
    with pytest.raises(Conflict) as caught:
        plan_keyed_write("k", "h1", hidden, None, ["public"])
    assert caught.value.details == {"field": "key"}
    assert str(hidden.id) not in caught.value.message
    copy = holder(None, "h1", project="secret")
    with pytest.raises(Conflict) as caught:
        plan_keyed_write("k", "h1", None, copy, ["public"])
    assert str(copy.id) not in caught.value.message and "existing_id" not in caught.value.details
    # Unlimited keys and project-less memories are within reach.
    assert plan_keyed_write("k", "h1", hidden, None, []).status == "updated"
