#!/usr/bin/env python3
"""Writes at the model's pace: batch remember throughput against the embedder's own, on the
same texts, in the same run; and single-write latency in a small and a large namespace.

Against a running server (its key, its data dir for the embedder's settings). Texts are
LoCoMo turns made unique (a day number), stored as ``episode`` memories:

1. ``--batches`` batches of ``--batch-size`` into each namespace given (``--namespaces``;
   say a fresh one and one holding 100k memories, seeded by ``bench.context_speed``);
2. the same texts embedded in this process by the embedder the server builds from the same
   settings (``service.embedding.build_embedder``), batch by batch: the model's pace;
3. ``--singles`` single remembers into each namespace (p50, p90).

It prints one JSON line per namespace with stored/s, the embedder's texts/s and their ratio
(the target: at least 0.8), and the load average before and after.

    python -m bench.write_ratio --url http://127.0.0.1:8765 --key ctxp_... \\
        --data-dir /tmp/ctxspeed --namespaces fresh-ns,big-u0
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path
from typing import Any

import httpx

from bench.stats import percentile
from service.remote import api_key_from_env

DATA = Path(__file__).resolve().parents[2] / "shared" / "bench" / "locomo"


def texts_for(n: int, seed: int) -> list[str]:
    turns = [json.loads(line) for line in (DATA / "memories.jsonl").open() if line.strip()]
    rng = random.Random(seed)
    return [
        f"{t['speaker']} noted on day {rng.randrange(10**6)}: {t['text']}"
        for t in (rng.choice(turns) for _ in range(n))
    ]


def store_batches(client: httpx.Client, namespace: str, texts: list[str], size: int) -> float:
    """Seconds to store ``texts`` in batches of ``size``."""
    started = time.perf_counter()
    for lo in range(0, len(texts), size):
        items = [
            {"namespace": namespace, "type": "episode", "content": text}
            for text in texts[lo : lo + size]
        ]
        response = client.post("/v1/remember/batch", json={"items": items})
        response.raise_for_status()
    return time.perf_counter() - started


def embed_batches(embedder: Any, texts: list[str], size: int) -> float:
    embedder.embed_documents(texts[:size])  # warm
    started = time.perf_counter()
    for lo in range(0, len(texts), size):
        embedder.embed_documents(texts[lo : lo + size])
    return time.perf_counter() - started


def singles(client: httpx.Client, namespace: str, texts: list[str]) -> dict[str, float]:
    latencies = []
    for text in texts:
        started = time.perf_counter()
        response = client.post(
            "/v1/remember", json={"namespace": namespace, "type": "episode", "content": text}
        )
        latencies.append((time.perf_counter() - started) * 1000)
        response.raise_for_status()
    latencies = sorted(latencies[3:])
    return {
        "p50_ms": round(percentile(latencies, 50), 1),
        "p90_ms": round(percentile(latencies, 90), 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=os.environ.get("CTXPACK_URL"))
    parser.add_argument("--key", default=api_key_from_env())
    parser.add_argument("--data-dir", type=Path, help="the server's CTXPACK_DATA_DIR")
    parser.add_argument("--namespaces", default="write-ratio-fresh")
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=50)
    parser.add_argument("--singles", type=int, default=40)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    args = parser.parse_args()
    if not args.url or not args.key:
        parser.error("--url and --key (or CTXPACK_URL, CTXPACK_API_KEY) are required")

    from service.config import Settings
    from service.embedding import build_embedder

    settings = Settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    embedder = build_embedder(settings)
    load_before = os.getloadavg()
    client = httpx.Client(
        base_url=args.url, headers={"Authorization": f"Bearer {args.key}"}, timeout=300
    )
    n = args.batches * args.batch_size
    for k, namespace in enumerate(ns.strip() for ns in args.namespaces.split(",")):
        texts = texts_for(n + args.singles, args.seed + k)
        stored_s = store_batches(client, namespace, texts[:n], args.batch_size)
        embed_s = embed_batches(embedder, texts[:n], args.batch_size)
        single = singles(client, namespace, texts[n:])
        print(
            json.dumps(
                {
                    "namespace": namespace,
                    "stored_per_s": round(n / stored_s, 1),
                    "embedder_per_s": round(n / embed_s, 1),
                    "ratio": round(embed_s / stored_s, 2),
                    "single": single,
                }
            ),
            flush=True,
        )
    print(json.dumps({"load_before": load_before, "load_after": os.getloadavg()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
