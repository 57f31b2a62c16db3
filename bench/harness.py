"""The run's harness: ``ctxpack serve`` as a subprocess (``CtxpackServer``), the load driver
every speed row is measured with (``run_load``: latencies over threads, ``lat_stats``), and the
run's log, progress bars and machine description.
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.stats import percentile as pct


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def lat_stats(lat_ms: Sequence[float], wall_s: float, errors: int = 0) -> dict[str, Any]:
    return {
        "n": len(lat_ms),
        "p50_ms": round(pct(lat_ms, 50), 2),
        "p95_ms": round(pct(lat_ms, 95), 2),
        "p99_ms": round(pct(lat_ms, 99), 2),
        "mean_ms": round(sum(lat_ms) / len(lat_ms), 2) if lat_ms else None,
        "per_s": round(len(lat_ms) / wall_s, 1) if wall_s > 0 else None,
        "errors": errors,
    }


def run_load(
    call: Callable[[Any], Any], jobs: Sequence[Any], concurrency: int, warmup: int = 0
) -> dict[str, Any]:
    """Run ``call(job)`` for every job with ``concurrency`` threads; latency per call and
    calls per second over the wall time. The first ``warmup`` jobs run first, unmeasured."""
    for job in jobs[:warmup]:
        call(job)
    todo = list(jobs[warmup:])
    lat: list[float] = [0.0] * len(todo)
    errors: list[str] = []
    nxt = iter(range(len(todo)))
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                i = next(nxt, None)
            if i is None:
                return
            t = time.perf_counter()
            try:
                call(todo[i])
            except Exception as exc:  # counted and reported, never hidden
                errors.append(repr(exc)[:300])
            lat[i] = (time.perf_counter() - t) * 1000

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    t0 = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t0
    out = lat_stats(lat, wall, len(errors))
    out["concurrency"] = concurrency
    if errors:
        out["first_errors"] = errors[:3]
    return out


def progress(total: int, desc: str) -> Any:
    from tqdm import tqdm

    return tqdm(
        total=total,
        desc=desc,
        unit="mem",
        file=sys.stderr,
        dynamic_ncols=True,
        mininterval=1.0,
        smoothing=0.1,
    )


def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            kb = int(next(ln.split()[1] for ln in f if ln.startswith("MemTotal")))
        ram_gb = round(kb / 2**20, 1)
    except OSError:
        ram_gb = None
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_gb": ram_gb,
        "os": platform.platform(terse=True),
        "python": platform.python_version(),
    }


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -------------------------------------------------------------------------- ctxpack server


class CtxpackServer:
    """``ctxpack serve`` in a subprocess, against an existing database URL."""

    def __init__(self, db_url: str, workdir: Path, key: str | None = None):
        self.db_url = db_url
        self.workdir = workdir
        self.proc: subprocess.Popen[str] | None = None
        self.key = key  # an empty database prints its bootstrap key; a seeded one needs it
        self.port = 0
        self.starts: list[dict[str, Any]] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, label: str) -> float:
        import httpx

        self.port = free_port()
        exe = Path(sys.executable).with_name("ctxpack")
        cmd = [str(exe), "serve"] if exe.exists() else [sys.executable, "-m", "service", "serve"]
        env = dict(os.environ)
        env.update(
            CTXPACK_DATABASE_URL=self.db_url,
            CTXPACK_DATA_DIR=str(self.workdir / "data"),
            CTXPACK_HOST="127.0.0.1",
            CTXPACK_PORT=str(self.port),
            CTXPACK_RATE_LIMIT_PER_MINUTE="0",
            CTXPACK_LOG_LEVEL="WARNING",
            CTXPACK_AUDIT_PRUNE_INTERVAL_SECONDS="0",
            # The goals repeat (templates): with the goal cache on, most calls would skip the
            # model. Off, every measured context call embeds its goal.
            CTXPACK_QUERY_CACHE_SIZE="0",
        )
        stderr = open(self.workdir / f"serve-{self.port}.log", "w")
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=stderr, env=env, text=True, cwd=self.workdir
        )
        got_key: list[str] = []

        def read_stdout() -> None:
            assert self.proc is not None
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                line = line.strip()
                if line.startswith("ctxp_") or (line and " " not in line and not got_key):
                    got_key.append(line)

        threading.Thread(target=read_stdout, daemon=True).start()
        with httpx.Client(timeout=2.0) as client:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"ctxpack serve exited with {self.proc.returncode}; see {stderr.name}"
                    )
                try:
                    if client.get(f"{self.base_url}/readyz").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.perf_counter() - t0 > 300:
                    raise RuntimeError("ctxpack serve not ready after 300 s")
                time.sleep(0.05)
        cold = time.perf_counter() - t0
        if self.key is None:
            deadline = time.time() + 10
            while not got_key and time.time() < deadline:
                time.sleep(0.05)
            if not got_key:
                raise RuntimeError("ctxpack serve printed no bootstrap key on an empty database")
            self.key = got_key[0]
        self.starts.append({"label": label, "seconds": round(cold, 2)})
        return cold

    def client(self) -> Any:
        import httpx

        return httpx.Client(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {self.key}"},
            timeout=httpx.Timeout(300.0),
            limits=httpx.Limits(max_connections=32, max_keepalive_connections=32),
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None


def post_batch(client: Any, items: list[dict[str, Any]]) -> dict[str, Any]:
    r = client.post("/v1/remember/batch", json={"items": items})
    r.raise_for_status()
    return r.json()  # type: ignore[no-any-return]
