#!/usr/bin/env python3
"""ctxpack-client against a running server: what ``remember_many`` buys over one call per
memory, and what a key costs a single write. Prints measured numbers; asserts nothing.

Measures, in fresh namespaces (so no write is a duplicate):
1. ``--items`` memories with ``remember_many`` (chunked to the server's batch limit or
   ``--chunk``, ``--concurrency`` chunks at a time): wall time and memories per second;
2. ``--singles`` memories with one ``remember`` each, sequentially: the same figures;
3. ``--singles`` single writes without a key, then with a key (created), then the same keys
   with new content (updated): p50 and p95 latency of each.

Usage (a server started with ``ctxpack serve``; its admin key):
    python -m bench.client_speed --url http://127.0.0.1:8099 --key ctx_... --items 2000
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients" / "python"))

from ctxpack_client import Client

from bench.stats import percentile

TOPICS = ["billing", "search", "deploys", "auth", "queues", "exports", "flags", "metrics"]


def fact(run: str, n: int, variant: str = "") -> str:
    topic = TOPICS[n % len(TOPICS)]
    return (
        f"The {topic} service instance {n} of run {run} keeps its state in shard {n % 97}{variant}; "
        f"restarting it drains in-flight work first, which takes about {n % 40 + 5} seconds."
    )


def timed_singles(label: str, calls: list[dict[str, object]], client: Client) -> None:
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    for call in calls:
        start = time.perf_counter()
        result = client.remember(**call)  # type: ignore[arg-type]
        latencies.append((time.perf_counter() - start) * 1000)
        statuses[result.status] = statuses.get(result.status, 0) + 1
    print(
        f"  {label:<28} n={len(calls):<5} p50={percentile(latencies, 50):7.1f} ms  "
        f"p95={percentile(latencies, 95):7.1f} ms  mean={statistics.fmean(latencies):7.1f} ms  {statuses}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--singles", type=int, default=200)
    parser.add_argument("--chunk", type=int, default=None)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    run = uuid.uuid4().hex[:8]

    with Client(args.url, args.key, timeout=120) as client:
        who = client.whoami()
        print(f"server {args.url}: max_batch_items={who.max_batch_items}")

        items = [{"namespace": f"bulk{run}", "content": fact(run, n)} for n in range(args.items)]
        start = time.perf_counter()
        result = client.remember_many(items, chunk_size=args.chunk, concurrency=args.concurrency)
        took = time.perf_counter() - start
        print(
            f"remember_many: {args.items} memories in {took:.2f} s = {args.items / took:.0f}/s "
            f"(chunk {args.chunk or 'default'}, concurrency {args.concurrency}; "
            f"created {result.created}, duplicates {result.duplicates}, rejected {result.rejected})"
        )

        singles = [{"namespace": f"one{run}", "content": fact(run, n, " (single)")} for n in range(args.singles)]
        start = time.perf_counter()
        for call in singles:
            client.remember(**call)  # type: ignore[arg-type]
        took = time.perf_counter() - start
        print(f"remember x{args.singles}, one call each: {took:.2f} s = {args.singles / took:.0f}/s")

        print("single-write latency:")
        timed_singles("no key", [{"namespace": f"plain{run}", "content": fact(run, n, " (plain)")} for n in range(args.singles)], client)
        timed_singles("key, created", [{"namespace": f"keyed{run}", "content": fact(run, n, " (v1)"), "key": f"k{n}"} for n in range(args.singles)], client)
        timed_singles("key, updated", [{"namespace": f"keyed{run}", "content": fact(run, n, " (v2)"), "key": f"k{n}"} for n in range(args.singles)], client)
        timed_singles("key, duplicate", [{"namespace": f"keyed{run}", "content": fact(run, n, " (v2)"), "key": f"k{n}"} for n in range(args.singles)], client)


if __name__ == "__main__":
    main()
