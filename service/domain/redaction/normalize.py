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
and only the characters that actually change are recorded (as edits, looked up by binary
search when a span is mapped back), so unchanged text costs no per-character work.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate

__all__ = ["TextView", "normalised_view"]

ZERO_WIDTH = frozenset("\u200b\u200c\u200d\u2060\ufeff\u00ad\u180e\u200e\u200f")
# Runs of non-ASCII characters, joined across ASCII gaps of up to 16 characters without a
# ``%`` (one run, not thousands, for text in which every other character is invisible).
_NON_ASCII_RE = re.compile(r"[^\x00-\x7f](?:[\x00-\x24\x26-\x7f]{0,16}[^\x00-\x7f])*")
_SPECIAL_RE = re.compile(_NON_ASCII_RE.pattern + r"|%[2-7][0-9A-Fa-f]")
PERCENT_RE = re.compile(r"%(?:2[1-9A-Fa-f]|[3-7][0-9A-Fa-f])")


@dataclass(frozen=True)
class TextView:
    """A normalised view of a text, and the map back to the text it came from.

    The map is stored as its edits, not per character: edit ``k`` put ``view[vstarts[k]:
    vends[k]]`` where ``original[ostarts[k]:oends[k]]`` was (a character NFKC changed, a
    removed zero-width character, a decoded ``%XX``, or a run of characters each replaced
    by exactly one, when ``one_to_one[k]``); between edits the view is the original
    shifted by a constant. So a text with few edits costs nothing per unchanged character.
    """

    view: str
    vstarts: list[int]
    vends: list[int]
    ostarts: list[int]
    oends: list[int]
    one_to_one: list[bool]

    def _char_span(self, i: int) -> tuple[int, int]:
        """The span of the original text that view character ``i`` came from."""
        # The last edit starting at or before ``i``: it holds ``i``, or ``i`` lies in the
        # unchanged stretch after it (several edits may start at one view position when
        # removed characters come first; the last of them is the one that can hold ``i``).
        k = bisect.bisect_right(self.vstarts, i) - 1
        if k < 0:
            return i, i + 1
        if i < self.vends[k]:
            if self.one_to_one[k]:
                o = self.ostarts[k] + (i - self.vstarts[k])
                return o, o + 1
            return self.ostarts[k], self.oends[k]
        o = self.oends[k] + (i - self.vends[k])
        return o, o + 1

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original text that the view's ``[start, end)`` came from."""
        return self._char_span(start)[0], self._char_span(end - 1)[1]


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
        None when nothing changes (the common case: plain ASCII); otherwise the view and
        its edits, from which the span of ``text`` each view character came from is
        looked up.
    """
    if text.isascii() and not decode_percent:
        return None
    special = _SPECIAL_RE if decode_percent else _NON_ASCII_RE
    pieces: list[str] = []
    vstarts: list[int] = []
    vends: list[int] = []
    ostarts: list[int] = []
    oends: list[int] = []
    one_to_one: list[bool] = []
    pos = 0  # original text copied to ``pieces`` so far
    vpos = 0  # length of the view built so far
    for m in special.finditer(text):
        token = m.group()
        s = m.start()
        if token[0] == "%":
            ch = chr(int(token[1:], 16))
            if ch in "\x7f ":
                continue
            reps = [ch]
        else:
            # A run of non-ASCII characters (with short ASCII gaps, which map to
            # themselves): each character is replaced by its own NFKC form.
            reps = list(map(_nfkc_char, token))
        piece = "".join(reps)
        if piece == token:
            continue
        base = vpos + (s - pos)  # where the run starts in the view
        pieces.append(text[pos:s])
        pieces.append(piece)
        if token[0] == "%":
            vstarts.append(base)
            vends.append(base + 1)
            ostarts.append(s)
            oends.append(s + 3)
            one_to_one.append(False)
        elif len(piece) == len(token) and "" not in reps:
            # Every character became one character (none vanished, so none grew).
            vstarts.append(base)
            vends.append(base + len(piece))
            ostarts.append(s)
            oends.append(s + len(token))
            one_to_one.append(True)
        else:
            changed = [i for i, (a, b) in enumerate(zip(token, reps, strict=True)) if a != b]
            at = list(accumulate(map(len, reps), initial=base))  # view offset of each char
            vstarts.extend([at[i] for i in changed])
            vends.extend([at[i + 1] for i in changed])
            ostarts.extend([s + i for i in changed])
            oends.extend([s + i + 1 for i in changed])
            one_to_one.extend([False] * len(changed))
        vpos = base + len(piece)
        pos = s + len(token)
    if not vstarts:
        return None
    pieces.append(text[pos:])
    return TextView("".join(pieces), vstarts, vends, ostarts, oends, one_to_one)
