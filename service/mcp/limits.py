"""Context saving for tool results: line and byte limits on text, byte limits on pages.

A tool result lands in the model's context window and stays there, so every tool that can
return a lot takes limits: list tools page with ``offset``/``limit`` and report
``{offset, limit, total, has_more}``; text tools take ``max_bytes`` (and ``head``/``tail``
lines) and say when and how they cut, so the model knows to ask again for more.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

Position = Literal["head", "tail"]
NOTE_RESERVE = 240
"""Bytes of a ``max_bytes`` budget kept free for the one-line note saying what was cut."""


class TruncationInfo(BaseModel):
    """How a text was cut. Present only when something was cut."""

    original_bytes: int
    original_lines: int
    kept_bytes: int
    kept_lines: int
    position: Position = Field(description="head: the start was kept; tail: the end was kept")


@dataclass(frozen=True)
class LimitedText:
    text: str
    truncation: TruncationInfo | None

    @property
    def truncated(self) -> bool:
        return self.truncation is not None


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def _clip_bytes(text: str, max_bytes: int, position: Position) -> str:
    """At most ``max_bytes`` of ``text`` from its start (head) or end (tail), never splitting a
    UTF-8 character."""
    raw = text.encode("utf-8")
    if len(raw) <= max_bytes:
        return text
    part = raw[:max_bytes] if position == "head" else raw[len(raw) - max_bytes :]
    return part.decode("utf-8", errors="ignore")


def limit_text(
    text: str,
    *,
    head: int | None = None,
    tail: int | None = None,
    max_bytes: int | None = None,
) -> LimitedText:
    """Apply line limits, then a byte limit that cuts at line boundaries when it can.

    Args:
        head: keep only the first ``head`` lines (wins over ``tail``).
        tail: keep only the last ``tail`` lines.
        max_bytes: the whole result, including the note appended when something was cut,
            fits in this many UTF-8 bytes (a budget below ``NOTE_RESERVE`` keeps no text).

    Returns:
        The kept text, followed by a ``[truncated: ...]`` line when something was cut, and
        the ``TruncationInfo``.
    """
    lines = text.splitlines(keepends=True)
    original_bytes, original_lines = _utf8_len(text), len(lines)
    position: Position = "tail" if tail is not None and head is None else "head"
    kept = lines
    if head is not None:
        kept = lines[:head]
    elif tail is not None:
        kept = lines[len(lines) - tail :] if tail else []
    body = "".join(kept)
    if max_bytes is not None and _utf8_len(body) > max_bytes:
        budget = max(0, max_bytes - NOTE_RESERVE)
        ordered = kept if position == "head" else list(reversed(kept))
        fitted: list[str] = []
        used = 0
        for line in ordered:
            size = _utf8_len(line)
            if used + size > budget:
                break
            fitted.append(line)
            used += size
        if not fitted and ordered and budget:
            # Not even one whole line fits: keep part of the first (or last) line.
            fitted = [_clip_bytes(ordered[0], budget, position)]
        kept = fitted if position == "head" else list(reversed(fitted))
        body = "".join(kept)
    if body == text:
        return LimitedText(text, None)
    info = TruncationInfo(
        original_bytes=original_bytes,
        original_lines=original_lines,
        kept_bytes=_utf8_len(body),
        kept_lines=len(kept),
        position=position,
    )
    kept_where = "first" if position == "head" else "last"
    note = (
        f"[truncated: kept the {kept_where} {info.kept_lines} of {info.original_lines} lines, "
        f"{info.kept_bytes} of {info.original_bytes} bytes; ask again with a larger max_bytes "
        f"or other head/tail to see more]"
    )
    if body and not body.endswith("\n"):
        body += "\n"
    return LimitedText(body + note, info)


def dumps(value: Any) -> str:
    """Compact JSON, UTF-8 kept as is (fewer bytes and tokens than escaped)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class FittedPage:
    items: list[dict[str, Any]]
    dropped: int
    clipped: bool


def fit_items(
    items: Sequence[dict[str, Any]],
    max_bytes: int | None,
    *,
    clip: Callable[[dict[str, Any], int], dict[str, Any]],
    overhead: int = 0,
) -> FittedPage:
    """Keep the leading items whose JSON fits in ``max_bytes - overhead``.

    Whole items are dropped from the end; when not even the first fits, it is kept with
    ``clip(item, budget)`` shrinking its biggest text so one page never comes back empty.
    """
    if max_bytes is None:
        return FittedPage(list(items), 0, False)
    budget = max(0, max_bytes - overhead)
    kept: list[dict[str, Any]] = []
    used = 2  # the list's brackets
    for item in items:
        size = _utf8_len(dumps(item)) + (1 if kept else 0)
        if used + size > budget:
            break
        kept.append(item)
        used += size
    clipped = False
    if not kept and items:
        kept = [clip(items[0], budget)]
        clipped = True
    return FittedPage(kept, len(items) - len(kept), clipped)


def clip_field(item: dict[str, Any], field: str, budget: int) -> dict[str, Any]:
    """A copy of ``item`` whose ``field`` text is cut so the item's JSON fits ``budget``
    bytes where possible, ending in ``…``."""
    text = item.get(field)
    if not isinstance(text, str):
        return item
    rest = _utf8_len(dumps({**item, field: "…"}))
    room = max(0, budget - rest)
    while True:
        clipped = {**item, field: _clip_bytes(text, room, "head") + "…"}
        excess = _utf8_len(dumps(clipped)) - budget
        if excess <= 0 or room == 0:  # JSON escapes can make the text longer than its bytes
            return clipped
        room = max(0, room - excess)
