#!/usr/bin/env python3
"""Latency of POST /v1/context over HTTP on a realistic store: 100k memories over 1,000 users.

Seeding goes straight to the database (COPY), not through remember, so a 100k store takes a
minute rather than an hour of embedding: texts are LoCoMo turns, vectors their MiniLM
embeddings (computed once and cached in --vectors) plus a little noise, so the vector space
has the clusters of real text. Per user: 40% of memories at ``u``, 40% in three sessions,
20% in tasks; random types; 30% in one of five projects; 5% in an agent diary; created over
the last 90 days; 50 relations. The seed lands in the org of the given key.

Then it asks ``--requests`` packs, one at a time (``--concurrency 1``), each at a random
user's task namespace with a LoCoMo question as the goal, and prints p50/p90/p99 of the
client-side latency, per retrieval mode. ``lexical`` never calls the model, so hybrid minus
lexical is roughly the cost of embedding the goal.

    CTXPACK_DATA_DIR=/tmp/ctxspeed CTXPACK_PORT=8765 CTXPACK_RATE_LIMIT_PER_MINUTE=0 \
        CTXPACK_QUERY_CACHE_SIZE=0 ctxpack serve                         # prints a key

(The goal cache off: a second run would otherwise find its goals' vectors cached.)
    python -m bench.context_speed --url http://127.0.0.1:8765 --key ctxp_... \\
        --data-dir /tmp/ctxspeed --seed
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import random
import sys
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from bench.measured_writes import STORED, invalid_reason, tally
from bench.seeding import deferred_indexes, settle
from bench.stats import percentile
from service.remote import api_key_from_env

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "bench" / "locomo"
TYPES = (
    "decision", "plan", "task", "idea", "claim", "constraint", "rule", "procedure",
    "pattern", "gotcha", "verification", "domain", "session", "episode",
)  # fmt: skip


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open() as f:
        return [json.loads(line) for line in f if line.strip()]


def vectors(texts: list[str], cache: Path) -> Any:
    import numpy as np

    if cache.exists():
        return np.load(cache)
    sys.path.insert(0, str(ROOT))
    from service.embedding.minilm import MiniLMEmbedder

    print(f"embedding {len(texts)} texts once (cached in {cache}) ...", flush=True)
    array = np.array(MiniLMEmbedder().embed_documents(texts), dtype=np.float32)
    np.save(cache, array)
    return array


def locomo_texts() -> list[str]:
    """The LoCoMo turns the seed's memories are made of (their text, the vector pool's rows)."""
    return [f"{t['speaker']}: {t['text']}" for t in read_jsonl(DATA / "memories.jsonl")]


def namespace_of(prefix: str, user: int, i: int, r: float, flat: bool) -> str:
    """Where the ``i``-th memory of ``user`` lives: 40% at the user, 40% in one of three
    sessions, 20% in one of two tasks of a session (every one at the user when ``flat``)."""
    name = f"{prefix}u{user}"
    if flat or r < 0.4:
        return name
    return f"{name}:s{i % 3}" if r < 0.8 else f"{name}:s{i % 3}:t{i % 2}"


def seed_orgs(
    database_url: str,
    org_ids: Sequence[uuid.UUID],
    users: int,
    per_user: int,
    cache: Path,
    prefix: str,
    *,
    seed: int = 7,
    now: datetime | None = None,
    relations_per_user: int = 50,
    flat: bool = False,
    defer_indexes: bool = False,
    index_memory: str = "1GB",
) -> dict[str, Any]:
    """``users`` users of ``per_user`` memories (and ``relations_per_user`` relations each)
    in every org of ``org_ids``, by COPY. The same ``seed`` and ``now`` give the same rows
    (ids included), so two engines can hold the same store. ``flat`` puts every memory of a
    user in one namespace. Returns counts and seconds."""
    import numpy as np
    import psycopg
    from pgvector.psycopg import register_vector

    sys.path.insert(0, str(ROOT))
    from service.store.bulk import copy_memories

    texts = locomo_texts()
    base = vectors(texts, cache)
    rng = np.random.default_rng(seed)
    pick = random.Random(seed)
    now = now or datetime.now(UTC)
    started = time.perf_counter()
    ids: list[tuple[uuid.UUID, list[uuid.UUID]]] = []

    def rows() -> Any:
        for org_id in org_ids:
            for u in range(users):
                mine: list[uuid.UUID] = []
                for i in range(per_user):
                    j = int(rng.integers(len(texts)))
                    ns = namespace_of(prefix, u, i, float(rng.random()), flat)
                    vec = base[j] + rng.normal(0, 0.02, base.shape[1]).astype(np.float32)
                    vec /= np.linalg.norm(vec)
                    when = now - timedelta(days=float(rng.random() * 90))
                    memory_id = uuid.UUID(int=pick.getrandbits(128), version=4)
                    mine.append(memory_id)
                    content = texts[j]
                    yield (
                        org_id, memory_id, ns, pick.choice(TYPES), content[:80], content,
                        hashlib.sha256(f"{content}|{org_id}|{u}|{i}".encode()).hexdigest(), vec,
                        f"p{i % 5}" if rng.random() < 0.3 else None,
                        "agent-x" if rng.random() < 0.05 else None, when, when,
                    )  # fmt: skip
                ids.append((org_id, mine))

    columns = ("org_id", "id", "namespace", "type", "name", "content", "content_hash",
               "embedding", "project", "agent_id", "created_at", "updated_at")  # fmt: skip
    built: dict[str, float] = {}
    settled: dict[str, float] = {}
    loaded = ["memories", "relations"]
    with contextlib.ExitStack() as stack:
        if defer_indexes:
            stack.enter_context(
                deferred_indexes(database_url, loaded, built, index_memory, settled)
            )
        with psycopg.connect(database_url) as conn:
            register_vector(conn)
            written = copy_memories(conn, columns, rows())
            edges: set[tuple[uuid.UUID, uuid.UUID, str]] = set()
            with conn.cursor().copy(
                "COPY relations (org_id, id, source_id, target_id, relationship) FROM STDIN"
            ) as copy:
                for org_id, mine in ids:
                    for _ in range(relations_per_user if len(mine) > 1 else 0):
                        a, b = pick.sample(mine, 2)
                        rel = pick.choice(("depends_on", "related_to", "derived_from"))
                        if (a, b, rel) not in edges:
                            edges.add((a, b, rel))
                            copy.write_row((org_id, uuid.uuid4(), a, b, rel))
            conn.commit()
        copied = time.perf_counter() - started
    if not defer_indexes:
        settle(database_url, loaded, settled)
    seconds = time.perf_counter() - started
    print(
        f"seeded {written} memories, {len(edges)} relations in {seconds:.0f} s",
        flush=True,
    )
    return {
        "memories": written, "relations": len(edges), "copy_s": round(copied, 1),
        "index_build_s": built, "settle_s": settled, "seconds": round(seconds, 1),
    }  # fmt: skip


def seed(
    database_url: str,
    org_id: uuid.UUID,
    users: int,
    per_user: int,
    cache: Path,
    prefix: str,
    rng_seed: int = 7,
) -> None:
    seed_orgs(database_url, [org_id], users, per_user, cache, prefix, seed=rng_seed)


async def measure(
    url: str, key: str, users: int, requests: int, mode: str, concurrency: int, prefix: str
) -> dict[str, float]:
    questions = [q["query"] for q in read_jsonl(DATA / "queries.jsonl")]
    pick = random.Random(11)
    latencies: list[float] = []
    sizes: list[int] = []
    sem = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {key}"}
    ) as client:

        async def one(goal: str, namespace: str) -> None:
            body = {"goal": goal, "namespace": namespace, "retrieval": mode}
            async with sem:
                started = time.perf_counter()
                response = await client.post("/v1/context", json=body, timeout=60)
                latencies.append((time.perf_counter() - started) * 1000)
            response.raise_for_status()
            sizes.append(response.json()["total_items"])

        for _ in range(20):  # warm up: connections, prepared statements, the model
            await one(f"warm-up goal {pick.random()}", f"{prefix}u0:s1:t1")
        latencies.clear()
        sizes.clear()
        # Distinct goals (as far as the question set goes), so the server's goal cache
        # never spares a measured call the model.
        order = pick.sample(questions, len(questions))
        started = time.perf_counter()
        await asyncio.gather(
            *(
                one(
                    order[i % len(order)],
                    f"{prefix}u{pick.randrange(users)}:s{pick.randrange(3)}:t{pick.randrange(2)}",
                )
                for i in range(requests)
            )
        )
        wall = time.perf_counter() - started
    return {
        **percentiles_ms(latencies), "max_ms": round(max(latencies), 2),
        "rps": round(requests / wall, 1), "mean_items": round(sum(sizes) / len(sizes), 1),
    }  # fmt: skip


def percentiles_ms(latencies: Sequence[float]) -> dict[str, float]:
    """p50, p90 and p99 of ``latencies`` (ms), as every report of this module gives them."""
    return {f"p{q}_ms": round(percentile(latencies, q), 2) for q in (50, 90, 99)}


def parse_layouts(spec: str, least: int = 2) -> list[tuple[str, int]]:
    """``speed-:1000,big-:1`` -> [("speed-", 1000), ("big-", 1)]: each seeded layout's
    namespace prefix and its count of users; at least ``least`` of them."""
    layouts = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        prefix, _, users = part.rpartition(":")
        if not prefix or not users.isdigit() or int(users) < 1:
            raise ValueError(f"a layout is PREFIX:USERS, got {part!r}")
        layouts.append((prefix, int(users)))
    if len(layouts) < least:
        raise ValueError(f"at least {least} layouts wanted, got {len(layouts)}")
    return layouts


async def measure_layouts(
    url: str,
    key: str,
    layouts: Sequence[tuple[str, int]],
    requests: int,
    mode: str,
    questions: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Issue 26's big-scope measurement: the layouts asked call by call on one server, one
    client (c=1), each round's order shuffled, so a burst of the host's noise falls on every
    layout alike. Each call is a LoCoMo question at a random user's task namespace of the
    layout; the figures are client-side. The first layout is the reference: every other one's
    p50 and p99 are set against its p50 (``p50_ratio``, ``p99_ratio``). ``questions``: the
    goals, LoCoMo's questions by default."""
    if questions is None:
        questions = [q["query"] for q in read_jsonl(DATA / "queries.jsonl")]
    pick = random.Random(13)
    latencies: dict[str, list[float]] = {prefix: [] for prefix, _ in layouts}
    sizes: dict[str, list[int]] = {prefix: [] for prefix, _ in layouts}
    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {key}"}
    ) as client:

        async def one(goal: str, namespace: str) -> tuple[float, int]:
            body = {"goal": goal, "namespace": namespace, "retrieval": mode}
            started = time.perf_counter()
            response = await client.post("/v1/context", json=body, timeout=60)
            elapsed = (time.perf_counter() - started) * 1000
            response.raise_for_status()
            return elapsed, response.json()["total_items"]

        for round_ in range(10):  # warm up: connections, prepared statements, the model
            for prefix, _ in layouts:
                await one(f"warm-up goal {round_} {pick.random()}", f"{prefix}u0:s1:t1")
        order = pick.sample(questions, len(questions))
        for i in range(requests):
            # Distinct goals per call, so the server's goal cache never spares one the model.
            turn = list(enumerate(layouts))
            pick.shuffle(turn)
            for j, (prefix, users) in turn:
                goal = order[(i * len(layouts) + j) % len(order)]
                namespace = (
                    f"{prefix}u{pick.randrange(users)}:s{pick.randrange(3)}:t{pick.randrange(2)}"
                )
                elapsed, items = await one(goal, namespace)
                latencies[prefix].append(elapsed)
                sizes[prefix].append(items)
    report: dict[str, Any] = {"mode": mode, "requests_per_layout": requests, "layouts": {}}
    reference = None
    for prefix, users in layouts:
        row = {
            "users": users,
            "calls": len(latencies[prefix]),
            **percentiles_ms(latencies[prefix]),
            "mean_items": round(sum(sizes[prefix]) / len(sizes[prefix]), 1),
        }
        if reference is None:
            reference = row["p50_ms"]
        else:
            row["p50_ratio"] = round(row["p50_ms"] / reference, 2)
            row["p99_ratio"] = round(row["p99_ms"] / reference, 2)
        report["layouts"][prefix] = row
    return report


async def measure_writes(
    url: str, key: str, namespaces: Sequence[str], writes: int, batch: int, nonce: str
) -> dict[str, Any]:
    """Single and batch remember latency into each of ``namespaces``, alternated call by
    call (one client, c=1). Every text is new to the store: a LoCoMo turn with this run's
    ``nonce`` and a counter, so no write is caught as an exact duplicate before it is
    embedded; a write the service did not store makes the figures invalid (``stored`` says
    how many were, ``invalid`` what went wrong: bench/measured_writes.py)."""
    texts = locomo_texts()
    pick = random.Random(nonce)
    order = pick.sample(range(len(texts)), len(texts))
    lat: dict[str, dict[str, list[float]]] = {ns: {"single": [], "batch": []} for ns in namespaces}
    counter = 0
    statuses: list[str] = []

    def fresh(namespace: str) -> dict[str, Any]:
        nonlocal counter
        counter += 1
        text = texts[order[counter % len(order)]]
        return {"namespace": namespace, "type": "episode",
                "content": f"{text} (noted in run {nonce}, entry {counter}.)"}  # fmt: skip

    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60
    ) as client:
        for i in range(writes + 5):  # 5 warm-up rounds
            for ns in namespaces:
                started = time.perf_counter()
                r = await client.post("/v1/remember", json=fresh(ns))
                single = (time.perf_counter() - started) * 1000
                r.raise_for_status()
                items = [fresh(ns) for _ in range(batch)]
                started = time.perf_counter()
                rb = await client.post("/v1/remember/batch", json={"items": items})
                batched = (time.perf_counter() - started) * 1000
                rb.raise_for_status()
                if i < 5:
                    continue
                statuses.append(r.json()["status"])
                statuses += [it["status"] for it in rb.json()["items"]]
                lat[ns]["single"].append(single)
                lat[ns]["batch"].append(batched)
    counts = tally(statuses)
    out: dict[str, Any] = {
        "sent": len(statuses), "stored": counts.get(STORED, 0), "batch_size": batch,
    }  # fmt: skip
    reason = invalid_reason(counts, len(statuses))
    if reason is not None:
        out["invalid"] = reason
    for ns, kinds in lat.items():
        out[ns] = {
            f"{kind}_p50_ms": round(percentile(sorted(v), 50), 2) for kind, v in kinds.items()
        }
    return out


def server_parser(doc: str | None) -> argparse.ArgumentParser:
    """The parser of a bench tool that talks to a running server, with the arguments every
    such tool takes: ``--url`` and ``--key`` (or ``CTXPACK_URL``, ``CTXPACK_API_KEY``), and
    ``--data-dir``, the server's ``CTXPACK_DATA_DIR`` (its embedded Postgres)."""
    parser = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=os.environ.get("CTXPACK_URL"))
    parser.add_argument("--key", default=api_key_from_env())
    parser.add_argument(
        "--data-dir", type=Path, help="the server's CTXPACK_DATA_DIR (embedded Postgres)"
    )
    return parser


def main() -> int:
    parser = server_parser(__doc__)
    parser.add_argument("--seed", action="store_true", help="seed the store first (direct COPY)")
    parser.add_argument("--database-url", help="or the server's external database URL")
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--per-user", type=int, default=100)
    parser.add_argument("--prefix", default="speed-", help="namespace prefix of the seeded users")
    parser.add_argument(
        "--rng-seed",
        type=int,
        default=7,
        help="the seed's random seed: the same one gives the same rows, ids included; give "
        "another one to seed a second set of users into the same store",
    )
    parser.add_argument("--vectors", type=Path, default=Path("/tmp/ctxpack-locomo-minilm.npy"))
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--modes", default="hybrid,lexical")
    parser.add_argument("--out", type=Path, default=Path("context_speed.json"))
    parser.add_argument(
        "--writes",
        type=int,
        default=0,
        help="instead of packs: this many single and batch remember calls into each of "
        "--write-namespaces, alternated",
    )
    parser.add_argument("--write-namespaces", default="big-u0:s0:t0,speed-u1:s0:t0")
    parser.add_argument(
        "--layouts",
        help="instead of one layout: seeded layouts as PREFIX:USERS,... (e.g. speed-:1000,"
        "big-:1), asked call by call in shuffled turns (hybrid, c=1); each later layout's p50 "
        "and p99 set against the first one's p50",
    )
    parser.add_argument("--write-batch", type=int, default=10)
    args = parser.parse_args()
    if not args.url or not args.key:
        parser.error("--url and --key (or CTXPACK_URL, CTXPACK_API_KEY) are required")

    who = httpx.get(f"{args.url}/v1/whoami", headers={"Authorization": f"Bearer {args.key}"}).json()
    report: dict[str, Any] = {
        "users": args.users,
        "per_user": args.per_user,
        "requests": args.requests,
    }
    if args.seed:
        sys.path.insert(0, str(ROOT))
        from service.config import Settings
        from service.store.database import libpq_url, resolve_database_url

        overrides: dict[str, Any] = {"database_url": args.database_url} if args.database_url else {}
        if args.data_dir:
            overrides["data_dir"] = args.data_dir
        url = libpq_url(resolve_database_url(Settings(**overrides)))
        seed(
            url,
            uuid.UUID(who["org_id"]),
            args.users,
            args.per_user,
            args.vectors,
            args.prefix,
            args.rng_seed,
        )
    if args.writes:
        nonce = uuid.uuid4().hex[:8]
        namespaces = [n.strip() for n in args.write_namespaces.split(",") if n.strip()]
        report["writes"] = asyncio.run(
            measure_writes(args.url, args.key, namespaces, args.writes, args.write_batch, nonce)
        )
        print(json.dumps(report["writes"]), flush=True)
        if "invalid" in report["writes"]:
            print(report["writes"]["invalid"], flush=True)
        args.out.write_text(json.dumps(report, indent=2))
        return 0
    if args.layouts:
        try:
            layouts = parse_layouts(args.layouts)
        except ValueError as error:
            parser.error(str(error))
        report["layouts"] = asyncio.run(
            measure_layouts(args.url, args.key, layouts, args.requests, "hybrid")
        )
        print(json.dumps(report["layouts"]), flush=True)
        args.out.write_text(json.dumps(report, indent=2))
        return 0
    results = {}
    for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
        results[mode] = asyncio.run(
            measure(
                args.url, args.key, args.users, args.requests, mode, args.concurrency, args.prefix
            )
        )
        print(f"{mode:8s} concurrency {args.concurrency}: {json.dumps(results[mode])}", flush=True)
    report["results"] = results
    args.out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
