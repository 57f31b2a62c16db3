"""The key vocabulary (domain/redaction/keys.py): which key names a secret, under which label."""

from __future__ import annotations

import pytest

from service.domain.redaction.keys import (
    LABELS,
    PLACEHOLDER_RE,
    is_id_key,
    key_words,
    label_for_key,
    placeholder,
)


@pytest.mark.parametrize(
    ("key", "label"),
    [
        ("password", "PASSWORD"),
        ("DB_PASSWORD", "PASSWORD"),
        ("apiKey", "API_KEY"),
        ("client_secret", "SECRET"),
        ("accessToken", "TOKEN"),
        ("PIN", "PIN"),
    ],
)
def test_a_key_naming_a_secret_gets_its_label(key: str, label: str) -> None:
    assert label_for_key(key) == label


@pytest.mark.parametrize("key", ["name", "description", "next_token", "page_token", "spin", "port"])
def test_a_key_naming_no_secret_gets_none(key: str) -> None:
    assert label_for_key(key) is None


def test_keys_split_into_words_at_case_and_punctuation() -> None:
    assert key_words("dbPassword") == ("db", "password")
    assert key_words("X-Api-Key") == ("x", "api", "key")


def test_identifier_keys_are_known() -> None:
    assert is_id_key("node_id")
    assert is_id_key("sha")
    assert not is_id_key("password")


def test_every_label_has_a_placeholder_the_pattern_matches() -> None:
    for label in LABELS:
        assert PLACEHOLDER_RE.fullmatch(placeholder(label))
    assert placeholder("PASSWORD") == "[PASSWORD:REDACTED]"
