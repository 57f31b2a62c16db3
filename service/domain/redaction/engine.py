"""Redaction, the engine: ``Redactor`` (text and JSON), the scan of the rule table over the
normalised views of a text, the replacement, and the passes that make it idempotent.
``REDACTOR`` is the process's one instance."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeAlias

from service.domain.redaction.heuristics import (
    NOT_A_SECRET_RE,
    PRINTABLE_BYTES,
    generic_secret,
    looks_random,
)
from service.domain.redaction.keys import (
    PLACEHOLDER_RE,
    is_id_key,
    key_words,
    label_for_key,
    placeholder,
)
from service.domain.redaction.normalize import PERCENT_RE, TextView, normalised_view
from service.domain.redaction.rules import KEYWORD_END_RE, LONG_TOKEN_RE, RULES, Rule, Taken

JSONValue: TypeAlias = "dict[str, JSONValue] | list[JSONValue] | str | int | float | bool | None"


@dataclass(frozen=True)
class RedactionResult:
    """The redacted text and how many values were replaced, per label."""

    text: str
    counts: dict[str, int]

    @property
    def redacted(self) -> bool:
        """True when at least one value was replaced."""
        return bool(self.counts)


def merge_counts(*counts: Mapping[str, int]) -> dict[str, int]:
    """Add up per-label redaction counts.

    Args:
        *counts: Any number of ``label -> count`` mappings.

    Returns:
        A new dict with the summed counts; labels with a zero total are left out.
    """
    merged: dict[str, int] = {}
    for mapping in counts:
        for label, n in mapping.items():
            merged[label] = merged.get(label, 0) + n
    return {label: n for label, n in merged.items() if n}


class Redactor:
    """Replaces secrets and PII in text and JSON-like values.

    Stateless and cheap to share: build one per application (the patterns are
    compiled once, at import).
    """

    def redact(self, text: str) -> RedactionResult:
        """Replace every secret and PII value in ``text``.

        Args:
            text: Any text: prose, a log line, a config file, a curl command.

        Returns:
            The text with each value replaced by ``[LABEL:REDACTED]`` and the
            number of replacements per label. Redacting an already redacted
            text changes nothing.
        """
        counts: dict[str, int] = {}
        # A replacement can expose a neighbour that the first pass skipped
        # because it was glued to the secret (``ghp_...U+44 20 7946 0958``);
        # a second pass catches it, and makes redaction idempotent.
        # Only a replacement glued to a word character can expose something new, so
        # the second pass is skipped when every replacement stands apart.
        for _ in range(_MAX_PASSES):
            text, found, glued = _redact_once(text)
            if not found:
                break
            _add(counts, found)
            if not glued:
                break
        return RedactionResult(text, counts)

    def redact_json(self, obj: JSONValue) -> tuple[JSONValue, dict[str, int]]:
        """Redact a JSON-like value (dicts, lists, scalars), keys and values at any depth,
        without mutating it.

        * String values are redacted as text.
        * Keys are redacted as text too (a key can be a secret: ``{"ghp_...": 1}``); when
          two keys end up the same, the later one gets a `` (2)`` suffix, so nothing is
          lost.
        * A value whose key names a secret (``password``, ``api_key``, ``accessToken``,
          ``client_secret``...) is replaced whole, whatever its shape:
          ``{"password": "hunter2"}`` becomes ``{"password": "[PASSWORD:REDACTED]"}``; an
          object or list under such a key has every scalar leaf replaced
          (``{"password": {"v": "..."}}``).

        Args:
            obj: A value as produced by ``json.loads``; tuples are treated as lists.

        Returns:
            The redacted copy and the number of replacements per label.
        """
        counts: dict[str, int] = {}
        return self._walk(obj, counts, None), counts

    def _walk(self, obj: JSONValue, counts: dict[str, int], secret: str | None) -> JSONValue:
        if isinstance(obj, str):
            if secret is not None and _is_whole_secret(obj):
                counts[secret] = counts.get(secret, 0) + 1
                return placeholder(secret)
            result = self.redact(obj)
            _add(counts, result.counts)
            return result.text
        if isinstance(obj, dict):
            out: dict[str, JSONValue] = {}
            named = _pair_label(obj)
            for key, value in obj.items():
                text_key = key if isinstance(key, str) else str(key)
                label = label_for_key(_plain_key(text_key)) or secret
                if named is not None and key_words(_plain_key(text_key))[-1:] == ("value",):
                    label = label or named
                new_key = self.redact(text_key)
                _add(counts, new_key.counts)
                name = new_key.text
                n = 2
                while name in out:
                    name = f"{new_key.text} ({n})"
                    n += 1
                if (
                    label is None
                    and isinstance(value, str)
                    and generic_secret(value.strip())
                    and not is_id_key(_plain_key(text_key))
                ):
                    # A random-looking value under a key that names no identifier.
                    out[name] = placeholder("SECRET")
                    counts["SECRET"] = counts.get("SECRET", 0) + 1
                elif label is not None and not isinstance(value, dict | list | tuple):
                    if _is_whole_secret(value):
                        out[name] = placeholder(label)
                        counts[label] = counts.get(label, 0) + 1
                    else:
                        out[name] = self._walk(value, counts, None)
                else:
                    out[name] = self._walk(value, counts, label)
            return out
        if isinstance(obj, list | tuple):
            return [self._walk(item, counts, secret) for item in obj]
        if secret is not None and _is_whole_secret(obj):
            counts[secret] = counts.get(secret, 0) + 1
            return placeholder(secret)
        return obj


def _pair_label(obj: Mapping[str, JSONValue]) -> str | None:
    """The secret a name/value pair names in its name: ``{"name": "DB_PASSWORD", "value":
    "…"}`` (Kubernetes env), ``{"Key": "password", "Value": "…"}`` (AWS tags),
    ``{"ParameterKey": "ApiToken", "ParameterValue": "…"}``. None when it names none."""
    for key, value in obj.items():
        if isinstance(key, str) and isinstance(value, str) and len(value) <= 200:
            if key_words(_plain_key(key))[-1:] in (("name",), ("key",)):
                label = label_for_key(_plain_key(value))
                if label is not None:
                    return label
    return None


def _plain_key(key: str) -> str:
    """A key as the rules read it: NFKC, no zero-width characters, ``%XX`` decoded."""
    view = normalised_view(key)
    return view.view if view is not None else key


def _is_whole_secret(value: JSONValue) -> bool:
    """A scalar under a secret-naming key that is worth replacing."""
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, int | float):
        return True  # a numeric PIN or password is still one
    if isinstance(value, str):
        stripped = value.strip()
        if not stripped or PLACEHOLDER_RE.fullmatch(stripped):
            return False
        # A random-looking value is a secret even when it is shaped like a path
        # (AWS secret keys may start with ``/``).
        return not NOT_A_SECRET_RE.match(stripped) or looks_random(stripped)
    return False


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for label, n in more.items():
        into[label] = into.get(label, 0) + n


def _value_span(m: re.Match[str], groups: Iterable[str]) -> tuple[int, int] | None:
    names = tuple(groups)
    if not names:
        return m.span()
    for name in names:
        if m.group(name) is not None and m.start(name) != m.end(name):
            return m.span(name)
    return None


_MAX_PASSES = 3


_B64_RUN_RE = re.compile(r"(?<![A-Za-z0-9+/=_\-])[A-Za-z0-9+/]{16,}={0,2}(?![A-Za-z0-9+/=_\-])")


_B64_MAX_CHARS = 8192


def _find_base64_secrets(text: str, taken: Taken) -> Iterable[tuple[int, int, str]]:
    """Base64 runs that decode to printable text holding a secret; the run is replaced
    whole, with the label of the first secret inside. One level deep: decoded text is
    scanned by the other rules, not decoded again. A run an earlier rule has taken (in
    part) could not be yielded, so it is not decoded."""
    for m in _B64_RUN_RE.finditer(text):
        run = m.group()
        if len(run) > _B64_MAX_CHARS or len(run) % 4 == 1 or taken.overlaps(*m.span()):
            continue
        try:
            raw = base64.b64decode(run + "=" * (-len(run) % 4), validate=True)
        except (binascii.Error, ValueError):
            continue
        if not raw or len(raw) - len(raw.translate(None, PRINTABLE_BYTES)) < 0.95 * len(raw):
            continue
        found = _scan(raw.decode("ascii", "replace"), decode_base64=False)
        if found:
            yield m.start(), m.end(), found[0][2]


_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


_MAX_KEY_CHARS = 64


def _keyword_starts(text: str) -> list[int]:
    """Where the keys that end in a secret keyword start: the beginning of the run of key
    characters before each keyword (at most 64 back), in order, once each."""
    out: list[int] = []
    for m in KEYWORD_END_RE.finditer(text):
        start = m.start()
        floor = max(0, start - _MAX_KEY_CHARS)
        while start > floor and text[start - 1] in _KEY_CHARS:
            start -= 1
        if not out or out[-1] != start:
            out.append(start)
    return out


def _anchored_matches(
    pattern: re.Pattern[str], text: str, starts: list[int]
) -> Iterable[re.Match[str]]:
    """``pattern`` matched at each key start, with ``finditer``'s rule that a match (even
    one the rule then rejects) hides the starts inside it: each character is read once."""
    floor = 0
    for start in starts:
        if start < floor:
            continue
        m = pattern.match(text, start)
        if m is not None:
            floor = max(m.end(), start + 1)
            yield m


def _present_triggers(lowered: str, long_run: bool = True) -> set[str]:
    """The rule triggers that occur in ``lowered``: one substring search per trigger
    (each a fast C scan), cheaper than one regex trying every trigger at every position.
    Without a long run of token characters, the provider tokens' triggers are skipped."""
    present = {t for t in _TRIGGERS if t in lowered}
    if long_run:
        # Grouped by their first two characters: one search per group, then its members.
        for head, group in _TOKEN_TRIGGER_GROUPS:
            if head in lowered:
                present.update(t for t in group if t in lowered)
    return present


# A run of token characters that every provider token's match holds.
_LONG_RUN_RE = re.compile(r"[A-Za-z0-9_\-+/=.~]{12}")


def _scan(text: str, *, decode_base64: bool = True) -> list[tuple[int, int, str]]:
    """Run the rule table over ``text``; sorted, non-overlapping ``(start, end, label)``."""
    taken = Taken()
    # Placeholders already in the text are taken first, so nothing wraps them, and masked
    # (same length), so that the words in them ("[API_KEY:REDACTED]") are no keywords.
    if ":REDACTED]" in text:
        for m in PLACEHOLDER_RE.finditer(text):
            taken.add(*m.span())
        text = PLACEHOLDER_RE.sub(lambda m: "\x00" * len(m.group()), text)
    lowered = text.lower()
    long_run = _LONG_RUN_RE.search(text) is not None
    present = _present_triggers(lowered, long_run)
    found: list[tuple[int, int, str]] = []
    starts: list[int] | None = None
    for rule in _rules_for(frozenset(present), long_run):
        if rule.needs and not any(n in lowered for n in rule.needs):
            continue
        finder = _find_base64_secrets if rule.decodes_base64 else rule.finder
        if finder is not None:
            if rule.decodes_base64 and not decode_base64:
                continue
            for start, end, label in finder(text, taken):
                if start < end and not taken.overlaps(start, end):
                    taken.add(start, end)
                    found.append((start, end, label))
            continue
        assert rule.pattern is not None
        if rule.anchored:
            if starts is None:
                starts = _keyword_starts(text)
            matches: Iterable[re.Match[str]] = _anchored_matches(rule.pattern, text, starts)
        else:
            matches = rule.pattern.finditer(text)
        for match in matches:
            span = _value_span(match, rule.groups)
            if span is None or span[0] == span[1]:
                continue
            if taken.overlaps(*span):
                continue
            accepted = rule.accept(match) if rule.accept else rule.label
            if accepted is None:
                continue
            taken.add(*span)
            found.append((span[0], span[1], accepted))
    found.sort()
    return found


_TRIGGERS: frozenset[str] = frozenset(
    t for rule in RULES if not rule.token_shaped for t in rule.triggers
)


_TOKEN_TRIGGERS: frozenset[str] = (
    frozenset(t for rule in RULES if rule.token_shaped for t in rule.triggers) - _TRIGGERS
)


_TOKEN_TRIGGER_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    (head, tuple(sorted(t for t in _TOKEN_TRIGGERS if t[:2] == head)))
    for head in sorted({t[:2] for t in _TOKEN_TRIGGERS})
)


# The rules without triggers, and each trigger's rules, by their place in the table.
_UNTRIGGERED: tuple[int, ...] = tuple(i for i, rule in enumerate(RULES) if not rule.triggers)
_BY_TRIGGER: dict[str, tuple[int, ...]] = {
    t: tuple(i for i, rule in enumerate(RULES) if t in rule.triggers)
    for t in _TRIGGERS | _TOKEN_TRIGGERS
}


@lru_cache(maxsize=4096)
def _rules_for(present: frozenset[str], long_run: bool) -> tuple[Rule, ...]:
    """The rules a text with these triggers (and a long token run or not) runs, in the
    table's order: those without triggers and those with one present; a provider token's
    rule only with a long run. The same as asking each rule in turn, for a few rules' cost
    (a text's trigger sets repeat: remembered)."""
    chosen = set(_UNTRIGGERED).union(*(_BY_TRIGGER[t] for t in present))
    return tuple(RULES[i] for i in sorted(chosen) if long_run or not RULES[i].token_shaped)


def _redact_once(text: str) -> tuple[str, dict[str, int], bool]:
    """One scan of the rule table over ``text``; see the module docstring.

    The rules read the normalised view (NFKC, no zero-width characters, ``%XX`` decoded;
    see redaction.normalize); spans found there are mapped back, and the original text is
    kept as written around them.
    """
    if not text:
        return text, {}, False
    views: list[TextView | None] = [normalised_view(text)]
    if PERCENT_RE.search(text):
        views.append(normalised_view(text, decode_percent=True))
    spans: list[tuple[int, int, str]] = []
    for view in views:
        for start, end, label in _scan(view.view if view is not None else text):
            if view is not None:
                start, end = view.original_span(start, end)
            spans.append((start, end, label))
    if not spans:
        return text, {}, False
    # Spans from two views, or two view spans from one original character, may overlap:
    # merge them, keeping the first label.
    spans.sort()
    found: list[tuple[int, int, str]] = []
    for start, end, label in spans:
        if found and start < found[-1][1]:
            prev = found.pop()
            found.append((prev[0], max(prev[1], end), prev[2]))
        else:
            found.append((start, end, label))
    parts: list[str] = []
    counts: dict[str, int] = {}
    pos = 0
    glued = False
    for start, end, label in found:
        parts.append(text[pos:start])
        parts.append(placeholder(label))
        counts[label] = counts.get(label, 0) + 1
        glued = (
            glued
            or _GLUE_RE.match(text, end) is not None
            or (start > 0 and _GLUE_RE.match(text, start - 1) is not None)
            or _DIGIT_GROUP_AFTER_RE.match(text, end) is not None
            or (start > 1 and _DIGIT_GROUP_BEFORE_RE.match(text, start - 2) is not None)
        )
        pos = end
    parts.append(text[pos:])
    return "".join(parts), counts, glued or _token_moved_closer(text, found)


def _token_moved_closer(text: str, found: list[tuple[int, int, str]]) -> bool:
    """Whether a replacement shorter than its secret stands before a long token that was
    left alone on the same line. The keyword rule measures 80 characters back from a
    token, so such a token is now nearer its keyword and the next pass may take it
    (``token: <secret> ... userghp_...``). One pass over the long tokens."""
    shrunk_line_end = -1  # the end of the line holding the last shrinking replacement
    i = 0
    for m in LONG_TOKEN_RE.finditer(text):
        start = m.start()
        while i < len(found) and found[i][1] <= start:
            f_start, f_end, label = found[i]
            if f_end - f_start > len(placeholder(label)) and f_end > shrunk_line_end:
                newline = text.find("\n", f_end)
                shrunk_line_end = len(text) if newline < 0 else newline
            i += 1
        if i < len(found) and found[i][0] < m.end():
            continue  # inside or across a replacement
        if start < shrunk_line_end:
            return True
    return False


# A character that can continue a token: next to a replacement, it may start or end a
# secret the first pass could not see.
_GLUE_RE = re.compile(r"[A-Za-z0-9_\-+/=%@:]")


# Digit groups split by a space, dot or dash (phones, cards, SSNs): a replacement that
# took the last group of one (``+44 20 7946 0958=<key>``) leaves the shorter number
# beside it, which the next pass may take.
_DIGIT_GROUP_BEFORE_RE = re.compile(r"\d[ .\-]")


_DIGIT_GROUP_AFTER_RE = re.compile(r"[ .\-]\d")


REDACTOR = Redactor()
"""The process's one redactor (stateless; its patterns are compiled at import)."""

