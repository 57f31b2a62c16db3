#!/usr/bin/env python3
"""Load run: a real ``ctxpack serve`` (real model, embedded Postgres) holding N memories, and
mixed remember/context traffic at the highest rate it sustains with zero errors.

Steps:
1. start ``ctxpack serve`` on a free port with ``--data-dir`` (kept between runs, so the
   slow seeding happens once; the key is kept in ``<data-dir>/load-key.txt``);
2. seed memories until the store holds ``--memories`` (bench/seed.py, batch API), with
   the real model, or, with ``--seed-embedder fake``, through a server on the fake embedder
   (seeding 100k on the real model takes hours on a busy 2-core machine; the stored vectors
   then carry no meaning, but the database holds and indexes the same amount);
3. find the rate: open-loop steps of ``--step-seconds`` at rising rates until one has an
   error, a p99 over ``--slo-p99`` seconds or falls behind its schedule;
4. hold the best rate for ``--duration`` seconds (>= 120 for the report) and print the rate,
   latency percentiles and errors, overall and per kind of call.

Traffic: ``--remember-share`` of calls are POST /v1/remember (a new technical statement or
LoCoMo turn at a random user's namespace), the rest POST /v1/context (a LoCoMo question or
a technical goal, at a random user:session, layer recall). If /v1/context does not exist the
rest are GET /v1/memories at a random user's namespace, and the report says so.

Open loop: calls start on schedule whether or not earlier ones finished (as real clients
do), so a server that falls behind shows it as latency, not as a lower offered rate. The run
is bounded in time and in calls in flight, and talks only to 127.0.0.1.

Usage:
    python -m bench.load --data-dir /tmp/ctxpack-load --memories 100000 --duration 120
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench import seed as seeding
from bench.stats import percentile

ROOT = Path(__file__).resolve().parents[1]
QUERIES = ROOT.parent / "shared" / "bench" / "locomo" / "queries.jsonl"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    url: str
    key: str
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def server_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXPACK_")}
    env.update(
        CTXPACK_DATA_DIR=str(data_dir),
        CTXPACK_LOG_LEVEL="WARNING",
        # The limiter stays in the path, far above the offered rate (one key drives it all).
        CTXPACK_RATE_LIMIT_PER_MINUTE="6000000",
        CTXPACK_RATE_LIMIT_BURST="100000",
        CTXPACK_AUDIT_PRUNE_INTERVAL_SECONDS="0",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    env.update(extra)
    return env


def start_server(data_dir: Path, *, timeout: float = 300, **env: str) -> Server:
    """``ctxpack serve`` on a free port; the admin key is read from its first start."""
    data_dir.mkdir(parents=True, exist_ok=True)
    key_file = data_dir / "load-key.txt"
    port = free_port()
    log = data_dir / "serve.log"
    with log.open("ab") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "service", "serve", "--port", str(port)],
            cwd=ROOT,
            env=server_env(data_dir, **env),
            stdout=subprocess.PIPE,
            stderr=err,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    key = key_file.read_text().strip() if key_file.exists() else ""
    assert process.stdout is not None
    os.set_blocking(process.stdout.fileno(), False)
    buffered = b""
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"ctxpack serve exited: {log.read_text()[-3000:]}")
        chunk = process.stdout.read() or b""
        buffered += chunk
        if not key and b"\n" in buffered:
            key = buffered.split(b"\n", 1)[0].decode().strip()
            key_file.write_text(key + "\n")
        with contextlib.suppress(httpx.HTTPError):
            if key and httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return Server(process, url, key, log)
        if time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"ctxpack serve did not start: {log.read_text()[-3000:]}")
        time.sleep(0.5)


# --- traffic --------------------------------------------------------------------------------


def goals() -> list[str]:
    questions: list[str] = []
    if QUERIES.exists():
        with QUERIES.open() as fh:
            questions = [json.loads(line)["query"] for line in fh]
    technical = [
        f"why did the {svc} service {what}"
        for svc in seeding.SERVICES
        for what in ("fail its health check", "roll back", "move off its old store", "get slower")
    ]
    return questions + technical


@dataclass
class Stats:
    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    samples: list[str] = field(default_factory=list)
    behind: int = 0

    def add(self, kind: str, seconds: float, ok: bool, detail: str = "") -> None:
        self.latencies.setdefault(kind, []).append(seconds)
        if not ok:
            self.errors[kind] = self.errors.get(kind, 0) + 1
            if len(self.samples) < 5:
                self.samples.append(f"{kind}: {detail}"[:300])

    @property
    def calls(self) -> int:
        return sum(len(v) for v in self.latencies.values())

    @property
    def error_count(self) -> int:
        return sum(self.errors.values()) + self.behind


def _ms(values: list[float], q: float) -> float:
    """The ``q``-th percentile of ``values`` (seconds) in ms; 0 when there are none."""
    return round(percentile(values, q) * 1000, 1) if values else 0.0


def summary(stats: Stats, rate: float, seconds: float) -> dict[str, Any]:
    everything = [x for v in stats.latencies.values() for x in v]
    out: dict[str, Any] = {
        "offered_rate": rate,
        "achieved_rate": round(stats.calls / seconds, 2),
        "seconds": round(seconds, 1),
        "calls": stats.calls,
        "errors": stats.error_count,
        "p50_ms": _ms(everything, 50),
        "p95_ms": _ms(everything, 95),
        "p99_ms": _ms(everything, 99),
        "max_ms": round(max(everything, default=0) * 1000, 1),
        "by_kind": {
            kind: {
                "calls": len(v),
                "errors": stats.errors.get(kind, 0),
                "p50_ms": _ms(v, 50),
                "p99_ms": _ms(v, 99),
            }
            for kind, v in stats.latencies.items()
        },
    }
    if stats.behind:
        out["not_started_in_time"] = stats.behind
    if stats.samples:
        out["error_samples"] = stats.samples
    return out


class Traffic:
    """Builds the calls of the mix; one instance per run, deterministic per seed."""

    def __init__(
        self, key: str, users: int, remember_share: float, has_context: bool, seed: int = 11
    ):
        self.headers = {"Authorization": f"Bearer {key}"}
        self.users = users
        self.remember_share = remember_share
        self.has_context = has_context
        self.rng = random.Random(seed)
        self.texts: Iterator[dict[str, Any]] = seeding.memories(seed + 1000, users)
        self.goals = goals()

    def next_call(self) -> tuple[str, str, str, dict[str, Any] | None, dict[str, str] | None]:
        user = f"user-{self.rng.randrange(self.users):04d}"
        if self.rng.random() < self.remember_share:
            item = next(self.texts)
            item["namespace"] = user
            # A unique suffix: the load measures writes, not the duplicate shortcut.
            item["content"] += f" (load {self.rng.getrandbits(32):08x})"
            return "remember", "POST", "/v1/remember", item, None
        if self.has_context:
            body = {
                "goal": self.rng.choice(self.goals),
                "namespace": f"{user}:s{self.rng.randint(1, 3)}",
                "layer": "recall",
            }
            return "context", "POST", "/v1/context", body, None
        return "list", "GET", "/v1/memories", None, {"namespace": user, "limit": "20"}


async def run_at(
    client: httpx.AsyncClient, traffic: Traffic, rate: float, seconds: float, max_in_flight: int
) -> dict[str, Any]:
    """Open-loop traffic at ``rate`` calls/s for ``seconds``."""
    stats = Stats()
    in_flight: set[asyncio.Task[None]] = set()
    slots = asyncio.Semaphore(max_in_flight)

    async def one(kind: str, method: str, path: str, body: Any, params: Any) -> None:
        started = time.perf_counter()
        try:
            response = await client.request(
                method, path, json=body, params=params, headers=traffic.headers
            )
            ok = response.status_code < 400
            detail = f"{response.status_code} {response.text[:200]}"
        except httpx.HTTPError as exc:
            ok, detail = False, type(exc).__name__
        stats.add(kind, time.perf_counter() - started, ok, detail)
        slots.release()

    started = time.perf_counter()
    total = int(rate * seconds)
    for i in range(total):
        due = started + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        if slots.locked():
            stats.behind += 1  # the server holds max_in_flight calls: count it as a failure
            continue
        await slots.acquire()
        task = asyncio.create_task(one(*traffic.next_call()))
        in_flight.add(task)
        task.add_done_callback(in_flight.discard)
    if in_flight:
        await asyncio.wait(in_flight, timeout=120)
    return summary(stats, rate, time.perf_counter() - started)


async def find_rate(
    client: httpx.AsyncClient, traffic: Traffic, args: argparse.Namespace
) -> tuple[float, list[dict[str, Any]]]:
    """Rising steps until one fails; the last clean rate."""
    steps: list[dict[str, Any]] = []
    rate, best = args.start_rate, 0.0
    while rate <= args.max_rate:
        result = await run_at(client, traffic, rate, args.step_seconds, args.max_in_flight)
        clean = (
            result["errors"] == 0
            and result["p99_ms"] <= args.slo_p99 * 1000
            and result["achieved_rate"] >= 0.95 * rate
        )
        result["clean"] = clean
        steps.append(result)
        print(json.dumps({"step": result}), flush=True)
        if not clean:
            break
        best = rate
        rate = round(rate * args.growth, 1)
    return best, steps


async def store_size(client: httpx.AsyncClient, key: str) -> int:
    response = await client.get(
        "/v1/memories", params={"limit": 1}, headers={"Authorization": f"Bearer {key}"}
    )
    response.raise_for_status()
    return int(response.json()["total"])


async def seed_with(data_dir: Path, args: argparse.Namespace, report: dict[str, Any]) -> None:
    """Seed up to ``--memories`` through a server of its own when ``--seed-embedder`` differs
    from the embedder under test (the fake one makes 100k affordable on a busy machine)."""
    server = start_server(data_dir, CTXPACK_EMBEDDER=args.seed_embedder)
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
            have = await store_size(client, server.key)
        if have < args.memories:
            print(
                f"seeding {args.memories - have} memories ({have} stored), "
                f"embedder {args.seed_embedder}",
                flush=True,
            )
            report["seed"] = await seeding.seed(
                server.url,
                server.key,
                args.memories - have,
                users=args.users,
                batch=args.seed_batch,
                concurrency=2,
                seed_value=have + 7,
            )
            report["seed"]["embedder"] = args.seed_embedder
            print(json.dumps({"seed": report["seed"]}), flush=True)
    finally:
        server.stop()


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    data_dir = Path(args.data_dir or tempfile.mkdtemp(prefix="ctxpack-load-"))
    report: dict[str, Any] = {"data_dir": str(data_dir), "loadavg_start": os.getloadavg()}
    if args.seed_embedder != "minilm":
        await seed_with(data_dir, args, report)
    server = start_server(data_dir)
    report["url"] = server.url
    try:
        limits = httpx.Limits(max_connections=args.max_in_flight, max_keepalive_connections=64)
        async with httpx.AsyncClient(base_url=server.url, timeout=60, limits=limits) as client:
            have = await store_size(client, server.key)
            if have < args.memories:
                print(f"seeding {args.memories - have} memories ({have} stored)", flush=True)
                report["seed"] = await seeding.seed(
                    server.url,
                    server.key,
                    args.memories - have,
                    users=args.users,
                    batch=args.seed_batch,
                    concurrency=2,
                    seed_value=have + 7,
                )
                print(json.dumps({"seed": report["seed"]}), flush=True)
            report["memories"] = await store_size(client, server.key)
            report["loadavg_before_traffic"] = os.getloadavg()
            if args.seed_only:
                return report
            has_context = (await client.get("/openapi.json")).json()["paths"].get(
                "/v1/context"
            ) is not None
            report["mix"] = {
                "remember": args.remember_share,
                "context" if has_context else "list (no /v1/context yet)": round(
                    1 - args.remember_share, 2
                ),
            }
            traffic = Traffic(server.key, args.users, args.remember_share, has_context)
            # Warm-up: the model's first calls and Postgres's caches.
            await run_at(client, traffic, max(1.0, args.start_rate / 2), 10, args.max_in_flight)
            if args.rate:
                best, steps = args.rate, []
            else:
                best, steps = await find_rate(client, traffic, args)
            report["steps"] = steps
            if best <= 0:
                report["result"] = "no clean rate found; lower --start-rate"
                return report
            for attempt in range(args.retries + 1):
                final = await run_at(client, traffic, best, args.duration, args.max_in_flight)
                final["attempt"] = attempt
                report.setdefault("holds", []).append(final)
                if final["errors"] == 0 and final["p99_ms"] <= args.slo_p99 * 1000:
                    report["result"] = final
                    break
                best = round(best * 0.8, 1)
            else:
                report["result"] = "the rate did not hold; see holds"
    finally:
        server.stop()
        report["loadavg_end"] = os.getloadavg()
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", help="kept between runs (default: a new temp dir)")
    parser.add_argument("--memories", type=int, default=100_000, help="store size to reach")
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--seed-batch", type=int, default=100)
    parser.add_argument("--duration", type=float, default=120, help="seconds at the found rate")
    parser.add_argument("--rate", type=float, help="skip the search: hold this rate")
    parser.add_argument("--start-rate", type=float, default=5)
    parser.add_argument("--growth", type=float, default=1.25, help="rate factor between steps")
    parser.add_argument("--max-rate", type=float, default=500)
    parser.add_argument("--step-seconds", type=float, default=30)
    parser.add_argument(
        "--slo-p99", type=float, default=2.0, help="p99 seconds a clean step allows"
    )
    parser.add_argument("--remember-share", type=float, default=0.3)
    parser.add_argument("--max-in-flight", type=int, default=64)
    parser.add_argument("--retries", type=int, default=2, help="lower the rate 20%% and retry")
    parser.add_argument("--seed-only", action="store_true", help="seed, then stop")
    parser.add_argument(
        "--seed-embedder",
        choices=["minilm", "fake"],
        default="minilm",
        help="embedder of the seeding server (fake: fast, vectors without meaning; the "
        "traffic always runs on the real model)",
    )
    parser.add_argument("--json", help="also write the report here")
    args = parser.parse_args(argv)
    report = asyncio.run(main_async(args))
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text)
    result = report.get("result")
    if isinstance(result, dict):
        print(
            f"\nsustained {result['achieved_rate']} calls/s for {result['seconds']} s with "
            f"{report['memories']} memories stored: p50 {result['p50_ms']} ms, p99 "
            f"{result['p99_ms']} ms, {result['errors']} errors"
        )
        return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
