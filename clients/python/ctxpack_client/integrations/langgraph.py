"""``CtxpackStore``: a LangGraph ``BaseStore`` whose items are ctxpack memories written with a
key, so ctxpack's write gate and redaction apply to everything an agent puts in it.

Namespaces. A LangGraph namespace tuple of 1-3 labels is a ctxpack namespace joined by ``:``:
``("alice",)`` is ``alice``, ``("memories", "alice")`` is ``memories:alice`` (a LangMem
namespace), ``("alice", "s1", "t1")`` is ``alice:s1:t1``. With ``root="acme"`` every tuple is
put under it (``("memories", "alice")`` becomes ``acme:memories:alice``). Refused, with
``InvalidNamespaceError``: more than 3 labels (with the root), and labels outside
``[A-Za-z0-9_-]{1,64}`` (LangGraph already refuses ``.``).

Items. ``put(ns, key, value)`` remembers ``value["content"]`` (or ``text_field``) under
``key``; the rest of the value is kept in the memory's metadata (``langgraph.value``), so
``get`` returns the value as put, after redaction. A value without that text field is stored
as its JSON. Putting a key again replaces the memory (ctxpack keeps the old one as history,
out of packs); the same content again (or an earlier version's content) only refreshes
the rest of the value. ``put(..., None)``
and ``delete`` erase the key's memory and its earlier versions. ``index`` is ignored:
ctxpack always indexes the text.

TTL (``supports_ttl``). ``put(..., ttl=minutes)`` (or the store's ``ttl`` config's
``default_ttl``) writes the memory with ``ttl_seconds``: from then on it is in no read or pack,
and the server purges it. The TTL is kept in the metadata, and a ``get`` or ``search`` with
``refresh_ttl`` (LangGraph's default; ``refresh_on_read`` in the config) sets each returned
item's expiry to that TTL from now again (``PATCH ttl_seconds``). A put without a TTL
stores an item that never expires.

Refused writes. A value the write gate refuses raises ``MemoryRejected`` (a ``ValueError``
naming the reason codes and hints); a key that looks like a secret raises ``ValidationError``.

Search. With a ``query``, ``search`` asks ctxpack for a context pack (``layer="recall"``) on
the namespace and keeps the items within it (a pack also draws on the namespace's ancestors,
never on its children), with their scores. Without one, it lists the namespace's subtree,
newest first. ``filter`` matches the item's value (``{"field": v}``, or ``{"field": {"$eq" |
"$ne" | "$gt" | "$gte" | "$lt" | "$lte": v}}``), checked on the client over the page it got.
``list_namespaces`` reads the namespaces of the memories within reach.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from ctxpack_client._client import AsyncClient, Client
from ctxpack_client.errors import Forbidden, GateRejected
from ctxpack_client.models import ContextItem, MemoryOut, RememberRequest

_LABEL = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")
META = "langgraph"
# A put whose text a current or earlier version of the key already holds is answered by
# that memory (``duplicate``, or ``updated`` when an earlier version comes back), which
# keeps the metadata and expiry it was written with: the store rewrites both.
# A search result with its memory id and metadata (for the TTL refresh).
_Picked = tuple[SearchItem, uuid.UUID, dict[str, Any]]


class MemoryRejected(ValueError):
    """ctxpack's write gate refused a put; ``reasons`` is ``[{code, hint}]``."""

    def __init__(self, namespace: tuple[str, ...], key: str, error: GateRejected) -> None:
        self.reasons = error.reasons
        hints = "; ".join(f"{r.get('code')}: {r.get('hint')}" for r in self.reasons)
        super().__init__(f"ctxpack refused to store {namespace}/{key}: {hints}")


class CtxpackStore(BaseStore):
    """A LangGraph store on ctxpack. See the module docstring for the mapping.

    Args:
        client: sync client (default: from CTXPACK_URL / CTXPACK_API_KEY).
        async_client: async client for the ``a*`` methods (default: built like ``client``).
        root: a ctxpack namespace every tuple goes under (e.g. the user, ``acme``).
        text_field: the value's field that is the memory's content.
        memory_type: the ctxpack type of stored items.
        ttl: LangGraph's TTL config (``default_ttl`` in minutes, ``refresh_on_read``).
    """

    supports_ttl = True

    def __init__(
        self,
        client: Client | None = None,
        *,
        async_client: AsyncClient | None = None,
        root: str | None = None,
        text_field: str = "content",
        memory_type: str = "domain",
        ttl: TTLConfig | None = None,
    ) -> None:
        self.client = client or Client()
        self.ttl_config = ttl
        self._async = async_client
        self.root = tuple(root.split(":")) if root else ()
        for label in self.root:
            if not _LABEL.match(label):
                raise InvalidNamespaceError(f"root label {label!r} is not [A-Za-z0-9_-]{{1,64}}")
        self.text_field = text_field
        self.memory_type = memory_type

    @property
    def aclient(self) -> AsyncClient:
        if self._async is None:
            config = self.client.config
            self._async = AsyncClient(config.base_url, config.api_key, timeout=config.timeout)
        return self._async

    # --- namespaces ---------------------------------------------------------------------------

    def to_ctxpack(self, namespace: Sequence[str]) -> str:
        """A LangGraph namespace tuple as a ctxpack namespace (raises InvalidNamespaceError)."""
        labels = (*self.root, *namespace)
        if not namespace or len(labels) > 3:
            raise InvalidNamespaceError(
                f"{tuple(namespace)}: ctxpack namespaces are user[:session[:task]], so 1-"
                f"{3 - len(self.root)} labels here"
            )
        for label in namespace:
            if not isinstance(label, str) or not _LABEL.match(label):
                raise InvalidNamespaceError(
                    f"{tuple(namespace)}: label {label!r} is not 1-64 of [A-Za-z0-9_-]"
                )
        return ":".join(labels)

    def to_langgraph(self, namespace: str) -> tuple[str, ...] | None:
        labels = tuple(namespace.split(":"))
        if labels[: len(self.root)] != self.root or len(labels) == len(self.root):
            return None
        return labels[len(self.root):]

    # --- values ---------------------------------------------------------------------------------

    def _request(
        self, namespace: tuple[str, ...], key: str, value: dict[str, Any], ttl: float | None
    ) -> RememberRequest:
        text = value.get(self.text_field)
        meta: dict[str, Any]
        if isinstance(text, str):
            rest = {k: v for k, v in value.items() if k != self.text_field}
            meta = {"key": key, "text_field": self.text_field, "value": rest}
        else:
            text = json.dumps(value, sort_keys=True, default=str)
            meta = {"key": key, "text_field": None, "value": value}
        if ttl is not None and not math.isfinite(ttl):
            ttl = None  # an infinite TTL: the item never expires
        if ttl is not None:
            meta["ttl_minutes"] = ttl
        return RememberRequest(
            content=text,
            namespace=self.to_ctxpack(namespace),
            key=key,
            type=self.memory_type,
            metadata={META: meta},
            ttl_seconds=None if ttl is None else _seconds(ttl),
        )

    @staticmethod
    def _expiry(req: RememberRequest) -> dict[str, Any]:
        """The PATCH fields that give an existing memory ``req``'s expiry."""
        return {"ttl_seconds": req.ttl_seconds} if req.ttl_seconds else {"expires_at": None}

    @staticmethod
    def _refresh(
        op: GetOp | SearchOp, found: Iterable[tuple[uuid.UUID, dict[str, Any]]]
    ) -> list[tuple[uuid.UUID, int]]:
        """The (id, seconds) of each item ``op`` reads whose TTL a read refreshes."""
        if not op.refresh_ttl:
            return []
        out = []
        for memory_id, metadata in found:
            meta = metadata.get(META)
            minutes = meta.get("ttl_minutes") if isinstance(meta, dict) else None
            if isinstance(minutes, int | float) and minutes > 0:
                out.append((memory_id, _seconds(minutes)))
        return out

    def _value(self, content: str, metadata: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
        meta = metadata.get(META)
        if not isinstance(meta, dict):
            return None, {self.text_field: content}
        rest = dict(meta.get("value") or {})
        field = meta.get("text_field")
        if field:
            rest[field] = content
        return meta.get("key"), rest

    def _item(self, memory: MemoryOut) -> Item | None:
        namespace = self.to_langgraph(memory.namespace)
        if namespace is None:
            return None
        key, value = self._value(memory.content, memory.metadata)
        return Item(
            value=value, key=memory.key or key or str(memory.id), namespace=namespace,
            created_at=memory.created_at, updated_at=memory.updated_at,
        )

    def _search_item(self, item: ContextItem) -> SearchItem | None:
        namespace = self.to_langgraph(item.namespace)
        if namespace is None:
            return None
        key, value = self._value(item.content, item.metadata)
        now = datetime.now().astimezone()
        return SearchItem(
            namespace=namespace, key=key or str(item.id), value=value,
            created_at=item.quality.created_at or now, updated_at=item.quality.updated_at or now,
            score=item.score,
        )

    # --- operations, sync -------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._run(op) for op in ops]

    def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            found = self.client.get_by_key(self.to_ctxpack(op.namespace), op.key)
            if found is None:
                return None
            for memory_id, seconds in self._refresh(op, [(found.id, found.metadata)]):
                with contextlib.suppress(Forbidden):  # a read-only key reads without renewing
                    found = self.client.update(memory_id, ttl_seconds=seconds)
            return self._item(found)
        if isinstance(op, PutOp):
            if op.value is None:
                self._delete(op.namespace, op.key)
            else:
                self._put(op.namespace, op.key, dict(op.value), op.ttl)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._namespaces(op, [m.namespace for m in self.client.memories(self._scope(()))])
        raise NotImplementedError(f"unsupported operation {type(op).__name__}")

    def _put(
        self, namespace: tuple[str, ...], key: str, value: dict[str, Any], ttl: float | None
    ) -> None:
        req = self._request(namespace, key, value, ttl)
        try:
            result = self.client.remember(req)
        except GateRejected as exc:
            raise MemoryRejected(namespace, key, exc) from exc
        if result.status != "created":  # an existing memory answered: see the note at META
            self.client.update(result.id, metadata=req.metadata, **self._expiry(req))

    def _delete(self, namespace: tuple[str, ...], key: str) -> None:
        ns = self.to_ctxpack(namespace)
        # Forgetting a key's memory brings its previous version back: forget them all.
        while (found := self.client.get_by_key(ns, key)) is not None:
            self.client.forget(found.id)

    def _scope(self, prefix: tuple[str, ...]) -> str:
        if prefix:
            return self.to_ctxpack(prefix) + ":*"
        return ":".join(self.root) + ":*" if self.root else "*"

    def _search(self, op: SearchOp) -> list[SearchItem]:
        if op.query:
            pack = self.client.context(
                op.query, self.to_ctxpack(op.namespace_prefix), limit=min(50, op.offset + op.limit)
            )
            picked = self._select_ranked(op, pack.items)
        else:
            picked = self._select_listed(op, self.client.memories(self._scope(op.namespace_prefix)))
        for memory_id, seconds in self._refresh(op, [(m, meta) for _, m, meta in picked]):
            with contextlib.suppress(Forbidden):  # a read-only key reads without renewing
                self.client.update(memory_id, ttl_seconds=seconds)
        return [item for item, _, _ in picked]

    # --- operations, async ------------------------------------------------------------------------

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return list(await asyncio.gather(*(self._arun(op) for op in ops)))

    async def _arun(self, op: Op) -> Result:
        client = self.aclient
        if isinstance(op, GetOp):
            found = await client.get_by_key(self.to_ctxpack(op.namespace), op.key)
            if found is None:
                return None
            for memory_id, seconds in self._refresh(op, [(found.id, found.metadata)]):
                with contextlib.suppress(Forbidden):  # a read-only key reads without renewing
                    found = await client.update(memory_id, ttl_seconds=seconds)
            return self._item(found)
        if isinstance(op, PutOp):
            ns = self.to_ctxpack(op.namespace)
            if op.value is None:
                while (old := await client.get_by_key(ns, op.key)) is not None:
                    await client.forget(old.id)
                return None
            req = self._request(op.namespace, op.key, dict(op.value), op.ttl)
            try:
                result = await client.remember(req)
            except GateRejected as exc:
                raise MemoryRejected(op.namespace, op.key, exc) from exc
            if result.status != "created":  # an existing memory answered: see the note at META
                await client.update(result.id, metadata=req.metadata, **self._expiry(req))
            return None
        if isinstance(op, SearchOp):
            if op.query:
                pack = await client.context(
                    op.query, self.to_ctxpack(op.namespace_prefix), limit=min(50, op.offset + op.limit)
                )
                picked = self._select_ranked(op, pack.items)
            else:
                listed = [m async for m in client.memories(self._scope(op.namespace_prefix))]
                picked = self._select_listed(op, listed)
            for memory_id, seconds in self._refresh(op, [(m, meta) for _, m, meta in picked]):
                with contextlib.suppress(Forbidden):  # a read-only key reads without renewing
                    await client.update(memory_id, ttl_seconds=seconds)
            return [item for item, _, _ in picked]
        if isinstance(op, ListNamespacesOp):
            names = [m.namespace async for m in client.memories(self._scope(()))]
            return self._namespaces(op, names)
        raise NotImplementedError(f"unsupported operation {type(op).__name__}")

    # --- selection --------------------------------------------------------------------------------

    def _within(self, op: SearchOp, namespace: tuple[str, ...]) -> bool:
        return namespace[: len(op.namespace_prefix)] == tuple(op.namespace_prefix)

    def _select_ranked(self, op: SearchOp, items: list[ContextItem]) -> list[_Picked]:
        found = [(self._search_item(i), i.id, i.metadata) for i in items]
        picked = [
            (s, mid, meta) for s, mid, meta in found
            if s and self._within(op, s.namespace) and _matches(s.value, op.filter)
        ]
        return picked[op.offset: op.offset + op.limit]

    def _select_listed(self, op: SearchOp, memories: Iterable[MemoryOut]) -> list[_Picked]:
        out: list[_Picked] = []
        skipped = 0
        for memory in memories:
            if memory.superseded_by is not None:
                continue  # an earlier version of a key: history, not an item
            item = self._item(memory)
            if item is None or not self._within(op, item.namespace) or not _matches(item.value, op.filter):
                continue
            if skipped < op.offset:
                skipped += 1
                continue
            found = SearchItem(item.namespace, item.key, item.value, item.created_at, item.updated_at)
            out.append((found, memory.id, memory.metadata))
            if len(out) >= op.limit:
                break
        return out

    def _namespaces(self, op: ListNamespacesOp, names: Iterable[str]) -> list[tuple[str, ...]]:
        found: set[tuple[str, ...]] = set()
        for name in names:
            ns = self.to_langgraph(name)
            if ns is None:
                continue
            if op.max_depth is not None:
                ns = ns[: op.max_depth]
            if all(_condition(ns, c.match_type, tuple(c.path)) for c in op.match_conditions or ()):
                found.add(ns)
        return sorted(found)[op.offset: op.offset + op.limit]


# The longest TTL the server takes (ttl_seconds, 100 years).
MAX_TTL_SECONDS = 100 * 366 * 86400


def _seconds(minutes: float) -> int:
    """LangGraph's TTL (minutes) as ctxpack's ttl_seconds: at least 1, at most the server's
    longest."""
    if minutes * 60 >= MAX_TTL_SECONDS:
        return MAX_TTL_SECONDS
    return max(1, math.ceil(minutes * 60))


def _condition(ns: tuple[str, ...], kind: str, path: tuple[str, ...]) -> bool:
    if len(path) > len(ns):
        return False
    part = ns[: len(path)] if kind == "prefix" else ns[len(ns) - len(path):]
    return all(p == "*" or p == n for p, n in zip(path, part, strict=True))


_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": lambda a, b: a == b,
    "$ne": lambda a, b: a != b,
    "$gt": lambda a, b: a is not None and a > b,
    "$gte": lambda a, b: a is not None and a >= b,
    "$lt": lambda a, b: a is not None and a < b,
    "$lte": lambda a, b: a is not None and a <= b,
}


def _matches(value: dict[str, Any], filter: dict[str, Any] | None) -> bool:
    for field, wanted in (filter or {}).items():
        have = value.get(field)
        if isinstance(wanted, dict) and wanted and all(k in _OPS for k in wanted):
            try:
                if not all(_OPS[k](have, v) for k, v in wanted.items()):
                    return False
            except TypeError:
                return False
        elif have != wanted:
            return False
    return True
