"""Speed at each size of the store: ctxpack's context calls, single and batch writes over HTTP,
each peer's search and writes in process (``measure_ctxpack``, ``measure_peer``); cold starts
(``cold_start_peer``); the audit row's cost (``audit_overhead``); and ``run_speed``, which
seeds each size in turn (skipping one the budget cannot fit) and measures it.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench import peers  # sets the offline and telemetry env vars before mem0 loads
from bench.corpus import PER_USER, corpus_for, extra_items, goals
from bench.harness import CtxpackServer, log, progress, run_load
from bench.quality import CachedEmbedder
from bench.report import speed_rows
from bench.seeding import PeerCopy, ctxpack_seed, deferred_indexes, direct_seed, fetch_vectors
from bench.stats import percentile as pct

ROOT = Path(__file__).resolve().parents[1]


def measure_ctxpack(
    client: Any,
    n_users: int,
    args: argparse.Namespace,
    seed: int,
    locomo_texts: list[str],
    size: int,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for conc, n in ((1, args.requests), (8, args.requests * 2)):
        jobs = goals(n + 10, n_users, seed + conc)

        items: list[int] = []

        def call(job: tuple[str, str], items: list[int] = items) -> None:
            r = client.post("/v1/context", json={"goal": job[1], "namespace": job[0]})
            r.raise_for_status()
            items.append(int(r.json().get("total_items", 0)))

        out[f"context_c{conc}"] = run_load(call, jobs, conc, warmup=10)
        out[f"context_c{conc}"]["mean_hits"] = round(sum(items) / len(items), 2) if items else None
        log(f"ctxpack context c{conc}: {out[f'context_c{conc}']}")
    singles = extra_items(f"single{size}", args.singles + 5, n_users, seed, locomo_texts)

    def remember(item: tuple[str, str, str, str]) -> None:
        ns, iid, typ, text = item
        r = client.post(
            "/v1/remember", json={"content": text, "namespace": ns, "type": typ, "source": iid}
        )
        r.raise_for_status()

    out["remember_single"] = run_load(remember, singles, 1, warmup=5)
    batch = extra_items(f"batch{size}", args.batch_sample, n_users, seed, locomo_texts)
    out["remember_batch"] = ctxpack_seed(
        client, batch, f"ctxpack: {len(batch)} more with {size:,} stored"
    )
    return out


def measure_peer(
    peer: Any,
    n_users: int,
    args: argparse.Namespace,
    seed: int,
    locomo_texts: list[str],
    size: int,
    k: int,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for conc, n in ((1, args.requests), (8, args.requests * 2)):
        jobs = goals(n + 10, n_users, seed + conc)
        hits: list[int] = []

        def call(job: tuple[str, str], hits: list[int] = hits) -> None:
            hits.append(len(peer.search(job[0], job[1], k)))

        res = run_load(call, jobs, conc, warmup=10)
        res["mean_hits"] = round(sum(hits) / len(hits), 2) if hits else None
        out[f"search_c{conc}"] = res
        log(f"{peer.name} search c{conc}: {res}")
    singles = extra_items(
        f"single{size}-{peer.name}", args.singles + 5, n_users, seed, locomo_texts
    )
    if peer.name == "mem0":
        singles = singles[: args.mem0_writes + 5]
    out["write_single"] = run_load(
        lambda it: peer.add_one(it[0], it[1], it[3]), singles, 1, warmup=5
    )
    if peer.name == "mem0":
        # mem0 has no batch add: its "batch" is add() per item, the rate of the singles above.
        out["write_batch"] = {
            "per_s": out["write_single"]["per_s"],
            "sent": out["write_single"]["n"],
            "note": "no batch API: add() per item",
        }
    else:
        batch = extra_items(
            f"batch{size}-{peer.name}", args.batch_sample, n_users, seed, locomo_texts
        )
        by_ns: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for ns, iid, _, text in batch:
            by_ns[ns].append((iid, text))
        t0 = time.perf_counter()
        # One store.batch over all namespaces, chunked as the adapter does.
        from langgraph.store.base import PutOp

        ops = [PutOp((ns,), iid, {"text": text}) for ns, iid, _, text in batch]
        for i in range(0, len(ops), 500):
            peer.store.batch(ops[i : i + 500])
        wall = time.perf_counter() - t0
        out["write_batch"] = {
            "sent": len(batch),
            "seconds": round(wall, 1),
            "per_s": round(len(batch) / wall, 1),
        }
    return out


COLD_PEER = r"""
import os, sys, time, json
t0 = time.perf_counter()
sys.path.insert(0, {root!r})
from bench import peers
name, url = sys.argv[1], sys.argv[2]
if name == "langgraph":
    p = peers.LangGraphPeer(url, peers.STEmbedder(peers.load_model()), create_db=False)
else:
    os.environ.setdefault("MEM0_DIR", sys.argv[3])
    p = peers.Mem0Peer(url, peers.model_path(), create_db=False, history_db_path=os.path.join(sys.argv[3], "h.db"))
p.search("u00000", "how do we roll back a deploy", 10)
print(json.dumps({{"seconds": time.perf_counter() - t0}}))
p.close()
"""


def cold_start_peer(name: str, url: str, workdir: Path) -> float:
    """Process start to first search answered, in a fresh interpreter."""
    code = COLD_PEER.format(root=str(ROOT))
    d = tempfile.mkdtemp(dir=workdir)
    t0 = time.perf_counter()
    res = subprocess.run(
        [sys.executable, "-c", code, name, url, d], capture_output=True, text=True, timeout=600
    )
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise RuntimeError(f"{name} cold start failed: {res.stderr[-2000:]}")
    return wall


def audit_overhead(db_url: str, n: int) -> dict[str, Any]:
    """record() in process against the bench database (bench/audit_overhead.py)."""
    import asyncio

    from bench import audit_overhead as ao

    series = asyncio.run(ao.measure(db_url, n))
    out: dict[str, Any] = {}
    for kind, sr in series.items():
        p50 = {name: round(pct(v, 50), 3) for name, v in sr.items()}
        plain = p50.get("call, no audit", p50.get("no audit"))
        audited = p50.get("call + audit", p50.get("with audit"))
        out[kind.replace(" ", "_")] = {
            "record_p50_ms": p50.get("record()"),
            "no_audit_p50_ms": plain,
            "with_audit_p50_ms": audited,
            "added_p50_ms": round(audited - plain, 3)
            if plain is not None and audited is not None
            else None,
            "p50_ms": p50,
        }
    out["n"] = n
    return out


def run_speed(
    args: argparse.Namespace,
    ctx: CtxpackServer,
    client: Any,
    ctx_url: str,
    cache: CachedEmbedder,
    lg_peer: Any,
    m0_peer: Any,
    locomo_texts: list[str],
    started: float,
    budget_s: float,
    workdir: Path,
    admin_url: str,
    notes: list[str],
) -> dict[str, Any]:
    sizes: list[dict[str, Any]] = []
    seeded_users = 0
    rate: float | None = None
    k = 24  # ctxpack's default recall pack size; the peers are asked for as many
    for n in args.size_list:
        n_users = max(1, math.ceil(n / PER_USER))
        new_users = range(seeded_users, n_users)
        todo = len(new_users) * PER_USER
        elapsed = time.perf_counter() - started
        api = seeded_users * PER_USER + todo <= args.api_seed_max
        if api and rate and elapsed + todo / rate * 1.6 + 60 > budget_s:
            proj = todo / rate
            sizes.append(
                {
                    "n": n,
                    "skipped": (
                        f"projected seeding {proj / 60:.0f} min at the {rate:.0f} memories/s measured "
                        f"in this run would overrun the {args.budget_minutes:g}-minute budget; "
                        f"run with --budget-minutes 0"
                    ),
                }
            )
            log(f"size {n}: skipped ({sizes[-1]['skipped']})")
            continue
        items = corpus_for(new_users, args.seed, locomo_texts)
        entry: dict[str, Any] = {"n": n, "users": n_users}
        peer_dbs = (
            [(lg_peer.url, ["store", "store_vectors"]), (m0_peer.url, [m0_peer.collection])]
            if lg_peer is not None
            else []
        )
        sinks = [PeerCopy(lg_peer), PeerCopy(m0_peer)] if lg_peer is not None else []
        built: dict[str, float] = {}  # the peers' index builds
        built_ctx: dict[str, float] = {}
        t_seed = time.perf_counter()
        if seeded_users * PER_USER + len(items) <= args.api_seed_max:
            seed = ctxpack_seed(client, items, f"ctxpack: seed to {n:,} via /v1/remember/batch")
            rate = seed["per_s"]
            if lg_peer is not None:
                t0 = time.perf_counter()
                bar = progress(todo, "peers: same rows (ctxpack's vectors)")
                with ExitStack() as stack:
                    for url, tables in peer_dbs:
                        stack.enter_context(deferred_indexes(url, tables, built))
                    for rows in fetch_vectors(ctx_url, new_users.start):
                        for sink in sinks:
                            sink(rows)
                        bar.update(len(rows))
                bar.close()
                entry["peer_seed"] = {
                    "rows": todo,
                    "seconds": round(time.perf_counter() - t0, 1),
                    "index_build_s": built,
                    "method": "copy",
                }
        else:
            with ExitStack() as stack:
                # Exits in reverse: the peers' indexes are built first, ctxpack's last.
                stack.enter_context(deferred_indexes(ctx_url, ["memories"], built_ctx))
                for url, tables in peer_dbs:
                    stack.enter_context(deferred_indexes(url, tables, built))
                seed = direct_seed(
                    client,
                    ctx_url,
                    ctx.workdir / "data",
                    items,
                    f"ctxpack{' + peers' if sinks else ''}: seed to {n:,} (COPY)",
                    sinks,
                )
            seed["index_build_s"] = built_ctx
            seed["seconds_with_index_builds"] = round(time.perf_counter() - t_seed, 1)
            if lg_peer is not None:
                entry["peer_seed"] = {
                    "rows": todo,
                    "seconds": seed["peer_write_seconds"],
                    "index_build_s": built,
                    "method": "copy",
                    "with": "ctxpack's bulk load (one pass: embed, COPY, peers' COPY)",
                }
        for sink in sinks:
            sink.check()
            sink.close()
        seeded_users = n_users
        log(f"seeded: {seed}; {entry.get('peer_seed')}")
        import psycopg
        from psycopg import sql

        with psycopg.connect(ctx_url) as conn:
            entry["stored_total"] = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
            conn.execute("ANALYZE memories")
        for url, tables in peer_dbs:  # the same fresh statistics for the peers
            with psycopg.connect(url, autocommit=True) as conn:
                for table in tables:
                    conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(table)))
        t_measure = time.perf_counter()
        entry["phase_s"] = {"seed": round(t_measure - t_seed, 1)}
        entry["ctxpack"] = measure_ctxpack(client, n_users, args, args.seed, locomo_texts, n)
        entry["ctxpack"]["seed"] = seed
        if lg_peer is not None:
            for p in (lg_peer, m0_peer):
                entry[p.name] = measure_peer(p, n_users, args, args.seed, locomo_texts, n, k)
        entry["phase_s"]["measure"] = round(time.perf_counter() - t_measure, 1)
        entry["rows"] = speed_rows(entry)
        sizes.append(entry)
    out: dict[str, Any] = {"sizes": sizes, "k": k}
    done = [s for s in sizes if not s.get("skipped")]
    cold: dict[str, Any] = {f"ctxpack serve, {s['label']}": s["seconds"] for s in ctx.starts}
    if done:
        largest = done[-1]
        ctx.stop()
        t = ctx.start(f"restart, {largest.get('stored_total', 0):,} memories stored")
        cold = {f"ctxpack serve, {s['label']}": s["seconds"] for s in ctx.starts}
        log(f"ctxpack restart: {t:.1f} s")
        if lg_peer is not None:
            for name, db in (("langgraph", peers.LANGGRAPH_DB), ("mem0", peers.MEM0_DB)):
                try:
                    cold[f"{name}: new process, model loaded, first search answered"] = round(
                        cold_start_peer(name, peers.db_url_for(admin_url, db), workdir), 2
                    )
                except Exception as exc:  # reported in the results
                    cold[f"{name} error"] = repr(exc)[:300]
        try:
            au = audit_overhead(ctx_url, args.audit_n)
            au["context_p50_ms"] = largest["ctxpack"]["context_c1"]["p50_ms"]
            out["audit"] = au
        except Exception as exc:  # reported in the results
            out["audit"] = {"error": repr(exc)[:500]}
    out["cold_start"] = cold
    notes.append(
        "ctxpack is measured over HTTP (client in this process, server a subprocess); "
        "the peers are called in process as libraries, so they skip the HTTP hop."
    )
    notes.append(
        "peers' speed stores were seeded by COPY with the rows their own write paths write "
        "(LangGraph's store and store_vectors rows, mem0's vector and add(infer=False) "
        "payload), carrying ctxpack's vectors for the same texts; one row per peer read back "
        "through its own API. For every bulk load the HNSW and GIN indexes were dropped and "
        "built again from their own definitions, ctxpack's included. Every measured write and "
        "search embeds with the model and goes through those indexes."
    )
    return out
