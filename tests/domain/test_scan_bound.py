"""The bound on text work per call (domain/scan_bound.py): what counts, and which field a 413
names."""

from __future__ import annotations

import pytest

from service.domain.scan_bound import check_scan_bound, compact_size, scanned_size
from service.errors import PayloadTooLarge


def test_text_counts_utf8_bytes_and_json_its_compact_form() -> None:
    assert scanned_size(None) == 0
    assert scanned_size("café") == 5
    assert scanned_size({"a": [1, 2], "b": "é"}) == len('{"a":[1,2],"b":"é"}'.encode())
    assert scanned_size(["x", None]) == compact_size(["x", None]) == len(b'["x",null]')
    assert scanned_size('{"a": 1}') == 8  # JSON sent as text counts as the text


def test_at_the_limit_passes_one_byte_over_is_413() -> None:
    check_scan_bound([("result", "x" * 100)], 100, "less")
    with pytest.raises(PayloadTooLarge) as over:
        check_scan_bound([("result", "x" * 101)], 100, "less")
    assert over.value.details["field"] == "result"
    assert "101 bytes" in over.value.message and "less" in over.value.message


def test_a_part_alone_over_is_named_else_the_field_holding_most() -> None:
    with pytest.raises(PayloadTooLarge) as alone:
        check_scan_bound(
            [("system", "s" * 10), ("tool_results.0.result", "a" * 20),
             ("tool_results.1.result", "b" * 120)],
            100,
            "less",
        )
    assert alone.value.details["field"] == "tool_results.1.result"
    parts = [(f"messages.{n}.content", "m" * 30) for n in range(3)]
    parts += [("tool_results.0.result", "r" * 40), ("user_message", None)]
    with pytest.raises(PayloadTooLarge) as summed:
        check_scan_bound(parts, 100, "less")
    assert summed.value.details["field"] == "messages"
    assert "130 bytes" in summed.value.message
    check_scan_bound(parts[:2] + parts[3:], 100, "less")
