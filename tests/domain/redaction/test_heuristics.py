"""Value heuristics (domain/redaction/heuristics.py): what a secret value looks like, and the
PII validators."""

from __future__ import annotations

from service.domain.redaction.heuristics import (
    VERSION_RE,
    generic_secret,
    is_card,
    is_iban,
    looks_random,
    shannon_entropy,
)


def test_random_tokens_look_random_and_words_do_not() -> None:
    assert looks_random("q8Zr2LmX7vKp4TnB9sWd")
    assert not looks_random("configuration_file_name")
    assert not looks_random("1.2.3")


def test_entropy_grows_with_variety() -> None:
    assert shannon_entropy("aaaaaaaa") == 0
    assert shannon_entropy("abcdefgh") > shannon_entropy("aabbccdd") > 0


def test_a_card_needs_a_valid_luhn_sum() -> None:
    assert is_card("4111 1111 1111 1111")
    assert not is_card("4111 1111 1111 1112")


def test_an_iban_needs_its_countrys_length_and_checksum() -> None:
    assert is_iban("DE89370400440532013000")
    assert not is_iban("DE8937040044053201300")
    assert not is_iban("DE00370400440532013000")


def test_versions_and_uuids_are_no_secrets() -> None:
    assert VERSION_RE.fullmatch("v1.2.3-rc1")
    assert not generic_secret("123e4567-e89b-12d3-a456-426614174000")
    assert generic_secret("q8Zr2LmX7vKp4TnB9sWdY3")
