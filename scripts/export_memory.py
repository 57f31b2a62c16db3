#!/usr/bin/env python3
"""Does `ctxpack export` stream? Peak memory (max RSS) of the export process at growing sizes.

Seeds a scratch database on a PostgreSQL server (memories generated in SQL: distinct text,
a constant vector; the vector and full-text indexes are dropped first, since export reads
neither and building them would dominate the seeding), then runs ``ctxpack export`` at each
size as a child process, output to /dev/null, and prints its max RSS, wall time and rate.
Flat RSS across sizes means memory does not grow with the row count.

    python scripts/export_memory.py --admin-url postgresql://... --sizes 10000,100000,1000000
    python scripts/export_memory.py --data-dir /tmp/exp   # the embedded server of that data dir
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import psycopg

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from service.store.database import _with_database, ensure_database, start_embedded, upgrade  # noqa: E402

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
        step = 50_000
        for start in range(have, upto, step):
            end = min(start + step, upto)
            conn.execute(
                """
                INSERT INTO memories (org_id, id, namespace, type, name, content, content_hash,
                                      embedding, tags, metadata, valid_at)
                SELECT %(org)s, gen_random_uuid(), 'user-' || (i %% 1000) || ':s' || (i %% 3),
                       'episode', 'Memory number ' || i,
                       'Memory number ' || i || ': the billing service on port ' || (8000 + i %% 1000)
                         || ' was upgraded to version ' || (i %% 17) || '.' || (i %% 5)
                         || ' after the incident of week ' || (i %% 52) || '.',
                       md5(i::text) || md5((i + 1)::text),
                       (SELECT array_agg(0.05)::vector FROM generate_series(1, 384)),
                       ARRAY['t' || (i %% 7)], jsonb_build_object('n', i), now()
                FROM generate_series(%(a)s, %(b)s - 1) AS i
                """,
                {"org": org_id, "a": start, "b": end},
            )
    return upto


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--admin-url", help="a server's URL (a database on it is created)")
    parser.add_argument("--data-dir", type=Path, help="else: the embedded server of this data dir")
    parser.add_argument("--database", default="ctxpack_exportbench")
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--with-vectors", action="store_true")
    args = parser.parse_args()
    admin = args.admin_url or start_embedded(args.data_dir or Path("/tmp/ctxpack-exportbench")).get_uri()
    ensure_database(admin, args.database)
    url = str(_with_database(admin, args.database))
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
