"""The tool-result envelope (the design's layer 2): every tool result passes through one
filter before a model sees it.

``build_envelope`` is the pure rule (used by POST /v1/tool-results, POST /v1/assemble and the
benchmark); ``envelope_call`` is the audited call around it. In this order:

1. **Read**: text, or any JSON value; a text that parses as a JSON object or array is read as
   JSON (shell tools print JSON). Non-finite numbers (NaN, Infinity) become the strings
   ``"NaN"``, ``"Infinity"``, ``"-Infinity"``: tools produce them, and JSON has no such number.
2. **Redact first** (``redact_fields``, the redactor every write uses; JSON keys and values
   at any depth). The seed trimmed first, which can cut a secret in half and leave the rest
   unmatched; here a cut only ever sees placeholders.
3. **Trim** to ``budget_tokens``, counted with the context pack's tokenizer (the embedder's
   ``count_tokens``). Strategies:

   * ``text``: the first and the last line (the command, the verdict), the head, the tail
     and the lines that carry errors (tracebacks, ``ERROR``,
     ``FAILED``, ``npm ERR!``, ``error:``, exceptions, non-zero exit codes), in their order,
     with ``[… N lines dropped …]`` where lines were dropped. Repeats of one error line
     (digits aside) count once after the second. A line too long for its share is cut.
   * ``json`` (automatic): the value is shortened level by level until it fits: arrays keep
     their first items plus the items that carry errors (a failed pod, a non-zero exit),
     with ``"[… N items dropped]"`` where items were dropped; long strings keep their start
     and say how many characters were dropped; keys are kept (the top level's always; only
     at the last levels are deep objects replaced by their shape, ``"{12 keys: a, b, …}"``,
     and wide nested ones cut to their first keys). Stays valid JSON.
   * ``fields``: only the named paths (``status.phase``; on a list a name maps over the
     items, a number picks one, ``*`` is every key), then ``json`` if still over budget.
   * ``summary``: the shape: types, sizes, keys (and for text: lines, error lines, the first
     and last line).
   * ``first_n``: the first tokens only. The fallback of every other strategy, never the
     default.

   ``auto`` picks ``fields`` when fields are given, ``json`` for JSON, ``text`` for text.

Cuts never fall inside a ``[LABEL:REDACTED]`` placeholder or a JSON string escape
(``\\n``, ``\\"``, ``\\u00e9``), and never inside a UTF-8 sequence (cuts are made on code
points, never on bytes). ``content`` never exceeds the budget: the final text is counted.

Cost: linear in the input. Parsing, redaction and one token count of the whole input are
single passes; each trimming level visits only what it keeps (a constant number of levels);
the text strategy counts only the lines it considers keeping. Callers run it in a worker
thread (``asyncio.to_thread``), never on the event loop, after the bound on text work per
call (``domain/scan_bound.py``): a result over ``max_scanned_bytes`` (its text's UTF-8 bytes,
or a JSON value's compact JSON) is a 413 naming ``result`` before any of it is read.

The audit row keeps the tool name, the call id, sizes, token counts, the strategy, the cuts'
counts and the redactions' labels and counts: never the content.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from service.domain import audit as audit_service
from service.domain.audit import AuditContext
from service.domain.auth import Caller
from service.domain.redaction import PLACEHOLDER_RE
from service.domain.redaction.fields import check_identifiers, redact_fields
from service.domain.scan_bound import Part, check_scan_bound
from service.embedding import AsyncEmbedder
from service.errors import InvalidInput
from service.schemas.tool_results import (
    MIN_BUDGET_TOKENS,
    RedactionCount,
    Strategy,
    ToolResultCut,
    ToolResultRequest,
    ToolResultResponse,
)

TokenCounter = Callable[[str], int]

SCAN_HINT = "cut the tool's output before sending it, or send it as several results"

MAX_JSON_DEPTH = 64
# Text is counted in pieces of about this many characters (cut at a line or a space), so a
# 4 MB log never becomes one tokenizer call holding a million tokens.
COUNT_CHUNK_CHARS = 64 * 1024
# Shares of a text budget: the head, the tail, and what the error lines may take first.
HEAD_SHARE = 0.15
TAIL_SHARE = 0.25
# A single line may take at most this share of the budget (longer ones are cut).
LINE_SHARE = 0.25
# An error line seen this many times (digits aside) is not kept again.
MAX_REPEATS = 2
# Characters of a first-n window per budget token: WordPiece tokens of code and logs average
# 2-4 characters; a window of 16 per token is never the binding limit but bounds the work.
FIRST_N_CHARS_PER_TOKEN = 16

ERROR_LINE_RE = re.compile(
    r"Traceback \(most recent call last\)"
    r"|\b(?:ERROR|ERR!|FAILED|FAILURE|FATAL|CRITICAL|PANIC|Failed|Error)\b"
    r"|^E {2,}\S"
    r"|^\s*(?:error|fatal|panic)(?:\[[\w-]+\])?:"
    r"|\b\d+ (?:failed|errors?)\b"
    r"|\b[A-Z]\w*(?:Error|Exception|Failure)\b"
    r"|\b(?:exit(?:ed)?(?: with)?(?: code| status)?|exit_code|exitcode|returncode|"
    r"non-zero exit status|return code)[\s:=(]*-?[1-9]\d*"
)
ZERO_ERRORS_RE = re.compile(r"\b(?:0 errors?|0 failed|no errors?)\b", re.IGNORECASE)
TRACEBACK_RE = re.compile(r"Traceback \(most recent call last\)")
# A JSON value that carries an error: kept when its array is shortened.
SIGNAL_RE = re.compile(
    r"(?i)\b(?:error|errored|failed|failure|fatal|panic|crashloopbackoff|oomkilled|"
    r"imagepullbackoff|errimagepull|evicted|unhealthy|timed? ?out)\b"
    r"|\bexited \([1-9]\d*\)"
)
SIGNAL_DEPTH = 7
SHORT_SLACK = 24
SIGNAL_NODES = 256
_DIGITS_RE = re.compile(r"\d+")


# --- the result ---------------------------------------------------------------------------------


@dataclass
class Envelope:
    """What ``build_envelope`` made of one tool result."""

    content: str
    strategy: Strategy
    is_json: bool
    tokens_before: int
    tokens_after: int
    bytes_before: int
    bytes_after: int
    redactions: dict[str, int]
    cuts: list[ToolResultCut] = field(default_factory=list)
    missing_fields: list[str] = field(default_factory=list)

    @property
    def trimmed(self) -> bool:
        return bool(self.cuts)


class _Cuts:
    """Counts of what a strategy dropped, by kind."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.details: dict[str, str] = {}

    def add(self, what: str, n: int, detail: str) -> None:
        if n > 0:
            self.counts[what] = self.counts.get(what, 0) + n
            self.details.setdefault(what, detail)

    def as_list(self) -> list[ToolResultCut]:
        return [
            ToolResultCut(what=w, dropped=n, detail=self.details[w]) for w, n in self.counts.items()
        ]


# --- reading ------------------------------------------------------------------------------------


def finite(value: Any, depth: int = 0) -> Any:
    """``value`` with NaN and the infinities as strings (``"NaN"``, ``"Infinity"``,
    ``"-Infinity"``), tuples as lists, and non-string keys as strings.

    Raises:
        InvalidInput: nesting deeper than ``MAX_JSON_DEPTH``.
    """
    if depth > MAX_JSON_DEPTH:
        raise InvalidInput("result", f"result nests deeper than {MAX_JSON_DEPTH} levels")
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {str(k): finite(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v, depth + 1) for v in value]
    return value


def read_result(result: Any, *, parse_text: bool = True) -> tuple[Any, bool]:
    """``(value, is_json)``: a text that holds a JSON object or array is parsed."""
    if isinstance(result, str):
        head = result.lstrip()[:1]
        if parse_text and head in ("{", "["):
            try:
                return finite(json.loads(result)), True
            except (ValueError, RecursionError):
                return result, False
        return result, False
    return finite(result), True


def dumps(value: Any) -> str:
    """Compact JSON, UTF-8 as is (no ``\\u`` escapes for non-ASCII text)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


# --- counting and cutting -----------------------------------------------------------------------


def count_long(text: str, count: TokenCounter) -> int:
    """Tokens of ``text``, counted in pieces cut at line (or space) boundaries: additive for a
    WordPiece tokenizer, whose pre-tokenizer splits at whitespace."""
    if len(text) <= COUNT_CHUNK_CHARS:
        return count(text)
    base = count("")
    total = 0
    start = 0
    n = len(text)
    pieces = 0
    while start < n:
        end = min(n, start + COUNT_CHUNK_CHARS)
        if end < n:
            cut = text.rfind("\n", start, end)
            if cut <= start:
                cut = text.rfind(" ", start, end)
            if cut > start:
                end = cut + 1
        total += count(text[start:end])
        pieces += 1
        start = end
    return total - base * (pieces - 1)


def safe_cut(text: str, pos: int) -> int:
    """The greatest position ``<= pos`` at which ``text`` may be cut: not inside a
    ``[LABEL:REDACTED]`` placeholder, nor inside a JSON string escape (``\\"``, ``\\n``,
    ``\\u00e9``). Positions are code points, so no UTF-8 sequence is ever split."""
    pos = max(0, min(pos, len(text)))
    # Inside a placeholder: back to its start.
    bracket = text.rfind("[", max(0, pos - 64), pos)
    while bracket != -1:
        m = PLACEHOLDER_RE.match(text, bracket)
        if m is not None and m.end() > pos:
            pos = bracket
            break
        bracket = text.rfind("[", max(0, pos - 64), bracket)
    # Inside an escape: an odd run of backslashes just before the cut, or a ``\\uXXXX``.
    run = 0
    while pos - run > 0 and text[pos - run - 1] == "\\":
        run += 1
    if run % 2 == 1:
        pos -= 1
    u = text.rfind("\\u", max(0, pos - 5), pos)
    if u != -1 and pos - u < 6:
        before = 0
        while u - before > 0 and text[u - before - 1] == "\\":
            before += 1
        if before % 2 == 0:
            pos = u
    return pos


def _word_cut(text: str, pos: int, slack: int = 24) -> int:
    """``safe_cut`` moved back to a space or line end when one is within ``slack``."""
    pos = safe_cut(text, pos)
    if pos >= len(text):
        return pos
    space = max(
        text.rfind(" ", max(0, pos - slack), pos), text.rfind("\n", max(0, pos - slack), pos)
    )
    return safe_cut(text, space) if space > 0 else pos


def first_n(text: str, budget: int, count: TokenCounter, *, marker: bool = True) -> tuple[str, int]:
    """The longest prefix of ``text`` (cut at a space where one is near, never inside a
    placeholder or an escape) that fits ``budget`` with its closing marker.

    Returns:
        The text and how many characters were dropped.
    """
    if count_long(text, count) <= budget:
        return text, 0
    window = text[: budget * FIRST_N_CHARS_PER_TOKEN]

    def candidate(pos: int) -> str:
        cut = _word_cut(window, pos)
        dropped = len(text) - cut
        tail = f"\n[… {dropped} more characters dropped to fit {budget} tokens]" if marker else ""
        return window[:cut].rstrip() + tail

    lo, hi = 0, len(window)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(candidate(mid)) <= budget:
            lo = mid
        else:
            hi = mid - 1
    out = candidate(lo)
    if count(out) > budget:  # the marker alone is over a tiny budget
        out = window[: _word_cut(window, lo)]
        while out and count(out) > budget:
            out = out[: _word_cut(out, len(out) // 2)]
    return out, len(text) - len(out.split("\n[… ", 1)[0])


# --- text ---------------------------------------------------------------------------------------


def _error_lines(lines: list[str]) -> list[int]:
    """Indexes of the lines that carry an error, the strongest first: each traceback's header,
    innermost frame and exception line, and every line the error pattern matches; a line seen
    more than ``MAX_REPEATS`` times (digits aside) once counted."""
    found: list[int] = []
    seen: dict[str, int] = {}
    n = len(lines)
    i = 0
    while i < n:
        line = lines[i]
        if TRACEBACK_RE.search(line):
            j = i + 1
            while j < n and (lines[j][:1] in (" ", "\t") or not lines[j].strip()):
                j += 1
            frames = [k for k in range(i + 1, j) if lines[k].strip()]
            block = [i, *frames[-2:]]
            if j < n:
                block.append(j)
            found.extend(block)
            i = j + 1
            continue
        if ERROR_LINE_RE.search(line) and not ZERO_ERRORS_RE.search(line):
            key = _DIGITS_RE.sub("#", line.strip())[:200]
            seen[key] = seen.get(key, 0) + 1
            if seen[key] <= MAX_REPEATS:
                found.append(i)
        i += 1
    # The first error is often the cause, the last the verdict: alternate from both ends.
    order: list[int] = []
    lo, hi = 0, len(found) - 1
    while lo <= hi:
        order.append(found[hi])
        if lo != hi:
            order.append(found[lo])
        lo += 1
        hi -= 1
    return list(dict.fromkeys(order))


class _LinePicker:
    """Keeps lines of a text within a token budget, counting each line once."""

    def __init__(self, lines: list[str], budget: int, count: TokenCounter) -> None:
        self.lines = lines
        self.budget = budget
        self.count = count
        self.base = count("")
        self.kept: dict[int, str] = {}
        self.order: list[int] = []
        self.used = 0
        self.segments = 0
        self.max_line = max(8, int(budget * LINE_SHARE))
        self.cut_chars = 0
        # What one ``[… N lines dropped …]`` marker costs (at its widest).
        self.marker = count(f"[… {len(lines)} lines dropped …]") - self.base + 1

    def _cost(self, i: int) -> tuple[str, int]:
        line = self.lines[i]
        if len(line) > self.max_line * FIRST_N_CHARS_PER_TOKEN:
            line = line[: self.max_line * FIRST_N_CHARS_PER_TOKEN]
        cost = self.count(line) - self.base
        if cost > self.max_line:
            line, _ = first_n(line, self.max_line, self.count, marker=False)
            line += " …"
            cost = self.count(line) - self.base
        return line, max(cost, 0) + 1

    def take(self, i: int, limit: int | None = None) -> bool:
        """Keep line ``i`` if it fits (within ``limit`` tokens used, default the budget)."""
        if i in self.kept or not 0 <= i < len(self.lines):
            return i in self.kept
        line, cost = self._cost(i)
        left, right = (i - 1) in self.kept, (i + 1) in self.kept
        segments = self.segments + (1 if not left and not right else -1 if left and right else 0)
        markers = (segments + 1) * self.marker
        if self.used + cost + markers > min(limit or self.budget, self.budget):
            return False
        self.kept[i] = line
        self.order.append(i)
        self.used += cost
        self.segments = segments
        self.cut_chars += len(self.lines[i]) - len(line.removesuffix(" …"))
        return True

    def render(self, keep: set[int] | None = None) -> tuple[str, int]:
        """The kept lines in order, a marker for each run of dropped lines; and how many
        lines were dropped."""
        indexes = sorted(keep if keep is not None else self.kept)
        out: list[str] = []
        prev = -1
        dropped = 0
        for i in indexes:
            gap = i - prev - 1
            if gap > 0:
                out.append(f"[… {gap} line{'s' if gap != 1 else ''} dropped …]")
                dropped += gap
            out.append(self.kept[i])
            prev = i
        gap = len(self.lines) - prev - 1
        if gap > 0:
            out.append(f"[… {gap} line{'s' if gap != 1 else ''} dropped …]")
            dropped += gap
        return "\n".join(out), dropped


def trim_text(text: str, budget: int, count: TokenCounter, cuts: _Cuts) -> str:
    """The text strategy: head, tail and error lines within ``budget`` (module docstring)."""
    lines = text.split("\n")
    if len(lines) <= 2:
        out, dropped = first_n(text, budget, count)
        cuts.add("chars", dropped, "a text of one or two lines: its first tokens are kept")
        return out
    picker = _LinePicker(lines, budget, count)
    # The first and the last line always (cut if too long): the command and the verdict.
    picker.take(0)
    picker.take(len(lines) - 1)
    head_limit = max(int(budget * HEAD_SHARE), picker.used)
    i = 1
    while i < len(lines) and picker.take(i, head_limit):
        i += 1
    tail_limit = picker.used + int(budget * TAIL_SHARE)
    j = len(lines) - 2
    while j > i and picker.take(j, tail_limit):
        j -= 1
    errors = _error_lines(lines)
    for k in errors:
        picker.take(k)
    # Room left: the tail grows back, then the head forward.
    while j > i and picker.take(j):
        j -= 1
    while i < j and picker.take(i):
        i += 1
    out, dropped = picker.render()
    tokens = count(out)
    keep = set(picker.kept)
    order = list(picker.order)
    # The per-line counts are exact for WordPiece; for any other tokenizer drop the last
    # picked lines until the real count fits.
    while tokens > budget and len(keep) > 1:
        for _ in range(max(1, len(order) // 10)):
            if len(keep) > 1:
                keep.discard(order.pop())
        out, dropped = picker.render(keep)
        tokens = count(out)
    if tokens > budget:
        out, extra = first_n(out, budget, count)
        cuts.add("chars", extra, "even the kept lines were over budget: their first tokens")
    kept_errors = sum(1 for k in errors if k in keep)
    cuts.add(
        "lines",
        dropped,
        f"kept {len(keep)} of {len(lines)} lines: the head, the tail and {kept_errors} of "
        f"{len(errors)} lines carrying errors; a marker stands where lines were dropped",
    )
    cuts.add("chars", picker.cut_chars, "lines too long for their share were cut")
    return out


def summarize_text(text: str, budget: int, count: TokenCounter) -> str:
    """The shape of a text: its lines, characters, error lines, first and last line."""
    lines = text.split("\n")
    errors = _error_lines(lines)
    first = next((line for line in lines if line.strip()), "")
    last = next((line for line in reversed(lines) if line.strip()), "")
    summary: dict[str, Any] = {
        "type": "text",
        "lines": len(lines),
        "chars": len(text),
        "error_lines": len(errors),
        "first_line": _short(first, 160),
        "last_line": _short(last, 160),
    }
    if errors:
        summary["first_error_line"] = _short(lines[min(errors)], 160)
    out = dumps(summary)
    if count(out) > budget:
        for key in ("first_error_line", "first_line", "last_line"):
            summary.pop(key, None)
            out = dumps(summary)
            if count(out) <= budget:
                break
    return out


# --- JSON ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Level:
    """How far one pass of the automatic JSON strategy shortens a value."""

    items: int
    chars: int
    depth: int
    keys: int


LEVELS: tuple[Level, ...] = (
    Level(items=50, chars=2000, depth=16, keys=400),
    Level(items=20, chars=600, depth=12, keys=200),
    Level(items=10, chars=240, depth=10, keys=100),
    Level(items=5, chars=120, depth=8, keys=60),
    Level(items=3, chars=80, depth=6, keys=40),
    Level(items=2, chars=48, depth=5, keys=24),
    Level(items=1, chars=32, depth=4, keys=16),
    Level(items=1, chars=16, depth=3, keys=8),
    Level(items=1, chars=12, depth=2, keys=6),
)


def _short(text: str, chars: int) -> str:
    if len(text) <= chars:
        return text
    cut = _word_cut(text, chars, slack=min(24, chars // 3))
    return f"{text[:cut].rstrip()}… [{len(text) - cut} more chars]"


def _has_signal(item: Any) -> bool:
    """An array item that carries an error: a string within its first levels that says so
    (``CrashLoopBackOff``, ``failed``, ``Exited (1)``), or a non-zero exit code. Looks at
    most at ``SIGNAL_NODES`` values, so the cost per item is bounded."""
    todo: list[tuple[Any, int]] = [(item, 0)]
    nodes = SIGNAL_NODES
    while todo and nodes > 0:
        value, depth = todo.pop()
        nodes -= 1
        if isinstance(value, str):
            if len(value) <= 400 and SIGNAL_RE.search(value):
                return True
        elif isinstance(value, dict) and depth < SIGNAL_DEPTH:
            for k, v in value.items():
                if (
                    k.lower() in ("exitcode", "exit_code", "returncode", "exit_status")
                    and isinstance(v, int)
                    and not isinstance(v, bool)
                    and v != 0
                ):
                    return True
                todo.append((v, depth + 1))
        elif isinstance(value, list) and depth < SIGNAL_DEPTH:
            todo.extend((v, depth + 1) for v in value[:16])
    return False


def _shape_of(value: Any) -> str:
    if isinstance(value, dict):
        keys = list(value)[:4]
        more = ", …" if len(value) > 4 else ""
        return f"{{{len(value)} keys: {', '.join(_short(k, 24) for k in keys)}{more}}}"
    if isinstance(value, list):
        return f"[{len(value)} items]"
    return str(value)


def shorten(value: Any, level: Level, cuts: _Cuts, depth: int = 0) -> Any:
    """One pass of the automatic JSON strategy (see ``LEVELS``); visits only what it keeps."""
    if isinstance(value, str):
        # A cut saves nothing when its marker costs what it drops.
        if len(value) > level.chars + SHORT_SLACK:
            out = _short(value, level.chars)
            cuts.add(
                "chars", len(value) - len(out.rsplit("… [", 1)[0]), "long strings keep their start"
            )
            return out
        return value
    if isinstance(value, dict):
        if depth >= level.depth and value:
            cuts.add("values", 1, "deep objects are shown as their shape")
            return _shape_of(value)
        out_dict: dict[str, Any] = {}
        # The top level keeps its keys (an API response's fields); nested objects may be cut.
        keys = level.keys if depth else max(level.keys, LEVELS[0].keys)
        for n, (k, v) in enumerate(value.items()):
            if n >= keys:
                rest = len(value) - keys
                out_dict["…"] = f"{rest} more keys"
                cuts.add("keys", rest, f"nested objects keep their first {level.keys} keys")
                break
            out_dict[k] = shorten(v, level, cuts, depth + 1)
        return out_dict
    if isinstance(value, list):
        if depth >= level.depth and value:
            cuts.add("values", 1, "deep arrays are shown as their size")
            return _shape_of(value)
        if len(value) <= level.items:
            return [shorten(v, level, cuts, depth + 1) for v in value]
        keep = list(range(level.items))
        extra = [i for i in range(level.items, len(value)) if _has_signal(value[i])][: level.items]
        keep.extend(extra)
        out_list: list[Any] = []
        prev = -1
        for i in keep:
            gap = i - prev - 1
            if gap > 0:
                out_list.append(f"[… {gap} item{'s' if gap != 1 else ''} dropped]")
            out_list.append(shorten(value[i], level, cuts, depth + 1))
            prev = i
        gap = len(value) - prev - 1
        if gap > 0:
            out_list.append(f"[… {gap} item{'s' if gap != 1 else ''} dropped]")
        what = " and the items that carry errors" if extra else ""
        cuts.add(
            "items",
            len(value) - len(keep),
            f"long arrays keep their first items{what}; a marker says how many were dropped",
        )
        return out_list
    return value


def summarize(value: Any, depth: int = 3, keys: int = 30) -> Any:
    """The shape of a JSON value: ``"string(12)"``, ``"number"``, objects as their keys'
    shapes, arrays as ``["480 items", <shape of the first>]``."""
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return f"string({len(value)})"
    if isinstance(value, dict):
        if depth <= 0:
            return f"object({len(value)} keys)"
        out: dict[str, Any] = {}
        for n, (k, v) in enumerate(value.items()):
            if n >= keys:
                out["…"] = f"{len(value) - keys} more keys"
                break
            out[k] = summarize(v, depth - 1, keys)
        return out
    if isinstance(value, list):
        if depth <= 0 or not value:
            return f"array({len(value)})"
        return [f"{len(value)} items", summarize(value[0], depth - 1, keys)]
    return type(value).__name__


def fit_summary(value: Any, budget: int, count: TokenCounter) -> str:
    for depth, keys in ((4, 40), (3, 30), (2, 20), (2, 10), (1, 10), (1, 5), (0, 0)):
        out = dumps(summarize(value, depth, keys))
        if count(out) <= budget:
            return out
    return dumps({"type": type(value).__name__})


def fit_json(
    value: Any, budget: int, count: TokenCounter, cuts: _Cuts, chars_per_token: float
) -> str:
    """The automatic JSON strategy: the first level whose text fits ``budget``."""
    for level in LEVELS:
        trial = _Cuts()
        out = dumps(shorten(value, level, trial))
        # Skip the count when the text is clearly too long for the budget.
        if len(out) > budget * chars_per_token * 1.6:
            continue
        if count_long(out, count) <= budget:
            for what, n in trial.counts.items():
                cuts.add(what, n, trial.details[what])
            return out
    cuts.add("values", 1, "the value was too large for the budget at every level: its shape")
    return fit_summary(value, budget, count)


def project(value: Any, paths: list[str]) -> tuple[Any, list[str]]:
    """The named paths of ``value`` (the ``fields`` strategy); and the paths it lacks."""
    tree: dict[str, Any] = {}
    for path in paths:
        node = tree
        for part in path.split("."):
            node = node.setdefault(part, {})
    found: set[str] = set()

    def walk(v: Any, node: dict[str, Any], prefix: str) -> Any:
        if not node:
            found.add(prefix)
            return v
        if isinstance(v, dict):
            out: dict[str, Any] = {}
            for key, sub in node.items():
                names = list(v) if key == "*" else [key] if key in v else []
                for name in names:
                    got = walk(v[name], sub, f"{prefix}.{key}" if prefix else key)
                    if got is not _MISSING:
                        out[name] = got
            return out if out else _MISSING
        if isinstance(v, list):
            picked: list[Any] = []
            by_index = {k: s for k, s in node.items() if k.isdigit()}
            by_name = {k: s for k, s in node.items() if not k.isdigit()}
            for key, sub in by_index.items():
                if int(key) < len(v):
                    got = walk(v[int(key)], sub, f"{prefix}.{key}" if prefix else key)
                    if got is not _MISSING:
                        picked.append(got)
            if by_name:
                for item in v:
                    got = walk(item, by_name, prefix)
                    if got is not _MISSING:
                        picked.append(got)
            return picked if picked else _MISSING
        return _MISSING

    out = walk(value, tree, "")
    missing = [p for p in paths if p not in found]
    return ({} if out is _MISSING else out), missing


_MISSING: Any = object()


# --- the envelope -------------------------------------------------------------------------------


def build_envelope(
    result: Any,
    budget: int,
    count: TokenCounter,
    *,
    strategy: Strategy = "auto",
    fields: list[str] | None = None,
) -> Envelope:
    """Redact, then trim one tool result to ``budget`` tokens (see the module docstring).

    Args:
        result: the tool's output: text or any JSON value.
        budget: the most tokens ``content`` may take (at least ``MIN_BUDGET_TOKENS``).
        count: the tokenizer's count (``embedder.count_tokens``).
        strategy: ``auto``, ``text``, ``json``, ``fields``, ``summary`` or ``first_n``.
        fields: the paths to keep (the ``fields`` strategy).

    Returns:
        The content, the strategy applied, counts before and after, cuts, missing fields and
        redactions by label.

    Raises:
        InvalidInput: ``fields`` named for a strategy that takes none, or none for ``fields``.
    """
    budget = max(budget, MIN_BUDGET_TOKENS)
    if strategy == "fields" and not fields:
        raise InvalidInput("fields", "the fields strategy needs `fields`: the paths to keep")
    if fields and strategy not in ("auto", "fields"):
        raise InvalidInput("fields", f"`fields` is for the fields strategy, not {strategy}")
    value, is_json = read_result(result, parse_text=strategy != "first_n")
    redacted, counts = redact_fields({"result": value})
    value = redacted["result"]
    full = dumps(value) if is_json else str(value)
    bytes_before = len(full.encode())
    tokens_before = count_long(full, count)
    chars_per_token = max(1.0, len(full) / max(1, tokens_before))
    cuts = _Cuts()
    missing: list[str] = []
    applied: Strategy
    if strategy == "auto":
        applied = "fields" if fields else "json" if is_json else "text"
    else:
        applied = strategy
    if applied in ("json", "fields") and not is_json:
        applied = "text"  # not JSON: the text strategy keeps the signal instead
    content_is_json = is_json and applied != "first_n"

    if applied == "fields":
        picked, missing = project(value, fields or [])
        dropped = _leaf_count(value) - _leaf_count(picked)
        cuts.add("fields", max(dropped, 0), "only the requested fields are kept")
        content = dumps(picked)
        if count_long(content, count) > budget:
            content = fit_json(picked, budget, count, cuts, chars_per_token)
    elif applied == "summary":
        content = (
            fit_summary(value, budget, count) if is_json else summarize_text(full, budget, count)
        )
        content_is_json = True
        if tokens_before > count(content):
            cuts.add("values", 1, "only the shape is kept: types, sizes and keys")
    elif tokens_before <= budget:
        content = full
    elif applied == "json":
        content = fit_json(value, budget, count, cuts, chars_per_token)
    elif applied == "text":
        if is_json:  # asked for text on JSON: one value per line
            full = json.dumps(value, ensure_ascii=False, indent=1)
            content_is_json = False
        content = trim_text(full, budget, count, cuts)
    else:
        content, dropped_chars = first_n(full, budget, count)
        cuts.add("tokens", max(0, tokens_before - count(content)), "only the first tokens are kept")
        del dropped_chars
    tokens_after = count_long(content, count)
    if tokens_after > budget:  # never over the budget, whatever a strategy produced
        content, _ = first_n(content, budget, count)
        content_is_json = False
        tokens_after = count(content)
        cuts.add("tokens", 1, "the strategy's output was over budget: its first tokens")
    return Envelope(
        content=content,
        strategy=applied,
        is_json=content_is_json,
        tokens_before=tokens_before,
        tokens_after=tokens_after,
        bytes_before=bytes_before,
        bytes_after=len(content.encode()),
        redactions=counts,
        cuts=cuts.as_list(),
        missing_fields=missing,
    )


def _leaf_count(value: Any) -> int:
    """Scalars in ``value`` (iteratively: results may be wide)."""
    n = 0
    todo: list[Any] = [value]
    while todo:
        v = todo.pop()
        if isinstance(v, dict):
            todo.extend(v.values())
        elif isinstance(v, list):
            todo.extend(v)
        else:
            n += 1
    return n


def tokenizer_name(embedder: AsyncEmbedder) -> str:
    """The name of the tokenizer ``embedder.count_tokens`` uses."""
    name = getattr(embedder.sync, "name", "")
    if name == "fake":
        return "fake (words and punctuation; tests only)"
    return "all-MiniLM-L6-v2 WordPiece (the context pack's tokenizer)"


def redaction_list(counts: dict[str, int]) -> list[RedactionCount]:
    return [RedactionCount(label=k, count=v) for k, v in sorted(counts.items())]


def response_of(
    req: ToolResultRequest, env: Envelope, tokenizer: str, missing: list[str]
) -> ToolResultResponse:
    return ToolResultResponse(
        tool_call_id=req.tool_call_id,
        content=env.content,
        tool_name=req.tool_name,
        strategy=env.strategy,
        content_type="json" if env.is_json else "text",
        tokenizer=tokenizer,
        budget_tokens=req.budget_tokens,
        tokens_before=env.tokens_before,
        tokens_after=env.tokens_after,
        bytes_before=env.bytes_before,
        bytes_after=env.bytes_after,
        trimmed=env.trimmed,
        cuts=env.cuts,
        missing_fields=missing,
        redactions=redaction_list(env.redactions),
    )


def audit_details(req: ToolResultRequest, env: Envelope) -> dict[str, Any]:
    """What the audit row keeps of one envelope: sizes, counts, labels; never content."""
    return {
        "tool_name": req.tool_name,
        "tool_call_id": req.tool_call_id,
        "strategy": env.strategy,
        "budget_tokens": req.budget_tokens,
        "bytes_before": env.bytes_before,
        "bytes_after": env.bytes_after,
        "tokens_before": env.tokens_before,
        "tokens_after": env.tokens_after,
        "cuts": {c.what: c.dropped for c in env.cuts},
        "fields": len(req.fields or []),
        "missing_fields": len(env.missing_fields),
        "redactions": dict(sorted(env.redactions.items())),
    }


def identifiers_of(requests: list[ToolResultRequest], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for n, req in enumerate(requests):
        where = f"{prefix}{n}." if prefix else ""
        out[f"{where}tool_call_id"] = req.tool_call_id
        out[f"{where}tool_name"] = req.tool_name
    return out


def scanned_parts(req: ToolResultRequest, prefix: str = "") -> list[Part]:
    """What the envelope scans of one request, for ``check_scan_bound``: the result, the field
    paths (a missing one is redacted before it is shown) and the identifiers (checked for
    secrets)."""
    return [
        (f"{prefix}result", req.result),
        (f"{prefix}fields", req.fields),
        (f"{prefix}tool_call_id", req.tool_call_id),
        (f"{prefix}tool_name", req.tool_name),
    ]


def process(
    req: ToolResultRequest, count: TokenCounter, budget: int | None = None
) -> tuple[Envelope, list[str]]:
    """One request through the envelope (in a worker thread): the envelope and its missing
    fields, redacted (a requested path may itself hold a secret)."""
    env = build_envelope(
        req.result,
        budget if budget is not None else req.budget_tokens,
        count,
        strategy=req.strategy,
        fields=req.fields,
    )
    missing = env.missing_fields
    if missing:
        shown, _ = redact_fields({"missing": missing})
        missing = list(shown["missing"])
    return env, missing


async def envelope_call(
    session: AsyncSession,
    embedder: AsyncEmbedder,
    caller: Caller,
    ctx: AuditContext,
    req: ToolResultRequest,
    max_scanned_bytes: int,
) -> ToolResultResponse:
    """POST /v1/tool-results: one tool result through the envelope; audit the call.

    Raises:
        ScopeDenied: the key has no read scope.
        InvalidInput: the call id or tool name holds a secret; ``fields`` misused.
        PayloadTooLarge: the result is over ``max_scanned_bytes`` (413 naming ``result``).
    """
    caller.require("read")
    check_identifiers(identifiers_of([req]))
    ctx.request = {
        "tool_name": req.tool_name,
        "tool_call_id": req.tool_call_id,
        "budget_tokens": req.budget_tokens,
        "strategy": req.strategy,
    }

    def bounded() -> tuple[Envelope, list[str]]:
        check_scan_bound(scanned_parts(req), max_scanned_bytes, SCAN_HINT)
        return process(req, embedder.count_tokens)

    env, missing = await asyncio.to_thread(bounded)
    redactions = sum(env.redactions.values())
    ctx.request["redaction_count"] = redactions
    audit_id = await audit_service.record(
        session,
        ctx,
        outcome="ok",
        status_code=200,
        details=audit_details(req, env),
        redaction_count=redactions,
    )
    response = response_of(req, env, tokenizer_name(embedder), missing)
    response.audit_id = audit_id
    return response
