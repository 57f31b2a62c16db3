#!/usr/bin/env python3
"""Where a call's time goes: phase timings of POST /v1/context or POST /v1/remember, in
process (the app on httpx's ASGI transport, no network), against an existing store.

Each phase (auth, embedding, scope probe, ranking statement, audit row, markdown; for
remember the duplicate probe, insert and audit) is timed by wrapping the function that does
it; the table gives p50 and mean per phase over the measured calls.

    python -m bench.phase_timings --data-dir /tmp/ctxspeed --key ctxp_... \\
        [--call context|remember] [--retrieval hybrid|lexical] [--requests 400]

Use a store seeded by ``bench/context_speed.py --seed`` (users ``speed-u0`` ..). Goals are
LoCoMo questions, remembered texts LoCoMo turns with a random suffix (so none is a
duplicate). The goal cache is off.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.stats import percentile  # noqa: E402

DATA = ROOT.parent / "shared" / "bench" / "locomo"

TIMES: dict[str, list[float]] = collections.defaultdict(list)


def timed(owner: Any, name: str, label: str) -> None:
    """Replace the coroutine function ``owner.name`` by one that records its duration."""
    inner = getattr(owner, name)

    @functools.wraps(inner)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await inner(*args, **kwargs)
        finally:
            TIMES[label].append((time.perf_counter() - started) * 1000)

    setattr(owner, name, wrapper)


def instrument(call: str) -> None:
    from service.domain import context as context_domain
    from service.domain import keys as key_service
    from service.domain import remember as remember_domain
    from service.store import memories, retrieval

    timed(key_service, "authenticate", "auth (cache miss)")
    if call == "context":
        timed(context_domain, "compile_context", "compile_context")
        timed(retrieval.RetrievalRepository, "scope_size", "scope probe")
        timed(retrieval.RetrievalRepository, "rank", "ranking statement")
        timed(context_domain.audit_service, "record", "audit row")
    else:
        timed(remember_domain, "remember", "remember")
        for name in ("probe_one", "existing_by_hash", "near_duplicates", "insert_many"):
            timed(memories.MemoryRepository, name, name)
        timed(remember_domain.audit_service, "record", "audit row")


async def run(args: argparse.Namespace) -> None:
    import httpx

    from service.app import create_app
    from service.config import Settings

    instrument(args.call)
    settings = Settings(
        data_dir=args.data_dir,
        print_bootstrap_key=False,
        rate_limit_per_minute=0,
        query_cache_size=0,
        audit_prune_interval_seconds=0,
    )
    app = create_app(settings)
    pick = random.Random(3)
    with (DATA / "queries.jsonl").open() as f:
        questions = [json.loads(line)["query"] for line in f if line.strip()]
    with (DATA / "memories.jsonl").open() as f:
        turns = [json.loads(line) for line in f if line.strip()]
    async with app.router.lifespan_context(app):
        timed(app.state.ctx.embedder, "embed_query", "embed goal")
        timed(app.state.ctx.embedder, "embed_documents", "embed documents")
        await asyncio.sleep(0.5)  # the auth cache's listener connects
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {args.key}"}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://t", headers=headers
        ) as c:
            for i in range(args.requests + args.warmup):
                if i == args.warmup:
                    TIMES.clear()
                user = f"{args.prefix}u{pick.randrange(args.users)}"
                if args.call == "context":
                    path = "/v1/context"
                    body: dict[str, Any] = {
                        "goal": pick.choice(questions),
                        "namespace": f"{user}:s{pick.randrange(3)}:t{pick.randrange(2)}",
                        "retrieval": args.retrieval,
                    }
                else:
                    turn = pick.choice(turns)
                    path = "/v1/remember"
                    body = {
                        "content": f"{turn['speaker']}: {turn['text']} (r{pick.random():.6f})",
                        "namespace": user,
                        "type": "episode",
                    }
                started = time.perf_counter()
                response = await c.post(path, json=body)
                TIMES["whole call (in process)"].append((time.perf_counter() - started) * 1000)
                if response.status_code not in (200, 201, 422):
                    raise SystemExit(f"{path}: {response.status_code} {response.text[:300]}")
    print(
        f"{args.call} ({args.retrieval if args.call == 'context' else 'real write'}), "
        f"{args.requests} calls"
    )
    print(f"{'phase':28s} {'calls':>6s} {'p50 ms':>8s} {'mean ms':>8s}")
    for label, values in sorted(TIMES.items(), key=lambda kv: -sum(kv[1])):
        values.sort()
        print(
            f"{label:28s} {len(values):6d} {percentile(values, 50):8.2f} "
            f"{sum(values) / len(values):8.2f}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", type=Path, required=True, help="the store's CTXPACK_DATA_DIR")
    parser.add_argument("--key", required=True, help="an API key of the seeded org")
    parser.add_argument("--call", choices=("context", "remember"), default="context")
    parser.add_argument("--retrieval", choices=("hybrid", "lexical", "vector"), default="hybrid")
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--prefix", default="speed-", help="namespace prefix of the seeded users")
    asyncio.run(run(parser.parse_args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
