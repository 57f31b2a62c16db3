#!/usr/bin/env python3
"""What writing the audit row adds to a call: the cost of ``domain.audit.record()``.

A call writes its audit row inside its own unit of work, after its last write, just before
the commit: one INSERT round trip. A write call's commit waits for the WAL flush anyway; a
read call (context, get, list) would wait for one only because of its audit row, so
``record()`` lets such a transaction commit asynchronously (see ``store/audit.py``).
Two kinds of call, each measured --n times with and without its audit row, in alternating
order:

  read call     SELECT 1 (standing in for context's reads) [+ record()] + commit
  write call    INSERT one row (standing in for remember's write) [+ record()] + commit

Printed per kind: the whole call without and with its row, record() alone (the time inside
``await record(...)``), and the commit without and with the row.

The row is a realistic context-call row: the request after redaction, 24 returned ids with
scores, facets and reasons, gated_out and the markdown token count. The rows are deleted after.
The quoted budget (issue 8): the audit row adds at most 1 ms to a call's p50.

Usage:  python -m bench.audit_overhead [--n 2000] [--database-url URL]
        (without --database-url: a throwaway embedded Postgres in a temp dir)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import text

from bench.stats import percentile
from service.config import Settings
from service.domain.audit import AuditContext, record
from service.domain.auth import Caller
from service.store.database import (
    create_engine,
    make_sessionmaker,
    resolve_database_url,
    start_embedded,
    upgrade,
)


def _row(caller: Caller) -> tuple[AuditContext, dict[str, Any], list[uuid.UUID]]:
    ids = [uuid.uuid4() for _ in range(24)]
    ctx = AuditContext(action="context", caller=caller, namespace="alice:s1:t1")
    ctx.request = {
        "goal": "fix the refresh token rotation bug in the auth service",
        "namespace": "alice:s1:t1",
        "intent": "debug",
        "layer": "recall",
        "project": "auth",
        "limit": 24,
    }
    details = {
        "items": [
            {
                "id": str(i),
                "score": round(0.9 - n * 0.02, 4),
                "facet": "gotchas" if n % 3 else "decisions",
                "reason": f"matched goal terms 'refresh token' + semantic {0.9 - n * 0.02:.2f}",
            }
            for n, i in enumerate(ids)
        ],
        "gated_out": 7,
        "markdown_tokens": 3120,
    }
    return ctx, details, ids


BENCH_PREFIX = "audit-overhead-bench-"


@dataclass
class Timing:
    """One call, in ms: the whole unit of work, record() alone, and the commit alone."""

    call: float
    record: float
    commit: float


async def _call(sessionmaker: Any, caller: Caller, *, write: bool, audit: bool) -> Timing:
    ctx, details, ids = _row(caller)
    inserted = 0.0
    started = time.perf_counter()
    async with sessionmaker() as session:
        if write:  # stands in for remember's own write
            await session.execute(
                text("INSERT INTO orgs (org_id, name) VALUES (:id, :name)"),
                {"id": uuid.uuid4(), "name": f"{BENCH_PREFIX}{uuid.uuid4().hex}"},
            )
        else:  # stands in for context's reads
            await session.execute(text("SELECT 1"))
        if audit:
            before = time.perf_counter()
            await record(
                session, ctx, outcome="ok", status_code=200, memory_ids=ids, details=details
            )
            inserted = time.perf_counter() - before
        committing = time.perf_counter()
        await session.commit()
        done = time.perf_counter()
    return Timing((done - started) * 1000, inserted * 1000, (done - committing) * 1000)


async def measure(url: str, n: int) -> dict[str, dict[str, list[float]]]:
    settings = Settings(database_url=url, embedder="fake")
    engine = create_engine(url, settings)
    sessionmaker = make_sessionmaker(engine)
    org_id = uuid.uuid4()
    caller = Caller(org_id, uuid.uuid4(), "bench", frozenset({"read", "write"}))
    results: dict[str, dict[str, list[float]]] = {}
    try:
        for kind, write in (("read call", False), ("write call", True)):
            series: dict[str, list[float]] = {
                "call, no audit": [],
                "call + audit": [],
                "record()": [],
                "commit, no audit": [],
                "commit + audit": [],
            }
            for i in range(n + n // 10):  # the first tenth warms the pool and the caches
                # Alternate which variant goes first, so drift and caches favour neither.
                if i % 2:
                    plain = await _call(sessionmaker, caller, write=write, audit=False)
                    audited = await _call(sessionmaker, caller, write=write, audit=True)
                else:
                    audited = await _call(sessionmaker, caller, write=write, audit=True)
                    plain = await _call(sessionmaker, caller, write=write, audit=False)
                if i >= n // 10:
                    series["call, no audit"].append(plain.call)
                    series["call + audit"].append(audited.call)
                    series["record()"].append(audited.record)
                    series["commit, no audit"].append(plain.commit)
                    series["commit + audit"].append(audited.commit)
            results[kind] = series
    finally:
        async with sessionmaker() as session:
            await session.execute(
                text("DELETE FROM audit_events WHERE org_id = :org"), {"org": org_id}
            )
            await session.execute(
                text("DELETE FROM orgs WHERE name LIKE :p"), {"p": BENCH_PREFIX + "%"}
            )
            await session.commit()
        await engine.dispose()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="measured calls (default 2000)")
    parser.add_argument("--database-url", help="an external, migrated PostgreSQL")
    args = parser.parse_args()

    url = args.database_url
    if url is None:
        root = Path(tempfile.mkdtemp(prefix="ctxpack-audit-bench-"))
        start_embedded(root, cleanup_mode="delete")  # throwaway: resolve_database_url attaches
        url = resolve_database_url(
            Settings(database_url=None, data_dir=root, database_name="ctxpack_bench")
        )
        upgrade(url)

    results = asyncio.run(measure(url, args.n))
    print(f"audit row overhead, {args.n} calls of each kind with and without it (ms)")
    print(f"{'':30}{'p50':>8}{'p90':>8}{'p99':>8}")
    for kind, series in results.items():
        for name, values in series.items():
            label = f"{kind}: {name}"
            print(
                f"{label:30}{percentile(values, 50):8.3f}{percentile(values, 90):8.3f}{percentile(values, 99):8.3f}"
            )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"(load average {load:.1f} on {os.cpu_count()} CPUs: other work on the machine skews p90/p99)"
    )
    for kind, series in results.items():
        p50 = {name: percentile(values, 50) for name, values in series.items()}
        whole = p50["call + audit"] - p50["call, no audit"]
        parts = p50["record()"] + p50["commit + audit"] - p50["commit, no audit"]
        print(
            f"{kind}: the audit row adds {whole:.3f} ms to the p50 call "
            f"(record() p50 + commit p50 difference: {parts:.3f} ms; budget 1 ms)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
