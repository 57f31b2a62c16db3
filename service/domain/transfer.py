"""The export file's rules (format version 1; lifecycle/transfer.py runs ``ctxpack export``
and ``ctxpack import`` on them): how a line is written and read, the header a file must open
with, what import refuses before anything is written (``check_file``: a line it could not
read back as it is, or what remember would refuse), what a line becomes (``memory_request``,
``artifact_row``), and the hash the service derives instead of trusting the file's
(``stored_hash``). The format itself is described in lifecycle/transfer.py.

Import is bounded like every write (domain/scan_bound.py): one line is one write, so the text
of one memory line (content, name, source, url, domain, origin, tags, metadata) or one
artifact line (name, summary, body) over ``max_scanned_bytes`` refuses the file, naming the
line and the field, in ``check_file``, before anything is written. The bound is per line, not
per file: an import is as many writes as it has lines, and its size is the operator's choice.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from service.domain.artifacts import memory_hash, schema_keys
from service.domain.namespaces import parse_namespace
from service.domain.redaction.fields import check_identifiers, redact_fields
from service.domain.scan_bound import Part, check_scan_bound, compact_size
from service.domain.writes.prepare import WriteItem
from service.errors import InvalidInput, PayloadTooLarge
from service.schemas.artifacts import SLUG
from service.schemas.common import non_finite_path
from service.schemas.memories import RememberRequest, storable_time

FORMAT = "ctxpack-export"


VERSION = 1


DROPPED_COLUMNS = {"org_id", "tsv"}


def encode_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if hasattr(value, "tolist"):  # a pgvector / numpy vector
        return value.tolist()
    raise TypeError(f"cannot encode {type(value).__name__}")


def encode_line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, default=encode_value, ensure_ascii=False, separators=(",", ":")) + "\n"


def records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open(encoding="utf-8") as f:
        for number, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise InvalidInput("file", f"line {number}: not JSON ({exc.msg})") from None
            if not isinstance(obj, dict):
                raise InvalidInput("file", f"line {number}: not a JSON object")
            yield number, obj


def read_header(path: Path) -> dict[str, Any]:
    for _, obj in records(path):
        if obj.get("kind") != "header" or obj.get("format") != FORMAT:
            raise InvalidInput("file", "not a ctxpack export: the first line is no ctxpack header")
        if obj.get("version") != VERSION:
            raise InvalidInput("file", f"export format version {obj.get('version')}; this ctxpack reads {VERSION}")
        return obj
    raise InvalidInput("file", "empty file")


def chunks(path: Path, kind: str, size: int) -> Iterator[list[tuple[int, dict[str, Any]]]]:
    chunk: list[tuple[int, dict[str, Any]]] = []
    for number, obj in records(path):
        if obj.get("kind") == kind:
            chunk.append((number, obj))
            if len(chunk) >= size:
                yield chunk
                chunk = []
    if chunk:
        yield chunk


def time_of(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


def uuid_of(value: Any) -> uuid.UUID | None:
    return uuid.UUID(value) if isinstance(value, str) else None


def key_of(obj: dict[str, Any]) -> str | None:
    key = obj.get("key")
    return key if isinstance(key, str) and key else None


def _refuse(number: int, what: str) -> InvalidInput:
    return InvalidInput("file", f"line {number}: {what}")


def _check_uuid(number: int, obj: dict[str, Any], name: str, *, required: bool = False) -> None:
    value = obj.get(name)
    if value is None and not required:
        return
    try:
        uuid.UUID(value)
    except (TypeError, ValueError, AttributeError):
        raise _refuse(number, f"{name} is not an id") from None


def _check_time(number: int, obj: dict[str, Any], name: str) -> None:
    value = obj.get(name)
    if value is None:
        return
    try:
        storable_time(datetime.fromisoformat(value))
    except (TypeError, ValueError) as exc:
        what = str(exc) if "9999" in str(exc) else "not an ISO 8601 time"
        raise _refuse(number, f"{name} is {what}") from None


_SLUG = re.compile(SLUG)


_LABEL = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


def _check_slug(number: int, value: Any, name: str, pattern: re.Pattern[str]) -> None:
    """A label or project as remember takes it: the schema's pattern, and no secret."""
    if value is None:
        return
    if not isinstance(value, str) or not pattern.match(value):
        raise _refuse(number, f"{name} is not a valid label ({pattern.pattern})")
    try:
        check_identifiers({name: value})
    except InvalidInput as exc:
        raise _refuse(number, exc.message) from None


def _check_vector(number: int, obj: dict[str, Any], dims: int | None) -> None:
    vec = obj.get("embedding")
    if vec is None:
        return
    if (
        not isinstance(vec, list)
        or (dims is not None and len(vec) != dims)
        or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in vec)
        or non_finite_path(vec) is not None
    ):
        raise _refuse(number, f"embedding is not a list of {dims or 'the header'}'s finite numbers")


def check_line(number: int, obj: dict[str, Any], dims: int | None = None) -> None:
    """Refuse, naming the line, what import could not read back as it is, or what remember
    would refuse."""
    kind = obj.get("kind")
    if kind == "memory":
        _check_uuid(number, obj, "id", required=True)
        _check_uuid(number, obj, "superseded_by")
        for name in ("created_at", "updated_at", "expires_at", "valid_at"):
            _check_time(number, obj, name)
        _check_vector(number, obj, dims)
        where = non_finite_path(obj.get("metadata"))
        if where is not None:
            raise _refuse(number, f"metadata holds a non-finite number at {where!r}")
        relations = obj.get("relations") or []
        if not isinstance(relations, list) or not all(isinstance(r, dict) for r in relations):
            raise _refuse(number, "relations is not a list of objects")
        for rel in relations:
            _check_uuid(number, rel, "id")
            _check_uuid(number, rel, "target_id")
            _check_time(number, rel, "created_at")
            _check_slug(number, rel.get("relationship"), "relationship", _LABEL)
    elif kind == "artifact":
        _check_uuid(number, obj, "id", required=True)
        _check_uuid(number, obj, "memory_id")
        _check_time(number, obj, "created_at")
        _check_slug(number, obj.get("project"), "project", _SLUG)
        body = obj.get("body")
        if not isinstance(body, dict | list):
            raise _refuse(number, "an artifact's body is not a JSON object or list")
        where = non_finite_path(body)
        if where is not None:
            raise _refuse(number, f"body holds a non-finite number at {where!r}")
        namespace = obj.get("namespace")
        if not isinstance(namespace, str):
            raise _refuse(number, "an artifact without a namespace")
        try:
            parse_namespace(namespace)
        except InvalidInput as exc:
            raise _refuse(number, exc.message) from None
        for name, most in (("name", 300), ("summary", 2000)):
            value = obj.get(name)
            if value is not None and (not isinstance(value, str) or len(value) > most):
                raise _refuse(number, f"an artifact's {name} is not text of at most {most} characters")
        if not isinstance(obj.get("size_bytes") or 0, int):
            raise _refuse(number, "size_bytes is not a whole number")
        keys = obj.get("schema_keys") or []
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise _refuse(number, "schema_keys is not a list of strings")


MEMORY_TEXT_FIELDS = ("content", "name", "source", "url", "domain", "origin")


def scanned_parts(obj: dict[str, Any]) -> list[Part]:
    """The text of one line that import redacts (and, for a memory, gates and embeds), for
    ``check_scan_bound``: a memory's as remember counts it (``writes/prepare.py:scanned_parts``),
    an artifact's as ``store_artifact`` counts it."""
    kind = obj.get("kind")
    if kind == "memory":
        parts: list[Part] = [(name, obj.get(name)) for name in MEMORY_TEXT_FIELDS]
        tags = obj.get("tags")
        parts += [(f"tags.{n}", tag) for n, tag in enumerate(tags)] if isinstance(tags, list) else [("tags", tags)]
        return [*parts, ("metadata", obj.get("metadata"))]
    if kind == "artifact":
        return [("name", obj.get("name")), ("summary", obj.get("summary")), ("body", obj.get("body"))]
    return []


def check_line_bound(number: int, obj: dict[str, Any], max_scanned_bytes: int) -> None:
    """413 when one line holds more text than one write may scan (module docstring).

    Raises:
        PayloadTooLarge: the message names the line; ``field`` names the line's field (the
            largest alone over the limit, else the one holding the most).
    """
    try:
        check_scan_bound(
            scanned_parts(obj), max_scanned_bytes,
            "one line of an import is one write; shorten it or raise max_scanned_bytes",
        )
    except PayloadTooLarge as exc:
        raise PayloadTooLarge(f"line {number}: {exc.message}", field=exc.details["field"]) from None


def check_file(
    path: Path, dims: int | None = None, max_scanned_bytes: int | None = None
) -> set[uuid.UUID]:
    """Read the whole file once before anything is written: a line import could not read
    is refused (``InvalidInput``, field ``file``, naming the line), and so is a line over
    the scan bound when ``max_scanned_bytes`` is given (``PayloadTooLarge``, naming the line
    and its field), so bad input writes nothing. Returns the ids of the keyed memories the
    file holds as superseded (history): a current holder of a key with one of these ids is
    the file's own older version, not a conflict."""
    replaced: set[uuid.UUID] = set()
    for number, obj in records(path):
        if max_scanned_bytes is not None:
            check_line_bound(number, obj, max_scanned_bytes)
        check_line(number, obj, dims)
        if obj.get("kind") == "memory" and key_of(obj) and obj.get("superseded_by"):
            replaced.add(uuid.UUID(obj["id"]))
    return replaced


def stored_hash(obj: dict[str, Any], item: WriteItem) -> str:
    """The hash the service derives, never the file's (a forged one would make a later,
    different remember a "duplicate" of this memory): an artifact's memory hashes its
    artifact's id, any other memory its redacted content."""
    artifact_id = item.metadata.get("artifact_id") if item.request.type == "artifact" else None
    if isinstance(artifact_id, str):
        try:
            return memory_hash(uuid.UUID(artifact_id))
        except ValueError:
            pass
    return str(item.hash)



def memory_request(obj: dict[str, Any]) -> RememberRequest:
    """A memory line as the remember request it is imported through (the write path then
    redacts, gates and hashes it like any write).

    Raises:
        ValidationError: the line is no valid remember request.
    """
    return RememberRequest(
        content=obj.get("content", ""),
        namespace=obj.get("namespace", ""),
        name=obj.get("name"),
        type=obj.get("type", "episode"),
        project=obj.get("project"),
        domain=obj.get("domain"),
        agent_id=obj.get("agent_id"),
        tags=obj.get("tags") or [],
        source=obj.get("source"),
        origin=obj.get("origin"),
        url=obj.get("url"),
        valid_at=obj.get("valid_at"),
        metadata=obj.get("metadata") or {},
        key=key_of(obj),
    )


def artifact_row(org_id: uuid.UUID, number: int, obj: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """An artifact line as the row import stores: name, summary and body redacted (by
    ``redact_fields``, as store_artifact redacts them), size and schema keys derived from the
    redacted body (as store_artifact derives them), ids and times kept.

    Returns:
        The row, and how many secrets redaction replaced in it.

    Raises:
        InvalidInput: the line has no id or namespace (field ``file``, naming the line).
    """
    aid = uuid_of(obj.get("id"))
    if aid is None or not isinstance(obj.get("namespace"), str):
        raise InvalidInput("file", f"line {number}: an artifact without id or namespace")
    raw = obj.get("body")
    values, counts = redact_fields({
        "name": str(obj.get("name") or ""),
        "summary": str(obj.get("summary") or ""),
        "body": raw if isinstance(raw, dict | list) else None,  # anything else is stored as {}
    })
    body = values["body"] if values["body"] is not None else {}
    return {
        "org_id": org_id,
        "id": aid,
        "namespace": obj["namespace"],
        "name": values["name"],
        "summary": values["summary"],
        "body": body,
        "size_bytes": compact_size(body),
        "schema_keys": schema_keys(body),
        "project": obj.get("project"),
        "memory_id": uuid_of(obj.get("memory_id")),
        "created_at": time_of(obj.get("created_at")) or datetime.now(UTC),
    }, sum(counts.values())
