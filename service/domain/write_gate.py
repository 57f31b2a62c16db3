"""The write gate: decides whether a piece of content is worth remembering.

Most of what an agent produces is not: acknowledgements ("ok", "thanks!"),
intermediate reasoning ("let me check... now I'll..."), and raw tool debris
(tracebacks, log lines, JSON responses, shell transcripts). Stored, these crowd
out real facts at retrieval time and pollute other tasks' context. The gate is a
coarse, cheap sieve in front of the store: no model, a few precompiled regexes,
linear in the content length.

It is calibrated on real dialogue (LoCoMo, see ``python -m bench.gate_report``) rather
than on a "50 chars, 30% letters" rule: short lines that state something ("Use
uv, not pip.", "The Fireworks headlined the festival.") pass, and none of the
turns LoCoMo's questions cite as evidence is rejected.

Every verdict carries reason codes, accepted ones included, each with a one-line
hint an agent can act on. Codes are stable API (see :data:`HINTS`):

=====================  =========================================================
accepted               passed every check
accepted_short_fact    short, but carries content words
accepted_structured    code/structured content, allowed for this type
empty                  nothing but whitespace
fragment               no information: chit-chat, acknowledgement, too short
oversize               longer than ``max_chars``
stack_trace            a Python/Java/JS/Go/Ruby/Rust traceback
log_dump               mostly timestamped or levelled log lines
json_dump              mostly a JSON/YAML/XML blob
symbol_heavy           mostly symbols: minified code, hex dump, base64 blob
reasoning_chain        intermediate reasoning rather than a conclusion
tool_output            a shell/REPL transcript or a diff
=====================  =========================================================
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from service.config import GateConfig as GateConfig

__all__ = ["HINTS", "GateConfig", "GateReason", "GateVerdict", "WriteGate"]

HINTS: Mapping[str, str] = MappingProxyType(
    {
        "accepted": "Passed the write gate.",
        "accepted_short_fact": "Short, but states something specific; stored as is.",
        "accepted_structured": "Code or structured content, accepted because this type allows it.",
        "empty": "Content is empty; send the fact, preference or decision itself.",
        "fragment": "Carries no information on its own (chit-chat or acknowledgement); "
        "write a self-contained fact, preference or decision.",
        "oversize": "Content is longer than the gate's max_chars; store a summary, "
        "or split it into separate memories.",
        "stack_trace": "Looks like a stack trace; store the error, its cause and the fix, "
        "not the frames.",
        "log_dump": "Looks like raw log lines; store what they showed (the event, error "
        "or number), not the log.",
        "json_dump": "Mostly a JSON/YAML/XML blob; state the fields that matter in a "
        "sentence, or store the blob as an artifact.",
        "symbol_heavy": "Mostly symbols (minified code, hex or base64); say what it is and "
        "why it matters instead.",
        "reasoning_chain": "Intermediate reasoning ('let me check…', 'now I'll…'); store the "
        "conclusion, not the steps.",
        "tool_output": "Raw shell/REPL output or a diff; store the result or the decision, "
        "not the transcript.",
    }
)


@dataclass(frozen=True)
class GateReason:
    """One reason behind a verdict: a stable code and a hint for the writer."""

    code: str
    hint: str


@dataclass(frozen=True)
class GateVerdict:
    """The gate's decision. ``reasons`` is never empty."""

    accepted: bool
    reasons: tuple[GateReason, ...]

    @property
    def codes(self) -> tuple[str, ...]:
        """The reason codes, in order."""
        return tuple(r.code for r in self.reasons)


def _reason(code: str) -> GateReason:
    return GateReason(code, HINTS[code])


# --------------------------------------------------------------------------
# Fragments.
#
# A short text is a fragment when every word in it is chit-chat or a function
# word: greetings, thanks, farewells, reactions, fillers. Anything else (a
# noun, a name with no greeting around it, a number, a time such as
# "tomorrow") is content, so the vocabulary is kept deliberately small: each
# word added here was checked against the LoCoMo evidence turns.
# --------------------------------------------------------------------------

# Words in any script; CJK characters count one each (those scripts put no
# spaces between words).
_WORD_RE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]|[^\W_]+(?:['’][^\W_]+)*")

# Words that make a text social rather than informative on their own.
_PHATIC = frozenset(
    """
    hi hey heya hiya hello yo howdy bye goodbye byebye cya ttyl later thanks thank thx ty
    cheers welcome congrats congratulations ok okay k kk yes yeah yep yup yea no nope nah
    sure lol lmao haha hahaha hehe hmm hm hmmm um uh wow whoa cool nice great awesome
    amazing wonderful fantastic incredible lovely agreed indeed totally absolutely exactly
    definitely right alright gotcha noted care luck fun bet np
    """.split()
)
# Function words and vague fillers; they never carry a fact by themselves.
_FILLER = frozenset(
    """
    a an the i me my you your yours ya u we us our it its it's that that's this these those
    there here so too also and or but to for of in on at with as is are was were be been
    being am do does did done have has had having will would can could should shall may
    might must just really very much all soon again now then well oh ah aw aww ooh same see
    talk chat catch keep stay safe good sounds sound looks look seems like glad happy hear
    hope enjoy let know go gotta gonna got get run take up out what what's how how's how're
    who where when why isn't i'm i'll i'd i've you're you'll you've we're we'll they they're
    it'll that'll what'll thing things stuff one lot lots some any more doing going day
    night week weekend time times true yourself please appreciate appreciated means mean
    kind words everything anything spirit
    """.split()
)
_SMALL_TALK = _PHATIC | _FILLER


def _is_fragment(content: str, words: list[str], config: GateConfig, named: bool) -> bool:
    if not words:
        return True  # ";)", "...", "👍"
    if not named and (len(content) < config.min_chars or len(words) < config.min_words):
        return True
    if len(words) > config.fragment_max_words:
        return False
    unknown = [w for w in words if w.lower() not in _SMALL_TALK]
    if not unknown:
        return True
    # "Bye Nate!", "Thanks, Joanna! Take care": a name addressed inside a
    # greeting, set off by punctuation. Without a greeting word a name is
    # content ("It's Shia Labeouf!"), and so is one inside the sentence
    # ("Where in England was it?").
    if len(unknown) > 1 or not any(w.lower() in _PHATIC for w in words):
        return False
    return re.search(rf"\b{re.escape(unknown[0])}\s*(?:[,!.?]|$)", content) is not None and (
        unknown[0][:1].isupper() and unknown[0][1:].islower()
    )


# --------------------------------------------------------------------------
# Stack traces.
# --------------------------------------------------------------------------

_TRACE_HEADER_RE = re.compile(
    r"""(?mx)^[ \t]*(?:
        Traceback\ \(most\ recent\ call\ last\):                 # Python
      | Exception\ in\ thread\ "[^"]*"                            # Java
      | goroutine\ \d+\ \[[^\]]+\]:                               # Go
      | panic:\ | thread\ '[^']*'\ panicked\ at                    # Go, Rust
      | (?:Uncaught\ )?[A-Z]\w*(?:Error|Exception)(?::|\s*$)       # JS/Java "TypeError: ..."
    )"""
)
_TRACE_FRAME_RE = re.compile(
    r"""(?mx)^[ \t]*(?:
        File\ "[^"\n]+",\ line\ \d+                               # Python
      | at\ [\w$.<>\[\]/`]+\([^()\n]*(?:\.\w+:\d+|Native\ Method|Unknown\ Source)[^()\n]*\)  # Java
      | at\ [\w$.<>\[\]`]+\([^()\n]*\)\ in\ \S+:line\ \d+                # C#
      | at\ (?:async\ )?[^\s()]*\ ?\(?[^\s()]+:\d+:\d+\)?\s*$     # Node / Rust "at file:l:c"
      | \S+\.go:\d+(?:\ \+0x[0-9a-f]+)?\s*$                       # Go
      | from\ \S+\.rb:\d+:in\ | \S+\.rb:\d+:in\ `                 # Ruby
      | \.\.\.\ \d+\ more\s*$ | Caused\ by:\                       # Java tails
    )"""
)


def _is_stack_trace(text: str, config: GateConfig) -> bool:
    frames = len(_TRACE_FRAME_RE.findall(text))
    if frames >= config.stack_min_frames:
        return True
    return frames >= 1 and _TRACE_HEADER_RE.search(text) is not None


# --------------------------------------------------------------------------
# Log lines: a leading timestamp, a leading level, or logfmt ``level=``.
# --------------------------------------------------------------------------

_LOG_LINE_RE = re.compile(
    r"""(?ix)^\s*(?:
        \[?\d{4}[-/]\d{2}[-/]\d{2}[T\ ]\d{2}:\d{2}               # 2024-05-01T10:00 / 2024/05/01 10:00
      | \[?\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\]?\s                     # 10:00:01.123
      | [A-Z][a-z]{2}\ [\ \d]\d\ \d{2}:\d{2}:\d{2}                # syslog: May  1 10:00:01
      | \[\s*\d+\.\d+\]                                          # dmesg: [   12.345]
      | \d{1,3}(?:\.\d{1,3}){3}\ -\ \S+\ \[\d{2}/\w{3}/\d{4}      # access log
      | [IWEF]\d{4}\ \d{2}:\d{2}:\d{2}                            # glog
      | \d{10}(?:\.\d+)?\s                                        # epoch seconds
      | (?-i:\[?(?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|ERR|CRITICAL|CRIT|FATAL|SEVERE)\]?[\s:|])
      | .*\blevel=(?:trace|debug|info|warn|warning|error|fatal)\b
    )"""
)


def _count_log_lines(lines: list[str]) -> int:
    return sum(1 for line in lines if _LOG_LINE_RE.match(line))


# --------------------------------------------------------------------------
# Structured blobs: JSON (whole, embedded or JSON lines), XML and YAML lines.
# --------------------------------------------------------------------------

_JSON_DECODER = json.JSONDecoder()
_XML_LINE_RE = re.compile(r"^\s*<[/?!]?[A-Za-z][\w:.\-]*(?:\s[^<>]*)?/?>")
# ``key: value`` with a config-style key (lower-case first letter, or indented
# under a parent) and a short scalar or nothing, as a map entry or a list item,
# and document markers. Prose ("Note: the deploy failed because..."), a note
# of labelled fields ("Owner: Ana") and a Markdown bullet ("- use uv") do not
# count.
_YAML_LINE_RE = re.compile(
    r"""^\s*(?:
        (?:-\s+)?["']?[a-z_][\w.\-/]*["']?:(?:\s+\S+(?:\s+\S+){0,3})?\s*$   # key: value
      | \s+["']?[A-Za-z_][\w.\-/]*["']?:(?:\s+\S+(?:\s+\S+){0,3})?\s*$     # nested Key: value
      | ---\s*$
    )""",
    re.X,
)
_JSON_LINE_RE = re.compile(
    r"""^\s*(?:[{}\[\],]+|"[^"]*"\s*:.*|"[^"]*",?|-?\d[\d.eE+\-]*,?|true,?|false,?|null,?)\s*$"""
)
_MAX_JSON_FAILURES = 32


def _structured_chars(text: str, lines: list[str]) -> int:
    """How many characters of ``text`` belong to JSON, XML or YAML structure."""
    stripped = text.strip()
    if stripped[:1] in "{[":
        try:
            value = json.loads(stripped)
        except (ValueError, RecursionError):  # deep nesting blows the decoder
            pass
        else:
            if isinstance(value, dict | list):
                return len(text)
    # JSON embedded in prose ("the API returned {...}"): decode from each
    # opening bracket. A decoded value is skipped over, so successes cost O(n)
    # in all; a failed probe may scan to the end, so failures are capped.
    json_chars = 0
    pos = 0
    failures = 0
    while failures < _MAX_JSON_FAILURES:
        start = _next_open(text, pos)
        if start < 0:
            break
        try:
            value, end = _JSON_DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):  # deep nesting blows the decoder
            failures += 1
            pos = start + 1
            continue
        if isinstance(value, dict | list) and end - start > 2:
            json_chars += end - start
        pos = max(end, start + 1)
    line_chars = sum(
        len(line)
        for line in lines
        if _XML_LINE_RE.match(line) or _JSON_LINE_RE.match(line) or _YAML_LINE_RE.match(line)
    )
    return max(json_chars, line_chars)


def _next_open(text: str, pos: int) -> int:
    a = text.find("{", pos)
    b = text.find("[", pos)
    if a < 0:
        return b
    if b < 0:
        return a
    return min(a, b)


# --------------------------------------------------------------------------
# Symbol-heavy text.
#
# Split on whitespace; a token is "plain" when, stripped of edge punctuation,
# it is a word, a number, an identifier (snake_case, dotted.name, kebab-case),
# a path or a URL, and not longer than 40 characters. The symbol ratio is the
# share of non-space characters outside plain tokens. Measured: LoCoMo turns
# 0.0-0.1, technical prose up to 0.25, Python source median 0.3 (95th
# percentile 0.65), hex dumps, minified code and base64 0.7-1.0.
# --------------------------------------------------------------------------

_PLAIN_TOKEN_RE = re.compile(
    r"""(?x)
      [^\W\d_][^\W\d_'’]*(?:['’\-][^\W\d_]+)*           # words in any script, it's, well-known
    | [-+]?\d+(?:[.,:/]\d+)*(?:%|st|nd|rd|th|s|k|m|x)?   # numbers, dates, times, 3rd, 10k
    | [A-Za-z_][\w]*(?:[.\-][A-Za-z_][\w]*)*(?:\(\))?  # identifiers, dotted.names, fn()
    | (?:[a-z][\w+.\-]*://|~?/|\.{1,2}/)[^\s]*        # URLs and paths
    | [\w.\-]+\.[A-Za-z]{1,5}                         # file.py, v1.2.3-rc.1
    """
)
_EDGE_PUNCT = "\"'`([{<)]}>,.;:!?*_"
_MIXED_HEX_RE = re.compile(r"(?=[0-9a-fA-F]*[a-fA-F])(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{2,}")
# Byte groups of a hex dump ("7f 45 4c 46", "7f45 4c46", "00000010:").
_HEX_GROUP_RE = re.compile(r"(?:[0-9a-fA-F]{2}){1,4}:?")


def _symbol_ratio(text: str) -> float:
    """Share of non-space characters outside plain tokens (see above).

    A hex dump is half digits, which read as numbers, so it is also measured as
    the share of characters in byte groups, provided enough of those groups
    hold a letter (a table of plain numbers is not a hex dump).
    """
    total = 0
    plain = 0
    hex_chars = 0
    hex_groups = 0
    hex_lettered = 0
    # Each distinct token is judged once: prose repeats its words, and a pathological
    # text ("+1 +1 +1 ...") repeats one token thousands of times.
    for token, count in Counter(text.split()).items():
        size = len(token) * count
        total += size
        if _HEX_GROUP_RE.fullmatch(token):
            hex_chars += size
            hex_groups += count
            hex_lettered += count * (not token.rstrip(":").isdigit())
        core = token.strip(_EDGE_PUNCT)
        if not core:
            continue
        if core.isascii():
            # Long ASCII runs are base64 or minified code, whatever they match.
            if (
                len(core) <= 40
                and _PLAIN_TOKEN_RE.fullmatch(core)
                and not _MIXED_HEX_RE.fullmatch(core)
            ):
                plain += size
        elif sum(ch.isalnum() for ch in core) >= 0.7 * len(core):
            plain += size  # CJK prose has no spaces: a whole clause is one token
    if not total:
        return 0.0
    ratio = 1.0 - plain / total
    if hex_groups and hex_lettered * 3 >= hex_groups:
        ratio = max(ratio, hex_chars / total)
    return ratio


# --------------------------------------------------------------------------
# Reasoning chains: first-person intentions to inspect something ("let me
# check", "now I'll run", "next, I will look at"). Plain intentions in dialogue
# ("let me know", "I'll try it out") use other verbs and do not count.
# --------------------------------------------------------------------------

_INSPECT_VERBS = (
    r"(?:check|verify|inspect|examine|investigate|look\ (?:at|into|for|through)|search"
    r"|grep|trace|debug|analy[sz]e|review|re-?run|run|read|open|test|confirm|compare|scan"
    r"|list|fetch|query|print|dig\ into|figure\ out|find\ (?:out|where|which|what|the)"
    r"|see\ (?:if|whether)|try\ (?:again|running|to\ (?:run|fix|find|reproduce)))\b"
)
_REASONING_RE = re.compile(
    rf"""(?ix)
    # Strong: an agent narrating its next step.
    (?P<strong>
        \blet\ me\ (?:first\ |now\ |also\ |quickly\ |just\ )?{_INSPECT_VERBS}
      | \b(?:now|next|first|then|so|ok(?:ay)?|alright|hmm+|wait)[,.]?\ +
        (?:i'?ll|i\ will|i\ need\ to|i\ should|i'?m\ going\ to|we\ need\ to|let\ me|let'?s)
        \ (?:first\ |now\ |also\ )?{_INSPECT_VERBS}
    )
    # Weak: also a plain intention or preference ("I will review PRs in the
    # morning"), so it only counts towards reasoning_min_markers.
    | (?P<weak>
        \b(?:let'?s|i(?:'ll|\ will|\ need\ to|\ should|'m\ going\ to))
        \ (?:first\ |now\ |also\ |then\ )?{_INSPECT_VERBS}
    )
    """
)
_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?…])\s+|\n+")
# What may precede a marker that still "leads" its sentence: bullets, quotes and
# interjections ("OK, let me check...", "- Now I'll run...").
_LEAD_IN_RE = re.compile(
    r"(?i)[\s\-*>•\"'(\d.)]*(?:(?:ok(?:ay)?|so|hmm+|alright|right|well|now|next|first|then|wait|good|great)[,.!:]?\s+)*"
)


# Every marker above holds one of these (``let me``/``let's``, ``i'll``/``i will``, ``i need
# to``, ``i should``, ``i'm going to``): a text with none of them has no marker, and is not
# split into sentences and matched at all. Only ASCII text is tested this way, where
# ``lower()`` and the pattern's IGNORECASE agree exactly.
_REASONING_NEEDLES = ("let", "ill", "i'll", "need to", "should", "going to")


def _reasoning(text: str, config: GateConfig) -> bool:
    if config.reasoning_min_markers > 0 and text.isascii():
        lowered = text.lower()
        if not any(needle in lowered for needle in _REASONING_NEEDLES):
            return False
    markers = 0
    led_sentences = 0  # sentences that open with a marker: "Let me check X."
    sentences = 0
    for sentence in _SENTENCE_SPLIT_RE.split(text):
        if not sentence.strip():
            continue
        sentences += 1
        found = list(_REASONING_RE.finditer(sentence))
        markers += len(found)
        first = found[0] if found else None
        if first and first.group("strong") and _LEAD_IN_RE.fullmatch(sentence[: first.start()]):
            led_sentences += 1
    if markers >= config.reasoning_min_markers:
        return True
    # One strong marker is enough when it leads most sentences. A marker in
    # passing ("Let's find a time - I'll check my schedule") does not make a chain.
    return led_sentences > 0 and led_sentences / sentences > config.reasoning_dominant_ratio


# --------------------------------------------------------------------------
# Tool output: shell/REPL transcripts (a prompt line, then its output) and diffs.
# --------------------------------------------------------------------------

_PROMPT_RE = re.compile(
    r"""(?x)^\s*(?:
        (?:\([\w.\-]+\)\s*)?\$\s+\S                        # $ cmd, (venv) $ cmd
      | [\w.\-]+@[\w.\-]+(?::[^\s$#]*)?\s*[$#]\s+\S         # user@host:~/x$ cmd
      | PS\ [A-Z]:\\[^>\n]*>\s*\S | [A-Z]:\\[^>\n]*>\s*\S   # PowerShell, cmd.exe
      | >>>\s | In\ \[\d+\]:                               # Python REPL, IPython
      | \w+=[#>]\s+\S                                       # psql: db=> select
      | mysql>\s
    )"""
)
_DIFF_HEADER_RE = re.compile(
    r"(?m)^(?:diff --git |@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@|--- a/|\+\+\+ b/)"
)
_DIFF_LINE_RE = re.compile(r"^[+\-](?![+\-]{2} )")


def _tool_output(lines: list[str], nonblank: int, config: GateConfig) -> bool:
    if _DIFF_HEADER_RE.search("\n".join(lines)):
        changed = sum(1 for line in lines if _DIFF_LINE_RE.match(line))
        if changed >= config.tool_output_min_lines:
            return True
    prompts = 0
    output = 0
    in_transcript = False
    for line in lines:
        if not line.strip():
            continue
        if _PROMPT_RE.match(line):
            prompts += 1
            in_transcript = True
        elif in_transcript:
            output += 1
    if prompts == 0 or output < config.tool_output_min_lines:
        return False
    return (prompts + output) / nonblank >= config.tool_output_min_ratio


class WriteGate:
    """Judges content before it is stored. Stateless; build one per application.

    Args:
        config: Thresholds; the defaults are calibrated on LoCoMo.
    """

    def __init__(self, config: GateConfig | None = None) -> None:
        self.config = config or GateConfig()

    def check(self, content: str, *, type: str = "episode", name: str | None = None) -> GateVerdict:
        """Decide whether ``content`` is worth storing.

        Args:
            content: The text to remember.
            type: The memory type. For ``config.code_types`` (artifact,
                procedure) code, structured blocks and shell transcripts up to
                ``config.code_max_chars`` are legitimate.
            name: The memory's name, when it has one. A named memory is a keyed
                value (``db_port`` = ``5433``), so the minimum length is waived;
                chit-chat is still a fragment.

        Returns:
            A verdict whose ``reasons`` hold every rejection reason that applies
            or, when accepted, one ``accepted*`` reason.
        """
        cfg = self.config
        text = content.strip()
        if not text:
            return GateVerdict(False, (_reason("empty"),))

        rejected: list[str] = []
        if len(text) > cfg.max_chars:
            rejected.append("oversize")
            text = text[: cfg.max_chars]  # still say what kind of dump it is

        lines = text.splitlines()
        nonblank = sum(1 for line in lines if line.strip()) or 1
        code_ok = type in cfg.code_types and len(text) <= cfg.code_max_chars
        structured = False

        if _is_stack_trace(text, cfg):
            rejected.append("stack_trace")
        log_lines = _count_log_lines(lines)
        if log_lines >= cfg.log_min_lines and log_lines / nonblank >= cfg.log_min_ratio:
            rejected.append("log_dump")
        if len(text) >= cfg.json_min_chars:
            share = _structured_chars(text, lines) / len(text)
            if share >= cfg.max_json_ratio:
                structured = True
                if not code_ok:
                    rejected.append("json_dump")
        if len(text) >= cfg.symbol_min_chars:
            ratio = _symbol_ratio(text)
            if ratio > (cfg.code_max_symbol_ratio if code_ok else cfg.max_symbol_ratio):
                rejected.append("symbol_heavy")
            elif ratio > cfg.max_symbol_ratio:
                structured = True
        if _reasoning(text, cfg):
            rejected.append("reasoning_chain")
        if _tool_output(lines, nonblank, cfg):
            structured = True
            if not code_ok:
                rejected.append("tool_output")

        if not rejected and _is_fragment(text, _WORD_RE.findall(text), cfg, named=name is not None):
            rejected.append("fragment")

        if rejected:
            return GateVerdict(False, tuple(_reason(code) for code in rejected))
        if structured:
            return GateVerdict(True, (_reason("accepted_structured"),))
        if len(text) < cfg.short_fact_chars:
            return GateVerdict(True, (_reason("accepted_short_fact"),))
        return GateVerdict(True, (_reason("accepted"),))
