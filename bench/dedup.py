"""What the duplicate checks cost a write, in a namespace that holds --memories memories
spread over projects p1, p2, none and a few agent diaries (issue 16: the checks are limited
to the write's project, diary and namespace).

In process: the app on httpx's ASGI transport, the fake embedder (so the numbers are the
service and SQL, not the model), a throwaway embedded Postgres. Measured, over HTTP:

  remember new       POST /v1/remember of a new text by a p1-limited key (exact + near probe)
  remember exact     the same text again (an exact duplicate: answers the existing id)
  batch 100 new      POST /v1/remember/batch of 100 new texts
  patch content      PATCH of a memory's content (hash check, re-embed)

Printed: p50 and p90 in ms per kind, and the plans of the exact and near probes.

Usage:  python -m bench.dedup [--memories 5000] [--n 100]

(Seeding goes through the API, whose batch near-duplicate check scans the namespace per
item: tens of thousands of memories in one namespace take minutes to seed.)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text

from bench.stats import percentile
from service.app import create_app
from service.config import Settings
from service.domain import keys as key_service
from service.embedding.fake import FakeEmbedder
from service.store.database import resolve_database_url, start_embedded, upgrade

WORDS = (
    "deploy cache runner gateway token rotation schema index vector queue worker retry "
    "timeout region shard replica backup restore audit metric alert budget latency"
).split()


def _text(rng: random.Random) -> str:
    words = " ".join(rng.choice(WORDS) for _ in range(14))
    return f"Note {uuid.uuid4().hex[:10]}: the {words} setting changed after review."


async def measure(url: str, memories: int, n: int) -> dict[str, list[float]]:
    settings = Settings(
        database_url=url, embedder="fake", migrate_on_start=False, print_bootstrap_key=False,
        rate_limit_per_minute=0,
    )  # type: ignore[call-arg]
    app = create_app(settings, embedder=FakeEmbedder(), database_url=url)
    rng = random.Random(16)
    out: dict[str, list[float]] = {}
    async with app.router.lifespan_context(app):
        async with app.state.ctx.sessionmaker() as session:
            admin = await key_service.create_key(session, org="dedup-speed", scopes=["read", "write"])
            p1 = await key_service.create_key(
                session, org="dedup-speed", scopes=["read", "write"], projects=["p1"]
            )
            await session.commit()
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            ha = {"Authorization": f"Bearer {admin.key}"}
            hp = {"Authorization": f"Bearer {p1.key}"}
            for start in range(0, memories, 500):
                items: list[dict[str, Any]] = []
                for i in range(start, min(memories, start + 500)):
                    item: dict[str, Any] = {"namespace": "alice", "content": _text(rng)}
                    item["project"] = ("p1", "p2", None)[i % 3]
                    if i % 7 == 0:
                        item["agent_id"] = f"agent{i % 5}"
                    items.append(item)
                r = await client.post("/v1/remember/batch", json={"items": items}, headers=ha)
                assert r.status_code == 200, r.text
            async with app.state.ctx.sessionmaker() as session:
                await session.execute(text("ANALYZE memories"))
                await session.commit()

            async def timed(kind: str, call: Any) -> httpx.Response:
                t0 = time.perf_counter()
                response = await call
                out.setdefault(kind, []).append((time.perf_counter() - t0) * 1000)
                assert response.status_code < 300, response.text
                return response

            for _ in range(n):
                body = {"namespace": "alice", "project": "p1", "content": _text(rng)}
                first = await timed("remember new", client.post("/v1/remember", json=body, headers=hp))
                await timed("remember exact", client.post("/v1/remember", json=body, headers=hp))
                await timed(
                    "patch content",
                    client.patch(
                        f"/v1/memories/{first.json()['id']}",
                        json={"content": _text(rng)},
                        headers=hp,
                    ),
                )
            for _ in range(max(3, n // 20)):
                items = [
                    {"namespace": "alice", "project": "p1", "content": _text(rng)} for _ in range(100)
                ]
                await timed(
                    "batch 100 new",
                    client.post("/v1/remember/batch", json={"items": items}, headers=hp),
                )
            async with app.state.ctx.sessionmaker() as session:
                h = (
                    await session.execute(
                        text("SELECT content_hash FROM memories WHERE project = 'p1' LIMIT 1")
                    )
                ).scalar()
                plan = await session.execute(
                    text(
                        "EXPLAIN (ANALYZE, COSTS OFF) SELECT m.id FROM memories m "
                        "WHERE m.org_id = :org AND m.namespace = 'alice' AND m.content_hash = :h "
                        "AND (m.project IS NULL OR m.project = 'p1') AND m.agent_id IS NULL LIMIT 1"
                    ),
                    {"org": admin.org_id, "h": h},
                )
                print("exact probe plan:")
                for (line,) in plan.all():
                    print("   ", line)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=5000)
    parser.add_argument("--n", type=int, default=100, help="measured single writes")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ctxpack-dedup-bench-"))
    start_embedded(root, cleanup_mode="delete")  # throwaway: resolve_database_url attaches to it
    url = resolve_database_url(
        Settings(database_url=None, data_dir=root, database_name="ctxpack_bench")
    )
    upgrade(url)
    results = asyncio.run(measure(url, args.memories, args.n))
    print(f"{args.memories} memories in the namespace; ms over HTTP (in process, fake embedder)")
    print(f"{'':18}{'p50':>8}{'p90':>8}{'n':>6}")
    for kind, values in results.items():
        print(f"{kind:18}{percentile(values, 50):8.2f}{percentile(values, 90):8.2f}{len(values):6d}")
    load = os.getloadavg()[0]
    print(f"(load average {load:.1f} on {os.cpu_count()} CPUs: other work skews the numbers)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
