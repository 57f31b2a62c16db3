#!/usr/bin/env python3
"""Same packs on Citus as on one node: LoCoMo loaded the way ``bench.locomo_eval`` loads it
(one namespace per conversation, about 600 turns each, consecutive turns linked), on a Citus
coordinator; exported with its vectors and imported into a one-node embedded PostgreSQL
(ids and times kept); then --goals LoCoMo questions asked on both, over every retrieval mode
(hybrid, lexical, vector) and layer (deep_search, recall), and the packs compared: item ids
in order, scores and the markdown.

Scopes of about 600 memories are under ``CTXPACK_EXACT_SCAN_MAX_ROWS``: retrieval is exact on
both, so the packs must be equal. The embedder is the deterministic fake one by default
(``--embedder minilm`` for the real model): both stores hold the same vectors either way,
and what is compared is the SQL's answer on the two engines.

Usage:  python -m bench.citus_packs --database-url postgresql://postgres@127.0.0.1:56432/ctxpack
"""

from __future__ import annotations

import argparse
import asyncio
import io
import itertools
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from bench.locomo_eval import DATA, load, read_jsonl
from service.app import create_app
from service.config import Settings
from service.domain import keys as key_service
from service.embedding import build_embedder
from service.embedding.base import Embedder
from service.lifecycle.transfer import export_store, import_store
from service.resources import open_resources
from service.store.database import ensure_database, start_embedded, upgrade, with_database

MODES = ("hybrid", "lexical", "vector")
LAYERS = ("deep_search", "recall")


def _settings(url: str, embedder: str) -> Settings:
    return Settings(  # type: ignore[call-arg]
        database_url=url, embedder=embedder, migrate_on_start=False, print_bootstrap_key=False,
        rate_limit_per_minute=0, audit_prune_interval_seconds=0, expiry_purge_interval_seconds=0,
    )  # fmt: skip


@asynccontextmanager
async def _client(url: str, model: Embedder, embedder: str) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    app = create_app(_settings(url, embedder), embedder=model, database_url=url)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench", timeout=600) as c:
            yield c, app.state.ctx


async def _key(resources: Any, org: str) -> str:
    async with resources.sessionmaker() as session:
        created = await key_service.create_key(session, org=org, scopes=["read", "write"])
        await session.commit()
    return created.key


async def _packs(client: httpx.AsyncClient, key: str, calls: list[dict[str, Any]]) -> list[Any]:
    out = []
    for call in calls:
        r = await client.post("/v1/context", json=call, headers={"Authorization": f"Bearer {key}"})
        r.raise_for_status()
        body = r.json()
        items = [(i["id"], i["score"]) for s in body["sections"] for i in s["items"]]
        out.append((items, body["markdown"]))
    return out


async def run(args: argparse.Namespace) -> None:
    model = build_embedder(_settings(args.database_url, args.embedder))
    turns = read_jsonl(DATA / "memories.jsonl")
    queries = read_jsonl(DATA / "queries.jsonl")
    org = f"locomo-{uuid.uuid4().hex[:8]}"
    prefix = "locomo-"
    started = time.perf_counter()
    async with _client(args.database_url, model, args.embedder) as (client, resources):
        client.headers["Authorization"] = f"Bearer {await _key(resources, org)}"
        loaded = await load(client, turns, prefix, links=True)
    print(f"loaded on the cluster: {loaded['counts']} ({time.perf_counter() - started:.0f} s)")

    root = Path(tempfile.mkdtemp(prefix="ctxpack-one-node-"))
    root.chmod(0o755)
    server = start_embedded(root, cleanup_mode="delete")
    ensure_database(server.get_uri(), "one_node")
    one_node = with_database(server.get_uri(), "one_node")
    upgrade(one_node)
    out = io.StringIO()
    async with open_resources(_settings(args.database_url, args.embedder), database_url=args.database_url,
                              embedder=model, listen=False) as source:  # fmt: skip
        await export_store(source, out, org=org, with_vectors=True)
    path = root / "locomo.jsonl"
    path.write_text(out.getvalue())
    async with open_resources(_settings(one_node, args.embedder), database_url=one_node,
                              embedder=model, listen=False) as target:  # fmt: skip
        summary = await import_store(target, path, org=org)
    print(f"imported on one node: {summary.created} memories, {summary.relations} relations, "
          f"re-embedded {summary.reembedded}")  # fmt: skip

    step = max(1, len(queries) // args.goals)
    chosen = queries[::step][: args.goals]
    combos = itertools.cycle(itertools.product(MODES, LAYERS))
    calls = []
    for q in chosen:
        mode, layer = next(combos)
        calls.append({"goal": q["query"], "namespace": f"{prefix}{q['group']}", "layer": layer,
                      "retrieval": mode, "limit": 10})  # fmt: skip
    # Each goal on both, one right after the other: scores carry a recency factor of now(),
    # which moves (slowly) between two askings.
    cluster: list[Any] = []
    node: list[Any] = []
    async with (
        _client(args.database_url, model, args.embedder) as (on_cluster, cluster_res),
        _client(one_node, model, args.embedder) as (on_node, node_res),
    ):
        cluster_key, node_key = await _key(cluster_res, org), await _key(node_res, org)
        for call in calls:
            cluster += await _packs(on_cluster, cluster_key, [call])
            node += await _packs(on_node, node_key, [call])
    same = sum(1 for a, b in zip(cluster, node, strict=True) if a == b)
    same_ids = sum(
        1 for a, b in zip(cluster, node, strict=True) if [i for i, _ in a[0]] == [i for i, _ in b[0]]
    )
    nonempty = sum(1 for items, _ in cluster if items)
    print(f"goals: {len(calls)} ({nonempty} non-empty packs on the cluster)")
    print(f"packs equal (ids, order, scores, markdown): {same}/{len(calls)}")
    print(f"item ids equal in order: {same_ids}/{len(calls)}")
    for (a, b), call in zip(zip(cluster, node, strict=True), calls, strict=True):
        if a != b:
            scores = [(x, y) for x, y in zip(a[0], b[0], strict=False) if x != y]
            print("DIFFERS:", call, scores, "markdown equal:", a[1] == b[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", required=True, help="a migrated Citus coordinator")
    parser.add_argument("--goals", type=int, default=240)
    parser.add_argument("--embedder", default="fake", choices=["fake", "minilm"])
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
