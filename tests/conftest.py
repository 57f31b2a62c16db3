"""Test fixtures: one embedded PostgreSQL + pgvector per test session, migrated with
``alembic upgrade head``; one app (fake embedder) per session; a fresh org per test.

Isolation between tests comes from orgs: every test works in orgs of its own, which is
also exactly the boundary the service guarantees. (A rolled-back outer transaction per
test would hide the concurrency and crash behaviour some tests exercise.)
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from hypothesis import settings as hypothesis_settings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from service.app import create_app
from service.config import Settings
from service.domain import keys as key_service
from service.embedding.fake import FakeEmbedder
from service.store.database import (
    _with_database,
    create_engine,
    ensure_database,
    make_sessionmaker,
    start_embedded,
    upgrade,
)

# Property tests: `make test` (and CI) draw the same examples every run, so a red build
# always reproduces; `make fuzz` draws fresh random ones each run to hunt new failures
# (each one found becomes an @example).
hypothesis_settings.register_profile("repeatable", derandomize=True, database=None)
hypothesis_settings.register_profile("fuzz", derandomize=False)
hypothesis_settings.load_profile(os.environ.get("CTXPACK_HYPOTHESIS_PROFILE", "repeatable"))


# An external database for the whole suite (`make test-citus` points it at a Citus
# coordinator): migrated at the start like the embedded one. Tests that need a server of
# their own (fresh databases, a standby) skip then.
EXTERNAL_DATABASE_URL = os.environ.get("CTXPACK_TEST_DATABASE_URL") or None


@pytest.fixture(scope="session")
def pg_server() -> Iterator[object]:
    if EXTERNAL_DATABASE_URL:
        pytest.skip("needs the embedded server (CTXPACK_TEST_DATABASE_URL is set)")
    root = Path(tempfile.mkdtemp(prefix="ctxpack-test-"))
    root.chmod(0o755)
    server = start_embedded(root, cleanup_mode="delete")
    return server


@pytest.fixture(scope="session")
def pg_url(request: pytest.FixtureRequest) -> str:
    if EXTERNAL_DATABASE_URL:
        upgrade(EXTERNAL_DATABASE_URL)
        return EXTERNAL_DATABASE_URL
    admin = request.getfixturevalue("pg_server").get_uri()
    ensure_database(admin, "ctxpack_test")
    url = str(_with_database(admin, "ctxpack_test"))
    upgrade(url)
    return url


@pytest.fixture(scope="session")
def on_citus(pg_url: str) -> bool:
    """The suite's database is a Citus coordinator (``make test-citus``)."""
    import psycopg

    from service.store.database import libpq_url

    with psycopg.connect(libpq_url(pg_url)) as conn:
        found = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone()
    return found is not None


def make_settings(pg_url: str, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "database_url": pg_url,
        "embedder": "fake",
        "migrate_on_start": False,
        "print_bootstrap_key": False,
        "rate_limit_per_minute": 0,
        "console_sign_in_per_minute": 0,
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def settings(pg_url: str) -> Settings:
    return make_settings(pg_url)


@pytest.fixture(scope="session")
async def app(settings: Settings, pg_url: str) -> AsyncIterator[FastAPI]:
    application = create_app(settings, embedder=FakeEmbedder(), database_url=pg_url)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        yield c


@dataclass
class Key:
    key: str
    key_id: uuid.UUID
    org_id: uuid.UUID
    org: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


KeyFactory = Callable[..., Awaitable[Key]]


@pytest.fixture
async def make_key(app: FastAPI) -> KeyFactory:
    """``await make_key(org=None, scopes=None, projects=None, namespaces=None)``: a key in a
    fresh org (or in ``org``)."""

    async def factory(
        org: str | None = None,
        scopes: list[str] | None = None,
        projects: list[str] | None = None,
        namespaces: list[str] | None = None,
    ) -> Key:
        org_name = org or f"org-{uuid.uuid4().hex[:12]}"
        async with app.state.ctx.sessionmaker() as session:
            created = await key_service.create_key(
                session,
                org=org_name,
                scopes=scopes or ["read", "write", "admin"],
                projects=projects,
                namespace_prefixes=namespaces,
            )
            await session.commit()
        return Key(created.key, created.key_id, created.org_id, org_name)

    return factory


@pytest.fixture
async def key(make_key: KeyFactory) -> Key:
    """An admin key (read, write, admin) in an org of this test's own."""
    return await make_key()


@pytest.fixture
def auth(key: Key) -> dict[str, str]:
    return key.headers


@pytest.fixture
async def session_factory(pg_url: str, settings: Settings) -> AsyncIterator[object]:
    engine = create_engine(pg_url, settings)
    yield make_sessionmaker(engine)
    await engine.dispose()
