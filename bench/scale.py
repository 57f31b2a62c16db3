#!/usr/bin/env python3
"""Scale bench: one node (embedded PostgreSQL) against a 3-node Citus cluster (a coordinator
and two workers on this machine), side by side in one run, at 100k memories over 1,000 orgs
and (``--big``) 1M memories over 10,000 orgs.

On one machine the cluster is not faster (three servers share the same cores and every
call takes one more hop): the point is that every call is routed to one shard and that its
cost does not grow with the number of orgs. Printed, per size and engine:

- **context**: p50/p99 of POST /v1/context (hybrid, recall layer) over HTTP on a real
  ``ctxpack serve``, one call at a time, each at a random org (its own key) and one of its
  task namespaces, with a LoCoMo question as the goal; the two engines' calls alternate in
  blocks, so both see the same machine;
- **batch writes**: memories per second of POST /v1/remember/batch (``--batch-size`` items
  at a random org's user), and the DB share of a batch: the time its SQL statements took
  (the same batches through the app in process, timed at the cursor) over its HTTP time.
  The servers run the deterministic fake embedder unless ``--embedder minilm``: the model's
  time is the same on both engines and, on 2 cores, would make a batch mostly embedding;
- **per-call cost against the number of orgs**: with two sizes, the ratio of the big size's
  figures to the small one's (1.0: the cost does not grow with the orgs);
- **routing** (``bench.citus_routing`` on the cluster): the share of the statements of
  remember and context calls Citus ran as single-shard router queries;
- **HNSW at a 100k-memory scope** (``--hnsw``): one org, one namespace of 100k memories
  (the same rows on both engines), so retrieval takes the namespace's own HNSW index
  (store/namespace_indexes.py). Recall@k is the share of the exact-scan pack's items (the
  same service before the namespace's indexes are built: the ranking over exact cosine
  distances) found by the HNSW path's pack, for
  ``retrieval=vector``, per engine; and the overlap of the cluster's packs with one node's
  (vector and hybrid, |A∩B| / max(|A|, |B|)). Goals are LoCoMo questions on the MiniLM model
  (the seeded vectors are MiniLM's, so the goals must be too). Targets (issue 25): recall
  within 0.5 points of one node, overlap >= 95%.

Seeding is direct: orgs and keys written by COPY (keys made and hashed by
``service.domain.auth``), memories by COPY (``bench.context_speed.seed_orgs``: LoCoMo turns,
their MiniLM vectors plus noise; HNSW and GIN indexes built after the load). Each org has
two users (``s-u0``, ``s-u1``), each with memories at the user, in three sessions and in
their tasks. ``--store DIR`` keeps both engines' data (one embedded server and the three
Citus nodes, one database per size) and the keys, so a later run skips the seeding:

    python -m bench.scale --store /var/tmp/ctxpack-scale --big --hnsw --seed-only
    python -m bench.scale --store /var/tmp/ctxpack-scale --big --hnsw --measure-only

Without ``--store`` everything lives in a temp dir, removed at the end. The load average is
printed before and after measuring. Results: JSON (``--out``) and a markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from bench import citus_routing, context_speed
from bench.load import Server, start_server
from bench.seed import memories as write_items
from bench.seeding import namespace_index_pass
from bench.stats import percentile

ROOT = Path(__file__).resolve().parents[1]
PREFIX = "s-"
USERS_PER_ORG = 2
HNSW_ROWS = 100_000


# --- plan (pure) ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Size:
    memories: int
    orgs: int

    @property
    def database(self) -> str:
        return f"scale_{self.memories}_{self.orgs}"

    @property
    def label(self) -> str:
        return f"{_short(self.memories)} memories / {_short(self.orgs)} orgs"

    @property
    def per_user(self) -> int:
        return max(1, self.memories // (self.orgs * USERS_PER_ORG))


SMALL = Size(100_000, 1_000)
BIG = Size(1_000_000, 10_000)


def _short(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1_000 and n % 1_000 == 0:
        return f"{n // 1_000}k"
    return str(n)


def parse_size(text: str) -> Size:
    """``MEMORIES:ORGS`` (e.g. ``10000:100``)."""
    try:
        memories, orgs = (int(part) for part in text.split(":"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not MEMORIES:ORGS: {text!r}") from exc
    if memories < orgs * USERS_PER_ORG or orgs < 1:
        raise argparse.ArgumentTypeError(f"need at least {USERS_PER_ORG} memories per org")
    return Size(memories, orgs)


def hnsw_database(rows: int) -> str:
    return f"scale_hnsw_{rows}"


def context_plan(orgs: int, n: int, seed: int) -> list[tuple[int, str]]:
    """``n`` context calls: (org index, namespace), a random org's user's task namespace."""
    rng = random.Random(seed)
    return [
        (
            rng.randrange(orgs),
            f"{PREFIX}u{rng.randrange(USERS_PER_ORG)}:s{rng.randrange(3)}:t{rng.randrange(2)}",
        )
        for _ in range(n)
    ]


def write_plan(orgs: int, n: int, seed: int) -> list[tuple[int, str]]:
    """``n`` batches: (org index, namespace), a random org's user's write namespace (kept
    apart from the seeded ones, so the run can remove what it wrote)."""
    rng = random.Random(seed)
    return [(rng.randrange(orgs), f"{PREFIX}u{rng.randrange(USERS_PER_ORG)}:w") for _ in range(n)]


def blocks(n: int, size: int) -> list[range]:
    """``range(n)`` cut in consecutive blocks of ``size`` (the last one shorter)."""
    return [range(i, min(i + size, n)) for i in range(0, n, size)]


def latency_summary(latencies_ms: Sequence[float]) -> dict[str, float]:
    values = sorted(latencies_ms)
    return {
        "n": len(values),
        "p50_ms": round(percentile(values, 50), 2),
        "p99_ms": round(percentile(values, 99), 2),
        "mean_ms": round(sum(values) / len(values), 2),
    }


def overlap(a: Sequence[str], b: Sequence[str]) -> float:
    """|A∩B| / max(|A|, |B|); two empty packs overlap fully."""
    if not a and not b:
        return 1.0
    return len(set(a) & set(b)) / max(len(set(a)), len(set(b)))


def recall(found: Sequence[str], truth: Sequence[str]) -> float:
    """The share of ``truth`` in ``found`` (1.0 when ``truth`` is empty)."""
    return len(set(found) & set(truth)) / len(set(truth)) if truth else 1.0


def routed_share(rows: Sequence[tuple[str, int, int, int]]) -> float:
    """single / (single + multi) over ``bench.citus_routing``'s rows."""
    single = sum(r[2] for r in rows)
    multi = sum(r[3] for r in rows)
    return single / (single + multi) if single + multi else 1.0


def cost_ratios(small: dict[str, Any], big: dict[str, Any]) -> dict[str, float | None]:
    """The big size's per-call figures over the small size's (one engine)."""

    def r(a: float | None, b: float | None) -> float | None:
        return round(b / a, 2) if a and b else None

    return {
        "context_p50": r(small["context"]["p50_ms"], big["context"]["p50_ms"]),
        "context_p99": r(small["context"]["p99_ms"], big["context"]["p99_ms"]),
        "write_ms_per_memory": r(small["writes"]["ms_per_memory"], big["writes"]["ms_per_memory"]),
    }


ENGINES = ("node", "cluster")


def markdown(report: dict[str, Any]) -> str:
    """The report's tables."""
    out = [
        "| size | engine | context p50 | context p99 | batch writes | write DB share |",
        "|---|---|---|---|---|---|",
    ]
    for label, per_engine in report["sizes"].items():
        for engine in ENGINES:
            if engine not in per_engine:
                continue
            m = per_engine[engine]
            share = m["writes"].get("db_share")
            out.append(
                f"| {label} | {engine} | {m['context']['p50_ms']:.1f} ms | "
                f"{m['context']['p99_ms']:.1f} ms | {m['writes']['memories_per_s']:.0f} memories/s | "
                f"{'' if share is None else f'{share:.0%}'} |"
            )
    if report.get("ratios"):
        out += ["", "| engine | context p50 ratio | context p99 ratio | write ms/memory ratio |",
                "|---|---|---|---|"]  # fmt: skip
        for engine, ratio in report["ratios"].items():
            cells = [("" if v is None else f"{v:.2f}") for v in ratio.values()]
            out.append(f"| {engine} ({report['ratio_of']}) | " + " | ".join(cells) + " |")
    if report.get("routing"):
        out += ["", "| routing phase | statements sent | single-shard | multi-shard |",
                "|---|---|---|---|"]  # fmt: skip
        for phase, sent, single, multi in report["routing"]["phases"]:
            out.append(f"| {phase} | {sent} | {single} | {multi} |")
        out.append(f"| **routed** | | {report['routing']['share']:.1%} | |")
    if report.get("hnsw"):
        h = report["hnsw"]
        out += [
            "",
            f"HNSW at a {_short(h['scope'])}-memory scope ({h['goals']} goals, top {h['k']}):",
            "",
            "| | one node | cluster |",
            "|---|---|---|",
            f"| recall@{h['k']} (vector pack vs exact-scan pack) | {h['recall']['node']:.1%} | "
            f"{h['recall']['cluster']:.1%} |",
            f"| exact-scan packs equal to one node's | | {h['exact_equal']:.1%} |",
            f"| vector pack overlap with one node | | {h['overlap']['vector']:.1%} |",
            f"| hybrid pack overlap with one node | | {h['overlap']['hybrid']:.1%} |",
        ]
    return "\n".join(out)


# --- engines --------------------------------------------------------------------------------


def with_database(url: str, database: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + database, parts.query, parts.fragment))


def free_base_port() -> int:
    """The first of three free consecutive ports."""
    for base in range(56100, 60000, 3):
        socks: list[socket.socket] = []
        try:
            for port in range(base, base + 3):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
        return base
    raise RuntimeError("no three free consecutive ports")


class Node:
    """One embedded PostgreSQL under ``root`` (stops when this process exits)."""

    def __init__(self, root: Path) -> None:
        from service.store.database import start_embedded

        self.server = start_embedded(root, cleanup_mode="stop")

    def url(self, database: str) -> str:
        from service.store.database import ensure_database

        admin = self.server.get_uri()
        ensure_database(admin, database)
        return with_database(admin, database)

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.server.cleanup()


class Cluster:
    """A coordinator and two workers (the Citus source's ``cluster.sh``) under ``root``."""

    def __init__(self, root: Path, base_port: int) -> None:
        lines = subprocess.run(
            ["bash", str(ROOT / "tools" / "citus_build.sh")],
            env={**os.environ, "PYTHON_BIN": sys.executable},
            check=True, capture_output=True, text=True,
        ).stdout.split()  # fmt: skip
        self.src, self.out = Path(lines[-2]), Path(lines[-1])
        self.root = root
        self.base_port = base_port
        root.mkdir(parents=True, exist_ok=True)
        for d in (root, root.parent):
            d.chmod(0o755)  # PostgreSQL runs as embedded_postgres when root starts it

    def url(self, database: str) -> str:
        result = subprocess.run(
            ["bash", str(self.src / "cluster.sh"), "start", str(self.out), str(self.root / "nodes"),
             str(self.base_port), database],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        return result.stdout.split()[-1]

    def stop(self) -> None:
        subprocess.run(
            ["bash", str(self.src / "cluster.sh"), "stop", str(self.out), str(self.root / "nodes")],
            check=False, capture_output=True,
        )  # fmt: skip


# --- seeding --------------------------------------------------------------------------------


def make_keys(n: int, name: str) -> list[dict[str, str]]:
    """``n`` orgs, each with one new read/write key (clear, to call with; stored hashed)."""
    from service.domain import auth

    return [
        {"org_id": str(uuid.uuid4()), "org": f"{name}-{i:05d}", "key_id": str(uuid.uuid4()),
         "key": auth.generate_key()}
        for i in range(n)
    ]  # fmt: skip


def write_orgs(url: str, orgs: Sequence[dict[str, str]]) -> None:
    """The orgs and their keys, by COPY (the key stored as the service stores it)."""
    import psycopg

    from service.domain import auth
    from service.store import models

    with psycopg.connect(url) as conn:
        with conn.cursor().copy(
            f"COPY {models.Org.__tablename__} (org_id, name) FROM STDIN"
        ) as copy:
            for o in orgs:
                copy.write_row((o["org_id"], o["org"]))
        with conn.cursor().copy(
            f"COPY {models.ApiKey.__tablename__} (org_id, id, name, key_prefix, key_hash, scopes) "
            "FROM STDIN"
        ) as copy:
            for o in orgs:
                copy.write_row((o["org_id"], o["key_id"], f"{o['org']}-key",
                                auth.display_prefix(o["key"]), auth.hash_key(o["key"]),
                                ["read", "write"]))  # fmt: skip
        conn.commit()


@dataclass
class Store:
    """What ``--store`` keeps: the engines' data, the keys, what was seeded."""

    root: Path

    @property
    def manifest_path(self) -> Path:
        return self.root / "manifest.json"

    def manifest(self) -> dict[str, Any]:
        if self.manifest_path.exists():
            return dict(json.loads(self.manifest_path.read_text()))
        return {"seeded": {}, "now": datetime.now(UTC).isoformat()}

    def save(self, manifest: dict[str, Any]) -> None:
        self.manifest_path.write_text(json.dumps(manifest, indent=2))

    def keys(self, database: str, n: int) -> list[dict[str, str]]:
        path = self.root / "keys" / f"{database}.json"
        if path.exists():
            return list(json.loads(path.read_text()))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.parent.chmod(0o700)
        keys = make_keys(n, database)
        path.write_text(json.dumps(keys))
        path.chmod(0o600)
        return keys


def seed_database(
    store: Store, engine: str, url: str, database: str, orgs: int, per_user: int,
    users: int, vectors: Path, *, flat: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """Migrate ``url`` and seed it unless the store says it is done; the same rows on every
    engine (same orgs, keys, memory ids, vectors and times)."""
    from service.store.database import libpq_url, upgrade

    manifest = store.manifest()
    done = manifest["seeded"].get(f"{engine}:{database}")
    if done:
        return dict(done)
    print(f"seeding {engine} {database} ...", flush=True)
    keys = store.keys(database, orgs)
    upgrade(url)
    started = time.perf_counter()
    write_orgs(libpq_url(url), keys)
    org_seconds = time.perf_counter() - started
    info = context_speed.seed_orgs(
        libpq_url(url), [uuid.UUID(o["org_id"]) for o in keys], users, per_user, vectors, PREFIX,
        now=datetime.fromisoformat(manifest["now"]), relations_per_user=per_user // 2,
        flat=flat, defer_indexes=True, index_memory="4GB",
    )  # fmt: skip
    info["orgs_s"] = round(org_seconds, 1)
    print(f"  {engine} {database}: orgs and keys {org_seconds:.1f} s, {info}", flush=True)
    manifest = store.manifest()
    manifest["seeded"][f"{engine}:{database}"] = info
    store.save(manifest)
    return info


# --- measuring ------------------------------------------------------------------------------


def serve(workdir: Path, url: str, key: str, embedder: str) -> Server:
    """``ctxpack serve`` on ``url`` (migrated already), fake or real embedder, no goal cache."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "load-key.txt").write_text(key + "\n")
    return start_server(
        workdir, CTXPACK_DATABASE_URL=url, CTXPACK_EMBEDDER=embedder,
        CTXPACK_MIGRATE_ON_START="false", CTXPACK_QUERY_CACHE_SIZE="0",
        CTXPACK_EXPIRY_PURGE_INTERVAL_SECONDS="0", CTXPACK_PRINT_BOOTSTRAP_KEY="false",
    )  # fmt: skip


def measure_size(
    size: Size,
    urls: dict[str, str],
    keys: list[dict[str, str]],
    work: Path,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Context latency and batch write rate on both engines, their calls alternating in blocks."""
    questions = [q["query"] for q in context_speed.read_jsonl(context_speed.DATA / "queries.jsonl")]
    servers = {e: serve(work / f"serve-{e}-{size.database}", urls[e], keys[0]["key"], args.embedder)
               for e in ENGINES}  # fmt: skip
    try:
        clients = {e: httpx.Client(base_url=s.url, timeout=120) for e, s in servers.items()}
        auth = [{"Authorization": f"Bearer {k['key']}"} for k in keys]
        goal_order = random.Random(11).sample(questions, len(questions))

        def context(engine: str, org: int, namespace: str, goal: str) -> float:
            body = {"goal": goal, "namespace": namespace, "retrieval": "hybrid"}
            t0 = time.perf_counter()
            r = clients[engine].post("/v1/context", json=body, headers=auth[org])
            ms = (time.perf_counter() - t0) * 1000
            r.raise_for_status()
            return ms

        warm = context_plan(size.orgs, 20, seed=5)
        for engine in ENGINES:  # connections, prepared statements, caches, the model
            for i, (org, ns) in enumerate(warm):
                context(engine, org, ns, f"warm-up {i}")
        plan = context_plan(size.orgs, args.requests, seed=13)
        latencies: dict[str, list[float]] = {e: [] for e in ENGINES}
        for n_block, block in enumerate(blocks(len(plan), 25)):
            order = ENGINES if n_block % 2 == 0 else ENGINES[::-1]
            for engine in order:
                for i in block:
                    org, ns = plan[i]
                    latencies[engine].append(
                        context(engine, org, ns, goal_order[i % len(goal_order)])
                    )

        items = write_items(seed=21, users=1)
        batches = write_plan(size.orgs, args.batches, seed=17)
        bodies = []
        for i, (org, ns) in enumerate(batches):
            chunk = [next(items) for _ in range(args.batch_size)]
            # A unique tail: no item is a duplicate (a duplicate costs less than a write).
            bodies.append(
                (
                    org,
                    [
                        {**item, "namespace": ns, "content": f"{item['content']} [{i}.{j}]"}
                        for j, item in enumerate(chunk)
                    ],
                )
            )
        write_s: dict[str, float] = dict.fromkeys(ENGINES, 0.0)
        outcome: dict[str, dict[str, int]] = {e: {"created": 0, "duplicates": 0, "rejected": 0}
                                              for e in ENGINES}  # fmt: skip
        for n_block, block in enumerate(blocks(len(bodies), 5)):
            order = ENGINES if n_block % 2 == 0 else ENGINES[::-1]
            for engine in order:
                for i in block:
                    org, body = bodies[i]
                    t0 = time.perf_counter()
                    r = clients[engine].post("/v1/remember/batch", json={"items": body},
                                             headers=auth[org])  # fmt: skip
                    write_s[engine] += time.perf_counter() - t0
                    r.raise_for_status()
                    for k in outcome[engine]:
                        outcome[engine][k] += r.json()[k]
        for c in clients.values():
            c.close()
    finally:
        for s in servers.values():
            s.stop()
    result: dict[str, Any] = {}
    written = len(bodies) * args.batch_size
    for engine in ENGINES:
        db_ms = asyncio.run(db_time_per_batch(urls[engine], keys, size, args))
        api_ms = write_s[engine] * 1000 / len(bodies)
        result[engine] = {
            "context": latency_summary(latencies[engine]),
            "writes": {
                "batches": len(bodies), "batch_size": args.batch_size, **outcome[engine],
                "memories_per_s": round(written / write_s[engine], 1),
                "ms_per_batch": round(api_ms, 1),
                "ms_per_memory": round(api_ms / args.batch_size, 3),
                "db_ms_per_batch": round(db_ms, 1),
                "db_share": round(db_ms / api_ms, 3) if api_ms else None,
            },
        }  # fmt: skip
        remove_writes(urls[engine])
    return result


@asynccontextmanager
async def in_process(
    url: str, embedder: Any, **overrides: Any
) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, float]]]:
    """The app on ``url`` in this process; the dict adds up the seconds its statements took
    (from the cursor's execute to its return)."""
    from sqlalchemy import event

    from service.app import create_app
    from service.config import Settings

    settings = Settings(  # type: ignore[call-arg]
        database_url=url, embedder="fake", migrate_on_start=False, print_bootstrap_key=False,
        rate_limit_per_minute=0, query_cache_size=0, audit_prune_interval_seconds=0,
        expiry_purge_interval_seconds=0, namespace_index_interval_seconds=0, **overrides,
    )  # fmt: skip
    app = create_app(settings, embedder=embedder, database_url=url)
    timing = {"db_s": 0.0}
    async with app.router.lifespan_context(app):
        for engine in (app.state.ctx.engine, app.state.ctx.pack_engine):

            @event.listens_for(engine.sync_engine, "before_cursor_execute")
            def before(conn: Any, *_: Any) -> None:
                conn.info["bench_t0"] = time.perf_counter()

            @event.listens_for(engine.sync_engine, "after_cursor_execute")
            def after(conn: Any, *_: Any) -> None:
                timing["db_s"] += time.perf_counter() - conn.info.pop(
                    "bench_t0", time.perf_counter()
                )

        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://bench", timeout=600
        ) as c:
            yield c, timing


async def db_time_per_batch(
    url: str, keys: list[dict[str, str]], size: Size, args: argparse.Namespace
) -> float:
    """Milliseconds of SQL in one batch: ``--db-batches`` batches through the app in process
    (fake embedder), their statements timed at the cursor."""
    from service.embedding.fake import FakeEmbedder

    items = write_items(seed=23, users=1)
    plan = write_plan(size.orgs, args.db_batches, seed=19)
    async with in_process(url, FakeEmbedder()) as (client, timing):
        for warm in range(2):
            org, ns = plan[warm % len(plan)]
            await client.post("/v1/remember/batch", headers={"Authorization": f"Bearer {keys[org]['key']}"},
                              json={"items": [{**next(items), "namespace": ns}]})  # fmt: skip
        timing["db_s"] = 0.0
        for i, (org, ns) in enumerate(plan):
            chunk = [next(items) for _ in range(args.batch_size)]
            body = {
                "items": [
                    {**item, "namespace": ns, "content": f"{item['content']} [d{i}.{j}]"}
                    for j, item in enumerate(chunk)
                ]
            }
            r = await client.post("/v1/remember/batch", json=body,
                                  headers={"Authorization": f"Bearer {keys[org]['key']}"})  # fmt: skip
            r.raise_for_status()
        return timing["db_s"] * 1000 / len(plan)


def remove_writes(url: str) -> None:
    """Delete what the measured writes added (their namespaces end in ``:w``): a stored store
    keeps its size from run to run."""
    import psycopg

    from service.store.database import libpq_url

    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute("DELETE FROM memories WHERE namespace LIKE %s", (f"{PREFIX}u%:w",))


async def measure_hnsw(
    urls: dict[str, str], key: str, scope: int, goals: int, k: int
) -> dict[str, Any]:
    """Recall and pack overlap at the HNSW scope (see the module's docstring)."""
    from service.embedding.minilm import MiniLMEmbedder

    questions = [q["query"] for q in context_speed.read_jsonl(context_speed.DATA / "queries.jsonl")]
    chosen = random.Random(29).sample(questions, min(goals, len(questions)))
    model = MiniLMEmbedder()
    auth = {"Authorization": f"Bearer {key}"}
    packs: dict[tuple[str, str], list[list[str]]] = {}

    async def ask(path: str, modes: tuple[str, ...]) -> None:
        async with contextlib.AsyncExitStack() as stack:
            clients = {
                engine: (await stack.enter_async_context(in_process(urls[engine], model)))[0]
                for engine in ENGINES
            }
            for goal in chosen:  # each goal on every engine back to back (scores carry recency)
                for mode in modes:
                    for engine in ENGINES:
                        body = {"goal": goal, "namespace": f"{PREFIX}u0", "retrieval": mode,
                                "limit": k}  # fmt: skip
                        r = await clients[engine].post("/v1/context", json=body, headers=auth)
                        r.raise_for_status()
                        ids = [i["id"] for s in r.json()["sections"] for i in s["items"]]
                        packs.setdefault((f"{engine}:{path}", mode), []).append(ids)

    # Exact first, with no namespace indexes (every one dropped), then through the scope's own
    # HNSW index, built as the namespace index job builds it.
    for engine in ENGINES:
        await namespace_index_pass(urls[engine], 10**12)
    await ask("exact", ("vector",))
    for engine in ENGINES:
        await namespace_index_pass(urls[engine], scope // 2)
    await ask("hnsw", ("vector", "hybrid"))

    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    rec = {e: mean([recall(f, t) for f, t in zip(packs[(f"{e}:hnsw", "vector")],
                                                  packs[(f"{e}:exact", "vector")], strict=True)])
           for e in ENGINES}  # fmt: skip
    return {
        "scope": scope, "goals": len(chosen), "k": k,
        "recall": rec,
        "recall_gap_points": round((rec["node"] - rec["cluster"]) * 100, 2),
        "exact_equal": mean([float(a == b) for a, b in zip(packs[("node:exact", "vector")],
                                                          packs[("cluster:exact", "vector")], strict=True)]),
        "overlap": {
            mode: mean([overlap(a, b) for a, b in zip(packs[("node:hnsw", mode)],
                                                      packs[("cluster:hnsw", mode)], strict=True)])
            for mode in ("vector", "hybrid")
        },
        "mean_items": mean([float(len(p)) for p in packs[("node:exact", "vector")]]),
    }  # fmt: skip


# --- run ------------------------------------------------------------------------------------


@contextlib.contextmanager
def engines(store: Store, port: int | None) -> Iterator[tuple[Node, Cluster]]:
    manifest = store.manifest()
    base = port or manifest.get("cluster_port") or free_base_port()
    manifest["cluster_port"] = base
    store.save(manifest)
    node = Node(store.root / "node")
    cluster = Cluster(store.root / "cluster", base)
    try:
        yield node, cluster
    finally:
        cluster.stop()
        node.stop()


def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = [args.size] if args.size else [SMALL, BIG] if args.big else [SMALL]
    temp = args.store is None
    root = Path(tempfile.mkdtemp(prefix="ctxpack-scale-")) if temp else args.store.resolve()
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    if os.getuid() == 0:  # PostgreSQL then runs as embedded_postgres, which must reach it
        closed = [d for d in root.parents if not os.stat(d).st_mode & 0o001]
        if closed:
            raise SystemExit(f"--store {root}: {closed[0]} is closed to other users")
    store = Store(root)
    report: dict[str, Any] = {"embedder": args.embedder, "requests": args.requests, "sizes": {}}
    try:
        with engines(store, args.port) as (node, cluster):
            urls: dict[Size, dict[str, str]] = {}
            todo = [(s.database, s.orgs, s.per_user, USERS_PER_ORG, False) for s in sizes]
            if args.hnsw:
                todo.append((hnsw_database(args.hnsw_rows), 1, args.hnsw_rows, 1, True))
            started = time.perf_counter()
            for database, orgs, per_user, users, flat in todo:
                for engine, owner in (("node", node), ("cluster", cluster)):
                    url = owner.url(database)
                    if (
                        args.measure_only
                        and f"{engine}:{database}" not in store.manifest()["seeded"]
                    ):
                        raise SystemExit(
                            f"{engine}:{database} is not seeded in {root} (run --seed-only)"
                        )
                    seed_database(store, engine, url, database, orgs, per_user, users, args.vectors,
                                  flat=flat)  # fmt: skip
                    for s in sizes:
                        if s.database == database:
                            urls.setdefault(s, {})[engine] = url
            if args.seed_only:
                print(f"seeded in {root} ({time.perf_counter() - started:.0f} s)")
                return report
            seconds = report["seconds"] = {}
            report["loadavg_before"] = [round(x, 2) for x in os.getloadavg()]
            print(f"load average before measuring: {report['loadavg_before']}", flush=True)
            for s in sizes:
                keys = store.keys(s.database, s.orgs)
                print(f"measuring {s.label} ...", flush=True)
                t0 = time.perf_counter()
                report["sizes"][s.label] = measure_size(s, urls[s], keys, root / "work", args)
                seconds[s.label] = round(time.perf_counter() - t0)
            if len(sizes) == 2:
                small, big = (report["sizes"][s.label] for s in sizes)
                report["ratio_of"] = f"{sizes[1].label} / {sizes[0].label}"
                report["ratios"] = {e: cost_ratios(small[e], big[e]) for e in ENGINES}
            if args.routing:
                print("routing share on the cluster ...", flush=True)
                t0 = time.perf_counter()
                phases = asyncio.run(citus_routing.run(urls[sizes[0]]["cluster"], 100, 108))
                report["routing"] = {"phases": phases, "share": routed_share(phases)}
                seconds["routing"] = round(time.perf_counter() - t0)
            if args.hnsw:
                print(f"HNSW at a {args.hnsw_rows}-memory scope ...", flush=True)
                t0 = time.perf_counter()
                database = hnsw_database(args.hnsw_rows)
                hnsw_urls = {"node": node.url(database), "cluster": cluster.url(database)}
                key = store.keys(database, 1)[0]["key"]
                report["hnsw"] = asyncio.run(
                    measure_hnsw(hnsw_urls, key, args.hnsw_rows, args.hnsw_goals, 10)
                )
                seconds["hnsw"] = round(time.perf_counter() - t0)
            report["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
            print(f"load average after measuring: {report['loadavg_after']}, seconds: {seconds}",
                  flush=True)  # fmt: skip
    finally:
        if temp:
            shutil.rmtree(root, ignore_errors=True)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", type=Path, help="keep the engines' data here (seed once)")
    parser.add_argument("--big", action="store_true", help="also 1M memories over 10,000 orgs")
    parser.add_argument("--size", type=parse_size, help="one size MEMORIES:ORGS instead (smoke)")
    parser.add_argument("--hnsw", action="store_true", help=f"recall at a {HNSW_ROWS}-memory scope")
    parser.add_argument("--hnsw-goals", type=int, default=200)
    parser.add_argument("--hnsw-rows", type=int, default=HNSW_ROWS, help="the HNSW scope's size")
    parser.add_argument("--no-routing", dest="routing", action="store_false",
                        help="skip the routing share")  # fmt: skip
    parser.add_argument("--seed-only", action="store_true")
    parser.add_argument("--measure-only", action="store_true", help="fail if a store is not seeded")
    parser.add_argument("--requests", type=int, default=1000, help="context calls per engine")
    parser.add_argument("--batches", type=int, default=50, help="write batches per engine")
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--db-batches", type=int, default=20, help="batches timed in process")
    parser.add_argument("--embedder", default="fake", choices=["fake", "minilm"])
    parser.add_argument("--port", type=int, help="the cluster's first port (3 in a row)")
    parser.add_argument("--vectors", type=Path, default=Path("/tmp/ctxpack-locomo-minilm.npy"))
    parser.add_argument("--out", type=Path, default=Path("bench-results/scale.json"))
    args = parser.parse_args(argv)
    if args.seed_only and args.measure_only:
        parser.error("--seed-only or --measure-only, not both")
    if args.seed_only and args.store is None:
        parser.error("--seed-only needs --store")
    report = run(args)
    if args.seed_only:
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print()
    print(markdown(report))
    print(f"\n(results in {args.out})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
