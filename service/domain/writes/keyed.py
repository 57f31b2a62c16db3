"""Keyed writes: ``remember`` with a ``key`` names the memory, so a client can write "the
memory called X" again and again and get one current memory.

The rules, for a write of content C under key K in namespace N (K is unique among the current
memories of an org's namespace; superseded versions keep K as history). "A copy of C" is looked
for only within the write's duplicate reach (store.memories: N, the write's project or none,
its agent diary or none, within the API key's projects), like an exact duplicate without a key,
so a keyed write never learns of a memory outside the key's reach:

- K names no current memory, and there is no copy of C: the memory is **created** under K.
- K names a current memory with the same content C: **duplicate**, its id comes back and
  nothing changes.
- K names a current memory with other content, and there is no copy of C: the new memory is
  stored under K and the old one is superseded by it (kept, linked by a ``supersedes`` edge,
  out of packs): **updated**, with ``superseded_id``.
- A current copy of C with no key, or an older version of K with C: that memory takes K (and
  becomes current again), the current holder of K, if any, is superseded by it: **updated**;
  with no holder it is **duplicate**. When the API key may not write that copy (a shared
  memory, for a key limited to projects) a new memory is stored instead.
- A current copy of C under another key: 409 ``conflict`` (field ``content``) naming it (it is
  within the key's reach); the key's memory is left as it was.
- A superseded copy of C that is not a version of K is history: it does not hold C (only
  current memories do, migration 0003), so the write stores a new memory.
- K belongs to a project outside the API key's reach: 409 ``conflict`` naming no id. K held by
  a memory the key may read but not write (shared, for a key limited to projects): 403, as for
  any supersession of such a memory.

Keyed writes of one (org, namespace, key) are serialized by a transaction-scoped advisory lock
(store), so two concurrent writers of a key never both create it.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from service.errors import Conflict, SharedMemoryReadOnly
from service.store.memories import Holder


@dataclass(frozen=True)
class KeyedPlan:
    """What one keyed write does.

    ``insert``: store a new memory under the key. ``claim``: give the key to ``existing_id``
    (an exact copy of the content) and make it current. ``duplicate``: nothing to do.
    ``superseded_id``: the key's current memory, to supersede by the result."""

    action: Literal["insert", "claim", "duplicate"]
    existing_id: uuid.UUID | None = None
    superseded_id: uuid.UUID | None = None
    revived: bool = False

    @property
    def status(self) -> str:
        if self.action == "insert":
            return "updated" if self.superseded_id else "created"
        if self.action == "claim" and (self.superseded_id or self.revived):
            return "updated"
        return "duplicate"


def in_reach(holder: Holder, key_projects: Sequence[str]) -> bool:
    """Read reach: a key limited to projects reaches those projects and project-less memories."""
    return not key_projects or holder.project is None or holder.project in key_projects


def in_write_reach(holder: Holder, key_projects: Sequence[str]) -> bool:
    """Write reach: a key limited to projects writes only into those projects."""
    return not key_projects or (holder.project is not None and holder.project in key_projects)


def plan_keyed_write(
    key: str,
    content_hash: str,
    current: Holder | None,
    same_content: Holder | None,
    key_projects: Sequence[str],
    field_prefix: str = "",
    *,
    project: str | None = None,
    agent_id: str | None = None,
) -> KeyedPlan:
    """Apply the module's rules to one write.

    Args:
        key: the write's key.
        content_hash: the hash of its (redacted) content.
        current: the current memory holding ``key`` in the namespace, if any.
        same_content: the memory with this content hash within the write's duplicate reach,
            if any (a current one first, then a version of ``key``, then the newest).
        key_projects: the API key's project limits (empty: all projects).
        field_prefix: ``items.3.`` in a batch, to name the field of a conflict.
        project: the write's project (None: shared).
        agent_id: the write's agent diary (None: none).

    Raises:
        Conflict: the content is held under another key, or a memory involved is out of reach.
        SharedMemoryReadOnly: the key's memory is shared and the API key is limited to projects.
    """
    plan = _plan(key, content_hash, current, same_content, key_projects, field_prefix)
    if current is not None and plan.superseded_id is not None and plan.action != "duplicate":
        successor = same_content if plan.action == "claim" else None
        new_project = successor.project if successor is not None else project
        new_agent = successor.agent_id if successor is not None else agent_id
        if not (
            (new_project is None or new_project == current.project)
            and (new_agent is None or new_agent == current.agent_id)
        ):
            raise Conflict(
                "this key names a memory of another project or agent diary in this namespace: "
                "replacing it would hide it from readers who cannot read this one; write it "
                "shared or in that memory's project, in no diary or in that memory's",
                field=f"{field_prefix}key",
            )
    return plan


def _plan(
    key: str,
    content_hash: str,
    current: Holder | None,
    same_content: Holder | None,
    key_projects: Sequence[str],
    field_prefix: str,
) -> KeyedPlan:
    if current is not None and not in_reach(current, key_projects):
        raise Conflict(
            "this key names a memory outside this API key's projects", field=f"{field_prefix}key"
        )
    if current is not None and current.content_hash == content_hash:
        return KeyedPlan("duplicate", existing_id=current.id)
    if current is not None and not in_write_reach(current, key_projects):
        raise SharedMemoryReadOnly(f"{field_prefix}key")
    superseded = current.id if current is not None else None
    if same_content is None:
        return KeyedPlan("insert", superseded_id=superseded)
    if not in_reach(same_content, key_projects):
        # Not reached with a duplicate-reach probe; never name such a memory.
        raise Conflict(
            "this content is already stored in the namespace, outside this API key's projects",
            field=f"{field_prefix}content",
        )
    is_current = same_content.superseded_by is None
    if same_content.key == key or (same_content.key is None and is_current):
        if not in_write_reach(same_content, key_projects):
            return KeyedPlan("insert", superseded_id=superseded)
        return KeyedPlan(
            "claim",
            existing_id=same_content.id,
            superseded_id=superseded,
            revived=not is_current,
        )
    if not is_current:
        # History holds no content (the unique index covers current memories only).
        return KeyedPlan("insert", superseded_id=superseded)
    raise Conflict(
        f"memory {same_content.id} in this namespace already holds this content under another key",
        field=f"{field_prefix}content",
        existing_id=str(same_content.id),
    )
