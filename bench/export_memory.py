"""Does `ctxpack export` stream? Peak memory (max RSS) of the export process at growing sizes.

Seeds a scratch database on a PostgreSQL server (memories written by COPY through
``service.store.bulk.copy_memories``: distinct text, a constant vector; the vector and
full-text indexes are dropped first, since export reads neither and building them would
dominate the seeding), then runs ``ctxpack export`` at each
size as a child process, output to /dev/null, and prints its max RSS, wall time and rate.
Flat RSS across sizes means memory does not grow with the row count.

    python -m bench.export_memory --admin-url postgresql://... --sizes 10000,100000,1000000
    python -m bench.export_memory --data-dir /tmp/exp   # the embedded server of that data dir
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from service.config import Settings
from service.store.bulk import copy_memories
from service.store.database import (
    ensure_database,
    resolve_database_url,
    upgrade,
    with_database,
)

REPO = Path(__file__).resolve().parents[1]
COLUMNS = (
    "org_id", "id", "namespace", "type", "name", "content", "content_hash", "embedding",
    "tags", "metadata", "valid_at",
)  # fmt: skip

CHILD = (
    "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, "
    "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def seed(url: str, org: str, upto: int, have: int) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        org_id = conn.execute(
            "INSERT INTO orgs (org_id, name) VALUES (gen_random_uuid(), %s) "
            "ON CONFLICT (name) DO UPDATE SET name = excluded.name RETURNING org_id",
            (org,),
        ).fetchone()[0]  # type: ignore[index]
        vector = np.full(384, 0.05, dtype=np.float32)
        now = datetime.now(UTC)

        def rows() -> Iterator[tuple[Any, ...]]:
            for i in range(have, upto):
                content = (
                    f"Memory number {i}: the billing service on port {8000 + i % 1000} was "
                    f"upgraded to version {i % 17}.{i % 5} after the incident of week {i % 52}."
                )
                yield (
                    org_id, uuid.uuid4(), f"user-{i % 1000}:s{i % 3}", "episode",
                    f"Memory number {i}", content,
                    hashlib.md5(str(i).encode()).hexdigest()
                    + hashlib.md5(str(i + 1).encode()).hexdigest(),
                    vector, [f"t{i % 7}"], {"n": i}, now,
                )  # fmt: skip

        copy_memories(conn, COLUMNS, rows())
    return upto


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--admin-url", help="a server's URL (a database on it is created)")
    parser.add_argument("--data-dir", type=Path, help="else: the embedded server of this data dir")
    parser.add_argument("--database", default="ctxpack_exportbench")
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--with-vectors", action="store_true")
    args = parser.parse_args()
    if args.admin_url:  # a server of the caller's: no public helper names a database on it
        ensure_database(args.admin_url, args.database)
        url = with_database(args.admin_url, args.database)
    else:
        data_dir = args.data_dir or Path("/tmp/ctxpack-exportbench")
        url = resolve_database_url(
            Settings(database_url=None, data_dir=data_dir, database_name=args.database)
        )
    upgrade(url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP INDEX IF EXISTS ix_memories_embedding_hnsw")
        conn.execute("DROP INDEX IF EXISTS ix_memories_tsv")
        have = conn.execute(
            "SELECT count(*) FROM memories m JOIN orgs o USING (org_id) WHERE o.name = 'exportbench'"
        ).fetchone()[0]  # type: ignore[index]
    env = {**os.environ, "PYTHONPATH": str(REPO), "CTXPACK_DATABASE_URL": url, "CTXPACK_EMBEDDER": "fake"}
    print(f"{'rows':>9} {'max RSS MB':>11} {'seconds':>8} {'rows/s':>8}  (with_vectors={args.with_vectors})")
    for size in [int(s) for s in args.sizes.split(",")]:
        if size > have:
            started = time.perf_counter()
            have = seed(url, "exportbench", size, have)
            print(f"  (seeded to {size} in {time.perf_counter() - started:.0f} s)", flush=True)
        command = [sys.executable, "-m", "service", "export", "--org", "exportbench", "-o", os.devnull]
        if args.with_vectors:
            command.append("--with-vectors")
        started = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", CHILD, *command], env=env, cwd=REPO, capture_output=True, text=True, check=True
        )
        seconds = time.perf_counter() - started
        rss_mb = int(out.stdout.strip()) / 1024
        print(f"{size:>9} {rss_mb:>11.0f} {seconds:>8.1f} {size / seconds:>8.0f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
