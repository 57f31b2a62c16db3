#!/usr/bin/env python3
"""Writes at the model's pace: batch remember throughput against the embedder's own, on the
same texts, in the same run; and single-write latency in a small and a large namespace.

Against a running server (its key, its data dir for the embedder's settings). Texts are
LoCoMo turns made unique (a day number), stored as ``episode`` memories:

1. ``--batches`` batches of ``--batch-size`` into each namespace given (``--namespaces``;
   say a fresh one and one holding 100k memories, seeded by ``bench.context_speed``);
2. the texts the service embedded for them (each stored memory's name over its content),
   embedded in this process by the embedder the server builds from the same settings
   (``service.embedding.build_embedder``), each batch's right after its answer, turn about
   with the service (``InterleavedPace``): the model's pace;
3. ``--singles`` single remembers into each namespace (p50, p90).

Every run's texts are new to the namespace, whatever ``--seed`` says: the draw is seeded by
``--seed`` and the number of memories the namespace holds (which every stored write raises),
its turns drawn without repeats and its day numbers distinct. A rate is printed only when
every write was stored: otherwise ``invalid`` says how many were caught as duplicates or
refused (bench/measured_writes.py).

It prints one JSON line per namespace with stored/s, the embedder's texts/s and their ratio
(the target: at least 0.8), and the load average before and after.

    python -m bench.write_ratio --url http://127.0.0.1:8765 --key ctxp_... \\
        --data-dir /tmp/ctxspeed --namespaces fresh-ns,big-u0
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path
from typing import Any

import httpx

from bench.context_speed import server_parser
from bench.measured_writes import (
    InterleavedPace,
    against_embedder,
    invalid_reason,
    servers_embedder,
    stored_embed_texts,
    tally,
    write_figure,
)
from bench.stats import percentile

DATA = Path(__file__).resolve().parents[2] / "shared" / "bench" / "locomo"


def texts_for(n: int, seed: int, mark: int, turns: list[dict[str, Any]] | None = None) -> list[str]:
    """``n`` distinct texts: LoCoMo turns without repeats (over again in a new order past the
    last), each with its own day number. ``mark`` (the memories the namespace holds) joins
    ``seed`` in the draw, so a later run against the same namespace sends texts of its own."""
    if turns is None:
        turns = [json.loads(line) for line in (DATA / "memories.jsonl").open() if line.strip()]
    rng = random.Random(f"{seed}-{mark}")
    picked: list[dict[str, Any]] = []
    while len(picked) < n:
        picked += rng.sample(turns, min(len(turns), n - len(picked)))
    days = rng.sample(range(10**6), n)
    return [
        f"{t['speaker']} noted on day {d}: {t['text']}" for t, d in zip(picked, days, strict=True)
    ]


def stored_in(client: httpx.Client, namespace: str) -> int:
    """How many memories the namespace holds (read on the primary)."""
    response = client.get(
        "/v1/memories",
        params={"namespace": namespace, "limit": 1},
        headers={"X-Ctxpack-Consistency": "primary"},
    )
    response.raise_for_status()
    return int(response.json()["total"])


def store_batches(
    client: httpx.Client,
    namespace: str,
    texts: list[str],
    size: int,
    pace: InterleavedPace | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """``texts`` stored in batches of ``size``: the figure (``write_figure``, its rate over the
    requests' seconds only) and the texts the service embedded for the items it stored.
    With ``pace``, each batch's stored texts are embedded right after its answer."""
    answers: list[dict[str, Any]] = []
    seconds = 0.0
    for lo in range(0, len(texts), size):
        chunk = texts[lo : lo + size]
        items = [{"namespace": namespace, "type": "episode", "content": text} for text in chunk]
        started = time.perf_counter()
        response = client.post("/v1/remember/batch", json={"items": items})
        took = time.perf_counter() - started
        seconds += took
        response.raise_for_status()
        batch_answers = response.json()["items"]
        if pace is not None:
            pace.add(stored_embed_texts(client, chunk, batch_answers), took)
        answers += [{**a, "index": lo + int(a["index"])} for a in batch_answers]
    counts = tally(a["status"] for a in answers)
    near = sum(bool(a.get("near_duplicates")) for a in answers)
    return write_figure(counts, len(texts), seconds, near), stored_embed_texts(
        client, texts, answers
    )


def singles(client: httpx.Client, namespace: str, texts: list[str]) -> dict[str, Any]:
    latencies = []
    statuses = []
    for text in texts:
        started = time.perf_counter()
        response = client.post(
            "/v1/remember", json={"namespace": namespace, "type": "episode", "content": text}
        )
        latencies.append((time.perf_counter() - started) * 1000)
        response.raise_for_status()
        statuses.append(response.json()["status"])
    counts = tally(statuses)
    reason = invalid_reason(counts, len(texts))
    if reason is not None:  # a duplicate skips the insert: its latency is not a write's
        return {"sent": len(texts), **counts, "invalid": reason}
    latencies = sorted(latencies[3:])
    return {
        "stored": len(texts),
        "p50_ms": round(percentile(latencies, 50), 1),
        "p90_ms": round(percentile(latencies, 90), 1),
    }


def main() -> int:
    parser = server_parser(__doc__)
    parser.add_argument("--namespaces", default="write-ratio-fresh")
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=50)
    parser.add_argument("--singles", type=int, default=40)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    args = parser.parse_args()
    if not args.url or not args.key:
        parser.error("--url and --key (or CTXPACK_URL, CTXPACK_API_KEY) are required")

    from service.config import Settings

    settings = Settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    embedder = servers_embedder(settings)
    load_before = os.getloadavg()
    client = httpx.Client(
        base_url=args.url, headers={"Authorization": f"Bearer {args.key}"}, timeout=300
    )
    n = args.batches * args.batch_size
    for k, namespace in enumerate(ns.strip() for ns in args.namespaces.split(",")):
        mark = stored_in(client, namespace)
        texts = texts_for(n + args.singles, args.seed + k, mark)
        pace = InterleavedPace(embedder, args.batch_size)
        batch, _ = store_batches(client, namespace, texts[:n], args.batch_size, pace)
        line: dict[str, Any] = {"namespace": namespace, "held_before": mark, "batch": batch}
        if "per_s" in batch:
            against_embedder(batch, pace.result())
            line |= {
                "stored_per_s": batch["per_s"],
                "embedder_per_s": batch["embedder"]["per_s"],
                "ratio": batch.get("of_embedder"),
            }
        else:
            line["stored_per_s"] = batch["invalid"]
        line["single"] = singles(client, namespace, texts[n:])
        print(json.dumps(line), flush=True)
    print(json.dumps({"load_before": load_before, "load_after": os.getloadavg()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
