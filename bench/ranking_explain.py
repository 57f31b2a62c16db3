#!/usr/bin/env python3
"""Where a context pack's database time goes, per scope: the ranking statement timed in
process (no HTTP, no model: goal vectors are embedded up front) on the pack pool's
connections (generic plans, as the server runs them), then one call under
``EXPLAIN (ANALYZE, BUFFERS)`` with its plan's heaviest nodes. The store's tables and
indexes are read into the page cache first (``bench.seeding.prewarm``).

Scopes are task namespaces of users seeded by ``bench.context_speed`` (``PREFIXuN``,
``PREFIXuN:s1``, ``PREFIXuN:s1:t1``), in the org of ``--key``:

    python -m bench.ranking_explain --url http://127.0.0.1:8765 --key ctxp_... \\
        --data-dir /tmp/ctxspeed --scopes big-:1,speed-:1000 --modes hybrid,lexical

A scope is ``PREFIX:USERS``; each call picks a random user. ``--explain-at K`` explains the
K-th call (after the plan cache has settled; the default 8 is past psycopg's prepare
threshold of 5). Load average before and after are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from bench.context_speed import parse_layouts, server_parser
from bench.stats import percentile
from service.store.retrieval import SCOPE_COUNT_CAP

DATA = Path(__file__).resolve().parents[2] / "shared" / "bench" / "locomo"


def explaining(execute: Any, plan_lines: list[str]) -> Any:
    """``execute`` that also runs the ranking statement (``WITH ...``) under EXPLAIN
    (ANALYZE, BUFFERS), collecting the plan's lines."""
    from sqlalchemy import text

    async def explain(stmt: Any, params: Any = None, *a: Any, **k: Any) -> Any:
        sql = getattr(stmt, "text", "")
        if sql.lstrip().startswith("WITH"):
            rows = await execute(text("EXPLAIN (ANALYZE, BUFFERS) " + sql), params)
            plan_lines.extend(r[0] for r in rows.all())
        return await execute(stmt, params, *a, **k)

    return explain


def explaining_pipeline(pipelined: Any, plan_lines: list[str]) -> Any:
    """``retrieval.pipelined_transaction`` (a wide scope's path on the pack pool) that first
    runs the ranking statement under EXPLAIN (ANALYZE, BUFFERS) in a transaction of its own
    with the same settings, collecting the plan's lines, then runs it as the server does."""

    async def explain(session: Any, settings: Any, ranked: Any) -> Any:
        def explained(lexemes: list[str]) -> tuple[str, dict[str, Any]]:
            sql, params = ranked(lexemes)
            return "EXPLAIN (ANALYZE, BUFFERS) " + sql, params

        rows = await pipelined(session, settings, explained)
        plan_lines.extend(str(next(iter(r.values()))) for r in rows)
        return await pipelined(session, settings, ranked)

    return explain


async def run_scope(
    args: argparse.Namespace, org: uuid.UUID, prefix: str, users: int, mode: str, goals: Any
) -> dict[str, Any]:
    from sqlalchemy.ext.asyncio import AsyncSession

    from service.config import Settings
    from service.domain.ranking import PlanInputs, build_plan
    from service.store import retrieval
    from service.store.database import create_engine, resolve_database_url
    from service.store.retrieval import RetrievalRepository, Scope

    pipelined = retrieval.pipelined_transaction
    settings = Settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    engine = create_engine(resolve_database_url(settings), settings, generic_plans=True)
    rng = random.Random(args.seed)
    latencies: list[float] = []
    plan_lines: list[str] = []
    try:
        for i, (goal, vector) in enumerate(goals):
            user = rng.randrange(users)
            names = [f"{prefix}u{user}", f"{prefix}u{user}:s1", f"{prefix}u{user}:s1:t1"]
            scope = Scope(org_id=org, namespaces=names)
            async with AsyncSession(engine) as session:
                repo = RetrievalRepository(session)
                if i == args.explain_at:
                    session.execute = explaining(session.execute, plan_lines)  # type: ignore[method-assign]
                    retrieval.pipelined_transaction = explaining_pipeline(pipelined, plan_lines)
                started = time.perf_counter()
                size = await repo.scope_size(scope, SCOPE_COUNT_CAP)
                plan = build_plan(
                    PlanInputs(
                        mode=mode,  # type: ignore[arg-type]
                        layer="recall",
                        intent="general",
                        query=goal,
                        query_vector=vector if mode != "lexical" else None,
                        limit=24,
                        domain=None,
                        include_related=True,
                        related_limit=5,
                    ),
                    settings,
                )
                try:
                    await repo.rank(scope, plan, size)
                finally:
                    retrieval.pipelined_transaction = pipelined
                if i != args.explain_at:
                    latencies.append((time.perf_counter() - started) * 1000)
    finally:
        await engine.dispose()
    measured = latencies[args.warmup :]
    heavy = [
        line.strip()[:160]
        for line in plan_lines
        if "actual time" in line and ("Scan" in line or "CTE" in line)
    ]
    if args.plan_file:
        with args.plan_file.open("a") as f:
            f.write(f"-- {prefix}:{users} {mode}\n" + "\n".join(plan_lines) + "\n")
    return {
        "scope": f"{prefix}:{users}",
        "mode": mode,
        "calls": len(measured),
        "p50_ms": round(percentile(measured, 50), 2),
        "p90_ms": round(percentile(measured, 90), 2),
        "p99_ms": round(percentile(measured, 99), 2),
        "plan_scans": heavy[:12],
        "timing": [line.strip() for line in plan_lines if line.strip().endswith(" ms")][-2:],
    }


def main() -> int:
    parser = server_parser(__doc__)
    parser.add_argument("--scopes", default="speed-:1000", help="PREFIX:USERS,...")
    parser.add_argument("--modes", default="hybrid,lexical")
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--explain-at", type=int, default=8)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument(
        "--plan-file", type=Path, help="append each explained call's whole plan to this file"
    )
    args = parser.parse_args()
    try:
        scopes = parse_layouts(args.scopes, least=1)
    except ValueError as error:
        parser.error(str(error))
    if not args.url or not args.key:
        parser.error("--url and --key (or CTXPACK_URL, CTXPACK_API_KEY) are required")

    from service.config import Settings
    from service.embedding import build_embedder

    who = httpx.get(f"{args.url}/v1/whoami", headers={"Authorization": f"Bearer {args.key}"})
    org = uuid.UUID(who.json()["org_id"])
    questions = [json.loads(line)["query"] for line in (DATA / "queries.jsonl").open()]
    picked = random.Random(args.seed).sample(questions, args.calls + args.warmup + 1)
    settings = Settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    vectors = build_embedder(settings).embed_documents(picked)
    goals = list(zip(picked, vectors, strict=True))
    # The store's pages in the page cache first, as a server that has run a while has them:
    # timed after a bench run had pushed them out, one big-scope goal's heap reads took
    # 19.4 ms against 1.8 ms once cached.
    from bench.seeding import prewarm
    from service.store.database import libpq_url, resolve_database_url

    warmed = prewarm(libpq_url(resolve_database_url(settings)), ["memories", "relations"])
    print(json.dumps({"prewarm": warmed}), flush=True)
    print(json.dumps({"load_before": os.getloadavg()}), flush=True)
    for prefix, users in scopes:
        for mode in args.modes.split(","):
            out = asyncio.run(run_scope(args, org, prefix, users, mode.strip(), goals))
            print(json.dumps(out), flush=True)
    print(json.dumps({"load_after": os.getloadavg()}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
