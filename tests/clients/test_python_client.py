"""ctxpack-client against a live ``ctxpack serve``: every call, sync and async, the error
classes, retries honouring Retry-After, and the configuration from the environment."""

from __future__ import annotations

import asyncio
import json
import uuid

import httpx
import pytest
from ctxpack_client import (
    AsyncClient,
    Client,
    Conflict,
    GateRejected,
    NamespaceAccessDenied,
    NotFound,
    RateLimited,
    TransportError,
    Unauthorized,
    ValidationError,
)
from ctxpack_client.models import RememberRequest

from tests.conftest import Key, KeyFactory

FACT = "The billing service retries webhooks three times with exponential backoff."


def test_every_sync_call(ctxpack_env: str, key: Key) -> None:
    with Client() as client:  # CTXPACK_URL / CTXPACK_API_KEY
        me = client.whoami()
        assert me.org_id == str(key.org_id)
        assert me.max_batch_items == 500

        stored = client.remember(FACT, "alice", type="procedure", key="webhooks")
        assert stored.status == "created" and stored.key == "webhooks"
        assert client.remember(FACT, "alice", type="procedure", key="webhooks").status == "duplicate"
        newer = client.remember(FACT.replace("three", "five"), "alice", type="procedure", key="webhooks")
        assert newer.status == "updated" and newer.superseded_id == stored.id
        found = client.get_by_key("alice", "webhooks")
        assert found is not None and found.id == newer.id
        assert client.get_by_key("alice", "absent") is None

        pack = client.context("how are webhooks retried", "alice:s2")
        assert [i.id for i in pack.items] == [newer.id]
        assert "five times" in pack.markdown
        assert client.wake("alice:s2").layer == "wake"

        got = client.get(newer.id)
        assert got.related[0].id == stored.id
        changed = client.update(newer.id, tags=["billing"])
        assert changed.tags == ["billing"]

        art = client.artifacts.create("alice", "retry table", {"tries": 5, "base_s": 2})
        assert client.artifacts.get(art.artifact_id, fields=["tries"]).fields == {"tries": 5}

        rows = client.audit.list(action="context", limit=5)
        assert rows.items and rows.items[0].action == "context"
        event = client.audit.get(rows.items[0].id)
        assert event.details
        replay = client.audit.replay(pack.audit_id)  # type: ignore[arg-type]
        assert replay.replayed == pack.audit_id
        assert len(list(client.audit.iter(limit=2))) >= 5

        assert client.forget(art.memory_id).deleted
        with pytest.raises(NotFound):
            client.get(art.memory_id)
        other = client.artifacts.create("alice", "backoff table", {"tries": 3})
        gone = client.artifacts.delete(other.artifact_id)
        assert (gone.deleted, gone.memory_id) == (True, other.memory_id)
        with pytest.raises(NotFound):
            client.artifacts.get(other.artifact_id)


def test_memories_iterator_pages_by_itself(ctxpack_env: str) -> None:
    with Client() as client:
        result = client.remember_many(
            [{"namespace": "pager", "content": f"Fact number {n}: the pager rotation changes every {n + 2} days."} for n in range(25)]
        )
        assert result.created == 25
        seen = list(client.memories("pager", page_size=7))
        assert len(seen) == 25
        assert len({m.id for m in seen}) == 25


def test_remember_many_chunks_concurrently_with_outcomes_in_order(ctxpack_env: str) -> None:
    items: list[RememberRequest | dict[str, object]] = [
        RememberRequest(namespace="bulk", content=f"Service {n} owns the {n}th shard of the user table.", key=f"svc-{n}")
        for n in range(11)
    ]
    items.insert(4, {"namespace": "bulk", "content": "ok"})
    with Client() as client:
        result = client.remember_many(items, chunk_size=3, concurrency=3)
        assert [i.index for i in result.items] == list(range(12))
        assert [i.status for i in result.items].count("created") == 11
        assert result.items[4].status == "rejected" and result.items[4].reasons
        assert (result.created, result.rejected, len(result.audit_ids)) == (11, 1, 4)
        again = client.remember_many(items, chunk_size=5)
        assert again.duplicates == 11


def test_remember_many_whole_chunk_error_names_the_input_item(ctxpack_env: str) -> None:
    items = [{"namespace": "bulk", "content": f"Queue {n} drains into the archive bucket nightly."} for n in range(5)]
    items[3]["related"] = [{"id": str(uuid.uuid4())}]
    with Client() as client, pytest.raises(ValidationError) as caught:
        client.remember_many(items, chunk_size=2)
    assert caught.value.field == "items.3.related.0.id"
    assert caught.value.partial.created == 3  # chunks [0, 1] and [4]; [2, 3] refused whole  # type: ignore[attr-defined]


def test_errors_map_to_classes(ctxpack_env: str, make_key: KeyFactory, key: Key) -> None:
    with Client() as client:
        with pytest.raises(GateRejected) as gated:
            client.remember("ok", "alice")
        assert gated.value.status == 422 and gated.value.field == "content"
        assert gated.value.reason_codes and gated.value.reasons[0]["hint"]
        client.remember(FACT, "alice", key="one")
        with pytest.raises(Conflict):
            client.remember(FACT, "alice", key="two")
        with pytest.raises(ValidationError) as invalid:
            client.remember(FACT, "alice", key="ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2)
        assert invalid.value.field == "key"
        with pytest.raises(NotFound):
            client.get(uuid.uuid4())
    with Client(api_key="ctx_not-a-key") as bad, pytest.raises(Unauthorized):
        bad.whoami()


async def test_namespace_denied_is_its_class(ctxpack_server: str, make_key: KeyFactory) -> None:
    limited = await make_key(namespaces=["bob"])
    async with AsyncClient(ctxpack_server, limited.key) as client:
        with pytest.raises(NamespaceAccessDenied) as denied:
            await client.remember(FACT, "alice")
        assert denied.value.field == "namespace"


async def test_every_async_call(ctxpack_env: str) -> None:
    async with AsyncClient() as client:
        stored = await client.remember(FACT, "carol", type="procedure", key="webhooks")
        assert stored.status == "created"
        many = await client.remember_many(
            [{"namespace": "carol", "content": f"Region {n} fails over to region {n + 1} within a minute."} for n in range(7)],
            chunk_size=2,
        )
        assert many.created == 7 and [i.index for i in many.items] == list(range(7))
        assert len([m async for m in client.memories("carol", page_size=3)]) == 8
        pack = await client.context("how are webhooks retried", "carol")
        assert stored.id in [i.id for i in pack.items]
        assert (await client.wake("carol")).layer == "wake"
        assert (await client.get_by_key("carol", "webhooks")).id == stored.id  # type: ignore[union-attr]
        assert (await client.update(stored.id, tags=["x"])).tags == ["x"]
        art = await client.artifacts.create("carol", "table", {"a": 1})
        assert (await client.artifacts.get(art.artifact_id)).body == {"a": 1}
        assert (await client.artifacts.delete(art.artifact_id)).deleted
        rows = await client.audit.list(action="context")
        assert (await client.audit.get(rows.items[0].id)).action == "context"
        assert (await client.audit.replay(pack.audit_id)).replayed == pack.audit_id  # type: ignore[arg-type]
        assert len([r async for r in client.audit.iter(limit=3)]) >= 5
        assert (await client.whoami()).scopes
        assert (await client.forget(stored.id)).deleted


def test_retries_honour_retry_after_then_give_up() -> None:
    calls: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) < 3:
            return httpx.Response(503, json={"error": {"code": "unavailable", "message": "busy"}}, headers={"Retry-After": "0"})
        return httpx.Response(200, json={"org_id": "o", "key_id": "k", "key_name": "n", "scopes": [], "projects": [], "namespace_prefixes": []})

    slept: list[float] = []
    import ctxpack_client._client as impl

    original = impl.time.sleep
    impl.time.sleep = slept.append  # type: ignore[assignment]
    try:
        client = Client("http://ctxpack.test", "k", http_client=httpx.Client(transport=httpx.MockTransport(handler)))
        assert client.whoami().org_id == "o"
        assert len(calls) == 3 and slept == [0.0, 0.0]

        def limited(request: httpx.Request) -> httpx.Response:
            return httpx.Response(429, json={"error": {"code": "rate_limited", "message": "slow down", "retry_after": 7}}, headers={"Retry-After": "7"})

        slept.clear()
        client = Client("http://ctxpack.test", "k", max_retries=2, max_backoff=5,
                        http_client=httpx.Client(transport=httpx.MockTransport(limited)))
        with pytest.raises(RateLimited) as caught:
            client.whoami()
        assert caught.value.retry_after == 7
        assert slept == [5, 5]  # Retry-After, capped at max_backoff
    finally:
        impl.time.sleep = original  # type: ignore[assignment]


@pytest.mark.parametrize("concurrent", [False, True])
def test_remember_many_keeps_what_was_stored_when_a_chunk_times_out(concurrent: bool) -> None:
    """A chunk with no answer raises TransportError after every chunk has run, with
    ``partial`` holding the chunks that were stored (sync and async alike)."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/whoami":
            return httpx.Response(200, json={"org_id": "o", "key_id": "k", "key_name": "n", "scopes": [],
                                             "projects": [], "namespace_prefixes": []})
        items = json.loads(request.content)["items"]
        if items[0]["content"].startswith("Fact 2"):
            raise httpx.ReadTimeout("slow", request=request)
        results = [{"index": i, "status": "created", "id": str(uuid.uuid4())} for i in range(len(items))]
        return httpx.Response(200, json={"items": results, "created": len(items), "duplicates": 0, "rejected": 0})

    items = [{"namespace": "alice", "content": f"Fact {n} about the billing service retries."} for n in range(5)]
    if concurrent:
        async def run() -> None:
            transport = httpx.MockTransport(handler)
            async with AsyncClient("http://ctxpack.test", "k", http_client=httpx.AsyncClient(transport=transport)) as client:
                await client.remember_many(items, chunk_size=2)

        with pytest.raises(TransportError) as caught:
            asyncio.run(run())
    else:
        client = Client("http://ctxpack.test", "k", http_client=httpx.Client(transport=httpx.MockTransport(handler)))
        with pytest.raises(TransportError) as caught:
            client.remember_many(items, chunk_size=2)
    partial = caught.value.partial  # type: ignore[attr-defined]
    assert partial.created == 3 and [i.index for i in partial.items] == [0, 1, 4]


def test_unreachable_server_is_a_transport_error() -> None:
    with Client("http://127.0.0.1:9", "k", max_retries=1, backoff=0.01) as client, pytest.raises(TransportError):
        client.whoami()


def test_url_and_key_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXPACK_URL", "http://example.test:9000/")
    monkeypatch.setenv("CTXPACK_API_KEY", "ctx_env")
    client = Client()
    client.close()
    assert client.config.base_url == "http://example.test:9000"
    assert client.config.headers()["Authorization"] == "Bearer ctx_env"
    assert Client("http://other.test", "ctx_arg").config.api_key == "ctx_arg"


@pytest.mark.parametrize("bad", ["../namespaces/alice", "..%2Fnamespaces%2Falice", "x/../../v1/keys", ""])
async def test_ids_are_checked_before_any_request(bad: str) -> None:
    """Review 2: ``forget("../namespaces/X")`` erased namespace X (the id went into the URL
    path unchecked). Every id is now a UUID or a ValidationError naming it, and nothing is
    sent."""
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(str(request.url))
        return httpx.Response(200, json={})

    client = Client("http://ctxpack.test", "k", http_client=httpx.Client(transport=httpx.MockTransport(handler)))
    for call, field in [
        (lambda: client.forget(bad), "memory_id"),
        (lambda: client.get(bad), "memory_id"),
        (lambda: client.update(bad, name="x"), "memory_id"),
        (lambda: client.artifacts.get(bad), "artifact_id"),
        (lambda: client.artifacts.delete(bad), "artifact_id"),
        (lambda: client.audit.get(bad), "audit_id"),
        (lambda: client.audit.replay(bad), "audit_id"),
    ]:
        with pytest.raises(ValidationError) as caught:
            call()
        assert caught.value.field == field
    aclient = AsyncClient(
        "http://ctxpack.test", "k", http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler))
    )
    with pytest.raises(ValidationError):
        await aclient.forget(bad)
    with pytest.raises(ValidationError):
        await aclient.artifacts.delete(bad)
    assert sent == []
