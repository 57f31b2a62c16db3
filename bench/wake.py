"""Wake pack benchmark: quality against a labelled fixture, and latency at 100k memories.

    python -m bench.wake                   # quality only (a minute or two)
    python -m bench.wake --scale 100000    # and the wake p50 over HTTP at 100k memories

What it does:

1. Starts an embedded PostgreSQL (or uses ``--database-url``), creates a fresh database and
   runs ``ctxpack serve`` against it (the real MiniLM model; rate limit and goal cache off,
   so every call with a goal embeds it; ``--goal-cache 1024`` runs it as configured by
   default, where a goal asked before, such as a generic one, skips the model).
2. Writes ``bench/fixtures/wake_fixture.json`` through ``POST /v1/remember`` (redaction,
   write gate, dedup and embedding as usual; finished tasks carry ``metadata.status``,
   later decisions ``supersedes`` the ones they replace), oldest first, then sets each
   memory's ``created_at`` to its ``days_ago`` (remember stamps the time of the write).
3. For every labelled call asks a wake pack with no goal, with the call's generic goal
   ("resume work") and with its specific goal, and scores the returned ids against the
   items a person would put in that pack: precision = labelled returned / returned,
   recall = labelled returned / labelled (micro-averaged over the calls; macro beside it).
   "specific-goal items present": the share of each call's ``specific_about`` items (what
   its specific goal is about) that the pack holds, which shows what the goal changes.
   A baseline row asks the ``recall`` layer with the generic goal: what a relevance-gated
   pack gives a session start.
4. With ``--scale N``: adds N memories (``--reuse`` keeps the last run's database and
   seeds only what is missing) over N/100 users straight into the table (COPY through
   ``service.store.bulk.copy_memories``;
   LoCoMo turns embedded once by the service's embedder, plus a little noise, as
   bench/context_speed.py seeds), then times wake packs over HTTP, one at a time, at
   random users' task namespaces: no goal, a generic goal, a specific goal (a LoCoMo
   question), and recall packs with the same questions for comparison.

Percentiles are ``bench.stats.percentile`` (linear interpolation), like every other report
of the package.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from bench.seeding import settle
from bench.stats import percentile

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "wake_fixture.json"
LOCOMO = ROOT.parent / "shared" / "bench" / "locomo"
BACKGROUND_TYPES = (
    "decision", "plan", "task", "idea", "claim", "constraint", "rule", "procedure",
    "pattern", "gotcha", "verification", "domain", "session", "episode",
)  # fmt: skip
# "Now" of the fixture: ages are counted back from it, so every run dates the memories alike
# (wake packs order by the stored day; a run-time "now" would move day boundaries).
FIXTURE_NOW = datetime(2026, 11, 20, 18, 0, tzinfo=UTC)
GENERIC_GOALS = ("resume work", "start of session", "continue where we left off")


def log(message: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {message}", file=sys.stderr, flush=True)


# --- the database and the server -------------------------------------------------------------


def fresh_database(work_dir: Path, database_url: str | None, name: str, keep: bool) -> str:
    """A URL to database ``name``: dropped and created empty, or with ``keep`` the existing
    one (created if missing)."""
    import psycopg

    from service.store.database import libpq_url, start_embedded

    if database_url:
        admin = libpq_url(database_url)
    else:
        admin = start_embedded(work_dir / "data").get_uri()
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if exists and not keep:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        if not exists or not keep:
            conn.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(admin)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


@contextlib.contextmanager
def server(
    database_url: str, work_dir: Path, port: int, key: str | None, goal_cache: int = 0
) -> Iterator[tuple[str, str]]:
    """``ctxpack serve`` on ``database_url`` (``goal_cache`` goal vectors kept; 0: every goal
    embedded); yields (base URL, ``key`` or, on an empty database, the bootstrap admin key)."""
    env = dict(os.environ)
    env.update(
        CTXPACK_DATABASE_URL=database_url,
        CTXPACK_DATA_DIR=str(work_dir / "data"),
        CTXPACK_HOST="127.0.0.1",
        CTXPACK_PORT=str(port),
        CTXPACK_RATE_LIMIT_PER_MINUTE="0",
        CTXPACK_QUERY_CACHE_SIZE=str(goal_cache),
        CTXPACK_LOG_LEVEL="WARNING",
        CTXPACK_AUDIT_PRUNE_INTERVAL_SECONDS="0",
        PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
    )
    errors = (work_dir / "serve.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "service", "serve"],
        stdout=subprocess.PIPE,
        stderr=errors,
        env=env,
        text=True,
        cwd=ROOT,
    )
    keys: list[str] = [key] if key else []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.strip().startswith("ctxp_"):
                keys.append(line.strip())

    threading.Thread(target=read, daemon=True).start()
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"ctxpack serve exited; see {errors.name}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200 and keys:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("ctxpack serve not ready after 300 s")
            time.sleep(0.2)
        yield base, keys[0]
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        errors.close()


def existing_store(database_url: str, fixture: dict[str, Any]) -> tuple[str, dict[str, str], int]:
    """For ``--reuse``: a new admin key in the org that holds the store, the fixture's ids
    (matched by content) and how many background memories there are."""
    import psycopg

    with psycopg.connect(database_url) as conn:
        org_id, org = conn.execute(
            "SELECT o.org_id, o.name FROM orgs o JOIN memories m USING (org_id) LIMIT 1"
        ).fetchone() or (None, None)
        if org is None:
            raise SystemExit("--reuse: the database holds no memories; run without it first")
        rows = conn.execute(
            "SELECT id, content FROM memories WHERE org_id = %s AND namespace NOT LIKE 'bg%%'",
            (org_id,),
        ).fetchall()
        (background,) = conn.execute(
            "SELECT count(*) FROM memories WHERE org_id = %s AND namespace LIKE 'bg%%'", (org_id,)
        ).fetchone() or (0,)
    by_content = {m["content"]: m["key"] for m in fixture["memories"]}
    keys = {str(i): by_content[c] for i, c in rows if c in by_content}
    created = subprocess.run(
        [sys.executable, "-m", "service", "keys", "create", "--org", org, "--name", "bench-wake",
         "--scope", "read", "--scope", "write", "--scope", "admin", "--database-url", database_url],
        capture_output=True, text=True, cwd=ROOT, check=True,
    )  # fmt: skip
    return created.stdout.strip().splitlines()[-1], keys, int(background)


# --- quality ---------------------------------------------------------------------------------


def seed_fixture(
    client: httpx.Client, database_url: str, fixture: dict[str, Any]
) -> dict[str, str]:
    """Write the fixture through remember, oldest first; returns memory id -> fixture key."""

    by_key: dict[str, str] = {}
    memories = sorted(fixture["memories"], key=lambda m: (-m["days_ago"], m["key"]))
    for memory in memories:
        body: dict[str, Any] = {
            "content": memory["content"],
            "namespace": memory["namespace"],
            "type": memory["type"],
        }
        if "status" in memory:
            body["metadata"] = {"status": memory["status"]}
        if "supersedes" in memory:
            body["supersedes"] = by_key[memory["supersedes"]]
        response = client.post("/v1/remember", json=body)
        if response.status_code != 201:
            raise RuntimeError(f"{memory['key']}: {response.status_code} {response.text}")
        by_key[memory["key"]] = response.json()["id"]
    keys = {memory_id: key for key, memory_id in by_key.items()}
    date_fixture(database_url, fixture, keys)
    return keys


def date_fixture(database_url: str, fixture: dict[str, Any], keys: dict[str, str]) -> None:
    """Set each fixture memory's created_at (and updated_at) to FIXTURE_NOW - days_ago."""
    import psycopg

    age = {m["key"]: m["days_ago"] for m in fixture["memories"]}
    with psycopg.connect(database_url) as conn:
        for memory_id, key in keys.items():
            when = FIXTURE_NOW - timedelta(days=age[key])
            conn.execute(
                "UPDATE memories SET created_at = %s, updated_at = %s WHERE id = %s",
                (when, when, memory_id),
            )


def ask(client: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/v1/context", json=body)
    response.raise_for_status()
    result: dict[str, Any] = response.json()
    return result


def returned_ids(pack: dict[str, Any]) -> list[str]:
    return [item["id"] for section in pack["sections"] for item in section["items"]]


def quality(
    client: httpx.Client, fixture: dict[str, Any], keys: dict[str, str], verbose: bool
) -> dict[str, Any]:
    """Precision and recall of each variant against the fixture's labels."""
    variants = {
        "wake, no goal": lambda c: {"layer": "wake"},
        "wake, generic goal": lambda c: {"layer": "wake", "goal": c["generic_goal"]},
        "wake, specific goal": lambda c: {"layer": "wake", "goal": c["specific_goal"]},
        "baseline: recall layer, generic goal": lambda c: {
            "layer": "recall",
            "goal": c["generic_goal"],
        },
    }
    rows: dict[str, Any] = {}
    for name, make in variants.items():
        hit = shown = wanted = empty = about_hit = about_all = 0
        precisions: list[float] = []
        recalls: list[float] = []
        for call in fixture["calls"]:
            body = {"namespace": call["namespace"], "limit": call["limit"], **make(call)}
            pack = ask(client, body)
            got = [keys.get(i, "?") for i in returned_ids(pack)]
            expected = set(call["expected"])
            good = [k for k in got if k in expected]
            hit += len(good)
            shown += len(got)
            wanted += len(expected)
            empty += not got
            about = set(call.get("specific_about", ()))
            about_hit += len(about & set(got))
            about_all += len(about)
            precisions.append(len(good) / len(got) if got else 0.0)
            recalls.append(len(good) / len(expected))
            if verbose:
                missed = sorted(expected - set(got))
                extra = [k for k in got if k not in expected]
                print(f"  {name} @ {call['namespace']}: extra {extra} missed {missed}")
        rows[name] = {
            "calls": len(fixture["calls"]),
            "returned": shown,
            "labelled_returned": hit,
            "labelled": wanted,
            "precision": hit / shown if shown else 0.0,
            "recall": hit / wanted,
            "macro_precision": sum(precisions) / len(precisions),
            "macro_recall": sum(recalls) / len(recalls),
            "empty_packs": empty,
            "goal_recall": about_hit / about_all if about_all else 0.0,
        }
    return rows


# --- latency at scale ------------------------------------------------------------------------


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open() as f:
        return [json.loads(line) for line in f if line.strip()]


def locomo_vectors(texts: list[str], cache: Path) -> Any:
    import numpy as np

    if cache.exists():
        return np.load(cache)
    from service.config import Settings
    from service.embedding import build_embedder

    log(f"embedding {len(texts)} LoCoMo turns once (cached in {cache})")
    embedder = build_embedder(Settings())
    vectors = np.array(embedder.embed_documents(texts), dtype=np.float32)
    np.save(cache, vectors)
    return vectors


def seed_background(
    database_url: str, org_id: uuid.UUID, count: int, work_dir: Path, texts_max: int
) -> float:
    """COPY ``count`` memories over ``count // 100`` users (``bg<n>``): 40% at the user,
    40% in three sessions, 20% in two tasks per session; random types; created over the
    last 90 days. Returns the seconds it took."""
    import hashlib

    import numpy as np
    import psycopg

    from service.store.bulk import copy_memories

    turns = read_jsonl(LOCOMO / "memories.jsonl")[:texts_max]
    texts = [f"{t['speaker']}: {t['text']}" for t in turns]
    base = locomo_vectors(texts, work_dir / f"locomo-{len(texts)}.npy")
    rng = np.random.default_rng(7)
    pick = random.Random(7)
    now = datetime.now(UTC)
    users = max(1, count // 100)
    started = time.perf_counter()
    columns = (
        "org_id", "id", "namespace", "type", "name", "content", "content_hash", "embedding",
        "created_at", "updated_at",
    )  # fmt: skip

    def rows() -> Iterator[tuple[Any, ...]]:
        for n in range(count):
            u = n % users
            j = int(rng.integers(len(texts)))
            r = rng.random()
            ns = f"bg{u}" if r < 0.4 else f"bg{u}:s{n % 3}" if r < 0.8 else f"bg{u}:s{n % 3}:t{n % 2}"
            vec = base[j] + rng.normal(0, 0.02, base.shape[1]).astype(np.float32)
            vec /= np.linalg.norm(vec)
            when = now - timedelta(days=float(rng.random() * 90))
            content = texts[j]
            yield (
                org_id, uuid.uuid4(), ns, pick.choice(BACKGROUND_TYPES), content[:80],
                content, hashlib.sha256(f"{content}|{n}".encode()).hexdigest(), vec,
                when, when,
            )  # fmt: skip

    with psycopg.connect(database_url) as conn:
        copy_memories(conn, columns, rows())
        conn.commit()
    settle(database_url, ["memories"])
    return time.perf_counter() - started


def latency(client: httpx.Client, users: int, requests: int) -> dict[str, Any]:
    """p50/p90/p99 in ms of each kind of pack, asked one at a time over HTTP."""
    questions = [q["query"] for q in read_jsonl(LOCOMO / "queries.jsonl")]
    pick = random.Random(11)
    kinds = {
        "wake, no goal": lambda: {"layer": "wake"},
        "wake, generic goal": lambda: {"layer": "wake", "goal": pick.choice(GENERIC_GOALS)},
        "wake, specific goal": lambda: {"layer": "wake", "goal": pick.choice(questions)},
        "recall (for comparison)": lambda: {"layer": "recall", "goal": pick.choice(questions)},
    }
    timings: dict[str, list[float]] = {name: [] for name in kinds}
    items: dict[str, list[int]] = {name: [] for name in kinds}
    # Interleaved, one of each kind in turn, so a change of machine load hits all alike.
    for n in range(requests + 10):
        u = pick.randrange(users)
        namespace = f"bg{u}:s{pick.randrange(3)}:t{pick.randrange(2)}"
        for name, make in kinds.items():
            body = {"namespace": namespace, **make()}
            t0 = time.perf_counter()
            pack = ask(client, body)
            elapsed = (time.perf_counter() - t0) * 1000
            if n >= 10:  # the first rounds warm the connection and the plans
                timings[name].append(elapsed)
                items[name].append(pack["total_items"])
    out: dict[str, Any] = {}
    for name in kinds:
        out[name] = {
            "requests": len(timings[name]),
            "p50_ms": round(percentile(timings[name], 50), 1),
            "p90_ms": round(percentile(timings[name], 90), 1),
            "p99_ms": round(percentile(timings[name], 99), 1),
            "mean_items": round(sum(items[name]) / len(items[name]), 1),
        }
    return out


# --- report ----------------------------------------------------------------------------------


def print_report(result: dict[str, Any]) -> None:
    print("\n## Wake quality (bench/fixtures/wake_fixture.json, real model)\n")
    print(
        "| pack | returned | labelled returned / labelled | precision | recall | macro P / R "
        "| specific-goal items present | empty |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, row in result["quality"].items():
        print(
            f"| {name} | {row['returned']} | {row['labelled_returned']} / {row['labelled']} | "
            f"{row['precision']:.1%} | {row['recall']:.1%} | "
            f"{row['macro_precision']:.1%} / {row['macro_recall']:.1%} | "
            f"{row['goal_recall']:.1%} | {row['empty_packs']} |"
        )
    if "latency" in result:
        scale = result["scale"]
        print(
            f"\n## Latency over HTTP at {scale['memories']:,} memories ({scale['users']:,} users)\n"
        )
        print("| pack | requests | p50 ms | p90 ms | p99 ms | items |")
        print("|---|---|---|---|---|---|")
        for name, row in result["latency"].items():
            print(
                f"| {name} | {row['requests']} | {row['p50_ms']} | {row['p90_ms']} | "
                f"{row['p99_ms']} | {row['mean_items']} |"
            )
        print(f"\nseeded in {scale['seed_seconds']:.0f} s; load average {result['loadavg']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.wake", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/ctxpack-wake-bench"))
    parser.add_argument("--database-url", help="an existing PostgreSQL (default: embedded)")
    parser.add_argument("--database-name", default="ctxpack_wake_bench")
    parser.add_argument("--port", type=int, default=18790)
    parser.add_argument("--fixture", type=Path, default=FIXTURE)
    parser.add_argument("--scale", type=int, default=0, help="background memories (0: none)")
    parser.add_argument("--requests", type=int, default=300, help="timed packs per kind")
    parser.add_argument("--texts", type=int, default=3000, help="LoCoMo turns to embed")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--goal-cache",
        type=int,
        default=0,
        help="goal vectors the server keeps (the service's default is 1024; 0, the default "
        "here: every goal is embedded, the worst case)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="per-call misses")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="keep the database of the last run (its fixture and background memories)",
    )
    args = parser.parse_args(argv)

    args.work_dir.mkdir(parents=True, exist_ok=True)
    fixture = json.loads(args.fixture.read_text())
    url = fresh_database(args.work_dir, args.database_url, args.database_name, args.reuse)
    result: dict[str, Any] = {"fixture": str(args.fixture), "at": datetime.now(UTC).isoformat()}
    key: str | None = None
    keys: dict[str, str] = {}
    background = 0
    if args.reuse:
        key, keys, background = existing_store(url, fixture)
        date_fixture(url, fixture, keys)
    with server(url, args.work_dir, args.port, key, args.goal_cache) as (base, key):
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=base, headers=headers, timeout=120) as client:
            if not keys:
                log(f"writing {len(fixture['memories'])} fixture memories through remember")
                keys = seed_fixture(client, url, fixture)
            result["quality"] = quality(client, fixture, keys, args.verbose)
            if args.scale:
                org_id = uuid.UUID(client.get("/v1/whoami").json()["org_id"])
                seconds = 0.0
                if background < args.scale:
                    log(f"seeding {args.scale - background:,} background memories (COPY)")
                    seconds = seed_background(
                        url, org_id, args.scale - background, args.work_dir, args.texts
                    )
                users = max(1, args.scale // 100)
                result["scale"] = {"memories": args.scale, "users": users, "seed_seconds": seconds}
                log(f"timing {args.requests} packs per kind")
                result["latency"] = latency(client, users, args.requests)
    result["loadavg"] = [round(x, 2) for x in os.getloadavg()]
    print_report(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
