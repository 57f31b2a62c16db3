"""Speed at each size of the store: ctxpack's context calls, single and batch writes over HTTP,
each peer's search and writes in process (``measure_ctxpack``, ``measure_peer``); cold starts
(``cold_start_peer``); the audit row's cost (``audit_overhead``); and ``run_speed``, which
seeds each size in turn (skipping one the budget cannot fit) and measures it.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench import peers  # sets the offline and telemetry env vars before mem0 loads
from bench.corpus import PER_USER, corpus_for, extra_items, goals
from bench.harness import CtxpackServer, log, now_iso, progress, run_load
from bench.measured_writes import invalid_reason, servers_embedder, tally, write_figure
from bench.quality import CachedEmbedder
from bench.report import speed_rows
from bench.seeding import (
    PeerCopy,
    VectorPool,
    ctxpack_seed,
    deferred_indexes,
    direct_seed,
    fetch_vectors,
    prewarm,
    settle,
)
from bench.stats import percentile as pct
from service.store.database import with_database

ROOT = Path(__file__).resolve().parents[1]


def measure_ctxpack(
    client: Any,
    n_users: int,
    args: argparse.Namespace,
    seed: int,
    locomo_texts: list[str],
    size: int,
    mark: int,
    embedder: Any | None = None,
) -> dict[str, Any]:
    """Context calls at concurrency 1 and 8, single remembers and one batch write into a
    store of ``size`` memories over ``n_users`` users. ``mark``: the memories the store
    holds before these writes, which makes their texts new to it (``extra_items``). A write
    figure stands only when every write was stored (bench/measured_writes.py); the batch's
    carries ``embedder``'s own pace on exactly the texts it stored, when one is given."""
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
    singles = extra_items(f"single{size}", args.singles + 5, n_users, seed, locomo_texts, mark)
    answers: list[dict[str, Any]] = []

    def remember(item: tuple[str, str, str, str]) -> None:
        ns, iid, typ, text = item
        r = client.post(
            "/v1/remember", json={"content": text, "namespace": ns, "type": typ, "source": iid}
        )
        r.raise_for_status()
        answers.append(r.json())

    single = run_load(remember, singles, 1, warmup=5)
    counts = tally(a["status"] for a in answers)
    single["stored"] = counts.get("created", 0)
    single["with_near_duplicates"] = sum(bool(a.get("near_duplicates")) for a in answers)
    reason = invalid_reason(counts, len(singles))
    if reason is not None:  # a duplicate skips the insert: its latency is not a write's
        single = {k: v for k, v in single.items() if not k.endswith(("_ms", "per_s"))}
        single.update(counts, invalid=reason)
        log(f"ctxpack single writes: {reason}")
    out["remember_single"] = single
    batch = extra_items(f"batch{size}", args.batch_sample, n_users, seed, locomo_texts, mark)
    out["remember_batch"] = ctxpack_seed(
        client, batch, f"ctxpack: {len(batch)} more with {size:,} stored", embedder
    )
    log(f"ctxpack batch write: {out['remember_batch']}")
    return out


def measure_peer(
    peer: Any,
    n_users: int,
    args: argparse.Namespace,
    seed: int,
    locomo_texts: list[str],
    size: int,
    k: int,
    mark: int,
) -> dict[str, Any]:
    """``peer``'s searches at concurrency 1 and 8, single writes and one batch write, with
    the same texts and marks as ``measure_ctxpack`` (its item ids are new keys: a store kept
    from an earlier run inserts them, never overwrites that run's)."""
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
        f"single{size}-{peer.name}", args.singles + 5, n_users, seed, locomo_texts, mark
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
            f"batch{size}-{peer.name}", args.batch_sample, n_users, seed, locomo_texts, mark
        )
        import psycopg
        from langgraph.store.base import PutOp

        def rows() -> int:
            with psycopg.connect(peer.url) as conn:
                return int(conn.execute("SELECT count(*) FROM store").fetchone()[0])

        before = rows()
        t0 = time.perf_counter()
        # One store.batch over all namespaces, chunked as the adapter does.
        ops = [PutOp((ns,), iid, {"text": text}) for ns, iid, _, text in batch]
        for i in range(0, len(ops), 500):
            peer.store.batch(ops[i : i + 500])
        wall = time.perf_counter() - t0
        # A put under a key the store holds overwrites it: only new rows count as stored.
        new = rows() - before
        counts = {"created": new, "updated": len(batch) - new}
        out["write_batch"] = write_figure(counts, len(batch), wall)
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


class BenchStore:
    """``--store DIR``: the speed stores kept in DIR for a later run. The Postgres data
    directory lives in DIR/pgdata; each size has databases of its own (``bench_ctxpack_<n>``,
    ``bench_langgraph_<n>``, ``bench_mem0_<n>``), seeded from scratch; DIR/state.json records
    each size once it is seeded (the seeding figures and the ctxpack key of its database), so
    a run with the same DIR measures those sizes without seeding them again. A size that
    was not recorded (a seeding cut short) is seeded again from empty databases. Each run's
    measured writes stay in its databases, so the next run's are drawn new to them
    (``extra_items``' mark)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / "state.json"
        self.state: dict[str, Any] = (
            json.loads(self.path.read_text()) if self.path.exists() else {"sizes": {}}
        )

    def seeded(self, n: int) -> dict[str, Any] | None:
        got = self.state["sizes"].get(str(n))
        return dict(got) if got else None

    def record(self, n: int, record: dict[str, Any]) -> None:
        self.state["sizes"][str(n)] = record
        self.path.write_text(json.dumps(self.state, indent=2, default=str) + "\n")
        self.path.chmod(0o600)  # it holds the bench databases' API keys

    @staticmethod
    def database(system: str, n: int) -> str:
        return f"bench_{system}_{n}"


def open_size(
    args: argparse.Namespace,
    store: BenchStore,
    n: int,
    admin_url: str,
    cache: CachedEmbedder,
    workdir: Path,
) -> tuple[CtxpackServer, str, Any, Any, dict[str, Any] | None]:
    """Size ``n``'s own databases in the store: ctxpack's server on its database, and the
    peers on theirs (mem0 only up to ``--mem0-max``). A size not recorded as seeded starts
    from empty databases."""
    rec = store.seeded(n)
    with_mem0 = not args.mem0_max or n <= args.mem0_max
    if rec is None:
        for system in ("ctxpack", "langgraph", "mem0"):
            peers.drop_database(admin_url, store.database(system, n))
    peers.ensure_database(admin_url, store.database("ctxpack", n))
    ctx_url = with_database(admin_url, store.database("ctxpack", n))
    server = CtxpackServer(ctx_url, workdir, key=rec["key"] if rec else None)
    server.start(f"{n:,} store" + (", seeded earlier" if rec else ", empty database"))
    lg = m0 = None
    if not args.skip_peers:
        lg = peers.LangGraphPeer(admin_url, cache, dbname=store.database("langgraph", n))
        lg.setup()
        if with_mem0:
            m0 = peers.Mem0Peer(
                admin_url,
                peers.model_path(),
                dbname=store.database("mem0", n),
                history_db_path=str(workdir / f"mem0-history-{n}.db"),
            )
            m0.setup()
    return server, ctx_url, lg, m0, rec


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
    """Seed each size and measure it. Without ``--store`` one store grows from size to size
    (ctxpack's database and each peer's); with it, each size has databases of its own in the
    store, seeded once (``BenchStore``)."""
    store = BenchStore(args.store) if args.store else None
    sizes: list[dict[str, Any]] = []
    seeded_users = 0
    rate: float | None = None
    k = 24  # ctxpack's default recall pack size; the peers are asked for as many
    pool = VectorPool(args.embed_max, seed=args.seed)
    embedder: Any | None = None  # for the batch write's comparison, built at the first measure
    servers = [ctx]
    server, ctx_url_n, client_n = ctx, ctx_url, client
    lg, m0 = lg_peer, m0_peer
    for n in args.size_list:
        n_users = max(1, math.ceil(n / PER_USER))
        rec = None
        if store is not None:
            if server is not ctx:  # the previous size's: its figures are taken
                client_n.close()
                server.stop()
                for p in (lg, m0):
                    if p is not None:
                        p.close()
            server, ctx_url_n, lg, m0, rec = open_size(args, store, n, admin_url, cache, workdir)
            servers.append(server)
            client_n = server.client()
            seeded_users = rec["users"] if rec else 0
        elif m0 is not None and args.mem0_max and n > args.mem0_max:
            m0 = None  # from this size on: its store stops growing and it is not measured
        new_users = range(seeded_users, n_users)
        todo = len(new_users) * PER_USER
        elapsed = time.perf_counter() - started
        api = seeded_users * PER_USER + todo <= args.api_seed_max
        if api and todo and rate and elapsed + todo / rate * 1.6 + 60 > budget_s:
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
        entry: dict[str, Any] = {"n": n, "users": n_users}
        live = [p for p in (lg, m0) if p is not None]
        if lg is not None and m0 is None:
            entry["mem0_skipped"] = (
                f"left out above {args.mem0_max:,} memories (--mem0-max), so that the run fits "
                "its time: its bulk load and index build would add about as much as "
                "LangGraph's; its figures at the smaller sizes stand"
            )
            log(entry["mem0_skipped"])
        peer_dbs = [
            (p.url, ["store", "store_vectors"] if p.name == "langgraph" else [p.collection])
            for p in live
        ]
        t_seed = time.perf_counter()
        if rec is not None:
            seed = rec["seed"]
            if rec.get("peer_seed"):
                entry["peer_seed"] = rec["peer_seed"]
            entry["seeded_earlier"] = f"{args.store} ({rec.get('seeded_at', '?')})"
            log(f"size {n}: seeded earlier in {args.store}, measuring")
        else:
            items = corpus_for(new_users, args.seed, locomo_texts)
            seed = seed_size(
                args, server, client_n, ctx_url_n, live, peer_dbs, items, n, pool, entry
            )
            if seed.get("per_s") and seed.get("method") != "copy":
                rate = seed["per_s"]
            if store is not None:
                store.record(
                    n,
                    {
                        "users": n_users,
                        "key": server.key,
                        "seed": seed,
                        "peer_seed": entry.get("peer_seed"),
                        "peers": [p.name for p in live],
                        "seeded_at": now_iso(),
                        "seed_value": args.seed,
                    },
                )
        seeded_users = n_users
        entry["seed_method"] = seed.get("seed_method") or (
            "embedded: every memory's text embedded by the service (batch API)"
        )
        import psycopg

        if rec is not None:  # a kept store: settled when seeded, but written to since
            settle(ctx_url_n, ["memories"])
            for url, tables in peer_dbs:
                settle(url, tables)
        with psycopg.connect(ctx_url_n) as conn:
            entry["stored_total"] = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
        t_measure = time.perf_counter()
        entry["phase_s"] = {"seed": round(t_measure - t_seed, 1)}
        if args.seed_only:
            entry["skipped"] = f"seeded only (--seed-only) into {args.store}"
            entry["ctxpack"] = {"seed": seed}
            sizes.append(entry)
            continue
        if embedder is None:  # the server's own, built from the same settings
            from service.config import Settings

            embedder = servers_embedder(Settings(data_dir=workdir / "data"))
        mark = entry["stored_total"]  # the measured writes' texts are new to this store
        entry["prewarm"] = {"ctxpack": prewarm(ctx_url_n, ["memories", "relations"])}
        entry["ctxpack"] = measure_ctxpack(
            client_n, n_users, args, args.seed, locomo_texts, n, mark, embedder
        )
        entry["ctxpack"]["seed"] = seed
        for p, (url, tables) in zip(live, peer_dbs, strict=True):
            entry["prewarm"][p.name] = prewarm(url, tables)
            entry[p.name] = measure_peer(p, n_users, args, args.seed, locomo_texts, n, k, mark)
        entry["phase_s"]["measure"] = round(time.perf_counter() - t_measure, 1)
        entry["rows"] = speed_rows(entry)
        sizes.append(entry)
    out: dict[str, Any] = {"sizes": sizes, "k": k}
    ratio = growth_ratio(sizes)
    if ratio:
        out["growth"] = ratio
    done = [s for s in sizes if not s.get("skipped")]

    def cold_starts() -> dict[str, Any]:
        return {f"ctxpack serve, {s['label']}": s["seconds"] for sv in servers for s in sv.starts}

    cold = cold_starts()
    if done:
        largest = done[-1]
        server.stop()
        t = server.start(f"restart, {largest.get('stored_total', 0):,} memories stored")
        cold = cold_starts()
        log(f"ctxpack restart: {t:.1f} s")
        for p in (lg, m0):
            if p is None:
                continue
            if store is not None:
                p.close()
            try:
                cold[f"{p.name}: new process, model loaded, first search answered"] = round(
                    cold_start_peer(p.name, p.url, workdir), 2
                )
            except Exception as exc:  # reported in the results
                cold[f"{p.name} error"] = repr(exc)[:300]
        try:
            au = audit_overhead(ctx_url_n, args.audit_n)
            au["context_p50_ms"] = largest["ctxpack"]["context_c1"]["p50_ms"]
            out["audit"] = au
        except Exception as exc:  # reported in the results
            out["audit"] = {"error": repr(exc)[:500]}
    elif store is not None:
        for p in (lg, m0):
            if p is not None:
                p.close()
    if server is not ctx:
        client_n.close()
        server.stop()
    out["cold_start"] = cold
    if any(s.get("seed_method", "").startswith("reused") for s in sizes):
        notes.append(
            f"sizes above {args.embed_max:,} memories (--embed-max) were seeded with vectors "
            "reused from the memories embedded in this run plus noise, as "
            "bench/context_speed.py seeds: embedding a million texts alone takes about 43 "
            "minutes here (each size's seed_method says how many of each)"
        )
    notes.append(
        "ctxpack is measured over HTTP (client in this process, server a subprocess); "
        "the peers are called in process as libraries, so they skip the HTTP hop."
    )
    notes.append(
        "peers' speed stores were seeded by COPY with the rows their own write paths write "
        "(LangGraph's store and store_vectors rows, mem0's vector and add(infer=False) "
        "payload), carrying ctxpack's vectors for the same texts; one row per peer read back "
        "through its own API. For every bulk load the HNSW and GIN indexes were dropped and "
        "built again from their own definitions, and the loaded tables vacuumed and analyzed "
        "before anything was timed, ctxpack's included. Every measured write and search embeds "
        "with the model and goes through those indexes."
    )
    notes.append(
        "every system's store is on one PostgreSQL server whose shared_buffers is sized as "
        "ctxpack sizes the embedded server it ships with (a quarter of the memory, at most "
        "4 GB; the versions line gives it). Before each size's measurements, each store's "
        "tables and their indexes were read into those buffers (pg_prewarm, 'buffer'; what "
        "does not fit stays in the operating system's page cache), ctxpack's before its own "
        "and each peer's before its own, as a server that has run a while has them (each "
        "size's prewarm gives the seconds and blocks); the sizes share one machine's memory, "
        "so a store seeded earlier is otherwise partly on disk."
    )
    return out


def seed_size(
    args: argparse.Namespace,
    server: CtxpackServer,
    client: Any,
    ctx_url: str,
    live: list[Any],
    peer_dbs: list[tuple[str, list[str]]],
    items: list[tuple[str, str, str, str]],
    n: int,
    pool: VectorPool,
    entry: dict[str, Any],
) -> dict[str, Any]:
    """Seed ``items`` (the next users' memories) into ctxpack (batch API while the store stays
    within ``--api-seed-max``, else COPY) and the same rows into each live peer; the peers'
    seeding figures go to ``entry``."""
    todo = len(items)
    first_user = int(items[0][0].lstrip("u")) if items else 0
    sinks = [PeerCopy(p) for p in live]
    built: dict[str, float] = {}  # the peers' index builds
    built_ctx: dict[str, float] = {}
    settled: dict[str, float] = {}  # the peers' loaded tables vacuumed and analyzed
    settled_ctx: dict[str, float] = {}
    work_mem = f"{max(1024, n // 250)}MB"  # an HNSW graph of n vectors built in memory
    t_seed = time.perf_counter()
    if first_user * PER_USER + todo <= args.api_seed_max:
        seed = ctxpack_seed(client, items, f"ctxpack: seed to {n:,} via /v1/remember/batch")
        settle(ctx_url, ["memories"], settled_ctx)  # as the peers' bulk loads are
        seed["settle_s"] = settled_ctx
        if live:
            t0 = time.perf_counter()
            bar = progress(todo, "peers: same rows (ctxpack's vectors)")
            with ExitStack() as stack:
                for url, tables in peer_dbs:
                    stack.enter_context(deferred_indexes(url, tables, built, work_mem, settled))
                for rows in fetch_vectors(ctx_url, first_user):
                    for sink in sinks:
                        sink(rows)
                    bar.update(len(rows))
            bar.close()
            entry["peer_seed"] = {
                "rows": todo,
                "seconds": round(time.perf_counter() - t0, 1),
                "index_build_s": built,
                "settle_s": settled,
                "method": "copy",
            }
    else:
        with ExitStack() as stack:
            # Exits in reverse: the peers' indexes are built first, ctxpack's last.
            stack.enter_context(
                deferred_indexes(ctx_url, ["memories"], built_ctx, work_mem, settled_ctx)
            )
            for url, tables in peer_dbs:
                stack.enter_context(deferred_indexes(url, tables, built, work_mem, settled))
            seed = direct_seed(
                client,
                ctx_url,
                server.workdir / "data",
                items,
                f"ctxpack{' + peers' if sinks else ''}: seed to {n:,} (COPY)",
                sinks,
                pool,
            )
        seed["index_build_s"] = built_ctx
        seed["settle_s"] = settled_ctx
        seed["seconds_with_index_builds"] = round(time.perf_counter() - t_seed, 1)
        if live:
            entry["peer_seed"] = {
                "rows": todo,
                "seconds": seed["peer_write_seconds"],
                "index_build_s": built,
                "settle_s": settled,
                "method": "copy",
                "with": "ctxpack's bulk load (one pass: embed, COPY, peers' COPY)",
            }
    for sink in sinks:
        sink.check()
        sink.close()
    log(f"seeded: {seed}; {entry.get('peer_seed')}")
    return seed


def growth_ratio(sizes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Context p50 at the largest measured size against 100k (or the next smaller size
    measured), the ratio the 1M target is stated in (≤ 1.2×)."""
    done = [s for s in sizes if not s.get("skipped") and "context_c1" in s.get("ctxpack", {})]
    if len(done) < 2:
        return None
    big = done[-1]
    base = next((s for s in done if s["n"] == 100_000 and s is not big), done[-2])
    a = base["ctxpack"]["context_c1"]["p50_ms"]
    b = big["ctxpack"]["context_c1"]["p50_ms"]
    return {
        "from_n": base["n"],
        "to_n": big["n"],
        "from_p50_ms": a,
        "to_p50_ms": b,
        "ratio": round(b / a, 2) if a else None,
        "target": "≤ 1.2" if big["n"] >= 1_000_000 else None,
    }
