"""``CtxpackStore`` (a LangGraph BaseStore on keyed writes) against a live ``ctxpack serve``:
the store API sync and async, refusals, and LangMem's own memory tools running on it."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from ctxpack_client import AsyncClient, Client
from ctxpack_client.integrations.langgraph import CtxpackStore, MemoryRejected
from langgraph.store.base import InvalidNamespaceError
from langmem import create_manage_memory_tool, create_search_memory_tool

from tests.conftest import Key, KeyFactory

GOTCHA = "The nightly export job fails silently when the S3 bucket's lifecycle rule deletes its staging prefix."
NEWER = "The nightly export job now writes to a dedicated bucket, so lifecycle rules no longer break it."
OTHER = "Customer invoices are generated on the first business day of each month, in UTC."


def test_store_put_get_search_delete_list(cx: Client) -> None:
    store = CtxpackStore(cx)
    ns = ("gina", "ops")
    store.put(ns, "export-job", {"content": GOTCHA, "severity": "high"})
    store.put(ns, "invoices", {"content": OTHER, "severity": "low"})
    store.put(("gina",), "profile", {"content": "Gina runs the data platform team and prefers terse answers."})

    item = store.get(ns, "export-job")
    assert item is not None
    assert item.value == {"content": GOTCHA, "severity": "high"}
    assert (item.namespace, item.key) == (ns, "export-job")
    assert store.get(ns, "absent") is None

    # Putting the key again replaces it; the same content again only refreshes the value.
    store.put(ns, "export-job", {"content": NEWER, "severity": "high"})
    assert store.get(ns, "export-job").value["content"] == NEWER  # type: ignore[union-attr]
    store.put(ns, "export-job", {"content": NEWER, "severity": "medium"})
    assert store.get(ns, "export-job").value == {"content": NEWER, "severity": "medium"}  # type: ignore[union-attr]

    found = store.search(ns, query="why did the nightly export break")
    assert found[0].key == "export-job" and found[0].score is not None
    assert "invoices" not in [f.key for f in found[:1]]
    assert [f.key for f in store.search(ns, filter={"severity": "low"})] == ["invoices"]
    assert {f.key for f in store.search(("gina",))} == {"export-job", "invoices", "profile"}
    assert {f.key for f in store.search(("gina",), filter={"severity": {"$ne": "low"}}, limit=5)} == {"export-job", "profile"}
    assert [f.key for f in store.search(("gina",), filter={"severity": {"$gte": "m"}})] == ["export-job"]

    assert store.list_namespaces() == [("gina",), ("gina", "ops")]
    assert store.list_namespaces(prefix=("gina", "ops")) == [("gina", "ops")]
    assert store.list_namespaces(max_depth=1) == [("gina",)]

    store.delete(ns, "export-job")
    assert store.get(ns, "export-job") is None  # every version gone, not the previous one back
    assert [f.key for f in store.search(ns)] == ["invoices"]


def test_store_put_of_an_earlier_version_keeps_the_new_value(cx: Client) -> None:
    store = CtxpackStore(cx)
    ns = ("lena",)
    store.put(ns, "job", {"content": GOTCHA, "x": 1})
    store.put(ns, "job", {"content": NEWER, "x": 2})
    store.put(ns, "job", {"content": GOTCHA, "x": 3}, ttl=60)
    item = store.get(ns, "job", refresh_ttl=False)
    assert item is not None and item.value == {"content": GOTCHA, "x": 3}
    assert _expiry(cx, "lena", "job") is not None
    store.put(ns, "job", {"content": NEWER, "x": 4})
    assert store.get(ns, "job").value == {"content": NEWER, "x": 4}  # type: ignore[union-attr]
    assert _expiry(cx, "lena", "job") is None


def test_store_refusals(cx: Client) -> None:
    store = CtxpackStore(cx)
    with pytest.raises(MemoryRejected) as rejected:
        store.put(("gina",), "k", {"content": "ok"})
    assert rejected.value.reasons and "ctxpack refused to store" in str(rejected.value)
    assert rejected.value.reasons[0]["code"] in str(rejected.value)
    with pytest.raises(InvalidNamespaceError):
        store.put(("a", "b", "c", "d"), "k", {"content": GOTCHA})
    with pytest.raises(InvalidNamespaceError):
        store.put(("has space",), "k", {"content": GOTCHA})
    rooted = CtxpackStore(cx, root="hank")
    rooted.put(("notes",), "k", {"content": GOTCHA})
    assert cx.get_by_key("hank:notes", "k") is not None
    with pytest.raises(InvalidNamespaceError):
        rooted.put(("a", "b", "c"), "k", {"content": GOTCHA})


def test_store_keeps_redaction(cx: Client) -> None:
    store = CtxpackStore(cx)
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2
    store.put(("ivy",), "deploy", {"content": f"Deploys use the token {secret} from the vault, rotated monthly.", "token": secret})
    value = store.get(("ivy",), "deploy").value  # type: ignore[union-attr]
    assert secret not in json.dumps(value)


def _expiry(cx: Client, namespace: str, key: str) -> datetime | None:
    found = cx.get_by_key(namespace, key)
    assert found is not None
    return found.expires_at


def test_store_put_after_its_ttl_ran_out_stores_the_item_again(cx: Client, pg_url: str) -> None:
    """An item whose TTL ran out (expired, not purged yet) is gone; putting the same value
    again stores it anew rather than failing on the expired memory."""
    import psycopg

    store = CtxpackStore(cx)
    store.put(("lena",), "export", {"content": GOTCHA}, ttl=1)
    found = cx.get_by_key("lena", "export")
    assert found is not None
    with psycopg.connect(pg_url) as conn:
        conn.execute("UPDATE memories SET expires_at = now() - interval '1 second' WHERE id = %s", (found.id,))
    assert store.get(("lena",), "export") is None
    store.put(("lena",), "export", {"content": GOTCHA})
    again = store.get(("lena",), "export")
    assert again is not None and again.value == {"content": GOTCHA}


def test_store_ttl_is_written_refreshed_on_read_and_cleared(cx: Client) -> None:
    store = CtxpackStore(cx)
    assert store.supports_ttl
    ns = ("kate",)
    store.put(ns, "export", {"content": GOTCHA}, ttl=30)
    first = _expiry(cx, "kate", "export")
    assert first is not None
    assert timedelta(minutes=29) < first - datetime.now(UTC) <= timedelta(minutes=30)
    # A read without a refresh leaves it; a read with one (LangGraph's default) renews it.
    store.get(ns, "export", refresh_ttl=False)
    assert _expiry(cx, "kate", "export") == first
    time.sleep(1.1)
    store.get(ns, "export")
    renewed = _expiry(cx, "kate", "export")
    assert renewed is not None and renewed > first
    time.sleep(1.1)
    assert [f.key for f in store.search(ns, query="nightly export fails")][:1] == ["export"]
    searched = _expiry(cx, "kate", "export")
    assert searched is not None and searched > renewed
    # The same content put again without a TTL: it no longer expires.
    store.put(ns, "export", {"content": GOTCHA})
    assert _expiry(cx, "kate", "export") is None
    store.get(ns, "export")  # nothing to refresh
    assert _expiry(cx, "kate", "export") is None
    # The config's default TTL applies to a put without one.
    timed = CtxpackStore(cx, ttl={"default_ttl": 5, "refresh_on_read": False})
    timed.put(ns, "invoices", {"content": OTHER})
    short = _expiry(cx, "kate", "invoices")
    assert short is not None and short - datetime.now(UTC) <= timedelta(minutes=5)
    timed.get(ns, "invoices")
    assert _expiry(cx, "kate", "invoices") == short
    # An infinite TTL never expires; a huge one is the server's longest.
    store.put(ns, "forever", {"content": NEWER}, ttl=float("inf"))
    assert _expiry(cx, "kate", "forever") is None
    store.put(ns, "century", {"content": OTHER + " Twice."}, ttl=1e12)
    far = _expiry(cx, "kate", "century")
    assert far is not None and far - datetime.now(UTC) > timedelta(days=365 * 99)


async def test_store_reads_with_a_read_only_key_without_renewing(
    cx: Client, ctxpack_env: str, key: Key, make_key: KeyFactory
) -> None:
    store = CtxpackStore(cx)
    store.put(("lola",), "note", {"content": GOTCHA}, ttl=30)
    before = _expiry(cx, "lola", "note")
    read_only = await make_key(org=key.org, scopes=["read"])
    with Client(api_key=read_only.key) as client:
        reader = CtxpackStore(client)
        item = reader.get(("lola",), "note")  # renewing takes write: skipped, the read stands
        assert item is not None and item.value == {"content": GOTCHA}
        assert [f.key for f in reader.search(("lola",))] == ["note"]
    assert _expiry(cx, "lola", "note") == before


async def test_store_async(cx: Client) -> None:
    async with AsyncClient() as aclient:
        store = CtxpackStore(cx, async_client=aclient)
        ns = ("jack", "s1")
        await store.aput(ns, "a", {"content": GOTCHA})
        await store.aput(ns, "b", {"content": OTHER, "kind": "billing"})
        assert (await store.aget(ns, "a")).value == {"content": GOTCHA}  # type: ignore[union-attr]
        hits = await store.asearch(ns, query="nightly export fails")
        assert hits[0].key == "a"
        assert [h.key for h in await store.asearch(ns, filter={"kind": "billing"})] == ["b"]
        assert await store.alist_namespaces() == [("jack", "s1")]
        with pytest.raises(MemoryRejected):
            await store.aput(ns, "c", {"content": "ok"})
        await store.aput(ns, "t", {"content": NEWER}, ttl=10)
        first = _expiry(cx, "jack:s1", "t")
        assert first is not None
        await asyncio.sleep(1.1)
        assert (await store.aget(ns, "t")).value == {"content": NEWER}  # type: ignore[union-attr]
        renewed = _expiry(cx, "jack:s1", "t")
        assert renewed is not None and renewed > first
        await store.adelete(ns, "a")
        assert await store.aget(ns, "a") is None


def test_langmem_tools_run_on_ctxpack_store(cx: Client) -> None:
    store = CtxpackStore(cx)
    manage = create_manage_memory_tool(namespace=("memories", "{langgraph_user_id}"), store=store)
    search = create_search_memory_tool(namespace=("memories", "{langgraph_user_id}"), store=store)
    config = {"configurable": {"langgraph_user_id": "kim"}}

    created = manage.invoke({"content": GOTCHA, "action": "create"}, config=config)
    assert created.startswith("created memory ")
    memory_key = created.rsplit(" ", 1)[-1]
    assert cx.get_by_key("memories:kim", memory_key) is not None

    hits = json.loads(search.invoke({"query": "why does the nightly export fail"}, config=config))
    assert hits[0]["key"] == memory_key
    assert hits[0]["value"] == {"content": GOTCHA}
    assert hits[0]["namespace"] == ["memories", "kim"]

    updated = manage.invoke({"content": NEWER, "action": "update", "id": memory_key}, config=config)
    assert updated == f"updated memory {memory_key}"
    assert store.get(("memories", "kim"), memory_key).value == {"content": NEWER}  # type: ignore[union-attr]
    hits = json.loads(search.invoke({"query": "nightly export job bucket"}, config=config))
    assert [h["value"]["content"] for h in hits] == [NEWER]  # the old version is out of search

    # Another user's namespace is another ctxpack namespace: nothing crosses.
    assert json.loads(search.invoke({"query": "nightly export"}, config={"configurable": {"langgraph_user_id": "lee"}})) == []

    deleted = manage.invoke({"action": "delete", "id": memory_key}, config=config)
    assert deleted == f"Deleted memory {memory_key}"
    assert store.get(("memories", "kim"), memory_key) is None


async def test_langmem_tools_async(cx: Client) -> None:
    async with AsyncClient() as aclient:
        store = CtxpackStore(cx, async_client=aclient)
        manage = create_manage_memory_tool(namespace=("memories", "{langgraph_user_id}"), store=store)
        search = create_search_memory_tool(namespace=("memories", "{langgraph_user_id}"), store=store)
        config = {"configurable": {"langgraph_user_id": f"u{uuid.uuid4().hex[:8]}"}}
        created = await manage.ainvoke({"content": OTHER}, config=config)
        assert created.startswith("created memory ")
        hits = json.loads(await search.ainvoke({"query": "when are invoices generated"}, config=config))
        assert hits[0]["value"] == {"content": OTHER}
