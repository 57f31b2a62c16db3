"""Write path, step 2: ``plan`` decides what one prepared write does, without a database.

Input: a prepared item (writes/prepare.py) and what the store found for it (a copy of its
content within the duplicate reach, the current holder of its key, the memory a PATCH
changes and another memory holding the content key it would take, the end of a superseded
chain). Output: a ``WritePlan``:

- ``insert``: a new memory, with its row values (``row_values``: only redacted text, never
  the request's own) and the text the model embeds (``embed_text``);
- ``update``: an existing memory changes (a PATCH's columns; a keyed write's copy taking
  the key);
- ``duplicate``: nothing to write, ``existing_id`` answers;
- ``conflict``: refused with ``error`` (409; import counts it instead of raising);
- ``supersede``: an insert that also supersedes the end of ``existing_id``'s chain (a
  re-assertion of superseded text; ``supersedes_head`` says whether it may).

Every rule here is a pure function of its arguments; writes/apply.py looks things up, calls
these, and carries out the plan. remember, batch, keyed writes, PATCH, import and the
artifact's memory all plan here.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from service.domain.writes.keyed import plan_keyed_write
from service.domain.writes.prepare import UpdateItem, WriteItem, derive_name, document_text
from service.errors import Conflict, CtxpackError
from service.schemas.memories import RememberRequest
from service.store.memories import ContentKey, Holder

Action = Literal["insert", "update", "duplicate", "conflict", "supersede"]


@dataclass(frozen=True)
class WritePlan:
    """What one write does (see the module docstring).

    Attributes:
        action: insert, update, duplicate, conflict or supersede.
        status: what the answer says (created, updated, duplicate; "" for a conflict).
        existing_id: duplicate: the copy; update: the memory changed; supersede: the
            superseded memory whose chain's end the new memory supersedes.
        superseded_id: a keyed write's holder of the key, superseded by the result.
        values: the columns to write (insert: the row without id and vector; update: the
            changed columns without the vector).
        embed_text: what the model embeds (None: no new vector).
        error: a conflict's refusal.
    """

    action: Action
    status: str = ""
    existing_id: uuid.UUID | None = None
    superseded_id: uuid.UUID | None = None
    values: dict[str, Any] = field(default_factory=dict)
    embed_text: str | None = None
    error: CtxpackError | None = None

    def refuse(self) -> None:
        """Raise a conflict's error; nothing for any other plan."""
        if self.error is not None:
            raise self.error


def row_values(org_id: uuid.UUID, item: WriteItem) -> dict[str, Any]:
    """The memories row of a prepared item, without its id and vector: only redacted text,
    never the request's own."""
    req = item.request
    return {
        "org_id": org_id,
        "namespace": req.namespace,
        "type": req.type,
        "name": item.name,
        "content": item.content,
        "content_hash": item.hash,
        "project": req.project,
        "domain": item.domain,
        "agent_id": req.agent_id,
        "tags": item.tags,
        "source": item.source,
        "origin": item.origin,
        "url": item.url,
        "valid_at": req.valid_at,
        "expires_at": item.expires_at,
        "meta": item.metadata,
    }


def embed_text(item: WriteItem) -> str:
    """What the model embeds for a prepared item: its name over its content, or the content
    alone when the name is its prefix (``document_text``)."""
    return document_text(item.name, item.content)


def imported_embed_text(item: WriteItem) -> str:
    """What the model embeds for an imported memory: what remember embeds, or for an
    artifact's memory what the artifact path embeds (its name over its summary)."""
    if item.request.type == "artifact" and "artifact_id" in item.metadata:
        return f"{item.name}\n{item.content}"
    return embed_text(item)


def insert(org_id: uuid.UUID, item: WriteItem, *, status: str = "created",
           superseded_id: uuid.UUID | None = None) -> WritePlan:
    return WritePlan(
        "insert",
        status=status,
        superseded_id=superseded_id,
        values=row_values(org_id, item),
        embed_text=embed_text(item),
    )


def plan_plain(
    org_id: uuid.UUID, item: WriteItem, copy: tuple[uuid.UUID, bool] | None
) -> WritePlan:
    """A write without a key, given ``copy``: the memory holding its content within the
    duplicate reach, as ``(id, is_current)``, if any.

    A current copy makes it a duplicate. A superseded copy is history: the write is stored
    again, and unless the request names its own ``supersedes`` it supersedes the end of that
    chain (``supersede``; ``supersedes_head`` decides whether it may)."""
    if copy is not None and copy[1]:
        return WritePlan("duplicate", status="duplicate", existing_id=copy[0])
    plan = insert(org_id, item)
    if copy is not None and item.request.supersedes is None:
        return WritePlan(
            "supersede",
            status="created",
            existing_id=copy[0],
            values=plan.values,
            embed_text=plan.embed_text,
        )
    return plan


class ChainEnd(Protocol):
    """The current end of a supersession chain, as the re-assertion rule sees it."""

    id: uuid.UUID
    namespace: str
    project: str | None
    agent_id: str | None


def supersedes_head(req: RememberRequest, head: ChainEnd | None, may_write: bool) -> bool:
    """Whether a re-asserted text supersedes ``head``, the current end of its old chain: the
    key may write it (``may_write``) and every reader of it can read the new memory (same
    namespace and diary, and the same project unless the new memory is shared). Otherwise
    the new memory is simply stored, and the end stays visible to those who cannot see it."""
    return (
        head is not None
        and may_write
        and head.namespace == req.namespace
        and head.agent_id == req.agent_id
        and (req.project is None or head.project == req.project)
    )


def plan_keyed(
    org_id: uuid.UUID,
    item: WriteItem,
    holder: Holder | None,
    same_content: Holder | None,
    key_projects: Sequence[str],
) -> WritePlan:
    """A write with a key, by the rules of writes/keyed.py, given the key's current
    ``holder`` and ``same_content``, the copy of the content within the duplicate reach.

    ``insert`` (``superseded_id``: the holder it replaces), ``update`` (``existing_id``, a
    copy of the content, takes the key and becomes current; ``superseded_id`` as for
    insert), ``duplicate``, or ``conflict``.

    Raises:
        SharedMemoryReadOnly: the holder is shared and the API key is limited to projects.
    """
    req = item.request
    try:
        keyed = plan_keyed_write(
            req.key or "",
            item.hash,
            holder,
            same_content,
            key_projects,
            item.prefix,
            project=req.project,
            agent_id=req.agent_id,
        )
    except Conflict as exc:
        return WritePlan("conflict", error=exc)
    if keyed.action == "insert":
        plan = insert(org_id, item, status=keyed.status, superseded_id=keyed.superseded_id)
        return WritePlan(
            "insert",
            status=plan.status,
            superseded_id=plan.superseded_id,
            values={**plan.values, "key": req.key},
            embed_text=plan.embed_text,
        )
    if keyed.action == "claim":
        return WritePlan(
            "update",
            status=keyed.status,
            existing_id=keyed.existing_id,
            superseded_id=keyed.superseded_id,
            values={"key": req.key},
        )
    return WritePlan("duplicate", status="duplicate", existing_id=keyed.existing_id)


def plan_import(
    org_id: uuid.UUID,
    item: WriteItem,
    memory_id: uuid.UUID,
    holder: Holder | None,
    replaced: set[uuid.UUID],
    stored_hash: str,
    times: dict[str, datetime | None],
) -> WritePlan:
    """An imported memory (lifecycle/transfer.py's rules), given the current ``holder`` of
    its key in the org (None when it has no key, or is superseded in the file): inserted
    with its id, ``stored_hash`` and the file's ``times`` (created_at, updated_at,
    expires_at), unless the holder is another memory the file does not say was replaced;
    then a ``duplicate`` (same content) or a ``conflict`` (other content, counted by import,
    never raised: import only adds)."""
    if holder is not None and holder.id != memory_id and holder.id not in replaced:
        if holder.content_hash == stored_hash:
            return WritePlan("duplicate", status="duplicate", existing_id=holder.id)
        return WritePlan(
            "conflict",
            existing_id=holder.id,
            error=Conflict("this key is held by another memory", field="key",
                           existing_id=str(holder.id)),
        )
    return WritePlan(
        "insert",
        status="created",
        values={**row_values(org_id, item), "id": memory_id, "content_hash": stored_hash, **times},
        embed_text=imported_embed_text(item),
    )


class Stored(Protocol):
    """A stored memory as a PATCH sees it."""

    id: uuid.UUID
    namespace: str
    name: str
    content: str
    content_hash: str
    project: str | None
    agent_id: str | None
    superseded_by: uuid.UUID | None


def update_values(row: Stored, item: UpdateItem) -> dict[str, Any]:
    """The columns a PATCH changes, from its prepared fields: redacted text, the new hash,
    and a name that follows the content (a derived name is derived again from the new
    content, an explicit one is kept, redacted again: ``item.kept_name``)."""
    changes, clean = item.changes, item.clean
    values: dict[str, Any] = {}
    for key in ("name", "url", "source", "domain", "origin", "tags"):
        if key in changes:
            values[key] = getattr(clean, key)
    if "metadata" in changes:
        values["meta"] = clean.metadata
    for key in ("type", "project", "valid_at"):
        if key in changes:
            values[key] = changes[key]
    if item.expiry_changed:
        values["expires_at"] = item.expires_at
    if clean.content is not None:
        values["content"] = clean.content
        values["content_hash"] = clean.hash
        if "name" not in changes:
            values["name"] = item.kept_name
    if values.get("name") is None and "name" in values:
        values["name"] = derive_name(values.get("content", row.content))
    return values


def taken_key(row: Stored, values: dict[str, Any]) -> ContentKey | None:
    """The content key a PATCH makes its memory hold, when it changes it (content or
    project) and the memory is current: another current memory may hold it already."""
    if row.superseded_by is None and ("content" in values or "project" in values):
        return (
            row.namespace,
            values.get("project", row.project),
            row.agent_id,
            values.get("content_hash", row.content_hash),
        )
    return None


def plan_update(row: Stored, values: dict[str, Any], taken: uuid.UUID | None) -> WritePlan:
    """A PATCH of ``row`` to ``values`` (``update_values``), given ``taken``: another current
    memory holding the content key it would take (``taken_key``), if any: a ``conflict``
    naming it (it lies in the same namespace, project and diary, so within reach), else an
    ``update``, re-embedded when the name or content changes."""
    if taken is not None:
        return WritePlan(
            "conflict",
            existing_id=taken,
            error=Conflict(
                f"memory {taken} in this namespace, project and diary already has this content",
                field="content" if "content" in values else "project",
                existing_id=str(taken),
            ),
        )
    text = None
    if "content" in values or "name" in values:
        text = document_text(values.get("name", row.name), values.get("content", row.content))
    return WritePlan(
        "update", status="updated", existing_id=row.id, values=values, embed_text=text
    )


def plan_artifact_memory(
    org_id: uuid.UUID,
    *,
    artifact_id: uuid.UUID,
    namespace: str,
    project: str | None,
    name: str,
    summary: str,
    content_hash: str,
    metadata: dict[str, Any],
) -> WritePlan:
    """The memory of a stored artifact: type ``artifact``, its summary as content, found by
    relevance (the model embeds its name over its summary), hashed by the artifact's id
    (two artifacts with one summary are two memories). Always an insert: the artifact is new."""
    return WritePlan(
        "insert",
        status="created",
        values={
            "org_id": org_id,
            "namespace": namespace,
            "type": "artifact",
            "name": name,
            "content": summary,
            "content_hash": content_hash,
            "project": project,
            "source": f"artifact:{artifact_id}",
            "meta": metadata,
        },
        embed_text=f"{name}\n{summary}",
    )
