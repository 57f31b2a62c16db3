"""The normalised view that redaction rules read, and the map back to the original text.

Secrets hide from regexes in ways a human reader does not notice: a zero-width space inside
a token, full-width letters (``ｐａｓｓｗｏｒｄ＝…``), a percent-encoded ``=`` in a URL. The
rules therefore run on a *view* of the text in which

* every non-ASCII character is replaced by its NFKC form (full-width, ligatures, ...);
* zero-width and invisible formatting characters (ZWSP, ZWNJ, ZWJ, word joiner, BOM, soft
  hyphen, Mongolian vowel separator) are removed;
* ``%XX`` escapes of printable ASCII (``%20``-``%7E``) are decoded.

Each character of the view remembers the span of the original text it came from, so a
secret found in the view is replaced in the *original* text, and everything around it is
stored exactly as written (the view itself is never stored).

Cost: ASCII text without ``%`` is its own view (one ``isascii`` call). Otherwise one regex
pass; runs of non-ASCII characters that NFKC leaves alone (most scripts) are copied whole,
so the per-character work is limited to the characters that actually change.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["TextView", "normalised_view"]

ZERO_WIDTH = frozenset("\u200b\u200c\u200d\u2060\ufeff\u00ad\u180e\u200e\u200f")
_SPECIAL_RE = re.compile(r"[^\x00-\x7f]+|%[2-7][0-9A-Fa-f]")
_NON_ASCII_RE = re.compile(r"[^\x00-\x7f]+")
PERCENT_RE = re.compile(r"%(?:2[1-9A-Fa-f]|[3-7][0-9A-Fa-f])")


@dataclass(frozen=True)
class TextView:
    """A normalised view of a text: ``view[i]`` came from ``original[starts[i]:ends[i]]``."""

    view: str
    starts: list[int]
    ends: list[int]

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original text that the view's ``[start, end)`` came from."""
        return self.starts[start], self.ends[end - 1]


@lru_cache(maxsize=4096)
def _nfkc_char(ch: str) -> str:
    if ch in ZERO_WIDTH:
        return ""
    return unicodedata.normalize("NFKC", ch)


def normalised_view(text: str, *, decode_percent: bool = False) -> TextView | None:
    """The view of ``text`` the rules read, or None when ``text`` is its own view.

    Args:
        text: Any text.
        decode_percent: Also decode ``%XX`` escapes of printable ASCII other than the
            space. The redactor reads both views when a text holds escapes: decoding
            ``%40`` inside a URL's password would cut it at the ``@``, while ``%3D`` in
            ``password%3Dhunter2`` hides the ``=`` the rules look for.

    Returns:
        None when nothing changes (the common case: plain ASCII); otherwise the view and,
        per view character, the span of ``text`` it came from.
    """
    if text.isascii() and not decode_percent:
        return None
    special = _SPECIAL_RE if decode_percent else _NON_ASCII_RE
    pieces: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    pos = 0
    changed = False
    for m in special.finditer(text):
        s, e = m.span()
        if s > pos:
            pieces.append(text[pos:s])
            starts.extend(range(pos, s))
            ends.extend(range(pos + 1, s + 1))
        token = m.group()
        if token[0] == "%":
            ch = chr(int(token[1:], 16))
            if ch in "\x7f ":
                pieces.append(token)
                starts.extend(range(s, e))
                ends.extend(range(s + 1, e + 1))
            else:
                changed = True
                pieces.append(ch)
                starts.append(s)
                ends.append(e)
        else:
            whole = unicodedata.normalize("NFKC", token)
            if whole == token and not any(ch in ZERO_WIDTH for ch in token):
                pieces.append(token)
                starts.extend(range(s, e))
                ends.extend(range(s + 1, e + 1))
            else:
                changed = True
                for i, ch in enumerate(token):
                    rep = _nfkc_char(ch)
                    pieces.append(rep)
                    starts.extend([s + i] * len(rep))
                    ends.extend([s + i + 1] * len(rep))
        pos = e
    if not changed:
        return None
    if pos < len(text):
        pieces.append(text[pos:])
        starts.extend(range(pos, len(text)))
        ends.extend(range(pos + 1, len(text) + 1))
    return TextView("".join(pieces), starts, ends)
