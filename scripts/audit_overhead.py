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

Printed per kind: record() alone (the time inside ``await record(...)``), the call without and
with its row, and their paired difference.

The row is a realistic context-call row: the request after redaction, 24 returned ids with
scores, facets and reasons, gated_out and the markdown token count. The rows are deleted after.
The quoted budget (issue 8): the audit row adds at most 1 ms to a call's p50.

Usage:  python scripts/audit_overhead.py [--n 2000] [--database-url URL]
        (without --database-url: a throwaway embedded Postgres in a temp dir)
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import text

from service.config import Settings
from service.domain.audit import AuditContext, record
from service.domain.auth import Caller
from service.store.database import (
    _with_database,
    create_engine,
    ensure_database,
    make_sessionmaker,
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


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _call(
    sessionmaker: Any, caller: Caller, *, write: bool, audit: bool
) -> tuple[float, float]:
    """One unit of work; returns (whole call, record() alone) in ms."""
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
        await session.commit()
    return (time.perf_counter() - started) * 1000, inserted * 1000


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
                "record()": [],
                "no audit": [],
                "with audit": [],
                "added": [],
            }
            for i in range(n + n // 10):  # the first tenth warms the pool and the caches
                # Alternate which variant goes first, so drift and caches favour neither.
                if i % 2:
                    plain, _ = await _call(sessionmaker, caller, write=write, audit=False)
                    audited, inserted = await _call(sessionmaker, caller, write=write, audit=True)
                else:
                    audited, inserted = await _call(sessionmaker, caller, write=write, audit=True)
                    plain, _ = await _call(sessionmaker, caller, write=write, audit=False)
                if i >= n // 10:
                    series["record()"].append(inserted)
                    series["no audit"].append(plain)
                    series["with audit"].append(audited)
                    series["added"].append(audited - plain)
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
        server = start_embedded(root, cleanup_mode="delete")
        admin = server.get_uri()
        ensure_database(admin, "ctxpack_bench")
        url = str(_with_database(admin, "ctxpack_bench"))
        upgrade(url)

    results = asyncio.run(measure(url, args.n))
    print(f"audit row overhead over {args.n} paired calls, ms")
    print(f"{'':24}{'p50':>8}{'p90':>8}{'p99':>8}")
    for kind, series in results.items():
        for name, values in series.items():
            label = f"{kind}: {name}"
            print(
                f"{label:24}{_pct(values, 0.5):8.3f}{_pct(values, 0.9):8.3f}{_pct(values, 0.99):8.3f}"
            )
    for kind, series in results.items():
        added = _pct(series["with audit"], 0.5) - _pct(series["no audit"], 0.5)
        print(
            f"{kind}: p50 with audit - p50 without = {added:.3f} ms; "
            f"median paired difference = {_pct(series['added'], 0.5):.3f} ms (budget 1 ms)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
