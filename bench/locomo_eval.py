#!/usr/bin/env python3
"""LoCoMo evidence recall of POST /v1/context, over HTTP, against a running ctxpack.

Each conversation (``group``) becomes one user namespace; each dialogue turn one ``episode``
memory, ``"<speaker>: <text>"``, its turn id in ``source``, its date in ``valid_at``. With
``--links`` (the default) consecutive turns of a session are linked (``follows`` /
``precedes``) through remember's ``related``, so deep_search's graph step can pull in the
neighbours of a hit: even turns are stored first, then odd turns with links to both
neighbours. Turns the write gate rejects are simply not stored (and counted).

Every question is asked at its conversation's namespace with layer deep_search and limit k
(10), once per retrieval mode (hybrid, lexical = BM25 only, vector = cosine only). Recall@k =
|gold ∩ top-k| / |gold| (top-k by item score), averaged per category and overall.

    # a server with the real model, and its bootstrap admin key
    CTXPACK_DATA_DIR=/tmp/ctxlocomo CTXPACK_PORT=8765 ctxpack serve
    python -m bench.locomo_eval --url http://127.0.0.1:8765 --key ctxp_... --load
    python -m bench.locomo_eval --url ... --key ... --modes hybrid --out results.json

``--calibrate`` (no server needed) measures the relevance floor's inputs instead: MiniLM
cosine of each question to its gold turns, to the other turns of its conversation and to
the turns of other conversations; with ``--url`` it also asks off-topic software goals of
every conversation, which a calibrated gate should answer with (nearly) empty packs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from collections import defaultdict
from collections.abc import MutableMapping
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from bench.report import write_json
from bench.stats import percentile
from service.remote import api_key_from_env

DATA = Path(__file__).resolve().parents[2] / "shared" / "bench" / "locomo"
BATCH = 250
MODES = ("hybrid", "lexical", "vector")

OFF_TOPIC_GOALS = [
    "Add refresh-token rotation to the auth service",
    "Fix the flaky integration test in the payments pipeline",
    "Migrate the Postgres schema to add a tenant_id column",
    "Configure Kubernetes ingress TLS certificates",
    "Tune the HNSW index parameters for vector search",
    "Write a Terraform module for the S3 bucket policy",
    "Debug the OOM crash in the Rust ingestion worker",
    "Plan the rollout of the new billing API v2",
    "Decide between Kafka and NATS for the event bus",
    "Implement rate limiting middleware in FastAPI",
    "Upgrade React from 17 to 18 in the dashboard",
    "Profile the slow GraphQL resolver for orders",
    "Set up CI caching for the monorepo builds",
    "Design the retry policy for webhook deliveries",
    "Investigate memory leaks in the Node.js gateway",
    "Add OpenTelemetry tracing to the checkout service",
    "Refactor the repository layer to async SQLAlchemy",
    "Write the on-call runbook for database failover",
    "Evaluate vector index options for document search",
    "Resume work on the crawler import adapter",
]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open() as f:
        return [json.loads(line) for line in f if line.strip()]


def turn_content(turn: dict[str, Any]) -> str:
    return f"{turn['speaker']}: {turn['text']}"


def turn_time(stamp: str) -> str | None:
    """'1:56 pm on 8 May, 2023' -> ISO 8601 (None when unparseable)."""
    try:
        return datetime.strptime(stamp.replace(" on ", " "), "%I:%M %p %d %B, %Y").isoformat() + "Z"
    except ValueError:
        return None


def namespace_of(prefix: str, group: str) -> str:
    return f"{prefix}{group}"


# --- loading -------------------------------------------------------------------------------


async def store_batches(
    client: httpx.AsyncClient,
    batch: list[tuple[dict[str, Any], dict[str, Any]]],
    counts: MutableMapping[str, int],
    ids: dict[str, str],
    rejected: list[str] | None = None,
) -> None:
    """POST ``batch`` (pairs of a record and its remember body) to /v1/remember/batch,
    ``BATCH`` at a time: counts each status, maps the record's ``id`` to its memory's, and
    lists the records the gate rejected (when ``rejected`` is given)."""
    for start in range(0, len(batch), BATCH):
        chunk = batch[start : start + BATCH]
        response = await client.post(
            "/v1/remember/batch", json={"items": [b for _, b in chunk]}, timeout=600
        )
        response.raise_for_status()
        for (record, _), result in zip(chunk, response.json()["items"], strict=True):
            counts[result["status"]] += 1
            if result.get("id"):
                ids[record["id"]] = result["id"]
            elif rejected is not None:
                rejected.append(record["id"])


async def load(
    client: httpx.AsyncClient, turns: list[dict[str, Any]], prefix: str, links: bool
) -> dict[str, Any]:
    """Store every turn through POST /v1/remember/batch; returns counts and turn id -> memory id."""
    by_session: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for t in turns:
        by_session[(t["group"], t["session"])].append(t)
    order = {t["id"]: i for i, t in enumerate(turns)}
    ids: dict[str, str] = {}
    counts = {"created": 0, "duplicate": 0, "rejected": 0}
    rejected: list[str] = []

    def item(t: dict[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "content": turn_content(t),
            "namespace": namespace_of(prefix, t["group"]),
            "type": "episode",
            "source": t["id"],
            "metadata": {"speaker": t["speaker"], "session": t["session"], "when": t["timestamp"]},
        }
        when = turn_time(t["timestamp"])
        if when:
            body["valid_at"] = when
        return body

    async def store(batch: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
        await store_batches(client, batch, counts, ids, rejected)

    if not links:
        await store([(t, item(t)) for t in sorted(turns, key=lambda t: order[t["id"]])])
        return {"counts": counts, "ids": ids, "rejected": rejected}
    sessions = list(by_session.values())
    await store([(t, item(t)) for s in sessions for i, t in enumerate(s) if i % 2 == 0])
    second: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for s in sessions:
        for i, t in enumerate(s):
            if i % 2 == 0:
                continue
            body = item(t)
            related = []
            if s[i - 1]["id"] in ids:
                related.append({"id": ids[s[i - 1]["id"]], "relationship": "follows"})
            if i + 1 < len(s) and s[i + 1]["id"] in ids:
                related.append({"id": ids[s[i + 1]["id"]], "relationship": "precedes"})
            body["related"] = related
            second.append((t, body))
    await store(second)
    return {"counts": counts, "ids": ids, "rejected": rejected}


# --- asking --------------------------------------------------------------------------------


async def ask(
    client: httpx.AsyncClient,
    queries: list[dict[str, Any]],
    prefix: str,
    mode: str,
    k: int,
    concurrency: int,
    layer: str,
) -> list[dict[str, Any]]:
    """Ask every question; returns per question the ranked turn ids and the latency."""
    sem = asyncio.Semaphore(concurrency)
    out: list[dict[str, Any]] = [{} for _ in queries]

    async def one(i: int, q: dict[str, Any]) -> None:
        body = {
            "goal": q["query"],
            "namespace": namespace_of(prefix, q["group"]),
            "layer": layer,
            "limit": k,
            "retrieval": mode,
            "related_limit": 0,
            "markdown_token_budget": 2000,
        }
        async with sem:
            started = time.perf_counter()
            response = await client.post("/v1/context", json=body, timeout=120)
            elapsed = (time.perf_counter() - started) * 1000
        response.raise_for_status()
        pack = response.json()
        items = sorted((i for s in pack["sections"] for i in s["items"]), key=lambda i: -i["score"])
        out[i] = {
            "qid": q["qid"],
            "ranked": [i["source"] for i in items],
            "gated_out": pack["gated_out"],
            "ms": elapsed,
        }

    await asyncio.gather(*(one(i, q) for i, q in enumerate(queries)))
    return out


def score(
    queries: list[dict[str, Any]], answers: list[dict[str, Any]], ks: tuple[int, ...]
) -> dict[str, dict[str, float]]:
    sums: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for q, a in zip(queries, answers, strict=True):
        gold = set(q["gold_ids"])
        for cat in (q["category_name"], "all"):
            sums[cat]["n"] += 1
            for k in ks:
                sums[cat][f"r@{k}"] += len(gold & set(a["ranked"][:k])) / len(gold)
    return {
        cat: {"n": int(v["n"]), **{f"r@{k}": round(100 * v[f"r@{k}"] / v["n"], 1) for k in ks}}
        for cat, v in sums.items()
    }


def table(results: dict[str, dict[str, dict[str, float]]], ks: tuple[int, ...]) -> str:
    cats = ["single-hop", "multi-hop", "temporal", "open-domain", "adversarial", "all"]
    head = f"{'category':<12} {'n':>5} " + " ".join(
        f"{m + ' ' + f'R@{k}':>14}" for m in results for k in ks
    )
    lines = [head, "-" * len(head)]
    for cat in cats:
        any_mode = next(iter(results.values()))
        if cat not in any_mode:
            continue
        row = f"{cat:<12} {any_mode[cat]['n']:>5} "
        row += " ".join(f"{results[m][cat][f'r@{k}']:>14.1f}" for m in results for k in ks)
        lines.append(row)
    return "\n".join(lines)


# --- calibration ---------------------------------------------------------------------------


def calibrate(turns: list[dict[str, Any]], queries: list[dict[str, Any]]) -> dict[str, Any]:
    """MiniLM cosine of questions to gold turns, other turns of the same conversation, and
    turns of other conversations; embedded as the service embeds (``document_text``: the
    content alone when its derived name is a prefix of it, else name + newline + content)."""
    import numpy as np

    from service.domain.remember import derive_name, document_text
    from service.embedding.minilm import MiniLMEmbedder

    model = MiniLMEmbedder()
    texts = [turn_content(t) for t in turns]
    docs = np.array(model.embed_documents([document_text(derive_name(c), c) for c in texts]))
    qs = np.array(model.embed_documents([q["query"] for q in queries]))
    index = {t["id"]: i for i, t in enumerate(turns)}
    groups: dict[str, list[int]] = defaultdict(list)
    for i, t in enumerate(turns):
        groups[t["group"]].append(i)
    names = sorted(groups)
    gold: list[float] = []
    same: list[float] = []
    other: list[float] = []
    for qi, q in enumerate(queries):
        own = groups[q["group"]]
        sims = docs[own] @ qs[qi]
        gold_rows = {index[g] for g in q["gold_ids"] if g in index}
        gold.extend(float(docs[g] @ qs[qi]) for g in gold_rows)
        same.extend(float(s) for r, s in zip(own, sims, strict=True) if r not in gold_rows)
        foreign = names[(names.index(q["group"]) + 1 + qi % (len(names) - 1)) % len(names)]
        other.extend(float(s) for s in docs[groups[foreign]] @ qs[qi])

    def pct(xs: list[float]) -> dict[str, float]:
        return {f"p{p}": round(percentile(xs, p), 3) for p in (5, 10, 25, 50, 75, 90, 99)}

    floors = {}
    for f in (0.20, 0.25, 0.30, 0.35, 0.40):
        floors[f"{f:.2f}"] = {
            "gold_at_or_above": round(100 * float(np.mean(np.array(gold) >= f)), 1),
            "same_conversation_other_turns": round(100 * float(np.mean(np.array(same) >= f)), 1),
            "other_conversations": round(100 * float(np.mean(np.array(other) >= f)), 2),
        }
    return {
        "gold": pct(gold),
        "same_conversation_other_turns": pct(same),
        "other_conversations": pct(other),
        "share_at_or_above_floor": floors,
        "pairs": {"gold": len(gold), "same": len(same), "other": len(other)},
    }


async def off_topic(client: httpx.AsyncClient, groups: list[str], prefix: str) -> dict[str, Any]:
    """Off-topic software goals asked of every conversation: items returned and gated out."""
    sizes: list[int] = []
    gated: list[int] = []
    for goal in OFF_TOPIC_GOALS:
        for g in groups:
            response = await client.post(
                "/v1/context",
                json={"goal": goal, "namespace": namespace_of(prefix, g), "layer": "recall"},
                timeout=120,
            )
            response.raise_for_status()
            sizes.append(response.json()["total_items"])
            gated.append(response.json()["gated_out"])
    return {
        "packs": len(sizes),
        "empty_packs_pct": round(100 * sum(1 for s in sizes if s == 0) / len(sizes), 1),
        "mean_items": round(statistics.mean(sizes), 2),
        "max_items": max(sizes),
        "mean_gated_out": round(statistics.mean(gated), 1),
    }


# --- main ----------------------------------------------------------------------------------


async def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--url", default=os.environ.get("CTXPACK_URL"), help="ctxpack base URL (env CTXPACK_URL)"
    )
    parser.add_argument(
        "--key",
        default=api_key_from_env(),
        help="API key with read+write (env CTXPACK_API_KEY)",
    )
    parser.add_argument(
        "--data", type=Path, default=DATA, help="directory of memories.jsonl and queries.jsonl"
    )
    parser.add_argument(
        "--prefix", default="", help="namespace prefix (namespace = prefix + group)"
    )
    parser.add_argument(
        "--load", action="store_true", help="store the turns first (POST /v1/remember/batch)"
    )
    parser.add_argument(
        "--no-links", dest="links", action="store_false", help="store no follows/precedes links"
    )
    parser.add_argument("--modes", default=",".join(MODES), help="retrieval modes to evaluate")
    parser.add_argument("--layer", default="deep_search", help="pack layer (default deep_search)")
    parser.add_argument(
        "--k", type=int, default=10, help="pack limit (recall is reported at 5 and k)"
    )
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--limit-queries", type=int, default=0, help="only the first N questions")
    parser.add_argument("--out", type=Path, default=Path("locomo_results.json"))
    parser.add_argument(
        "--calibrate", action="store_true", help="measure the relevance floor's inputs"
    )
    args = parser.parse_args()

    turns = read_jsonl(args.data / "memories.jsonl")
    queries = read_jsonl(args.data / "queries.jsonl")
    if args.limit_queries:
        queries = queries[: args.limit_queries]
    report: dict[str, Any] = {
        "data": str(args.data),
        "questions": len(queries),
        "turns": len(turns),
    }

    if args.calibrate:
        report["calibration"] = calibrate(turns, queries)
        print(json.dumps(report["calibration"], indent=2))
        if not args.url:
            args.out.write_text(json.dumps(report, indent=2))
            return 0
    if not args.url or not args.key:
        parser.error("--url and --key (or CTXPACK_URL, CTXPACK_API_KEY) are required")

    headers = {"Authorization": f"Bearer {args.key}"}
    async with httpx.AsyncClient(base_url=args.url, headers=headers) as client:
        if args.load:
            started = time.perf_counter()
            loaded = await load(client, turns, args.prefix, args.links)
            report["load"] = {
                "counts": loaded["counts"],
                "seconds": round(time.perf_counter() - started, 1),
                "rejected_turns": loaded["rejected"],
                "links": args.links,
            }
            gold = {g for q in queries for g in q["gold_ids"]}
            report["load"]["rejected_gold_turns"] = sorted(gold & set(loaded["rejected"]))
            print(
                f"loaded: {loaded['counts']} in {report['load']['seconds']} s; "
                f"rejected evidence turns: {len(report['load']['rejected_gold_turns'])}"
            )
        if args.calibrate:
            report["off_topic"] = await off_topic(
                client, sorted({t["group"] for t in turns}), args.prefix
            )
            print("off-topic goals:", json.dumps(report["off_topic"]))
            args.out.write_text(json.dumps(report, indent=2))
            return 0
        ks = (5, args.k)
        results: dict[str, dict[str, dict[str, float]]] = {}
        latency: dict[str, dict[str, float]] = {}
        for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
            answers = await ask(
                client, queries, args.prefix, mode, args.k, args.concurrency, args.layer
            )
            results[mode] = score(queries, answers, ks)
            ms = [a["ms"] for a in answers]
            latency[mode] = {
                "p50_ms": round(percentile(ms, 50), 1),
                "p99_ms": round(percentile(ms, 99), 1),
                "concurrency": args.concurrency,
            }
            print(
                f"{mode}: R@{args.k} all = {results[mode]['all'][f'r@{args.k}']}%  "
                f"(latency p50 {latency[mode]['p50_ms']} ms at concurrency {args.concurrency})"
            )
        report.update(layer=args.layer, k=args.k, recall=results, latency=latency)
        print()
        print(table(results, ks))
        write_json(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
