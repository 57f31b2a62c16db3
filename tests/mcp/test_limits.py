"""Context saving: line and byte limits on text results."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from service.mcp.limits import NOTE_RESERVE, clip_field, dumps, fit_items, limit_text

TEXT = "".join(f"line {i}: {'x' * 40}\n" for i in range(100))


def test_untouched_text_has_no_truncation() -> None:
    limited = limit_text(TEXT, max_bytes=len(TEXT.encode()))
    assert limited.text == TEXT
    assert limited.truncation is None


def test_head_and_tail_keep_whole_lines_and_say_so() -> None:
    head = limit_text(TEXT, head=3)
    assert head.text.startswith("line 0:")
    assert head.text.splitlines()[2].startswith("line 2:")
    assert head.truncation is not None
    assert (
        head.truncation.kept_lines,
        head.truncation.original_lines,
        head.truncation.position,
    ) == (3, 100, "head")
    assert head.text.splitlines()[-1].startswith("[truncated: kept the first 3 of 100 lines")
    tail = limit_text(TEXT, tail=2)
    assert tail.text.splitlines()[:2] == ["line 98: " + "x" * 40, "line 99: " + "x" * 40]
    assert tail.truncation is not None
    assert tail.truncation.position == "tail"
    assert "kept the last 2 of 100 lines" in tail.text
    both = limit_text(TEXT, head=1, tail=5)
    assert both.truncation is not None
    assert both.truncation.kept_lines == 1


def test_max_bytes_cuts_at_line_boundaries_note_included() -> None:
    limited = limit_text(TEXT, max_bytes=1000)
    assert len(limited.text.encode()) <= 1000
    assert limited.truncation is not None
    kept = limited.text.splitlines()[:-1]
    assert all(line.endswith("x" * 40) for line in kept)
    assert limited.truncation.kept_bytes == sum(len(line) + 1 for line in kept)
    assert limited.truncation.original_bytes == len(TEXT)
    from_end = limit_text(TEXT, tail=50, max_bytes=1000)
    assert from_end.text.splitlines()[-2].startswith("line 99:")


def test_one_long_line_is_cut_inside_without_splitting_characters() -> None:
    text = "é" * 5000
    limited = limit_text(text, max_bytes=NOTE_RESERVE + 101)
    body = limited.text.splitlines()[0]
    assert set(body) == {"é"}
    assert len(body.encode()) <= 101
    assert len(limited.text.encode()) <= NOTE_RESERVE + 101


@given(st.text(), st.integers(min_value=NOTE_RESERVE, max_value=5000))
def test_max_bytes_always_holds(text: str, max_bytes: int) -> None:
    assert len(limit_text(text, max_bytes=max_bytes).text.encode()) <= max_bytes


def test_fit_items_drops_whole_items_then_clips_the_first() -> None:
    items = [{"id": i, "content": "y" * 100} for i in range(10)]
    fitted = fit_items(items, 500, clip=lambda i, b: clip_field(i, "content", b))
    assert len(dumps(fitted.items).encode()) <= 500
    assert fitted.dropped == 10 - len(fitted.items)
    assert not fitted.clipped
    one = fit_items(items, 60, clip=lambda i, b: clip_field(i, "content", b))
    assert one.clipped
    assert len(one.items) == 1
    assert len(dumps(one.items[0]).encode()) <= 60
    assert fit_items(items, None, clip=lambda i, b: i).items == items


@given(st.text(min_size=1), st.integers(min_value=40, max_value=400))
def test_clip_field_fits_even_with_json_escapes(text: str, budget: int) -> None:
    clipped = clip_field({"id": 1, "content": text}, "content", budget)
    assert len(dumps(clipped).encode()) <= budget
