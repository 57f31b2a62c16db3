#!/usr/bin/env python3
"""How Citus runs ctxpack's calls: the share of remember and context statements routed to a
single shard, from Citus's own counters.

On a Citus coordinator (``--database-url``, migrated: ``ctxpack db upgrade``), the script
creates an org and a key, authenticates once (the caller cache then answers), and runs
through the service's own app (in process, fake embedder):

- ``--remember`` remember calls (single writes, keyed writes, a batch of 20 every 10th call),
- ``--context`` context calls over every layer (recall, deep_search with the graph step,
  wake) and retrieval mode (hybrid, lexical, vector), half of them with
  the org's namespaces indexed (``namespace_indexes.sync``) so the wide path (each
  namespace's own HNSW, SET LOCAL) runs too.

Citus counts every statement it plans over distributed or reference tables as a
single-shard or a multi-shard execution (``citus_stat_counters``, with
``citus.enable_stat_counters``); the counters are reset after the key is made and read at
the end. Statements that touch no Citus table (BEGIN, SET LOCAL) are not executions of
either kind; the script also counts every statement the app sent (SQLAlchemy events).
Printed: the counts per phase and the routing share, single / (single + multi). The goal
is 100%.

Usage:  python -m bench.citus_routing --database-url postgresql://postgres@127.0.0.1:56432/ctxpack
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import psycopg
from sqlalchemy import event

from bench.seed import memories
from service.app import create_app
from service.config import Settings
from service.domain import keys as key_service
from service.embedding.fake import FakeEmbedder
from service.store import namespace_indexes
from service.store.database import libpq_url

LAYERS = ("recall", "deep_search", "wake")
MODES = ("hybrid", "lexical", "vector")


def _counters(url: str) -> tuple[int, int]:
    with psycopg.connect(libpq_url(url)) as conn:
        row = conn.execute(
            "SELECT query_execution_single_shard, query_execution_multi_shard "
            "FROM citus_stat_counters WHERE name = current_database()"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def _reset(url: str) -> None:
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute(
            "SELECT citus_stat_counters_reset(oid) FROM pg_database "
            "WHERE datname = current_database()"
        )


@asynccontextmanager
async def _app(url: str, **overrides: Any) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    """A client of the app on ``url``, and the app's resources; ``client.statements["n"]``
    counts the statements the app sends."""
    settings = Settings(  # type: ignore[call-arg]
        database_url=url, embedder="fake", migrate_on_start=False, print_bootstrap_key=False,
        audit_prune_interval_seconds=0, expiry_purge_interval_seconds=0, **overrides,
    )  # fmt: skip
    app = create_app(settings, embedder=FakeEmbedder(), database_url=url)
    async with app.router.lifespan_context(app):
        statements = {"n": 0}
        for engine in (app.state.ctx.engine, app.state.ctx.pack_engine):

            @event.listens_for(engine.sync_engine, "before_cursor_execute")
            def count(*_: Any) -> None:
                statements["n"] += 1

        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            client.statements = statements  # type: ignore[attr-defined]
            yield client, app.state.ctx


async def run(url: str, n_remember: int, n_context: int) -> list[tuple[str, int, int, int]]:
    """Runs the calls, prints the table and returns its rows: (phase, statements sent,
    single-shard, multi-shard)."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone() is None:
            raise SystemExit("not a Citus coordinator")
        # For the connections opened from here on (the app's pools).
        conn.execute(f'ALTER DATABASE "{conn.info.dbname}" SET citus.enable_stat_counters = on')
    items = memories(seed=3, users=2)
    results: list[tuple[str, int, int, int]] = []
    async with _app(url) as (client, resources):
        async with resources.sessionmaker() as session:
            created = await key_service.create_key(
                session, org=f"routing-{uuid.uuid4().hex[:8]}", scopes=["read", "write"]
            )
            await session.commit()
        auth = {"Authorization": f"Bearer {created.key}"}
        assert (await client.get("/v1/whoami", headers=auth)).status_code == 200  # cached now

        _reset(url)
        sent = client.statements["n"]  # type: ignore[attr-defined]
        for i in range(n_remember):
            if i % 10 == 9:
                batch = [next(items) for _ in range(20)]
                r = await client.post("/v1/remember/batch", json={"items": batch}, headers=auth)
            else:
                body = next(items)
                if i % 5 == 0:
                    body["key"] = f"fact-{i % 15}"
                r = await client.post("/v1/remember", json=body, headers=auth)
            assert r.status_code in (200, 201), r.text
        single, multi = _counters(url)
        results.append(("remember", client.statements["n"] - sent, single, multi))  # type: ignore[attr-defined]

        _reset(url)
        sent = client.statements["n"]  # type: ignore[attr-defined]
        calls = itertools.product(LAYERS, MODES, ("user-0000", "user-0001:s1"))
        for _, (layer, mode, namespace) in zip(
            range(n_context // 2), itertools.cycle(calls), strict=False
        ):
            body = {"goal": "deploy the billing service", "namespace": namespace,
                    "layer": layer, "retrieval": mode}  # fmt: skip
            r = await client.post("/v1/context", json=body, headers=auth)
            assert r.status_code == 200, r.text
        single, multi = _counters(url)
        results.append(("context (exact scan)", client.statements["n"] - sent, single, multi))  # type: ignore[attr-defined]

    async with _app(url) as (client, resources):
        assert (await client.get("/v1/whoami", headers=auth)).status_code == 200
        # Each namespace of the org gets its own HNSW and GIN index: packs take the wide path.
        await namespace_indexes.sync(resources.engine, 0, org_id=created.org_id)
        _reset(url)
        sent = client.statements["n"]  # type: ignore[attr-defined]
        calls = itertools.product(LAYERS, MODES, ("user-0000", "user-0001:s1"))
        for _, (layer, mode, namespace) in zip(
            range(n_context // 2), itertools.cycle(calls), strict=False
        ):
            body = {"goal": "deploy the billing service", "namespace": namespace,
                    "layer": layer, "retrieval": mode}  # fmt: skip
            r = await client.post("/v1/context", json=body, headers=auth)
            assert r.status_code == 200, r.text
        single, multi = _counters(url)
        results.append(("context (HNSW path)", client.statements["n"] - sent, single, multi))  # type: ignore[attr-defined]

    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{conn.info.dbname}" RESET citus.enable_stat_counters')

    print(
        f"{'phase':<22} {'statements sent':>16} {'single-shard':>13} {'multi-shard':>12} {'routed':>8}"
    )
    total_single = total_multi = 0
    for phase, sent_n, single, multi in results:
        share = single / (single + multi) if single + multi else 1.0
        total_single += single
        total_multi += multi
        print(f"{phase:<22} {sent_n:>16} {single:>13} {multi:>12} {share:>8.1%}")
    share = total_single / (total_single + total_multi) if total_single + total_multi else 1.0
    print(f"{'all':<22} {'':>16} {total_single:>13} {total_multi:>12} {share:>8.1%}")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", required=True, help="a migrated Citus coordinator")
    parser.add_argument("--remember", type=int, default=100, help="remember calls")
    parser.add_argument("--context", type=int, default=108, help="context calls")
    args = parser.parse_args()
    asyncio.run(run(args.database_url, args.remember, args.context))


if __name__ == "__main__":
    main()
