"""service/domain/namespaces.py: namespaces as the domain takes them (the grammar, from
``schemas/namespaces.py``, and no secret), ancestry and key prefixes."""

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


@pytest.mark.parametrize("value", ["", "a:b:c:d", "alice::s", "al ice"])
def test_the_grammar_is_the_schemas(value: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_namespace(value, "items.3.namespace")
    assert caught.value.details["field"] == "items.3.namespace"


def test_a_namespace_holding_a_secret_is_refused_naming_its_label_not_the_secret() -> None:
    aws = "AKIA" + "Z9" * 8
    with pytest.raises(InvalidInput) as caught:
        parse_namespace(f"alice:{aws}", "items.3.namespace")
    assert caught.value.details["field"] == "items.3.namespace"
    assert "AWS_ACCESS_KEY" in caught.value.message and aws not in caught.value.message
    # only an erase of a namespace stored before the check takes it
    assert parse_namespace(f"alice:{aws}", refuse_secrets=False) == f"alice:{aws}"


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
