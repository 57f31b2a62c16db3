#!/usr/bin/env python3
"""Seed a running ctxpack with N memories of realistic text across many users, through the
HTTP batch API (so every memory is redacted, gated, deduplicated and embedded as usual).

Text: LoCoMo dialogue turns (../shared/bench/locomo/memories.jsonl), each as "<speaker>, on
<date>: <turn>", and synthesized technical statements (decisions, gotchas, procedures,
constraints about services, ports, versions and incidents). Memories are spread over
``--users`` users (``user-0042``), each with a few sessions (``user-0042:s2``).

Only memories the gate accepts count: the script keeps sending until ``--count`` memories
were *created* (rejected and duplicate items are reported, not counted).

Usage:
    python -m bench.seed --url http://127.0.0.1:8080 --key ctxp_... --count 100000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from tqdm import tqdm

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "bench" / "locomo" / "memories.jsonl"

SERVICES = [
    "billing",
    "search",
    "ingest",
    "auth",
    "notifications",
    "reporting",
    "gateway",
    "scheduler",
    "payments",
    "profile",
    "export",
    "webhooks",
    "inventory",
    "pricing",
    "analytics",
    "mailer",
]
STORES = ["Postgres 16", "Postgres 17", "Redis 7", "Kafka", "S3", "ClickHouse", "SQLite", "NATS"]
TOOLS = ["pytest", "ruff", "mypy", "Terraform", "Helm", "Argo CD", "GitHub Actions", "Bazel"]
PEOPLE = ["Priya", "Marcus", "Lena", "Tomás", "Aiko", "Jamal", "Sofia", "Wen", "Olu", "Greta"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
REASONS = [
    "the old client leaked connections under load",
    "the vendor SDK does not support retries with backoff",
    "p99 latency doubled after the last schema change",
    "the nightly export overlapped with the backup window",
    "cold starts exceeded the health-check timeout",
    "the staging data set is too small to show the regression",
    "two teams wrote to the same queue with different schemas",
    "the migration locked the table for several minutes",
]

TEMPLATES: list[tuple[str, str]] = [
    ("decision", "We moved the {svc} service from {store} to {store2} because {reason}."),
    (
        "decision",
        "The {svc} team decided to pin {tool} to version {major}.{minor} until {reason2} is fixed.",
    ),
    ("gotcha", "The {svc} service fails its health check on port {port} when {reason}."),
    (
        "gotcha",
        "Running {tool} against the {svc} repo needs the {env} flag, otherwise it reads the wrong config.",
    ),
    (
        "procedure",
        "To rotate the {svc} credentials, run the {tool} job on {day}, then restart the workers one at a time.",
    ),
    (
        "procedure",
        "Deploys of {svc} go through canary first; {person} approves promotion after {mins} minutes of clean metrics.",
    ),
    (
        "constraint",
        "The {svc} API must answer within {ms} ms at p99; anything slower breaks the {svc2} timeouts.",
    ),
    (
        "constraint",
        "Never run schema migrations on {svc} during business hours on {day}; {reason}.",
    ),
    (
        "claim",
        "{person} measured {rps} requests per second on the {svc} service with {store} as the backing store.",
    ),
    (
        "verification",
        "Verified on {day}: the {svc} backfill processed {rows} rows and the checksums matched {store2}.",
    ),
    (
        "plan",
        "Next sprint, {person} will split the {svc} worker pool so that {svc2} jobs stop starving it.",
    ),
    (
        "task",
        "Open task for {person}: add retries with jitter to the {svc} client calling {svc2}, ticket {ticket}.",
    ),
    ("pattern", "Every outage in {svc} this quarter started with {reason}; check that first."),
    (
        "episode",
        "On {day} the {svc} on-call ({person}) rolled back release {major}.{minor}.{patch} after {reason}.",
    ),
]

TYPES_FOR_TURNS = ["episode", "episode", "episode", "claim", "session"]


def _fill(rng: random.Random, template: str) -> str:
    svc, svc2 = rng.sample(SERVICES, 2)
    store, store2 = rng.sample(STORES, 2)
    return template.format(
        svc=svc,
        svc2=svc2,
        store=store,
        store2=store2,
        tool=rng.choice(TOOLS),
        person=rng.choice(PEOPLE),
        day=rng.choice(DAYS),
        reason=rng.choice(REASONS),
        reason2=rng.choice(REASONS).split(" ", 2)[-1],
        port=rng.randint(1024, 65000),
        major=rng.randint(1, 9),
        minor=rng.randint(0, 40),
        patch=rng.randint(0, 20),
        env=rng.choice(["--prod", "--staging", "--ci", "--local"]),
        mins=rng.choice([10, 15, 30, 60]),
        ms=rng.choice([50, 100, 200, 250, 500]),
        rps=rng.randint(80, 9000),
        rows=rng.randint(10_000, 90_000_000),
        ticket=f"OPS-{rng.randint(100, 9999)}",
    )


def load_turns(path: Path = LOCOMO) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    with path.open() as fh:
        return [json.loads(line) for line in fh]


def memories(seed: int, users: int, sessions: int = 3) -> Iterator[dict[str, Any]]:
    """An endless stream of remember items: LoCoMo turns and technical statements, spread
    over ``users`` users and their sessions."""
    rng = random.Random(seed)
    turns = load_turns()
    n = 0
    while True:
        user = f"user-{rng.randrange(users):04d}"
        namespace = user if rng.random() < 0.5 else f"{user}:s{rng.randint(1, sessions)}"
        if turns and rng.random() < 0.5:
            turn = turns[n % len(turns)]
            content = f"{turn['speaker']}, on {turn['timestamp']}: {turn['text']}"
            kind = rng.choice(TYPES_FOR_TURNS)
        else:
            kind, template = rng.choice(TEMPLATES)
            content = _fill(rng, template)
        n += 1
        yield {"namespace": namespace, "type": kind, "content": content, "tags": [kind]}


async def seed(
    url: str,
    key: str,
    count: int,
    *,
    users: int = 1000,
    batch: int = 100,
    concurrency: int = 2,
    seed_value: int = 7,
    progress: bool = True,
) -> dict[str, float]:
    """Send batches until ``count`` memories were created. Returns the counts and the rate."""
    stream = memories(seed_value, users)
    totals = {"created": 0, "duplicate": 0, "rejected": 0}
    started = time.perf_counter()
    bar = tqdm(total=count, unit="mem", disable=not progress, smoothing=0.05)
    lock = asyncio.Lock()
    headers = {"Authorization": f"Bearer {key}"}

    async def worker(client: httpx.AsyncClient) -> None:
        while True:
            async with lock:
                missing = count - totals["created"]
                if missing <= 0:
                    return
                items = [next(stream) for _ in range(min(batch, missing))]
            response = await client.post(
                "/v1/remember/batch", json={"items": items}, headers=headers
            )
            if response.status_code != 200:
                raise RuntimeError(f"batch failed: {response.status_code} {response.text[:300]}")
            body = response.json()
            async with lock:
                totals["created"] += body["created"]
                totals["duplicate"] += body["duplicates"]
                totals["rejected"] += body["rejected"]
                bar.update(body["created"])
                bar.set_postfix(rejected=totals["rejected"], duplicate=totals["duplicate"])

    async with httpx.AsyncClient(base_url=url, timeout=600) as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    bar.close()
    elapsed = time.perf_counter() - started
    return {
        **totals,
        "seconds": round(elapsed, 1),
        "per_second": round(totals["created"] / elapsed, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="http://127.0.0.1:8080")
    parser.add_argument("--key", required=True, help="an API key with the write scope")
    parser.add_argument("--count", type=int, default=10_000, help="memories to create")
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=100, help="items per batch call")
    parser.add_argument("--concurrency", type=int, default=2, help="batches in flight")
    parser.add_argument("--seed", type=int, default=7, help="random seed of the text stream")
    args = parser.parse_args(argv)
    result = asyncio.run(
        seed(
            args.url,
            args.key,
            args.count,
            users=args.users,
            batch=args.batch,
            concurrency=args.concurrency,
            seed_value=args.seed,
        )
    )
    print(json.dumps(result), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
