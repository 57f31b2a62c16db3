"""Scope scaling: context over one namespace that holds 1k, 10k and 100k memories, beside
LangGraph's search over the same namespace, on databases of their own (``bench_ctxpack_scope``,
``bench_langgraph_scope``, made afresh each run) on the run's Postgres, with a ctxpack server
of their own.

Each scope is one user's namespace (``scope<N>-u0``) seeded by bench/context_speed.py's
``seed_orgs`` with ``flat=True``: LoCoMo turns as text, their MiniLM vectors (embedded once,
cached in ``VECTORS``) plus a little noise, by COPY. LangGraph gets the very
rows and vectors (``PeerCopy``), keyed by ctxpack's memory id. Both are asked LoCoMo's
questions at that namespace, one call at a time: ctxpack over HTTP with its default
retrieval (hybrid), as the other speed rows; LangGraph in process, ``store.search`` with the
same k. For each bulk load the HNSW and GIN indexes are dropped and built again, and the
loaded tables vacuumed and analyzed before the scope is timed (``deferred_indexes``), and
each store's tables and indexes read into the page cache (``prewarm``), as for the speed
sizes.
"""

from __future__ import annotations

import argparse
import json
import uuid
from pathlib import Path
from typing import Any

from bench import context_speed, peers
from bench.harness import CtxpackServer, log, run_load
from bench.seeding import PeerCopy, deferred_indexes, namespace_rows, prewarm
from service.store.database import with_database

CTXPACK_SCOPE_DB = "bench_ctxpack_scope"
LANGGRAPH_SCOPE_DB = "bench_langgraph_scope"
VECTORS = Path("/tmp/ctxpack-locomo-minilm.npy")  # LoCoMo's turns embedded once (context_speed's)


def scope_namespace(n: int) -> str:
    return f"scope{n}-u0"


def run_scope(
    args: argparse.Namespace, admin_url: str, cache: Any, workdir: Path, k: int = 24
) -> dict[str, Any]:
    """Seed and measure each of ``args.scope_list``; one entry per scope size."""
    for db in (CTXPACK_SCOPE_DB, LANGGRAPH_SCOPE_DB):
        peers.drop_database(admin_url, db)
    peers.ensure_database(admin_url, CTXPACK_SCOPE_DB)
    ctx_url = with_database(admin_url, CTXPACK_SCOPE_DB)
    ctx = CtxpackServer(ctx_url, workdir)
    ctx.start("scope scaling, empty database")
    lg_peer = None
    if not args.skip_peers:
        lg_peer = peers.LangGraphPeer(admin_url, cache, dbname=LANGGRAPH_SCOPE_DB)
        lg_peer.setup()
    try:
        with ctx.client() as client:
            return measure_scopes(args, ctx_url, client, lg_peer, k)
    finally:
        if lg_peer is not None:
            lg_peer.close()
        ctx.stop()


def measure_scopes(
    args: argparse.Namespace, ctx_url: str, client: Any, lg_peer: Any, k: int
) -> dict[str, Any]:
    org_id = uuid.UUID(client.get("/v1/whoami").json()["org_id"])
    with open(context_speed.DATA / "queries.jsonl") as f:
        questions = [json.loads(line)["query"] for line in f if line.strip()]
    out: list[dict[str, Any]] = []
    for n in args.scope_list:
        ns = scope_namespace(n)
        seeded = context_speed.seed_orgs(
            ctx_url,
            [org_id],
            1,
            n,
            VECTORS,
            f"scope{n}-",
            seed=n,  # the seed gives the row ids: one per scope, so the scopes never collide
            flat=True,
            defer_indexes=True,
        )
        entry: dict[str, Any] = {"n": n, "namespace": ns, "seed": seeded}
        if lg_peer is not None:
            sink = PeerCopy(lg_peer)
            built: dict[str, float] = {}
            settled: dict[str, float] = {}
            with deferred_indexes(lg_peer.url, ["store", "store_vectors"], built, settled=settled):
                for rows in namespace_rows(ctx_url, ns):
                    sink(rows)
            sink.check()
            sink.close()
            entry["peer_seed"] = {"index_build_s": built, "settle_s": settled}
        jobs = [questions[i % len(questions)] for i in range(args.requests + 10)]
        hits: list[int] = []

        def context(goal: str, hits: list[int] = hits, ns: str = ns) -> None:
            r = client.post("/v1/context", json={"goal": goal, "namespace": ns})
            r.raise_for_status()
            hits.append(int(r.json().get("total_items", 0)))

        # As for the speed sizes: each store's tables and indexes in the page cache first.
        entry["prewarm"] = {"ctxpack": prewarm(ctx_url, ["memories", "relations"])}
        entry["ctxpack"] = run_load(context, jobs, 1, warmup=10)
        entry["ctxpack"]["mean_hits"] = round(sum(hits) / len(hits), 2) if hits else None
        if lg_peer is not None:
            found: list[int] = []

            def search(goal: str, found: list[int] = found, ns: str = ns) -> None:
                found.append(len(lg_peer.search(ns, goal, k)))

            entry["prewarm"]["langgraph"] = prewarm(lg_peer.url, ["store", "store_vectors"])
            entry["langgraph"] = run_load(search, jobs, 1, warmup=10)
            entry["langgraph"]["mean_hits"] = round(sum(found) / len(found), 2) if found else None
        log(f"scope {n:,}: {entry}")
        out.append(entry)
    return {
        "sizes": out,
        "k": k,
        "note": (
            "one namespace per scope size, seeded by bench/context_speed.py (flat layout: "
            "LoCoMo turns, their vectors plus noise) into databases of their own; LangGraph "
            "got the same rows and vectors; LoCoMo questions as goals, c=1"
        ),
    }
