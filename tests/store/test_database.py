"""The pool pings a connection that sat idle and replaces it when it died meanwhile (as after
a Postgres restart); the context-pack pool's connections default to generic plans."""

from __future__ import annotations

import psycopg
import pytest
from sqlalchemy import event, text

from service.config import Settings
from service.store import database
from service.store.database import create_engine, libpq_url


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
