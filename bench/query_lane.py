"""The int8 query lane (``CTXPACK_QUERY_PRECISION=int8``) against fp32 queries: its vectors,
its recall and its latency, on the goals of LoCoMo and of the agent corpus.

    python -m bench.query_lane quality            # cosines, then R@5 / R@10 through the API
    python -m bench.query_lane quality --reuse    # keep the last run's database (no loading)
    python -m bench.query_lane timing             # latency: on a quiet machine only
    python -m bench.query_lane timing --goals 4 --warmup 1 --threads 1   # a smoke check

``quality`` (CPU-heavy, a few minutes; no timing in it):

- cosine of each goal's int8 query vector to its fp32 one, min / 1st percentile / mean per
  corpus, over the text a context call embeds for the goal (``ranking.goal_query``);
- recall: each corpus is stored once through ``POST /v1/remember/batch`` in an embedded
  Postgres (dates and links, as ``ctxpack ingest --links`` stores them; documents on the
  service's own document lane), then every goal is asked through ``POST /v1/context``
  (deep_search, limit 10, hybrid and vector-only) by an app whose embedder has
  ``query_precision=fp32``, then by one with ``int8``, on the same stored rows. Evidence
  R@5 / R@10 per corpus and lane, and how often the two lanes return the same top 10
  (``--control`` asks with fp32 a second time: the same top 10 an unchanged lane returns).

``timing``: per-query latency of ``embed_query`` on both lanes, the same goals in the same
process, fp32 and int8 alternating which runs first; at 1 thread and at the service's
``embed_threads``; p50 / p99 wall time and CPU ms per call (the CPU column is the steadier
one on a busy machine). The load average is printed before and after: a run that starts
above 1.0 is to be discarded (``make bench`` applies the same rule).

The model cache is ``bench/.cache/models`` (gitignored): the fp32 export and its int8 copy
are built there once, locally, from the packaged weights.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench import crossval, locomo_eval
from bench.report import write_json
from bench.stats import percentile

CACHE = Path(__file__).resolve().parent / ".cache"
CORPORA = ("locomo", "agent")
LANES = ("fp32", "int8")
MODES = ("hybrid", "vector")
K = (5, 10)
LOAD = "ingest"  # valid_at and follows / precedes links: what ctxpack ingest --links stores


def log(message: str) -> None:
    crossval.log(message)


def vector_text(goal: str) -> str:
    """The text a context call embeds for ``goal`` (its focused vector text)."""
    from service.domain import ranking

    return ranking.goal_query(goal, None).vector


def embedder(model_cache: Path, precision: str, threads: int) -> Any:
    """The service's ONNX embedder with queries on ``precision`` (documents in fp32)."""
    from service.embedding.onnx import OnnxMiniLMEmbedder

    return OnnxMiniLMEmbedder(
        model_cache, threads=threads, documents_precision="fp32", query_precision=precision
    )


# --- quality: vectors -------------------------------------------------------------------------


def cosine_summary(fp32: np.ndarray, int8: np.ndarray) -> dict[str, float]:
    """min, 1st percentile and mean cosine of paired unit vectors (rows)."""
    cos = (fp32 * int8).sum(1) / (np.linalg.norm(fp32, axis=1) * np.linalg.norm(int8, axis=1))
    values = cos.tolist()
    return {
        "n": len(values),
        "min": round(min(values), 5),
        "p1": round(percentile(values, 1), 5),
        "mean": round(sum(values) / len(values), 5),
    }


def vector_agreement(
    goals: dict[str, list[str]], model_cache: Path, threads: int
) -> dict[str, dict[str, Any]]:
    """Per corpus, the cosine of int8 to fp32 query vectors of its goals, and its worst goal."""
    lanes = {p: embedder(model_cache, p, threads) for p in LANES}
    out: dict[str, dict[str, Any]] = {}
    for corpus, texts in goals.items():
        vecs = {p: np.array([lanes[p].embed_query(t) for t in texts]) for p in LANES}
        summary: dict[str, Any] = cosine_summary(vecs["fp32"], vecs["int8"])
        summary["worst_goal"] = texts[int(((vecs["fp32"] * vecs["int8"]).sum(1)).argmin())]
        out[corpus] = summary
        log(f"cosine int8 vs fp32, {corpus}: {summary}")
    return out


# --- quality: recall --------------------------------------------------------------------------


def recall(queries: list[dict[str, Any]], ranked: list[list[str]], k: int) -> float:
    """Evidence recall@k in points: |gold ∩ top-k| / |gold|, averaged over ``queries``."""
    total = sum(
        len(set(q["gold_ids"]) & set(r[:k])) / len(q["gold_ids"])
        for q, r in zip(queries, ranked, strict=True)
    )
    return round(100 * total / len(queries), 2)


def agreement(fp32: list[list[str]], int8: list[list[str]], k: int = 10) -> dict[str, float]:
    """How alike the two lanes' packs are: the share of goals with the same top k (same order)
    and the mean share of the top k both hold."""
    pairs = [(a[:k], b[:k]) for a, b in zip(fp32, int8, strict=True)]
    same = sum(a == b for a, b in pairs)
    overlap = [len(set(a) & set(b)) / max(len(a), len(b)) if a or b else 1.0 for a, b in pairs]
    return {
        "same_top": round(100 * same / len(fp32), 1),
        "overlap": round(100 * sum(overlap) / len(overlap), 1),
    }


async def ask_lane(
    precision: str,
    url: str,
    work: Path,
    model_cache: Path,
    data: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]],
    key: tuple[str, Any] | None,
) -> tuple[tuple[str, Any], dict[tuple[str, str], list[list[str]]]]:
    """Start the app with ``query_precision=precision`` on ``url``, store what is not stored
    yet (with the first lane), ask every goal in each mode; returns the key (and its org) and
    the rankings."""
    from service.app import create_app
    from service.config import Settings
    from service.domain import keys as key_service

    settings = Settings(
        database_url=url, data_dir=work, model_cache_dir=model_cache, migrate_on_start=False,
        print_bootstrap_key=False, rate_limit_per_minute=0, query_cache_size=0,
        audit_prune_interval_seconds=0, query_precision=precision,
    )  # type: ignore[call-arg]  # fmt: skip
    app = create_app(settings, database_url=url)
    ranked: dict[tuple[str, str], list[list[str]]] = {}
    async with app.router.lifespan_context(app):
        if key is None:
            async with app.state.ctx.sessionmaker() as session:
                created = await key_service.create_key(
                    session, org="query-lane", scopes=["read", "write", "admin"]
                )
                await session.commit()
            key = (created.key, created.org_id)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://query-lane",
            headers={"Authorization": f"Bearer {key[0]}"},
        ) as client:  # fmt: skip
            for corpus, (memories, queries) in data.items():
                prefix = f"{LOAD}-{crossval.corpus_tag(memories)}-"
                if not await crossval.stored(app, key[1], prefix):
                    started = time.perf_counter()
                    counts = await crossval.load_memories(client, memories, LOAD)
                    log(f"stored {corpus}: {counts} in {time.perf_counter() - started:.0f} s")
                for mode in MODES:
                    answers = await locomo_eval.ask(
                        client, queries, prefix, mode, max(K), 2, "deep_search"
                    )
                    ranked[(corpus, mode)] = [a["ranked"] for a in answers]
                    log(f"asked {corpus} ({mode}) with {precision} queries")
    return key, ranked


async def recall_by_lane(
    args: argparse.Namespace, data: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]]
) -> dict[str, Any]:
    """R@k per corpus, mode and lane on the same stored rows, and the lanes' agreement."""
    from bench.wake import fresh_database
    from service.store.database import upgrade

    work = CACHE / "query_lane"
    url = fresh_database(work, args.database_url, "ctxpack_query_lane", keep=args.reuse)
    upgrade(url)
    key = None
    by_lane: dict[str, dict[tuple[str, str], list[list[str]]]] = {}
    for precision in LANES:
        key, by_lane[precision] = await ask_lane(precision, url, work, args.model_cache, data, key)
    if args.control:
        key, by_lane["control"] = await ask_lane("fp32", url, work, args.model_cache, data, key)
    out: dict[str, Any] = defaultdict(dict)
    for corpus, (_, queries) in data.items():
        for mode in MODES:
            row: dict[str, Any] = {"n": len(queries)}
            for precision in LANES:
                for k in K:
                    row[f"{precision} R@{k}"] = recall(
                        queries, by_lane[precision][(corpus, mode)], k
                    )
            row.update(agreement(by_lane["fp32"][(corpus, mode)], by_lane["int8"][(corpus, mode)]))
            if args.control:
                again = agreement(
                    by_lane["fp32"][(corpus, mode)], by_lane["control"][(corpus, mode)]
                )
                row["control_same_top"] = again["same_top"]
            out[corpus][mode] = row
    return dict(out)


def print_quality(report: dict[str, Any]) -> None:
    print("\ncosine of int8 to fp32 query vectors (the text a context call embeds)")
    print(f"{'corpus':<8} {'goals':>6} {'min':>8} {'p1':>8} {'mean':>8}")
    for corpus, s in report["cosine"].items():
        print(f"{corpus:<8} {s['n']:>6} {s['min']:>8.5f} {s['p1']:>8.5f} {s['mean']:>8.5f}")
    if "recall" not in report:
        return
    print("\nevidence recall through POST /v1/context (deep_search, limit 10), same stored rows")
    head = (
        f"{'corpus':<8} {'mode':<7} {'goals':>6} {'fp32 R@5':>9} {'int8 R@5':>9} "
        f"{'fp32 R@10':>10} {'int8 R@10':>10} {'same top10':>11} {'overlap':>8}"
    )
    control = any("control_same_top" in r for m in report["recall"].values() for r in m.values())
    head += f" {'fp32 again':>11}" if control else ""
    print(head)
    print("-" * len(head))
    for corpus, modes in report["recall"].items():
        for mode, r in modes.items():
            print(
                f"{corpus:<8} {mode:<7} {r['n']:>6} {r['fp32 R@5']:>9.2f} {r['int8 R@5']:>9.2f} "
                f"{r['fp32 R@10']:>10.2f} {r['int8 R@10']:>10.2f} {r['same_top']:>10.1f}% "
                f"{r['overlap']:>7.1f}%"
                + (f" {r['control_same_top']:>10.1f}%" if "control_same_top" in r else "")
            )


def quality(args: argparse.Namespace) -> dict[str, Any]:
    from service.config import Settings

    data = {name: crossval.load_corpus(name) for name in args.corpora}
    if args.groups:
        for name, (memories, queries) in data.items():
            keep = sorted({m["group"] for m in memories})[: args.groups]
            data[name] = (
                [m for m in memories if m["group"] in keep],
                [q for q in queries if q["group"] in keep],
            )
    goals = {name: [vector_text(q["query"]) for q in qs] for name, (_, qs) in data.items()}
    threads = Settings().embed_threads
    report: dict[str, Any] = {"cosine": vector_agreement(goals, args.model_cache, threads)}
    if not args.no_recall:
        report["recall"] = asyncio.run(recall_by_lane(args, data))
    print_quality(report)
    return report


# --- timing -----------------------------------------------------------------------------------


def latency_summary(wall_ms: list[float], cpu_ms: list[float]) -> dict[str, float]:
    """p50 / p99 wall time and mean CPU time per call, in ms."""
    return {
        "p50": round(percentile(wall_ms, 50), 3),
        "p99": round(percentile(wall_ms, 99), 3),
        "cpu": round(sum(cpu_ms) / len(cpu_ms), 3),
    }


def time_lanes(texts: list[str], model_cache: Path, threads: int, warmup: int) -> dict[str, Any]:
    """Latency of ``embed_query`` per lane over ``texts``, the lanes alternating which runs
    first on each goal."""
    lanes = {p: embedder(model_cache, p, threads) for p in LANES}
    for p in LANES:
        for t in texts[:warmup]:
            lanes[p].embed_query(t)
    wall: dict[str, list[float]] = {p: [] for p in LANES}
    cpu: dict[str, list[float]] = {p: [] for p in LANES}
    for i, text in enumerate(texts):
        for p in LANES if i % 2 == 0 else LANES[::-1]:
            c0, t0 = time.process_time(), time.perf_counter()
            lanes[p].embed_query(text)
            wall[p].append((time.perf_counter() - t0) * 1000)
            cpu[p].append((time.process_time() - c0) * 1000)
    out: dict[str, Any] = {p: latency_summary(wall[p], cpu[p]) for p in LANES}
    out["int8/fp32 p50"] = round(out["int8"]["p50"] / out["fp32"]["p50"], 3)
    out["int8/fp32 p99"] = round(out["int8"]["p99"] / out["fp32"]["p99"], 3)
    return out


def timing(args: argparse.Namespace) -> dict[str, Any]:
    from service.config import Settings
    from service.embedding.int8 import int8_path, quantize_onnx
    from service.embedding.onnx import export_onnx

    fp32 = args.model_cache / "all-MiniLM-L6-v2.onnx"
    if not int8_path(fp32).exists():
        quantize_onnx(export_onnx(fp32))
        print("the model files were built just now: run again once the load has settled")
    before = os.getloadavg()
    print(f"load average before: {before[0]:.2f} {before[1]:.2f} {before[2]:.2f}", flush=True)
    if before[0] > 1.0:
        print("warning: 1-minute load average above 1.0: discard this run", flush=True)
    texts: list[str] = []
    for name in CORPORA:
        _, queries = crossval.load_corpus(name)
        texts += [vector_text(q["query"]) for q in queries]
    # Both corpora in the sample, in a fixed order.
    texts = [texts[i] for i in np.random.default_rng(7).permutation(len(texts))][: args.goals]
    threads = sorted({int(t) for t in args.threads.split(",")} if args.threads else
                     {1, Settings().embed_threads})  # fmt: skip
    report: dict[str, Any] = {"goals": len(texts)}
    for n in threads:
        report[f"threads={n}"] = time_lanes(texts, args.model_cache, n, args.warmup)
    after = os.getloadavg()
    print(f"\nembed_query latency over {len(texts)} goals (LoCoMo and agent), ms")
    head = (
        f"{'threads':>7} {'fp32 p50':>9} {'int8 p50':>9} {'fp32 p99':>9} {'int8 p99':>9} "
        f"{'fp32 cpu':>9} {'int8 cpu':>9} {'p50 x':>6} {'p99 x':>6}"
    )
    print(head)
    print("-" * len(head))
    for n in threads:
        r = report[f"threads={n}"]
        print(
            f"{n:>7} {r['fp32']['p50']:>9.2f} {r['int8']['p50']:>9.2f} {r['fp32']['p99']:>9.2f} "
            f"{r['int8']['p99']:>9.2f} {r['fp32']['cpu']:>9.2f} {r['int8']['cpu']:>9.2f} "
            f"{r['int8/fp32 p50']:>6.2f} {r['int8/fp32 p99']:>6.2f}"
        )
    print(f"load average after: {after[0]:.2f} {after[1]:.2f} {after[2]:.2f}")
    report["loadavg"] = {"before": list(before), "after": list(after)}
    return report


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model-cache", type=Path, default=CACHE / "models")
    sub = parser.add_subparsers(dest="command", required=True)
    q = sub.add_parser("quality", help="cosines and recall, int8 against fp32 queries")
    q.add_argument("--corpora", type=lambda s: s.split(","), default=list(CORPORA))
    q.add_argument("--groups", type=int, default=0, help="groups per corpus (0: all)")
    q.add_argument("--no-recall", action="store_true", help="the cosines only")
    q.add_argument("--reuse", action="store_true", help="keep the last run's database")
    q.add_argument("--control", action="store_true", help="ask with fp32 twice (determinism)")
    q.add_argument("--database-url", default=None, help="a server instead of the embedded one")
    q.add_argument("--out", type=Path, default=CACHE / "query_lane_quality.json")
    t = sub.add_parser("timing", help="embed_query latency per lane (quiet machine only)")
    t.add_argument("--goals", type=int, default=1000, help="goals timed per lane")
    t.add_argument("--warmup", type=int, default=50, help="untimed calls per lane first")
    t.add_argument("--threads", default="", help="e.g. 1,2 (default: 1 and embed_threads)")
    t.add_argument("--out", type=Path, default=CACHE / "query_lane_timing.json")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    report = quality(args) if args.command == "quality" else timing(args)
    write_json(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
