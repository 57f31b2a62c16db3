"""Write path, step 1: ``prepare`` turns one remember request into a ``WriteItem``.

The key's rights (namespace, project, identifiers holding secrets, a key that looks like a
secret), then the write pipeline (validate -> redact -> gate -> hash, domain/write_pipeline.py)
and the expiry: CPU work on text, run in a worker thread. A gate rejection is recorded on the
item, not raised, so a batch carries on. ``validate_links`` then checks ``related`` and
``supersedes`` within the key's reach (and the supersedes reach rule), and ``scanned_parts``
lists a write's text for the bound on text work per call (domain/scan_bound.py). remember,
batch, keyed writes and import prepare their items here.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from service.config import Settings
from service.domain.auth import Caller
from service.domain.expiry import expiry_of, patched_expiry
from service.domain.namespaces import parse_namespace
from service.domain.redaction import merge_counts
from service.domain.redaction.fields import check_identifiers
from service.domain.scan_bound import Part
from service.domain.write_gate import GateVerdict
from service.domain.write_pipeline import CleanWrite, WritePipeline, strip_placeholders
from service.errors import GateRejected, InvalidInput
from service.schemas.memories import GateReasonOut, Redaction, RememberRequest
from service.store.memories import MemoryRepository

NAME_CHARS = 80


_WS = re.compile(r"\s+")


def derive_name(content: str) -> str:
    """A short title from the content: its first sentence or line, cut at a word boundary."""
    first = re.split(r"(?<=[.!?])\s|\n", content.strip(), maxsplit=1)[0].strip()
    first = _WS.sub(" ", first)
    if len(first) <= NAME_CHARS:
        return first.rstrip(".") or content.strip()[:NAME_CHARS]
    cut = first[:NAME_CHARS].rsplit(" ", 1)[0]
    return cut + "…"


def document_text(name: str, content: str) -> str:
    """What the model embeds for a memory: its name over its content, or the content alone when
    the name is a prefix of it (a derived name is the content's first sentence; embedding those
    words twice doubles the model's work on a one-sentence memory for no new meaning)."""
    head = name.rstrip("…").rstrip()
    if not head or _WS.sub(" ", content.strip()).startswith(head):
        return content
    return f"{name}\n{content}"


@dataclass
class WriteItem:
    """One item after validation, redaction and the gate."""

    index: int
    request: RememberRequest
    content: str = ""
    name: str = ""
    url: str | None = None
    source: str | None = None
    domain: str | None = None
    origin: str | None = None
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    redactions: dict[str, int] = field(default_factory=dict)
    verdict: GateVerdict | None = None
    hash: str = ""
    expires_at: datetime | None = None
    warnings: list[str] = field(default_factory=list)
    rejection: list[GateReasonOut] | None = None
    # What the new memory supersedes: the request's, or the chain head a re-assertion replaces.
    supersedes: uuid.UUID | None = None

    @property
    def content_key(self) -> tuple[str, str | None, str | None, str]:
        """The exact-duplicate key: namespace, project, agent diary, content hash."""
        req = self.request
        return (req.namespace, req.project, req.agent_id, self.hash)
    prefix: str = ""  # how a field of this item is named in an error: "" or "items.3."

    @property
    def redaction_list(self) -> list[Redaction]:
        return [Redaction(label=k, count=v) for k, v in sorted(self.redactions.items())]


@dataclass
class UpdateItem:
    """A PATCH after the write pipeline: its set fields, their cleaned values, the expiry,
    and the name the memory keeps when its content changes and no name was sent."""

    changes: dict[str, Any]
    clean: CleanWrite
    # The memory's explicit name, redacted again (None: the name was derived, derive it anew).
    kept_name: str | None = None
    expiry_changed: bool = False
    expires_at: datetime | None = None
    redactions: dict[str, int] = field(default_factory=dict)


def prepare_update(
    changes: dict[str, Any],
    row_type: str,
    row_name: str,
    row_content: str,
    pipeline: WritePipeline,
) -> UpdateItem:
    """A PATCH's text work, as for remember: validate, redact, gate (placeholders stripped
    the same way), hash; then its expiry. A content change is gated as a new write; a type
    change alone gates the old content under the new type (field ``type``). A memory's
    explicit name is kept over a content change, redacted again.

    Raises:
        InvalidInput: a bad field or expiry (422 naming it).
        GateRejected: the new content, or the old content under a new type, fails the gate.
    """
    new_type = changes.get("type") or row_type
    clean = pipeline.run(
        type=new_type,
        content=changes.get("content"),
        name=changes.get("name"),
        url=changes.get("url"),
        source=changes.get("source"),
        metadata=(changes["metadata"] or {}) if "metadata" in changes else None,
        domain=changes.get("domain"),
        origin=changes.get("origin"),
        tags=changes.get("tags"),
    )
    item = UpdateItem(changes=changes, clean=clean)
    counts = [clean.redactions]
    item.expiry_changed, item.expires_at = patched_expiry(changes)
    if clean.verdict is not None and not clean.verdict.accepted:
        # Oversize content comes back without text (refused before any scan): refused all
        # the same, never a 200 that kept the old content.
        raise GateRejected([{"code": r.code, "hint": r.hint} for r in clean.verdict.reasons])
    if clean.content is not None:
        if "name" not in changes and row_name != derive_name(row_content):
            # A derived name follows the content; an explicit one stays (redacted again).
            kept = pipeline.redactor.redact(row_name)
            item.kept_name = kept.text
            counts.append(kept.counts)
    elif "type" in changes and changes["type"] != row_type:
        # A new type labels the old content: it passes the gate as a new write would.
        name = clean.name if "name" in changes else row_name
        verdict = pipeline.gate.check(strip_placeholders(row_content), type=new_type, name=name)
        if not verdict.accepted:
            raise GateRejected(
                [{"code": r.code, "hint": r.hint} for r in verdict.reasons], field="type"
            )
    item.redactions = merge_counts(*counts)
    return item


def prepare(
    index: int,
    req: RememberRequest,
    caller: Caller,
    settings: Settings,
    pipeline: WritePipeline,
    prefix: str,
) -> WriteItem:
    """Steps 1-3 for one item (the write pipeline, after the key's rights). Raises
    InvalidInput/permission errors; gate rejections are recorded on the item, not raised, so
    a batch can carry on."""
    # A namespace holding a secret is refused before the 403 that would name it.
    caller.check_namespace(parse_namespace(req.namespace, f"{prefix}namespace"))
    # Identifiers are checked before the project check, whose 403 names the project.
    check_identifiers(
        {
            f"{prefix}project": req.project,
            f"{prefix}agent_id": req.agent_id,
            **{f"{prefix}related.{n}.relationship": r.relationship for n, r in enumerate(req.related)},
        }
    )
    caller.check_write_project(req.project, f"{prefix}project")
    if req.key is not None and pipeline.redactor.redact(req.key).counts:
        raise InvalidInput(
            f"{prefix}key", "the key looks like a secret or personal data; keys are stored as sent"
        )
    clean = pipeline.run(
        type=req.type,
        content=req.content,
        name=req.name or None,
        url=req.url or None,
        source=req.source or None,
        metadata=req.metadata,
        domain=req.domain,
        origin=req.origin,
        tags=list(req.tags),
        field_prefix=prefix,
    )
    item = WriteItem(index=index, request=req, prefix=prefix)
    item.expires_at = expiry_of(req, settings, prefix)
    item.content = clean.content or ""
    item.url = clean.url
    item.source = clean.source
    item.domain = clean.domain
    item.origin = clean.origin
    item.tags = clean.tags or []
    item.metadata = clean.metadata or {}
    item.redactions = clean.redactions
    if item.redactions:
        item.warnings.append(
            f"redacted {sum(item.redactions.values())} secret(s) before storing: "
            + ", ".join(sorted(item.redactions))
        )
    item.verdict = clean.verdict
    if not clean.accepted:
        assert item.verdict is not None
        item.rejection = [GateReasonOut(code=r.code, hint=r.hint) for r in item.verdict.reasons]
        return item
    item.name = clean.name or derive_name(item.content)
    item.hash = clean.hash
    return item


async def validate_links(
    repo: MemoryRepository, caller: Caller, items: list[WriteItem], field_prefix: str | None
) -> None:
    """422 naming the field when a related or superseded id is unknown, foreign or out of
    the key's reach (all three look the same, so nothing leaks about other orgs)."""
    wanted: set[uuid.UUID] = set()
    for item in items:
        wanted.update(r.id for r in item.request.related)
        if item.request.supersedes:
            wanted.add(item.request.supersedes)
    if not wanted:
        return
    found = await repo.link_targets(
        caller.org_id, list(wanted), caller.namespace_prefixes, caller.projects
    )
    for item in items:
        prefix = f"{field_prefix}{item.index}." if field_prefix is not None else ""
        for pos, ref in enumerate(item.request.related):
            if ref.id not in found:
                raise InvalidInput(
                    f"{prefix}related.{pos}.id", f"unknown memory id {ref.id} (not in this org or out of reach)"
                )
        if item.request.supersedes and item.request.supersedes not in found:
            raise InvalidInput(
                f"{prefix}supersedes",
                f"unknown memory id {item.request.supersedes} (not in this org or out of reach)",
            )
        if item.request.supersedes:
            # Superseding hides the old memory from every reader: it takes write reach, and
            # every reader of the old memory must be able to read the new one.
            project, namespace, agent_id = found[item.request.supersedes]
            caller.check_write_project(project, f"{prefix}supersedes")
            if not reads_along(item.request, project, namespace, agent_id):
                raise InvalidInput(
                    f"{prefix}supersedes",
                    f"memory {item.request.supersedes} is read where this one would not be "
                    "(another namespace, another agent's diary or another project): superseding "
                    "it would hide it from readers who cannot see its replacement; write this "
                    "memory in its namespace, shared or in its project, and in its diary or none",
                )


def reads_along(
    req: RememberRequest, project: str | None, namespace: str, agent_id: str | None
) -> bool:
    """Whether every reader of a memory at ``namespace`` (in ``project`` and ``agent_id``'s
    diary) also reads ``req``'s new memory: the new one lives at that very namespace, is
    shared or in the same project, and is in no diary or the same one. Not at an ancestor:
    a pack below reads its ancestors, but a key limited to the old namespace's prefix does
    not, and would lose the memory and meet a ``superseded_by`` it cannot read."""
    return (
        namespace == req.namespace
        and (req.project is None or req.project == project)
        and (req.agent_id is None or req.agent_id == agent_id)
    )


def request_summary(items: list[WriteItem]) -> dict[str, Any]:
    """What the audit row keeps of the request: shapes and names, never content."""
    def one(item: WriteItem) -> dict[str, Any]:
        req = item.request
        return {
            "namespace": req.namespace,
            "type": req.type,
            "name": item.name or None,
            "project": req.project,
            "agent_id": req.agent_id,
            "content_chars": len(item.content),
            "tags": len(req.tags),
            "related": [str(r.id) for r in req.related],
            "supersedes": str(req.supersedes) if req.supersedes else None,
            "key": req.key,
        }

    total = merge_counts(*(i.redactions for i in items))
    summary: dict[str, Any] = {
        "redactions": [{"label": k, "count": v} for k, v in sorted(total.items())],
        "redaction_count": sum(total.values()),
    }
    if len(items) == 1:
        summary.update(one(items[0]))
    else:
        summary["items"] = len(items)
        summary["namespaces"] = sorted({i.request.namespace for i in items})[:20]
    return summary


def scanned_parts(req: RememberRequest, prefix: str) -> list[Part]:
    """The text of one write the redactor would scan, for ``check_scan_bound`` (an item over
    the gate's size is refused before any scan, but its bytes still count: they were sent)."""
    parts: list[Part] = [
        (f"{prefix}{name}", getattr(req, name))
        for name in ("content", "name", "source", "url", "domain", "origin")
    ]
    parts += [(f"{prefix}tags.{n}", tag) for n, tag in enumerate(req.tags)]
    if req.metadata:
        parts.append((f"{prefix}metadata", req.metadata))
    return parts


def check_batch_keys(items: list[WriteItem]) -> None:
    """422 when a batch names one key twice in a namespace, or stores one content under two
    keys: which should win is the caller's to say."""
    seen: dict[tuple[str, str], int] = {}
    content: dict[tuple[str, str], int] = {}
    for item in items:
        if item.request.key is None:
            continue
        where = (item.request.namespace, item.request.key)
        if where in seen:
            raise InvalidInput(
                f"items.{item.index}.key", f"key repeated in this batch (items.{seen[where]}.key)"
            )
        seen[where] = item.index
        if item.rejection is None:
            same = (item.request.namespace, item.hash)
            if same in content:
                raise InvalidInput(
                    f"items.{item.index}.content",
                    f"same content as items.{content[same]} under another key",
                )
            content[same] = item.index
