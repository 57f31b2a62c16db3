"""The normalised view (domain/redaction/normalize.py): what the rules read, and the map back
to the text as written."""

from __future__ import annotations

from service.domain.redaction.normalize import normalised_view


def test_ascii_text_without_percent_is_its_own_view() -> None:
    assert normalised_view("password=hunter2") is None


def test_zero_width_characters_are_removed_and_spans_map_back() -> None:
    text = "pass\u200bword=hunter2"
    view = normalised_view(text)
    assert view is not None
    assert view.view == "password=hunter2"
    start = view.view.index("hunter2")
    a, b = view.original_span(start, start + len("hunter2"))
    assert text[a:b] == "hunter2"


def test_full_width_letters_are_folded() -> None:
    view = normalised_view("ｐａｓｓｗｏｒｄ＝x")
    assert view is not None
    assert view.view == "password=x"
    assert view.original_span(0, 8) == (0, 8)


def test_percent_escapes_are_decoded_only_when_asked() -> None:
    text = "token%3Dabc"
    assert normalised_view(text) is None or normalised_view(text).view == text  # type: ignore[union-attr]
    decoded = normalised_view(text, decode_percent=True)
    assert decoded is not None
    assert decoded.view == "token=abc"
    assert decoded.original_span(5, 6) == (5, 8)
