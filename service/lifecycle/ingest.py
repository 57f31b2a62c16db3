"""``ctxpack ingest``: chat histories in, one memory per turn.

Formats (``--format auto`` tells them apart):

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

Rules:

- One memory per turn: ``"<speaker>: <text>"`` (or the text alone with ``--speaker-in
  metadata``), type ``episode`` unless ``--type``; the turn's time becomes ``valid_at``.
- Namespaces: ``--namespace`` may hold ``{conversation}``; each session becomes the session
  namespace ``<namespace>:<session>`` (``--sessions metadata`` keeps it in metadata only).
- Each turn has a stable external id (the file's turn id, else a hash of conversation,
  session, speaker, time and text), kept in ``source`` and in ``metadata.external_id``, and
  sent as remember's ``key`` (``turn_key``: the id itself when it is a valid key, else a
  digest of it). A rerun is idempotent by key: a turn sent again is a keyed ``duplicate``
  (no model time), and a turn whose text changed under the same id is ``updated`` (the old
  memory is kept as history). Turns already in the resume file with the same item are
  skipped without a call; an edited turn is sent again.
- A turn whose text is already held by another turn's key in its namespace (the same words
  said twice) cannot hold a key of its own: the server refuses it (409, or 422 within a
  batch), and ingest sends it again without its key, where it is an exact ``duplicate`` of
  that memory, as it was before keys (``without_key`` in the summary).
- Batches go through remember's batch path, to a server (``--url`` + key) or the local
  database; each batch is one transaction, so the write gate, redaction and deduplication
  apply as to any write. The outcome of each batch is appended to a resume file before the
  next is sent: Ctrl-C stops between batches (a batch in flight is either committed, and
  found again as duplicates, or not), and the same command resumes.
- ``--links`` links consecutive turns of a session (``follows``/``precedes``), as the LoCoMo
  benchmark's loader does: even turns first, then odd turns linked to both neighbours.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from pathlib import Path
from typing import Any, Protocol

from service.config import Settings
from service.errors import CtxpackError, InvalidInput, ServiceUnavailable

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


# --- targets ----------------------------------------------------------------------------


class Target(Protocol):
    async def send(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Store a batch; returns one ``{status, id?, reasons?}`` per item, in order."""
        ...


class HttpTarget:
    """POST /v1/remember/batch on a server, with the key as a Bearer token. Transient
    failures (connection, 5xx, 429) are retried with backoff; a refusal (4xx) stops."""

    def __init__(self, url: str, key: str, retries: int = 5, transport: Any = None) -> None:
        from service.remote import CtxpackHttp

        self.client = CtxpackHttp(url, key, agent="ctxpack-ingest", timeout=600, transport=transport)
        self.retries = retries

    async def send(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        from service.remote import error_body

        delay = 1.0
        for attempt in range(self.retries + 1):
            try:
                response = await self.client.send("POST", "/v1/remember/batch", json={"items": items})
            except ServiceUnavailable:
                if attempt == self.retries:
                    raise
            else:
                if response.status_code < 400:
                    return list(response.json()["items"])
                if response.status_code not in (429, 502, 503, 504) or attempt == self.retries:
                    raise _Refused(error_body(response))
            await asyncio.sleep(delay)
            delay = min(delay * 2, 30)
        raise ServiceUnavailable("unreachable")  # pragma: no cover

    async def close(self) -> None:
        await self.client.aclose()


class _Refused(CtxpackError):
    status_code = 400
    code = "refused"

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(
            f"the server refused a batch: {error.get('code')}: {error.get('message')}",
            **({"field": error["field"]} if "field" in error else {}),
        )
        self.code = str(error.get("code") or "refused")  # type: ignore[misc]


class LocalTarget:
    """remember's batch path on the local database, one transaction per batch, as an
    operator of one org, through the call runner (a failed batch is audited, transport
    ``cli``)."""

    def __init__(self, resources: Any, caller: Any) -> None:
        self.resources = resources
        self.caller = caller

    async def send(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        from pydantic import ValidationError

        from service import operations
        from service.calls import Transport
        from service.schemas.memories import RememberBatchRequest

        try:
            request = RememberBatchRequest.model_validate({"items": items})
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise InvalidInput(where, first["msg"]) from None
        # Through the call runner, as every face: one unit of work, the domain's audit row on
        # success and the runner's (transport ``cli``) when the batch fails.
        op = operations.REMEMBER_BATCH
        response = await self.resources.runner.run(
            self.caller,
            op.action,
            lambda session, caller, ctx: op.answer(self.resources, session, caller, ctx, request),
            transport=Transport.CLI,
        )
        return [r.model_dump(mode="json") for r in response.items]

    async def close(self) -> None:
        return None


# --- the run ----------------------------------------------------------------------------


@dataclass
class IngestSummary:
    turns: int = 0
    created: int = 0
    updated: int = 0  # an edited turn: the memory under its key replaced (history kept)
    duplicate: int = 0
    without_key: int = 0  # a turn whose text another turn's key holds: sent without its key
    rejected: Counter[str] = field(default_factory=Counter)
    # Turns the server refused as input (``invalid_<field>``): skipped and counted.
    invalid: Counter[str] = field(default_factory=Counter)
    # Turns whose timestamp could not be read: stored without valid_at, counted (a sample).
    unparsed_timestamps: int = 0
    unparsed_samples: list[str] = field(default_factory=list)
    resumed: int = 0  # already done in an earlier run (from the resume file)
    interrupted: bool = False
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "turns": self.turns,
            "created": self.created,
            "updated": self.updated,
            "duplicate": self.duplicate,
            "without_key": self.without_key,
            "rejected": sum(self.rejected.values()),
            "rejected_by_reason": dict(sorted(self.rejected.items())),
            "invalid": sum(self.invalid.values()),
            "invalid_by_field": dict(sorted(self.invalid.items())),
            "unparsed_timestamps": self.unparsed_timestamps,
            "unparsed_samples": self.unparsed_samples,
            "skipped_already_done": self.resumed,
            "interrupted": self.interrupted,
            "seconds": round(self.seconds, 1),
        }

    def text(self) -> str:
        lines = [
            f"turns: {self.turns}  created: {self.created}  updated: {self.updated}  "
            f"duplicate: {self.duplicate}  rejected: {sum(self.rejected.values())}  "
            f"already done: {self.resumed}  ({self.seconds:.1f} s)"
        ]
        if self.without_key:
            lines.append(f"  without a key (text held by another turn's key): {self.without_key}")
        for reason, n in sorted(self.rejected.items(), key=lambda kv: -kv[1]):
            lines.append(f"  rejected {reason}: {n}")
        if self.unparsed_timestamps:
            lines.append(
                f"timestamps not understood (stored without a date): {self.unparsed_timestamps}"
                f", e.g. {', '.join(repr(x) for x in self.unparsed_samples)}"
                " (see --date-order, --timezone)"
            )
        if self.invalid:
            lines.append(f"skipped as invalid input: {sum(self.invalid.values())}")
        for reason, n in sorted(self.invalid.items(), key=lambda kv: -kv[1]):
            lines.append(f"  {reason}: {n}")
        if self.interrupted:
            lines.append("interrupted: run the same command again to resume")
        return "\n".join(lines)


class Checkpoint:
    """The resume file: one JSON line per finished turn, ``{x: external id, s: status, id,
    r: reasons, h: fingerprint of the item sent}``, appended and flushed after each batch.
    A turn is done when its id is there with the same fingerprint (or none, in a file
    written before fingerprints): an edited turn is sent again."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.done: dict[str, dict[str, Any]] = {}
        if path is not None and path.exists():
            with path.open(encoding="utf-8") as f:
                for raw in f:
                    try:
                        row = json.loads(raw)
                    except json.JSONDecodeError:
                        continue  # a line cut by a crash: that batch is sent again
                    self.done[row["x"]] = row
        self._file = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("a", encoding="utf-8")

    def is_done(self, external_id: str, fingerprint: str) -> bool:
        row = self.done.get(external_id)
        return row is not None and row.get("h", fingerprint) == fingerprint

    def record(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            self.done[row["x"]] = row
        if self._file is not None:
            self._file.write("".join(json.dumps(r) + "\n" for r in rows))
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> Checkpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def fingerprint(item: dict[str, Any]) -> str:
    """A short digest of a turn's remember item (before links): what the resume file
    compares, so a turn edited since it was sent is sent again."""
    return hashlib.sha256(json.dumps(item, sort_keys=True).encode()).hexdigest()[:16]


_ITEM_FIELD = re.compile(r"^items\.(\d+)\.(.+)$")


def invalid_result(field_name: str) -> dict[str, Any]:
    """The outcome of a turn the server refused as input (a time past year 9999, a session
    name holding a secret): skipped, counted under ``invalid_<field>``, never sent again for
    the same item (the resume file records it), and the run goes on."""
    return {"status": "invalid", "reasons": [{"code": f"invalid_{field_name}"}]}


async def send_keyed(
    target: Target, items: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], set[int]]:
    """Send a batch of keyed items; returns the results in order and the indexes of the
    items sent without their key.

    remember refuses a keyed item whose content is already held by another key in its
    namespace (409 ``conflict``, or 422 when two items of the batch hold the same text),
    naming ``items.<n>.content``: two turns that said the same words. That item is taken out
    and the rest sent again (the refusal stored nothing); the items taken out are then sent
    without their key, where each is an exact duplicate of the memory holding its text, as
    every turn was before keys. Any other 422 naming one item (``items.<n>.<field>``) takes
    that item out as ``invalid`` (``invalid_result``): one bad turn never stops a run. A
    batch over the server's text bound (413) is sent in halves. A refusal naming no item is
    raised."""
    pending = list(range(len(items)))
    deferred: list[int] = []  # to send again without their key
    unkeyed: set[int] = set()  # sent without their key (here or in a half)
    results: dict[int, dict[str, Any]] = {}
    while pending:
        try:
            sent = await target.send([items[i] for i in pending])
        except CtxpackError as exc:
            if exc.code == "payload_too_large" and len(pending) > 1:
                half = len(pending) // 2
                for part in (pending[:half], pending[half:]):
                    out, part_unkeyed = await send_keyed(target, [items[i] for i in part])
                    results.update(zip(part, out, strict=True))
                    unkeyed.update(part[i] for i in part_unkeyed)
                break
            where = _ITEM_FIELD.match(str(exc.details.get("field", "")))
            if exc.code not in ("conflict", "validation_error") or where is None:
                raise
            position = int(where.group(1))
            if position >= len(pending):
                raise
            index = pending.pop(position)
            if where.group(2) == "content" and "key" in items[index]:
                deferred.append(index)
            elif exc.code == "validation_error":
                results[index] = invalid_result(where.group(2))
            else:
                raise
            continue
        results.update(zip(pending, sent, strict=True))
        break
    if deferred:
        bare = [{k: v for k, v in items[i].items() if k != "key"} for i in deferred]
        out, _ = await send_keyed(target, bare)
        results.update(zip(deferred, out, strict=True))
        unkeyed.update(deferred)
    return [results[i] for i in range(len(items))], unkeyed


def _phases(turns: list[Turn], links: bool) -> list[list[Turn]]:
    if not links:
        return [turns]
    return [[t for t in turns if t.position % 2 == 0], [t for t in turns if t.position % 2 == 1]]


def _neighbours(turns: list[Turn]) -> dict[str, tuple[str | None, str | None]]:
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


async def ingest(
    turns: list[Turn],
    target: Target,
    mapping: Mapping,
    fmt: str,
    *,
    checkpoint: Checkpoint,
    summary: IngestSummary,
    batch_size: int = 250,
    links: bool = False,
    progress: Any = None,
) -> IngestSummary:
    """Send every turn not yet in ``checkpoint``, ``batch_size`` at a time; ``summary`` is
    updated after each batch (so an interrupted run still reports what it did)."""
    started = time.monotonic()
    summary.turns = len(turns)
    seen: set[str] = set()
    unique: list[Turn] = []
    for t in turns:  # a turn listed twice in a file is one turn
        if t.external_id not in seen:
            seen.add(t.external_id)
            unique.append(t)
    neighbours = _neighbours(unique) if links else {}
    # The namespace template itself must be valid (a usage error stops the run); a turn
    # whose own data makes its item invalid (a session name holding a secret) is skipped.
    namespace_of(Turn("template", ""), Mapping(mapping.namespace, sessions="metadata"))
    built: dict[str, dict[str, Any]] = {}
    refused: dict[str, str] = {}
    for t in unique:
        try:
            built[t.external_id] = item_of(t, mapping, fmt)
        except InvalidInput as exc:
            refused[t.external_id] = str(exc.details.get("field") or "turn")
            continue
        if t.timestamp not in (None, "") and "valid_at" not in built[t.external_id]:
            summary.unparsed_timestamps += 1
            if len(summary.unparsed_samples) < 3:
                summary.unparsed_samples.append(str(t.timestamp)[:40])
    prints = {
        x: fingerprint(built[x]) if x in built else fingerprint({"x": x, "invalid": refused[x]})
        for x in (t.external_id for t in unique)
    }
    todo = [t for t in unique if not checkpoint.is_done(t.external_id, prints[t.external_id])]
    summary.resumed = len(unique) - len(todo)
    skipped = [t for t in todo if t.external_id in refused]
    if skipped:
        for t in skipped:
            summary.invalid.update(invalid_result(refused[t.external_id])["reasons"][0].values())
        checkpoint.record(
            [{"x": t.external_id, "s": "invalid", "id": None,
              "r": [f"invalid_{refused[t.external_id]}"], "h": prints[t.external_id]}
             for t in skipped]
        )
        todo = [t for t in todo if t.external_id not in refused]
    if progress is not None:
        progress.set_total(len(todo))
    try:
        for phase in _phases(todo, links):
            for start in range(0, len(phase), batch_size):
                chunk = phase[start : start + batch_size]
                items = [dict(built[t.external_id]) for t in chunk]
                if links:
                    for t, item in zip(chunk, items, strict=True):
                        if t.position % 2 == 0:
                            continue
                        related = []
                        prev, nxt = neighbours.get(t.external_id, (None, None))
                        for other, rel in ((prev, "follows"), (nxt, "precedes")):
                            done = checkpoint.done.get(other) if other else None
                            if done and done.get("id"):
                                related.append({"id": done["id"], "relationship": rel})
                        if related:
                            item["related"] = related
                results, unkeyed = await send_keyed(target, items)
                summary.without_key += len(unkeyed)
                rows = []
                for t, result in zip(chunk, results, strict=True):
                    status = result["status"]
                    reasons = [r["code"] for r in result.get("reasons") or []]
                    rows.append({"x": t.external_id, "s": status, "id": result.get("id"), "r": reasons,
                                 "h": prints[t.external_id]})
                    if status == "created":
                        summary.created += 1
                    elif status == "updated":
                        summary.updated += 1
                    elif status == "duplicate":
                        summary.duplicate += 1
                    elif status == "invalid":
                        summary.invalid.update(reasons)
                    else:
                        summary.rejected.update(reasons or ["rejected"])
                checkpoint.record(rows)
                if progress is not None:
                    progress.update(
                        len(chunk), created=summary.created, updated=summary.updated, dup=summary.duplicate,
                        rejected=sum(summary.rejected.values()),
                    )
    except (KeyboardInterrupt, asyncio.CancelledError):
        summary.interrupted = True
        raise
    finally:
        summary.seconds = time.monotonic() - started
    return summary


def default_checkpoint(file: str, target: str, mapping: Mapping, links: bool) -> Path:
    import platformdirs

    ident = json.dumps(
        [os.path.abspath(file) if file != "-" else "-", target, mapping.namespace,
         mapping.sessions, mapping.speaker_in, mapping.type, links]
    )
    name = hashlib.sha256(ident.encode()).hexdigest()[:16] + ".jsonl"
    return Path(platformdirs.user_cache_dir("ctxpack")) / "ingest" / name


def run_ingest_command(
    args: argparse.Namespace, settings: Settings
) -> int:
    """The body of ``ctxpack ingest`` (see the module docstring)."""
    from service.lifecycle.progress import Progress

    if args.batch_size < 1 or args.batch_size > settings.max_batch_items:
        raise InvalidInput("batch-size", f"--batch-size must be 1..{settings.max_batch_items}")
    text = sys.stdin.read() if args.file == "-" else _read(Path(args.file))
    fmt, turns = read_turns(text, args.format)
    mapping = Mapping(
        args.namespace, args.sessions, args.speaker_in, args.type,
        date_order=args.date_order, zone=parse_zone(args.timezone),
    )
    # A bad --namespace template fails before anything is sent (a bad turn does not).
    namespace_of(Turn("template", ""), Mapping(mapping.namespace, sessions="metadata"))
    from service.remote import api_key_from_env

    key = args.key or api_key_from_env()
    if args.url and not key:
        raise InvalidInput(
            "key", "--url needs --key (or CTXPACK_API_KEY): a key with the write scope"
        )
    target_id = args.url or settings.database_url or str(settings.data_dir)
    ck_path = args.checkpoint or default_checkpoint(args.file, target_id, mapping, args.links)
    if args.restart and ck_path.exists():
        ck_path.unlink()
    summary = IngestSummary()
    checkpoint = Checkpoint(ck_path)
    sys.stderr.write(
        f"ingest: {len(turns)} turns ({fmt}) -> {args.url or 'local database'}; resume file {ck_path}\n"
    )

    async def run() -> None:
        target: Any
        if args.url:
            target = HttpTarget(args.url, key or "")
            try:
                with Progress("ingest", None, unit="turn") as progress:
                    await ingest(turns, target, mapping, fmt, checkpoint=checkpoint, summary=summary,
                                 batch_size=args.batch_size, links=args.links, progress=progress)
            finally:
                await target.close()
            return
        from service.domain.audit import resolve_org
        from service.lifecycle.local import open_local, operator

        async with open_local(settings) as res:
            async with res.runner.operator_session() as session:
                org = await resolve_org(session, args.org)
            target = LocalTarget(res, operator(org.org_id))
            with Progress("ingest", None, unit="turn") as progress:
                await ingest(turns, target, mapping, fmt, checkpoint=checkpoint, summary=summary,
                             batch_size=args.batch_size, links=args.links, progress=progress)

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        summary.interrupted = True
        _report(summary)
        return 130
    finally:
        checkpoint.close()
    _report(summary)
    return 0


def _report(summary: IngestSummary) -> None:
    """The summary: readable on stderr, one JSON object on stdout."""
    sys.stderr.write(summary.text() + "\n")
    sys.stdout.write(json.dumps(summary.as_dict()) + "\n")
    sys.stdout.flush()


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInput("file", f"no such file: {path}") from None
    except UnicodeDecodeError:
        raise InvalidInput("file", f"{path} is not UTF-8 text") from None


__all__ = [
    "Checkpoint",
    "HttpTarget",
    "IngestSummary",
    "LocalTarget",
    "Mapping",
    "Turn",
    "ingest",
    "item_of",
    "read_turns",
    "send_keyed",
    "turn_key",
]
