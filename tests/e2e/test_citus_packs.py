"""On Citus, where retrieval is exact (scopes under the exact-scan threshold), a pack is the
pack one node gives: same items, same order, same scores, same markdown.

The cluster's store (the suite's database under ``make test-citus``) is seeded through the
API, exported with its vectors and imported into a one-node embedded PostgreSQL (ids and
times kept); then the same goals, over every layer, retrieval mode and several intents,
run on both. Skipped when the suite's database is not a Citus coordinator.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from fastapi import FastAPI

from bench.seed import memories
from service.app import create_app
from service.domain import keys as key_service
from service.embedding.fake import FakeEmbedder
from service.lifecycle.local import LocalResources
from service.lifecycle.transfer import export_store, import_store
from service.resources import open_resources
from service.store.database import (
    ensure_database,
    libpq_url,
    start_embedded,
    upgrade,
    with_database,
)
from tests.conftest import Key, make_settings

MEMORIES = 150
USERS = 3
GOALS = 40


def _is_citus(url: str) -> bool:
    with psycopg.connect(libpq_url(url)) as conn:
        return conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone() is not None


@pytest.fixture(scope="module")
def one_node() -> str:
    """A one-node embedded PostgreSQL of this module's own, migrated."""
    root = Path(tempfile.mkdtemp(prefix="ctxpack-one-node-"))
    root.chmod(0o755)
    server = start_embedded(root, cleanup_mode="delete")
    ensure_database(server.get_uri(), "one_node")
    url = str(with_database(server.get_uri(), "one_node"))
    upgrade(url)
    return url


@contextlib.asynccontextmanager
async def _resources(url: str) -> AsyncIterator[LocalResources]:
    async with open_resources(
        make_settings(url), database_url=url, embedder=FakeEmbedder(), listen=False
    ) as res:
        yield res


@contextlib.asynccontextmanager
async def _client(url: str) -> AsyncIterator[httpx.AsyncClient]:
    application: FastAPI = create_app(
        make_settings(url, audit_prune_interval_seconds=0, expiry_purge_interval_seconds=0),
        embedder=FakeEmbedder(),
        database_url=url,
    )
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            client.app = application  # type: ignore[attr-defined]
            yield client


def _calls(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """GOALS context calls: goals from stored texts' words, over the users' namespaces,
    cycling through layers, retrieval modes and intents."""
    layers = itertools.cycle(["recall", "deep_search", "wake", "recall"])
    modes = itertools.cycle(["hybrid", "hybrid", "lexical", "vector"])
    intents = itertools.cycle(["general", "debug", "build", "decide", "learn"])
    calls = []
    for item in items[: GOALS * 3 : 3]:
        words = item["content"].split()
        goal = " ".join(words[2:9])
        namespace = item["namespace"] if ":" in item["namespace"] else f"{item['namespace']}:s1"
        calls.append(
            {"goal": goal, "namespace": namespace, "layer": next(layers),
             "retrieval": next(modes), "intent": next(intents)}
        )  # fmt: skip
    return calls


async def _packs(client: httpx.AsyncClient, key: str, calls: list[dict[str, Any]]) -> list[Any]:
    out = []
    for call in calls:
        r = await client.post("/v1/context", json=call, headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 200, (call, r.text)
        body = r.json()
        items = [
            (i["id"], i["score"], i["reason"], [x["id"] for x in i.get("related", [])])
            for s in body["sections"]
            for i in s["items"]
        ]
        out.append((call, items, body["markdown"], body.get("gated_out")))
    return out


async def test_exact_scope_packs_equal_one_nodes(
    client: httpx.AsyncClient, key: Key, pg_url: str, one_node: str, tmp_path: Path
) -> None:
    if not _is_citus(pg_url):
        pytest.skip("the suite's database is not a Citus coordinator (make test-citus)")
    items = list(itertools.islice(memories(seed=25, users=USERS), MEMORIES))
    for start in range(0, len(items), 50):
        r = await client.post(
            "/v1/remember/batch", json={"items": items[start : start + 50]}, headers=key.headers
        )
        assert r.status_code == 200, r.text
    out = io.StringIO()
    async with _resources(pg_url) as source:
        await export_store(source, out, org=key.org, with_vectors=True)
    path = tmp_path / "cluster.jsonl"
    path.write_text(out.getvalue())
    async with _resources(one_node) as target:
        summary = await import_store(target, path, org="one-node")
        async with target.sessionmaker() as session:
            created = await key_service.create_key(session, org="one-node", scopes=["read"])
            await session.commit()
    assert summary.complete and summary.reembedded == 0

    calls = _calls(items)
    cluster, node = [], []
    async with _client(one_node) as single:
        for call in calls:  # each goal on both, one right after the other
            cluster += await _packs(client, key.key, [call])
            node += await _packs(single, created.key, [call])
    assert sum(1 for _, found, _, _ in cluster if found) >= len(calls) // 2
    for ours, theirs in zip(cluster, node, strict=True):
        if ours != theirs:
            call, mine, _, _ = ours
            other = theirs[1]
            differ = [(n, a, b) for n, (a, b) in enumerate(itertools.zip_longest(mine, other)) if a != b]
            pytest.fail(f"{call}: cluster and one node differ at {differ} (markdown equal: "
                        f"{ours[2] == theirs[2]}, gated_out {ours[3]} vs {theirs[3]})")  # fmt: skip
