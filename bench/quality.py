"""Retrieval quality on LoCoMo: ctxpack through its API, LangGraph and mem0 through their own
calls, an exact-cosine pgvector scan and BM25 (Okapi), all on the same turns and questions;
evidence recall@5/@10 per category and overall (``recall_table``).

The turn and question vectors are computed once in process (``CachedEmbedder``, filled by the
model's fp32 ONNX export and checked against sentence-transformers in ``onnx_fill``) and served
to the peers' embed calls, so each peer stores and searches what its own embedder would
produce without embedding the corpus three times.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench import peers  # sets the offline and telemetry env vars before mem0 loads
from bench.harness import CtxpackServer, log, post_batch, progress
from bench.seeding import seed_mem0
from bench.stats import percentile as pct

K_QUALITY = (5, 10)

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
