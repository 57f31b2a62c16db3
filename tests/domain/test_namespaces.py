"""service/domain/namespaces.py: the namespace grammar, ancestry and key prefixes."""

from __future__ import annotations

import pytest

from service.domain.namespaces import (
    allowed,
    ancestors,
    parse_namespace,
    parse_namespace_filter,
    visible_namespaces,
    within_prefix,
)
from service.errors import InvalidInput


@pytest.mark.parametrize("value", ["alice", "alice:s1", "alice:s1:t-2", "a.b_c-d:X"])
def test_valid_namespaces_are_returned_unchanged(value: str) -> None:
    assert parse_namespace(value) == value


@pytest.mark.parametrize(
    "value", ["", "a:b:c:d", "alice:", ":alice", "alice::s", "al ice", "a/b", "x" * 65]
)
def test_invalid_namespaces_name_the_field(value: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_namespace(value, "items.3.namespace")
    assert caught.value.details["field"] == "items.3.namespace"


def test_filters_exact_subtree_and_everything() -> None:
    assert parse_namespace_filter("alice:s1") == ("alice:s1", False)
    assert parse_namespace_filter("alice:*") == ("alice", True)
    assert parse_namespace_filter("*") == (None, True)
    with pytest.raises(InvalidInput):
        parse_namespace_filter("alice:**")


def test_ancestors_run_from_the_user_down() -> None:
    assert ancestors("u") == ["u"]
    assert ancestors("u:s:t") == ["u", "u:s", "u:s:t"]


def test_prefixes_are_segment_wise() -> None:
    assert within_prefix("alice:s1", "alice")
    assert within_prefix("alice", "alice")
    assert not within_prefix("alicex", "alice")
    assert not within_prefix("alice", "alice:s1")  # a prefix never reaches above itself


def test_a_key_without_prefixes_reaches_everything() -> None:
    assert allowed("anyone:s", [])
    assert allowed("bob:s1", ["alice", "bob"])
    assert not allowed("carol", ["alice", "bob"])


def test_a_call_sees_itself_and_its_ancestors_within_the_key() -> None:
    # Never a sibling task or another session: only the chain up to the user.
    assert visible_namespaces("u:s:t", []) == ["u", "u:s", "u:s:t"]
    # A key limited to u:s cannot read u, even from below it.
    assert visible_namespaces("u:s:t", ["u:s"]) == ["u:s", "u:s:t"]
    assert visible_namespaces("u:s:t", ["v"]) == []
