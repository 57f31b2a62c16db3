"""Server-side render time of each console page at N memories (default 100,000).

Seeds an embedded Postgres by COPY (``service.store.bulk.copy_memories``, as ``bench.seeding`` does
for its 100k store): N memories
over N/100 users (``user-0001:s1:t2``-style namespaces, 15 types, tags, projects), plus an
audit trail of N/5 rows spread over the last 14 days (writes with redactions and gate
rejections, context calls with ``gated_out``), so the overview's series have work to do.
Vectors are random unit vectors and the app runs the fake embedder: the page's database and
template work is what is measured, not the model. Then it signs in through the form and
requests every page ``--repeat`` times in-process (httpx over ASGI, no socket), printing
the median and p95 per page.

Usage:
    python -m bench.console [--memories 100000] [--repeat 20] [--data-dir /tmp/ctxpack-console-bench]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, get_args

import httpx
import numpy as np
import psycopg

from bench.seeding import settle
from bench.stats import percentile
from service.app import create_app
from service.config import Settings
from service.domain import keys as key_service
from service.domain.remember import content_hash
from service.embedding.fake import FakeEmbedder
from service.schemas.memories import MemoryType
from service.store.bulk import copy_memories
from service.store.database import (
    create_engine,
    libpq_url,
    make_sessionmaker,
    resolve_database_url,
    upgrade,
)

TYPES = list(get_args(MemoryType))
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
]
VERBS = [
    "moved to",
    "depends on",
    "must not call",
    "was rewritten around",
    "now caches",
    "retries against",
    "is rate limited by",
    "replaced",
]
REASONS = ["fragment", "raw_tool_output", "log_dump", "reasoning_chain", "symbol_heavy"]
LABELS = ["EMAIL", "GITHUB_TOKEN", "AWS_ACCESS_KEY", "PHONE", "PASSWORD"]


def _sentence(rng: random.Random, i: int) -> str:
    a, b = rng.sample(SERVICES, 2)
    return (
        f"The {a} service {rng.choice(VERBS)} {b} after incident {i}; "
        f"owners agreed on {rng.choice(['Monday', 'Friday'])} to keep it that way."
    )


async def _key(url: str, settings: Settings, org: str) -> tuple[str, uuid.UUID]:
    engine = create_engine(url, settings)
    try:
        async with make_sessionmaker(engine)() as session:
            created = await key_service.create_key(
                session,
                org=org,
                name="bench-admin",
                scopes=["read", "write", "admin"],
            )
            await session.commit()
            return created.key, created.org_id
    finally:
        await engine.dispose()


def seed(url: str, org_id: uuid.UUID, n: int) -> dict[str, Any]:
    rng = random.Random(17)
    users = max(1, n // 100)
    t0 = time.perf_counter()
    columns = (
        "org_id", "id", "namespace", "type", "name", "content", "content_hash", "embedding",
        "project", "agent_id", "tags", "created_at", "updated_at",
    )  # fmt: skip
    now = time.time()

    def rows() -> Iterator[tuple[Any, ...]]:
        for i in range(n):
            u = rng.randrange(users)
            depth = rng.random()
            ns = (
                f"user-{u:04d}"
                + (f":s{rng.randrange(4)}" if depth > 0.3 else "")
                + (f":t{rng.randrange(3)}" if depth > 0.8 else "")
            )
            text = _sentence(rng, i)
            vec = np.random.default_rng(i).standard_normal(384).astype(np.float32)
            vec /= np.linalg.norm(vec)
            at = datetime.fromtimestamp(now - rng.random() * 14 * 86400, UTC)
            yield (
                org_id,
                uuid.uuid4(),
                ns,
                rng.choice(TYPES),
                text[:80],
                text,
                content_hash(text),
                vec,
                rng.choice(["shop", "ops", None]),
                None,
                [rng.choice(SERVICES)],
                at,
                at,
            )

    with psycopg.connect(libpq_url(url)) as conn:
        conn.execute("DROP INDEX IF EXISTS ix_memories_embedding_hnsw")
        copy_memories(conn, columns, rows())
        conn.commit()
        seeded = time.perf_counter() - t0
        t1 = time.perf_counter()
        conn.execute("SET maintenance_work_mem = '512MB'")
        conn.execute(
            "CREATE INDEX ix_memories_embedding_hnsw ON memories USING hnsw "
            "(embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
        )
        conn.commit()
        indexed = time.perf_counter() - t1
        t2 = time.perf_counter()
        conn.execute(
            """
            INSERT INTO audit_events (org_id, id, created_at, key_id, caller, action, namespace,
                request, outcome, status_code, memory_ids, details, redaction_count,
                rejection_count, latency_ms)
            SELECT %(org)s, gen_random_uuid(), now() - (random() * interval '14 days'), NULL,
                   'bench', a.action, 'user-' || lpad((g %% %(users)s)::text, 4, '0'),
                   CASE WHEN a.action = 'remember' AND g %% 7 = 0 THEN jsonb_build_object(
                     'redactions', jsonb_build_array(jsonb_build_object('label',
                       (%(labels)s::text[])[1 + g %% 5], 'count', 1)))
                   ELSE '{}'::jsonb END,
                   CASE WHEN a.action = 'remember' AND g %% 5 = 0 THEN 'rejected' ELSE 'ok' END,
                   200, '{}',
                   CASE WHEN a.action = 'context' THEN jsonb_build_object('gated_out', g %% 9)
                        WHEN g %% 5 = 0 THEN jsonb_build_object('error_code', 'gate_rejected',
                          'reasons', jsonb_build_array((%(reasons)s::text[])[1 + g %% 5]))
                        ELSE '{}'::jsonb END,
                   CASE WHEN a.action = 'remember' AND g %% 7 = 0 THEN 1 ELSE 0 END,
                   CASE WHEN a.action = 'remember' AND g %% 5 = 0 THEN 1 ELSE 0 END,
                   5.0
            FROM generate_series(1, %(rows)s) g
            CROSS JOIN LATERAL (SELECT CASE WHEN g %% 2 = 0 THEN 'context' ELSE 'remember' END
                                AS action) a
            """,
            {"org": org_id, "users": users, "rows": n // 5, "labels": LABELS, "reasons": REASONS},
        )
        conn.commit()
        audited = time.perf_counter() - t2
    settle(libpq_url(url), ["memories", "audit_events"])
    return {"copy_s": round(seeded, 1), "hnsw_s": round(indexed, 1), "audit_s": round(audited, 1)}


async def measure(
    url: str, settings: Settings, key: str, repeat: int
) -> list[tuple[str, list[float]]]:
    app = create_app(settings, embedder=FakeEmbedder(), database_url=url)
    results: list[tuple[str, list[float]]] = []
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as c:
            form = await c.get("/ui/login")
            token = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)  # type: ignore[union-attr]
            r = await c.post("/ui/login", data={"csrf": token, "key": key})
            assert r.status_code in (200, 303), r.status_code
            overview = await c.get("/ui/")
            csrf = re.search(r'name="csrf" value="([^"]+)"', overview.text).group(1)  # type: ignore[union-attr]
            listing = (await c.get("/ui/memories?ns=user-0001")).text
            mid = re.search(r'data-id="([0-9a-f-]{36})"', listing).group(1)  # type: ignore[union-attr]
            await c.post(
                "/ui/pack",
                data={"csrf": csrf, "goal": "billing retries", "namespace": "user-0001:s1"},
            )
            audit = (await c.get("/ui/audit?action=context")).text
            aid = re.search(r'data-id="([0-9a-f-]{36})"', audit).group(1)  # type: ignore[union-attr]
            pages: list[tuple[str, str, dict[str, str] | None]] = [
                ("overview", "/ui/", None),
                ("namespaces", "/ui/namespaces", None),
                ("namespaces opened", "/ui/namespaces?open=user-0001", None),
                ("memories", "/ui/memories", None),
                ("memories ns subtree", "/ui/memories?ns=user-0001", None),
                ("memories type+tag", "/ui/memories?type=gotcha&tag=billing", None),
                ("memories text", "/ui/memories?q=billing+webhooks", None),
                ("memories text broad", "/ui/memories?q=incident", None),
                ("memories page 200", "/ui/memories?page=200", None),
                ("memory detail", f"/ui/memories/{mid}", None),
                ("edit form", f"/ui/memories/{mid}/edit", None),
                (
                    "pack preview",
                    "/ui/pack",
                    {
                        "csrf": csrf,
                        "goal": "billing retries after incidents",
                        "namespace": "user-0001:s1",
                    },
                ),
                ("audit", "/ui/audit", None),
                ("audit filtered", "/ui/audit?action=remember&outcome=rejected", None),
                ("audit row", f"/ui/audit/{aid}", None),
                ("replay", f"/ui/audit/{aid}/replay", {"csrf": csrf}),
                ("keys", "/ui/keys", None),
            ]
            for name, path, data in pages:
                times = []
                for _ in range(repeat):
                    t = time.perf_counter()
                    r = await (c.post(path, data=data) if data is not None else c.get(path))
                    times.append((time.perf_counter() - t) * 1000)
                    assert r.status_code == 200, (name, r.status_code, r.text[:300])
                results.append((name, times))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/ctxpack-console-bench"))
    args = parser.parse_args()
    args.data_dir.mkdir(parents=True, exist_ok=True)
    db = f"console_bench_{args.memories}"
    url = resolve_database_url(
        Settings(database_url=None, data_dir=args.data_dir, database_name=db)
    )
    upgrade(url)
    settings = Settings(
        database_url=url,
        embedder="fake",
        migrate_on_start=False,
        print_bootstrap_key=False,
        rate_limit_per_minute=0,
        data_dir=args.data_dir,
    )
    key, org_id = asyncio.run(_key(url, settings, f"bench-{args.memories}"))
    with psycopg.connect(libpq_url(url)) as conn:
        have = conn.execute("SELECT count(*) FROM memories WHERE org_id = %s", (org_id,)).fetchone()
    if have and have[0] >= args.memories:
        print(f"reusing the {have[0]} memories seeded before in {args.data_dir}", flush=True)
        settle(libpq_url(url), ["memories", "audit_events"])
    else:
        print(f"seeding {args.memories} memories ...", flush=True)
        print("seed:", seed(url, org_id, args.memories), flush=True)
    results = asyncio.run(measure(url, settings, key, args.repeat))
    print(
        f"\n{'page':<22} {'median ms':>10} {'p95 ms':>8}   ({args.memories} memories, "
        f"{args.repeat} requests each, in-process over ASGI)"
    )
    for name, times in results:
        print(f"{name:<22} {percentile(times, 50):>10.1f} {percentile(times, 95):>8.1f}")


if __name__ == "__main__":
    main()
