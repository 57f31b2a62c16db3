"""Client fixtures: a live ``ctxpack serve`` (a real process on a free port, on the test
session's embedded Postgres, fake embedder) and ctxpack-client pointed at it.

The client distribution lives in clients/python; it is put on ``sys.path`` here so the tests
run against the source without installing it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
CLIENT_SRC = ROOT / "clients" / "python"
if str(CLIENT_SRC) not in sys.path:
    sys.path.insert(0, str(CLIENT_SRC))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def ctxpack_server(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``ctxpack serve`` in a subprocess; yields its base URL."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXPACK_")}
    env.update(
        CTXPACK_DATABASE_URL=pg_url,
        CTXPACK_EMBEDDER="fake",
        CTXPACK_PRINT_BOOTSTRAP_KEY="false",
        CTXPACK_RATE_LIMIT_PER_MINUTE="0",
        CTXPACK_AUDIT_PRUNE_INTERVAL_SECONDS="0",
        CTXPACK_LOG_LEVEL="WARNING",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    log_path = tmp_path_factory.mktemp("client-live") / "serve.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "service", "serve", "--no-migrate", "--port", str(port)],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"ctxpack serve exited: {log_path.read_text()[-2000:]}")
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"ctxpack serve did not start: {log_path.read_text()[-2000:]}")
            time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def ctxpack_env(ctxpack_server: str, key: object, monkeypatch: pytest.MonkeyPatch) -> str:
    """CTXPACK_URL and CTXPACK_API_KEY set for this test (an admin key in a fresh org)."""
    monkeypatch.setenv("CTXPACK_URL", ctxpack_server)
    monkeypatch.setenv("CTXPACK_API_KEY", key.key)  # type: ignore[attr-defined]
    return ctxpack_server


@pytest.fixture
def cx(ctxpack_env: str) -> Iterator[object]:
    """A ctxpack_client.Client on the live server (closed after the test)."""
    from ctxpack_client import Client

    with Client() as client:
        yield client
