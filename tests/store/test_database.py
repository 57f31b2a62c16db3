"""The pool pings a connection that sat idle and replaces it when it died meanwhile (as after
a Postgres restart); the context-pack pool's connections default to generic plans; the
embedded server runs with the shared_buffers it is given."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

import psycopg
import pytest
from sqlalchemy import event, text

from service.config import Settings
from service.store import database
from service.store.database import create_engine, libpq_url
from tests.conftest import EXTERNAL_DATABASE_URL


async def _backend_pid(engine: object) -> int:
    async with engine.connect() as conn:  # type: ignore[attr-defined]
        return int((await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one())


async def test_idle_dead_connection_is_replaced(
    pg_url: str, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = create_engine(pg_url, settings)
    try:
        pid = await _backend_pid(engine)
        with psycopg.connect(libpq_url(pg_url), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s::int)", (pid,))
        monkeypatch.setattr(database, "PING_AFTER_IDLE_SECONDS", 0.0)
        assert await _backend_pid(engine) != pid  # no error: the pool reconnected
    finally:
        await engine.dispose()


async def test_pack_pool_uses_generic_plans(pg_url: str, settings: Settings) -> None:
    engine = create_engine(pg_url, settings, generic_plans=True)
    statements: list[str] = []
    event.listen(
        engine.sync_engine, "before_cursor_execute", lambda *a: statements.append(a[2])
    )
    try:
        for _ in range(3):
            async with engine.connect() as conn:
                mode = (await conn.execute(text("SHOW plan_cache_mode"))).scalar_one()
        assert mode == "force_generic_plan"
        assert statements == ["SHOW plan_cache_mode"] * 3
    finally:
        await engine.dispose()


# A process that starts (or attaches to) the embedded server of ROOT with MB of
# shared_buffers, prints the server's value, and stays attached until its stdin closes.
_ATTACH = """
import sys
from pathlib import Path
import psycopg
from service.store.database import libpq_url, start_embedded
server = start_embedded(Path(sys.argv[1]), cleanup_mode=sys.argv[3], shared_buffers_mb=int(sys.argv[2]))
with psycopg.connect(libpq_url(server.get_uri())) as conn:
    print(conn.execute("SHOW shared_buffers").fetchone()[0], flush=True)
sys.stdin.read()
"""


def _attach(root: str, mb: int, cleanup: str = "stop") -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _ATTACH, root, str(mb), cleanup],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _shared_buffers(root: str, mb: int) -> str:
    proc = _attach(root, mb)
    out, err = proc.communicate("", timeout=120)
    assert proc.returncode == 0, err
    return out.strip()


def test_embedded_server_takes_its_shared_buffers() -> None:
    """A fresh data dir starts with the setting (restarted once); a process alone on the
    server applies a change at its start; one that is not leaves the running server alone
    and the change waits for the next start of a process that is alone."""
    if EXTERNAL_DATABASE_URL:
        pytest.skip("needs the embedded server")
    # Not pytest's tmp_path: as root the server runs as another user, who must reach it.
    root = tempfile.mkdtemp(prefix="ctxpack-buffers-")
    os.chmod(root, 0o755)
    try:
        assert _shared_buffers(root, 160) == "160MB"
        assert _shared_buffers(root, 192) == "192MB"
        holder = _attach(root, 192)
        assert holder.stdout is not None and holder.stdout.readline().strip() == "192MB"
        try:
            assert _shared_buffers(root, 224) == "192MB"  # another process is attached
        finally:
            holder.communicate("", timeout=120)
        assert _shared_buffers(root, 224) == "224MB"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_default_shared_buffers_is_at_most_a_quarter_of_memory_within_bounds() -> None:
    total_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    mb = database.default_shared_buffers_mb()
    assert 128 <= mb <= 4096
    assert mb == 128 or mb <= total_mb // 4  # a cgroup's limit may lower it further
