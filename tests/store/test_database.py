"""The pool pings a connection that sat idle and replaces it when it died meanwhile (as after
a Postgres restart), leaving no transaction open; the context-pack pool's connections default to generic plans; the
embedded server runs with the shared_buffers it is given."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from typing import Any

import psycopg
import pytest
from sqlalchemy import event, make_url, text

from service.config import Settings
from service.domain.ranking import PlanInputs, build_plan
from service.store import database
from service.store.database import create_engine, ensure_database, libpq_url, upgrade, with_database
from service.store.models import EMBEDDING_DIMS
from service.store.retrieval import Scope, build_pack_sql, scope_sql
from service.store.wake import build_wake_sql
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


async def test_the_idle_ping_leaves_no_transaction_open(
    pg_url: str, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pinged connection is handed out outside any transaction: its caller's snapshot is its
    own, and it may switch to autocommit (the namespace index job's DDL needs it; a ping's
    open transaction made psycopg refuse)."""
    engine = create_engine(pg_url, settings)
    try:
        await _backend_pid(engine)
        monkeypatch.setattr(database, "PING_AFTER_IDLE_SECONDS", 0.0)
        async with engine.connect() as raw:
            conn = await raw.execution_options(isolation_level="AUTOCOMMIT")
            assert (await conn.execute(text("SELECT 1"))).scalar_one() == 1
    finally:
        await engine.dispose()


async def test_pack_pool_uses_generic_plans(pg_url: str, settings: Settings) -> None:
    engine = create_engine(pg_url, settings, generic_plans=True)
    statements: list[str] = []
    event.listen(engine.sync_engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    try:
        for _ in range(3):
            async with engine.connect() as conn:
                mode = (await conn.execute(text("SHOW plan_cache_mode"))).scalar_one()
        assert mode == "force_generic_plan"
        assert statements == ["SHOW plan_cache_mode"] * 3
    finally:
        await engine.dispose()


async def test_the_pack_pool_keeps_fewer_prepared_statements(
    pg_url: str, settings: Settings
) -> None:
    """Each fully indexed wide scope has a statement text of its own, whose kept plan takes
    about 0.5 MB of its backend: the pack pool keeps ``PACK_PREPARED_MAX`` of them, not
    psycopg's 100. The other pools keep psycopg's default."""
    pack = create_engine(pg_url, settings, generic_plans=True)
    other = create_engine(pg_url, settings)
    try:
        async with pack.connect() as conn:
            raw = await conn.get_raw_connection()
            assert raw.driver_connection.prepared_max == database.PACK_PREPARED_MAX
        async with other.connect() as conn:
            raw = await conn.get_raw_connection()
            assert raw.driver_connection.prepared_max == 100
    finally:
        await pack.dispose()
        await other.dispose()


async def test_a_long_statement_is_converted_once(pg_url: str, settings: Settings) -> None:
    """psycopg keeps a statement text's converted placeholders only up to a length; a
    ranking statement (6-7 kB) is longer than its default, so ``create_engine`` raises it.
    Fails if a psycopg release stops reading the setting."""
    from psycopg import _queries

    engine = create_engine(pg_url, settings, generic_plans=True)
    padding = " ".join(f"/* {n:04d} */" for n in range(800))  # about 10 kB
    sql = f"SELECT CAST(:a AS int) + CAST(:b AS int) {padding}"
    assert len(sql) > 8_000
    try:
        async with engine.connect() as conn:
            first = (await conn.execute(text(sql), {"a": 1, "b": 2})).scalar_one()
            hits = _queries._query2pg.cache_info().hits
            again = (await conn.execute(text(sql), {"a": 3, "b": 4})).scalar_one()
        assert (first, again) == (3, 7)
        assert _queries._query2pg.cache_info().hits == hits + 1
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
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
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


async def _generic_plan(conn: psycopg.AsyncConnection[Any], sql: str) -> str:
    """``EXPLAIN (GENERIC_PLAN)`` of a statement written with ``:name`` parameters: the plan
    a prepared statement gets under ``force_generic_plan``, made without its values."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    numbered = re.sub(r"(?<![:\w\\]):(\w+)", number, sql).replace("\\:", ":")
    cursor = await conn.execute("EXPLAIN (GENERIC_PLAN) " + numbered)  # type: ignore[call-overload]
    rows = await cursor.fetchall()
    return "\n".join(str(r[0]) for r in rows)


def _memories_reads(plan: str) -> list[str]:
    """The index condition of each scan of ``memories`` in ``plan`` ("seq" for a sequential
    scan): what it reads."""
    lines = plan.splitlines()
    reads = []
    for i, line in enumerate(lines):
        if " on memories " not in line:
            continue
        if "Seq Scan" in line:
            reads.append("seq")
            continue
        cond = next(x for x in lines[i + 1 :] if "Index Cond:" in x)
        reads.append(cond.split("Index Cond:", 1)[1].strip())
    return reads


@pytest.mark.skipif(
    bool(EXTERNAL_DATABASE_URL),
    reason="a database of its own; on Citus the pack pool plans every call for its values",
)
async def test_pack_pool_never_reads_a_big_org_whole(pg_url: str, settings: Settings) -> None:
    """One org holding every row in two namespaces (a self-hosted team): a generic plan,
    blind to the org and the namespaces, estimates "most of the table" for a scope, and the
    plain scope predicate is read through the org alone (the whole org, every call). The
    pack pool's ranking and wake statements, planned the way it plans them (generic, no
    sequential scans), read a namespace or a row by key at every scan of memories."""
    url = make_url(pg_url).set(database="ctxpack_one_org").render_as_string(hide_password=False)
    ensure_database(pg_url, "ctxpack_one_org")
    upgrade(url)
    org = uuid.uuid4()
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute("TRUNCATE memories CASCADE")
        conn.execute("INSERT INTO orgs (org_id, name) VALUES (%s, %s)", (org, f"team-{org}"))
        conn.execute(
            """
            INSERT INTO memories (org_id, id, namespace, type, name, content, content_hash,
                                  embedding, created_at, updated_at, metadata)
            SELECT %s, gen_random_uuid(), CASE WHEN g %% 10 = 0 THEN 'alice' ELSE 'bob' END,
                   'decision', 'note ' || g, 'note ' || g || ' about the deploy', md5(g::text),
                   array_fill(0.05, ARRAY[%s])::vector, now(), now(), '{}'
            FROM generate_series(1, 4000) g
            """,
            (org, EMBEDDING_DIMS),
        )
        conn.execute("ANALYZE memories")
    plan = build_plan(
        PlanInputs(
            mode="hybrid",
            layer="recall",
            intent="general",
            query="the deploy",
            query_vector=[0.05] * EMBEDDING_DIMS,
            limit=24,
            domain=None,
            include_related=True,
            related_limit=5,
        ),
        settings,
    )
    scope = Scope(org_id=org, namespaces=["alice", "alice:s1", "alice:s1:t1"])
    engine = create_engine(url, settings, generic_plans=True)
    try:
        async with engine.connect() as conn:
            raw = await conn.get_raw_connection()
            pack_pool = raw.driver_connection
            plans = {
                "pack": await _generic_plan(pack_pool, build_pack_sql(scope, plan, narrow=True)),
                "wake": await _generic_plan(pack_pool, build_wake_sql(scope, None)),
            }
    finally:
        await engine.dispose()
    async with await psycopg.AsyncConnection.connect(libpq_url(url), autocommit=True) as conn:
        blind = f"SELECT m.id FROM memories m WHERE {scope_sql('m', scope)}"
        plans["blind"] = await _generic_plan(conn, blind)
    # The blind form reads the org whole; the pack pool's statements read a namespace or
    # a row by key at every scan of memories.
    assert _memories_reads(plans["blind"]) == ["seq"]
    for name in ("pack", "wake"):
        reads = _memories_reads(plans[name])
        assert reads, name
        for cond in reads:
            assert "namespace" in cond or "id = " in cond, (name, cond, plans[name])


def test_with_database_names_another_database_on_the_same_server() -> None:
    # The benchmarks and tools reach their databases through it: credentials, query and a
    # socket directory kept, only the path replaced.
    assert (
        with_database("postgresql://postgres:pw@127.0.0.1:5432/postgres?sslmode=disable", "bench")
        == "postgresql://postgres:pw@127.0.0.1:5432/bench?sslmode=disable"
    )
    assert with_database("postgresql://postgres:@/postgres?host=/tmp/pg", "one_node") == (
        "postgresql://postgres:@/one_node?host=/tmp/pg"
    )
