"""The rules of ``ctxpack ingest``: which format a chat history is in, how its turns are read,
and what memory each turn becomes (lifecycle/ingest.py sends them, in batches, with
progress and a resume file).

Formats (``read_turns``; ``auto`` tells them apart):

- ``openai``: OpenAI-style message lists: a JSON list of ``{role, content}`` messages, a list
  of such lists, ``{"messages": [...]}``, or JSON lines of ``{"messages": [...]}`` (one
  conversation per line). Each conversation is a session; ``role`` (or ``name``) is the
  speaker; ``content`` may be a string or a list of ``{"type": "text", "text"}`` parts;
  system and tool messages are skipped.
- ``locomo``: LoCoMo's JSON (``locomo10.json``): samples with ``sample_id`` and a
  ``conversation`` of ``session_<n>`` turn lists and ``session_<n>_date_time`` stamps. A
  shared photo is kept as `` [shares a photo: <caption>]``, as the benchmark's converter does.
- ``jsonl``: one turn per line, ``{text, speaker, timestamp, session}``, optionally ``id``
  and ``conversation`` (or LoCoMo's ``group``).

What a turn becomes (``item_of``, a remember batch item):

- One memory per turn: ``"<speaker>: <text>"`` (or the text alone with ``speaker_in
  metadata``), type ``episode`` unless another is mapped; the turn's time becomes
  ``valid_at`` (``parse_time``: times as people write them, in the mapped zone and date order).
- Namespaces (``namespace_of``): the namespace may hold ``{conversation}``; each session
  becomes the session namespace ``<namespace>:<session>`` (``sessions metadata`` keeps it in
  metadata only).
- Each turn has a stable external id (the file's turn id, else a hash of conversation,
  session, speaker, time and text), kept in ``source`` and in ``metadata.external_id``, and
  sent as remember's ``key`` (``turn_key``: the id itself when it is a valid key, else a
  digest of it), which makes a rerun idempotent by key.
- Links (``link_phases``, ``neighbours``): consecutive turns of a session may be linked
  (``follows``/``precedes``), as the LoCoMo benchmark's loader does: even turns first, then
  odd turns linked to both neighbours.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any

from service.errors import InvalidInput

FORMATS = ("openai", "locomo", "jsonl")
_SEGMENT_BAD = re.compile(r"[^A-Za-z0-9_.\-]+")
_SESSION_KEY = re.compile(r"^session_(\d+)$")


@dataclass
class Turn:
    """One dialogue turn, as read from the file."""

    external_id: str
    text: str
    speaker: str | None = None
    timestamp: str | None = None
    session: str | None = None
    conversation: str | None = None
    position: int = 0  # within its session


def turn_key(turn: Turn) -> str:
    """The turn's key for remember: its stable external id, when that is a valid key (at most
    ``KEY_MAX`` characters, no surrounding whitespace or control characters, nothing the
    redactor would change: keys are stored as sent, so the server refuses a secret-looking
    one); else ``sha256:<40 hex>`` of the id, which is stable too. What makes a rerun
    idempotent."""
    from service.domain.redaction import REDACTOR
    from service.schemas.memories import KEY_MAX, check_key

    external = turn.external_id
    candidates = [external] if len(external) <= KEY_MAX else []
    for salt in range(8):  # a digest the redactor would change is astronomically rare
        candidates.append("sha256:" + hashlib.sha256(f"{external}\x00{salt}".encode()).hexdigest()[:40])
    for candidate in candidates:
        try:
            check_key(candidate)
        except ValueError:
            continue
        if not REDACTOR.redact(candidate).counts:
            return candidate
    raise InvalidInput("file", f"turn {external[:80]!r}: no valid key")  # pragma: no cover


def _stable_id(*parts: Any) -> str:
    raw = "\x1f".join("" if p is None else str(p) for p in parts)
    return "sha1:" + hashlib.sha1(raw.encode()).hexdigest()[:20]


DATE_ORDERS = ("auto", "dmy", "mdy", "ymd")
_ONLY_DIGITS = re.compile(r"^\d+$")
_OFFSET = re.compile(r"^([+-])(\d{2}):?(\d{2})$")
_ANCHOR_A = datetime(1, 1, 1)
_ANCHOR_B = datetime(2, 2, 2)


def parse_zone(value: str | None) -> tzinfo:
    """``--timezone``: an IANA name (``Europe/Lisbon``), ``UTC`` or an offset (``+01:00``)."""
    if value is None or value.upper() in ("", "UTC", "Z"):
        return UTC
    offset = _OFFSET.match(value.strip())
    if offset is not None:
        sign, hours, minutes = offset.groups()
        delta = timedelta(hours=int(hours), minutes=int(minutes))
        return timezone(-delta if sign == "-" else delta)
    from dateutil import tz as dateutil_tz

    zone = dateutil_tz.gettz(value)
    if zone is None:
        raise InvalidInput("timezone", f"unknown time zone {value!r} (an IANA name or +HH:MM)")
    return zone  # type: ignore[no-any-return]


def _day_first(text: str, order: str) -> bool:
    """Which of two small numbers is the day: ``dmy``/``mdy`` say so; ``auto`` reads the
    separator, as people write: ``29.12.2023`` (dots: day first, as in most of Europe),
    ``12/29/2023`` (slashes: month first, as in the US). A number over 12 settles it either
    way (dateutil swaps an impossible month)."""
    if order == "dmy":
        return True
    if order in ("mdy", "ymd"):
        return False
    return "." in text.split(" ")[0] or ("-" in text.split(" ")[0] and not text[:4].isdigit())


def parse_time(value: Any, *, order: str = "auto", zone: tzinfo = UTC) -> datetime | None:
    """A turn's time, as people and tools write it: ISO 8601, a Unix time, LoCoMo's
    ``1:56 pm on 8 May, 2023``, RFC 2822 (``Fri, 29 Dec 2023 00:51:12 +0100``), day-first
    and US forms (``29.12.2023, 00:51:12``, ``12/29/2023 12:51 AM``), with month names in
    English. A time without a zone is taken in ``zone``. Ambiguous day/month follows
    ``order`` (``_day_first``). None when it is not a full date (a year, a month and a day
    must all be in the text: dateutil would fill the rest from today)."""
    if value is None or value == "" or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            return datetime.fromtimestamp(float(value), UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if _ONLY_DIGITS.match(str(value).strip()):
        # Unix seconds (9-10 digits) or milliseconds (12-13) as text; any other run of
        # digits is no date.
        digits = str(value).strip()
        if len(digits) in (9, 10):
            return datetime.fromtimestamp(int(digits), UTC)
        if len(digits) in (12, 13):
            return datetime.fromtimestamp(int(digits) / 1000, UTC)
        return None
    text = str(value).strip()
    if len(text) > 64:
        return None
    when: datetime | None = None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        for fmt in ("%I:%M %p %d %B, %Y", "%I:%M %p %d %b, %Y"):
            try:
                when = datetime.strptime(text.replace(" on ", " "), fmt)
                break
            except ValueError:
                continue
    if when is None:
        from dateutil import parser as dateutil_parser

        cleaned = text.replace(" on ", " ").replace(",", " ")
        dayfirst = _day_first(text, order)
        try:
            a = dateutil_parser.parse(cleaned, dayfirst=dayfirst, yearfirst=order == "ymd", default=_ANCHOR_A)
            b = dateutil_parser.parse(cleaned, dayfirst=dayfirst, yearfirst=order == "ymd", default=_ANCHOR_B)
        except (ValueError, OverflowError):
            return None
        if (a.year, a.month, a.day) != (b.year, b.month, b.day):
            return None  # the text lacks the year, the month or the day
        when = a
    return when if when.tzinfo else when.replace(tzinfo=zone)


# --- formats --------------------------------------------------------------------------


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") in ("text", "input_text", "output_text")
        )
    return ""


def _openai_conversation(messages: list[Any], conv_id: str) -> Iterator[Turn]:
    position = 0
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise InvalidInput("file", f"conversation {conv_id}: message {index} is not an object")
        role = message.get("role")
        if role in ("system", "developer", "tool", "function"):
            continue
        text = _text_of(message.get("content")).strip()
        if not text:
            continue
        stamp = message.get("timestamp") or message.get("created_at") or message.get("time")
        yield Turn(
            external_id=str(message.get("id") or f"{conv_id}:{index}"),
            text=text,
            speaker=str(message.get("name") or role or "") or None,
            timestamp=None if stamp is None else str(stamp),
            session=conv_id,
            conversation=None,
            position=position,
        )
        position += 1


def read_openai(source: list[Any]) -> Iterator[Turn]:
    """``source``: conversations, each ``{"messages": [...]}`` or a list of messages."""
    conversations: list[tuple[str, list[Any]]] = []
    for index, conv in enumerate(source):
        if isinstance(conv, dict) and "messages" in conv:
            conv_id = str(conv.get("id") or conv.get("conversation_id") or f"c{index + 1}")
            conversations.append((conv_id, conv["messages"]))
        elif isinstance(conv, list):
            if conv and all(isinstance(m, dict) and "role" in m for m in conv):
                conversations.append((f"c{index + 1}", conv))
            else:
                raise InvalidInput("file", f"conversation {index}: not a list of messages")
        else:
            raise InvalidInput("file", f"conversation {index}: expected {{messages: [...]}} or a message list")
    for conv_id, messages in conversations:
        yield from _openai_conversation(messages, conv_id)


def read_locomo(data: Any) -> Iterator[Turn]:
    samples = data if isinstance(data, list) else [data]
    for s_index, sample in enumerate(samples):
        if not isinstance(sample, dict) or not isinstance(sample.get("conversation"), dict):
            raise InvalidInput("file", f"sample {s_index}: no 'conversation' object (not LoCoMo JSON)")
        conv_id = str(sample.get("sample_id") or f"conv-{s_index}")
        conv = sample["conversation"]
        sessions = sorted(
            (int(m.group(1)), key) for key in conv if (m := _SESSION_KEY.match(key))
        )
        for number, key in sessions:
            stamp = conv.get(f"{key}_date_time")
            for position, turn in enumerate(conv.get(key) or []):
                text = str(turn.get("text", "")).strip()
                if turn.get("blip_caption"):
                    text += f" [shares a photo: {turn['blip_caption']}]"
                dia_id = turn.get("dia_id") or f"D{number}:{position + 1}"
                yield Turn(
                    external_id=f"{conv_id}:{dia_id}",
                    text=text,
                    speaker=turn.get("speaker"),
                    timestamp=stamp,
                    session=str(number),
                    conversation=conv_id,
                    position=position,
                )


def read_jsonl(rows: list[Any]) -> Iterator[Turn]:
    positions: Counter[tuple[Any, Any]] = Counter()
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, dict) or not isinstance(row.get("text"), str):
            raise InvalidInput("file", f"line {number}: expected an object with a 'text' string")
        conv = row.get("conversation", row.get("group"))
        session = row.get("session")
        key = (conv, session)
        external = row.get("id") or _stable_id(conv, session, row.get("speaker"), row.get("timestamp"), row["text"])
        yield Turn(
            external_id=str(external),
            text=row["text"].strip(),
            speaker=row.get("speaker"),
            timestamp=None if row.get("timestamp") is None else str(row["timestamp"]),
            session=None if session is None else str(session),
            conversation=None if conv is None else str(conv),
            position=positions[key],
        )
        positions[key] += 1


def read_turns(text: str, fmt: str = "auto") -> tuple[str, list[Turn]]:
    """Parse a file's text; returns (the format, its turns in file order)."""
    stripped = text.lstrip()
    whole: Any = None
    lines: list[Any] | None = None
    try:
        whole = json.loads(stripped) if stripped else None
    except json.JSONDecodeError:
        lines = []
        for number, raw in enumerate(text.splitlines(), start=1):
            if raw.strip():
                try:
                    lines.append(json.loads(raw))
                except json.JSONDecodeError as exc:
                    raise InvalidInput("file", f"line {number}: not JSON ({exc.msg})") from None
    if whole is None and lines is None:
        raise InvalidInput("file", "the file is empty")
    if whole is not None and isinstance(whole, dict) and "text" in whole:
        lines, whole = [whole], None  # a one-line JSONL file
    if fmt == "auto":
        if lines is not None:
            fmt = "openai" if lines and isinstance(lines[0], dict) and "messages" in lines[0] else "jsonl"
        else:
            first = whole[0] if isinstance(whole, list) and whole else whole
            if isinstance(first, dict) and "conversation" in first:
                fmt = "locomo"
            elif isinstance(first, list) or (isinstance(first, dict) and ("messages" in first or "role" in first)):
                fmt = "openai"
            else:
                raise InvalidInput("format", "cannot tell the format: pass --format")
    if fmt == "openai":
        if lines is not None:
            source = lines
        elif isinstance(whole, dict):
            source = [whole]
        elif isinstance(whole, list) and whole and isinstance(whole[0], dict) and "role" in whole[0]:
            source = [whole]  # a single message list
        else:
            source = whole if isinstance(whole, list) else [whole]
        turns = list(read_openai(source))
    elif fmt == "locomo":
        if whole is None:
            raise InvalidInput("format", "LoCoMo input is one JSON document, not JSON lines")
        turns = list(read_locomo(whole))
    elif fmt == "jsonl":
        turns = list(read_jsonl(lines if lines is not None else (whole if isinstance(whole, list) else [whole])))
    else:
        raise InvalidInput("format", f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
    return fmt, turns


# --- turns to remember items ------------------------------------------------------------


@dataclass(frozen=True)
class Mapping:
    namespace: str
    sessions: str = "namespace"  # or "metadata"
    speaker_in: str = "content"  # or "metadata"
    type: str = "episode"
    date_order: str = "auto"  # DATE_ORDERS: which of two small numbers is the day
    zone: tzinfo = UTC  # for timestamps that name none


def _segment(value: str) -> str:
    seg = _SEGMENT_BAD.sub("-", value).strip("-")[:64]
    return seg or "x"


def namespace_of(turn: Turn, mapping: Mapping) -> str:
    from service.domain.namespaces import parse_namespace

    base = mapping.namespace
    if "{conversation}" in base:
        base = base.replace("{conversation}", _segment(turn.conversation or "default"))
    if mapping.sessions == "namespace" and turn.session is not None:
        session = turn.session
        base = f"{base}:{_segment('s' + session if session.isdigit() else session)}"
    return parse_namespace(base, "namespace")


def item_of(turn: Turn, mapping: Mapping, fmt: str) -> dict[str, Any]:
    """The remember item of a turn (JSON-ready)."""
    content = turn.text
    if mapping.speaker_in == "content" and turn.speaker:
        content = f"{turn.speaker}: {turn.text}"
    metadata: dict[str, Any] = {"external_id": turn.external_id, "ingest_format": fmt}
    for name in ("speaker", "session", "conversation", "timestamp"):
        value = getattr(turn, name)
        if value is not None:
            metadata[name] = value
    body: dict[str, Any] = {
        "content": content,
        "namespace": namespace_of(turn, mapping),
        "type": mapping.type,
        "source": turn.external_id[:2000],
        "metadata": metadata,
        "key": turn_key(turn),
    }
    when = parse_time(turn.timestamp, order=mapping.date_order, zone=mapping.zone)
    if when is not None:
        body["valid_at"] = when.isoformat()
    return body


# --- links ----------------------------------------------------------------------------


def link_phases(turns: list[Turn], links: bool) -> list[list[Turn]]:
    """The order turns are sent in: all at once, or with ``--links`` the even turns of each
    session first, then the odd ones (linked to both neighbours, already in)."""
    if not links:
        return [turns]
    return [[t for t in turns if t.position % 2 == 0], [t for t in turns if t.position % 2 == 1]]


def neighbours(turns: list[Turn]) -> dict[str, tuple[str | None, str | None]]:
    """Each turn's previous and next turn in its session (external ids), for ``--links``."""
    by_session: dict[tuple[Any, Any], list[Turn]] = {}
    for t in turns:
        by_session.setdefault((t.conversation, t.session), []).append(t)
    out: dict[str, tuple[str | None, str | None]] = {}
    for group in by_session.values():
        group.sort(key=lambda t: t.position)
        for i, t in enumerate(group):
            prev = group[i - 1].external_id if i > 0 else None
            nxt = group[i + 1].external_id if i + 1 < len(group) else None
            out[t.external_id] = (prev, nxt)
    return out
