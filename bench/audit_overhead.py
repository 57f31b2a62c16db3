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

``--read-modes``: context-like read calls with each way of writing their row, timed side by
side (``read_audit``, domain/audit/read_queue.py). A call runs on a pool like the context
packs' (generic plans, autocommit), reads (SELECT 1, standing in for the pack's reads) and
records its row:

  no audit      no row (the floor)
  inline        the row INSERTed by the call (read_audit = inline, the default)
  queued        the row handed to a running read-audit queue at commit (read_audit = queued)

``--concurrency`` calls run at once; the modes take turns in blocks of ``--block`` calls, in
rotating order, so drift and caches favour none. Printed per mode: p50/p90/p99 of a call and
calls per second over its blocks; then the queue's batches, and a check that every row of
both audited modes reached the table (the queue drained).

Usage:  python -m bench.audit_overhead [--n 2000] [--database-url URL]
        python -m bench.audit_overhead --read-modes [--n 4000] [--concurrency 8]
            [--flush-ms 5] [--batch-rows 500] [--database-url URL]
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
from service.domain.audit import AuditContext, ReadAuditQueue, attach, record
from service.domain.auth import Caller
from service.store import probes
from service.store.database import (
    create_engine,
    libpq_url,
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


READ_MODES = ("no audit", "inline", "queued")


async def _read_call(sessionmaker: Any, caller: Caller, mode: str, queue: ReadAuditQueue) -> float:
    """One context-like read call in ``mode``; its time in ms."""
    ctx, details, ids = _row(caller)
    ctx.read_only = True
    started = time.perf_counter()
    async with sessionmaker() as session:
        deferred = attach(session, queue) if mode == "queued" else None
        await session.execute(text("SELECT 1"))  # stands in for the pack's reads
        if mode != "no audit":
            await record(
                session, ctx, outcome="ok", status_code=200, memory_ids=ids, details=details
            )
        await session.commit()
        if deferred is not None:
            deferred.commit()
    return (time.perf_counter() - started) * 1000


async def measure_read_modes(
    url: str, n: int, *, concurrency: int, block: int, flush_ms: float, batch_rows: int
) -> dict[str, Any]:
    """``n`` measured read calls per mode (after a tenth more to warm up), ``concurrency`` at
    a time. Returns per mode the call times (ms) and calls per second, and the queue's
    counts."""
    settings = Settings(database_url=url, embedder="fake")
    citus = await probes.has_citus(libpq_url(url))
    pack_engine = create_engine(url, settings, generic_plans=True, citus=citus)
    write_engine = create_engine(url, settings, citus=citus)
    sessionmaker = make_sessionmaker(pack_engine)
    queue = ReadAuditQueue(
        make_sessionmaker(write_engine),
        capacity=settings.read_audit_queue_rows,
        batch_rows=batch_rows,
        flush_seconds=flush_ms / 1000,
        per_org=citus,
    )
    org_id = uuid.uuid4()
    caller = Caller(org_id, uuid.uuid4(), "bench", frozenset({"read"}))
    times: dict[str, list[float]] = {m: [] for m in READ_MODES}
    busy: dict[str, float] = dict.fromkeys(READ_MODES, 0.0)
    audited = 0
    try:
        async with queue.running():
            warm = n // 10
            blocks = -(-(n + warm) // block)
            for b in range(blocks):
                order = READ_MODES[b % 3 :] + READ_MODES[: b % 3]
                for mode in order:
                    todo = list(range(block))

                    async def worker(mode: str = mode, todo: list[int] = todo) -> list[float]:
                        done = []
                        while todo:
                            todo.pop()
                            done.append(await _read_call(sessionmaker, caller, mode, queue))
                        return done

                    began = time.perf_counter()
                    parts = await asyncio.gather(*(worker() for _ in range(concurrency)))
                    wall = time.perf_counter() - began
                    if mode != "no audit":
                        audited += block
                    if b * block >= warm:
                        times[mode].extend(t for part in parts for t in part)
                        busy[mode] += wall
        async with make_sessionmaker(write_engine)() as session:
            stored = (
                await session.execute(
                    text("SELECT count(*) FROM audit_events WHERE org_id = :org"), {"org": org_id}
                )
            ).scalar_one()
    finally:
        async with make_sessionmaker(write_engine)() as session:
            await session.execute(
                text("DELETE FROM audit_events WHERE org_id = :org"), {"org": org_id}
            )
            await session.commit()
        await pack_engine.dispose()
        await write_engine.dispose()
    return {
        "times": times,
        "per_second": {m: len(times[m]) / busy[m] if busy[m] else 0.0 for m in READ_MODES},
        "expected_rows": audited,
        "stored_rows": int(stored),
        "queue_written": queue.written,
        "queue_dropped": queue.dropped,
    }


def _embedded_url() -> str:
    root = Path(tempfile.mkdtemp(prefix="ctxpack-audit-bench-"))
    start_embedded(root, cleanup_mode="delete")  # throwaway: resolve_database_url attaches
    url = resolve_database_url(
        Settings(database_url=None, data_dir=root, database_name="ctxpack_bench")
    )
    upgrade(url)
    return url


def print_read_modes(result: dict[str, Any], args: argparse.Namespace) -> None:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"context-like read calls, {args.n} per mode at concurrency {args.concurrency} "
        f"(queue: flush {args.flush_ms} ms, batches of up to {args.batch_rows}) (ms)"
    )
    print(f"{'':12}{'p50':>8}{'p90':>8}{'p99':>8}{'calls/s':>10}")
    for mode in READ_MODES:
        values = result["times"][mode]
        print(
            f"{mode:12}{percentile(values, 50):8.3f}{percentile(values, 90):8.3f}"
            f"{percentile(values, 99):8.3f}{result['per_second'][mode]:10.0f}"
        )
    p50 = {m: percentile(result["times"][m], 50) for m in READ_MODES}
    print(
        f"the row adds {p50['inline'] - p50['no audit']:.3f} ms inline, "
        f"{p50['queued'] - p50['no audit']:.3f} ms queued to the p50 call"
    )
    complete = result["stored_rows"] == result["expected_rows"]
    print(
        f"rows stored {result['stored_rows']} of {result['expected_rows']} "
        f"({'all' if complete else 'MISSING ROWS'}); queue wrote {result['queue_written']}, "
        f"dropped {result['queue_dropped']}"
    )
    print(f"(load average {load:.1f} on {os.cpu_count()} CPUs at the end)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="measured calls (default 2000)")
    parser.add_argument("--database-url", help="an external, migrated PostgreSQL")
    parser.add_argument(
        "--read-modes",
        action="store_true",
        help="time context-like read calls: no audit, inline, queued (read_audit)",
    )
    parser.add_argument("--concurrency", type=int, default=8, help="with --read-modes")
    parser.add_argument("--block", type=int, default=200, help="with --read-modes: calls a turn")
    parser.add_argument("--flush-ms", type=float, default=5.0, help="with --read-modes")
    parser.add_argument("--batch-rows", type=int, default=500, help="with --read-modes")
    args = parser.parse_args()

    url = args.database_url or _embedded_url()
    if args.read_modes:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"(load average {load:.1f} on {os.cpu_count()} CPUs at the start)")
        result = asyncio.run(
            measure_read_modes(
                url,
                args.n,
                concurrency=args.concurrency,
                block=args.block,
                flush_ms=args.flush_ms,
                batch_rows=args.batch_rows,
            )
        )
        print_read_modes(result, args)
        return 0 if result["stored_rows"] == result["expected_rows"] else 1

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
