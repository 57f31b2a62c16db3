"""Test fixtures: one embedded PostgreSQL + pgvector per test session, migrated with
``alembic upgrade head``; one app (fake embedder) per session; a fresh org per test.

Isolation between tests comes from orgs: every test works in orgs of its own, which is
also exactly the boundary the service guarantees. (A rolled-back outer transaction per
test would hide the concurrency and crash behaviour some tests exercise.)
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from hypothesis import settings as hypothesis_settings
from mcp import Client
from sqlalchemy import insert, text

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from service.app import create_app
from service.config import Settings
from service.domain import keys as key_service
from service.domain.remember import document_text
from service.embedding.fake import FakeEmbedder
from service.mcp.backends import LocalBackend, bearer_key
from service.mcp.server import build_server
from service.store.database import (
    create_engine,
    ensure_database,
    make_sessionmaker,
    start_embedded,
    upgrade,
    with_database,
)
from service.store.models import Memory, Relation

# Property tests: `make test` (and CI) draw the same examples every run, so a red build
# always reproduces; `make fuzz` draws fresh random ones each run to hunt new failures
# (each one found becomes an @example).
hypothesis_settings.register_profile("repeatable", derandomize=True, database=None)
hypothesis_settings.register_profile("fuzz", derandomize=False)
hypothesis_settings.load_profile(os.environ.get("CTXPACK_HYPOTHESIS_PROFILE", "repeatable"))


# An external database for the whole suite (`make test-citus` points it at a Citus
# coordinator): migrated at the start like the embedded one. Tests that need a server of
# their own (fresh databases, a standby) skip then.
ROOT = Path(__file__).resolve().parents[1]

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
    url = str(with_database(admin, "ctxpack_test"))
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
        # Namespace indexes are built by the tests that want them (namespace_indexes.sync).
        "namespace_index_interval_seconds": 0,
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


# --- apps with settings of their own, MCP clients, SQL (the hardening suites' fixtures, used
# across the suite) ----------------------------------------------------------------------------

AppFactory = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]


@pytest.fixture
def app_with(pg_url: str) -> AppFactory:
    """``async with app_with(**settings) as client``: a fresh app on the test database with
    those settings overridden, running its lifespan, and a client of it (``client.app``)."""

    @asynccontextmanager
    async def open_app(**overrides: Any) -> AsyncIterator[httpx.AsyncClient]:
        settings = make_settings(pg_url, audit_prune_interval_seconds=0, **overrides)
        application = create_app(settings, embedder=FakeEmbedder(), database_url=pg_url)
        async with application.router.lifespan_context(application):
            transport = httpx.ASGITransport(app=application)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                client.app = application  # type: ignore[attr-defined]
                yield client

    return open_app


McpConnect = Callable[[Key], AbstractAsyncContextManager[Client]]


@pytest.fixture
def mcp_connect(app: FastAPI) -> McpConnect:
    """``async with mcp_connect(key) as client``: an in-memory MCP client acting as ``key``.
    Open it inside the test: its task group must be left in the task that entered it."""
    state = app.state.ctx

    @asynccontextmanager
    async def open_client(key: Key) -> AsyncIterator[Client]:
        server = build_server(LocalBackend(state, bearer_key(key.key)))
        async with Client(server, raise_exceptions=True) as client:
            yield client

    return open_client


SqlRows = Callable[..., Awaitable[list[Any]]]


@pytest.fixture
def sql(app: FastAPI) -> SqlRows:
    """``await sql("SELECT ...", **params)``: rows of a query on the test database."""

    async def run(query: str, **params: Any) -> list[Any]:
        async with app.state.ctx.sessionmaker() as session:
            return list((await session.execute(text(query), params)).all())

    return run


def org_of(key: Key) -> uuid.UUID:
    return key.org_id


# --- seeding: memories and relations written straight through the models, so a test controls
# every column (created_at, superseded_by, agent_id...) and embeddings come from the same fake
# embedder the app uses (over ``document_text(name, content)``, as remember does) -------------

_FAKE = FakeEmbedder()
BASE_TIME = datetime(2026, 1, 1, tzinfo=UTC)


class Seeder:
    """Writes memories and relations into one org."""

    def __init__(self, app: FastAPI, org_id: uuid.UUID) -> None:
        self.app = app
        self.org_id = org_id
        self._tick = 0

    async def add(
        self,
        content: str,
        *,
        namespace: str = "alice",
        type: str = "decision",
        name: str | None = None,
        project: str | None = None,
        agent_id: str | None = None,
        domain: str | None = None,
        source: str | None = None,
        created_at: datetime | None = None,
        superseded_by: uuid.UUID | None = None,
        metadata: dict[str, Any] | None = None,
        valid_at: datetime | None = None,
    ) -> uuid.UUID:
        """Store one memory; without ``created_at`` each one is a minute newer than the last."""
        self._tick += 1
        memory_id = uuid.uuid4()
        title = name or content.split(".")[0][:80]
        when = created_at or BASE_TIME + timedelta(minutes=self._tick)
        async with self.app.state.ctx.sessionmaker() as session:
            await session.execute(
                insert(Memory).values(
                    org_id=self.org_id,
                    id=memory_id,
                    namespace=namespace,
                    type=type,
                    name=title,
                    content=content,
                    content_hash=hashlib.sha256(f"{content}{memory_id}".encode()).hexdigest(),
                    embedding=_FAKE.embed_documents([document_text(title, content)])[0],
                    project=project,
                    agent_id=agent_id,
                    domain=domain,
                    source=source,
                    created_at=when,
                    updated_at=when,
                    superseded_by=superseded_by,
                    valid_at=valid_at,
                    meta=metadata or {},
                )
            )
            await session.commit()
        return memory_id

    async def relate(
        self, source: uuid.UUID, target: uuid.UUID, relationship: str = "depends_on"
    ) -> None:
        async with self.app.state.ctx.sessionmaker() as session:
            await session.execute(
                insert(Relation).values(
                    org_id=self.org_id,
                    id=uuid.uuid4(),
                    source_id=source,
                    target_id=target,
                    relationship=relationship,
                )
            )
            await session.commit()


SeederFactory = Callable[[Key], Awaitable[Seeder]]


@pytest.fixture
async def seed(app: FastAPI, key: Key) -> Seeder:
    """A seeder in the org of ``key``."""
    return Seeder(app, key.org_id)


@pytest.fixture
def seeder_for(app: FastAPI) -> Callable[[Key], Seeder]:
    """``seeder_for(other_key)``: a seeder in another key's org."""

    def factory(k: Key) -> Seeder:
        return Seeder(app, k.org_id)

    return factory


# --- a real server on a socket ---------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def server_env(pg_url: str) -> dict[str, str]:
    """The environment of a ctxpack subprocess on the test database with the fake embedder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXPACK_")}
    env.update(
        CTXPACK_DATABASE_URL=pg_url,
        CTXPACK_EMBEDDER="fake",
        CTXPACK_PRINT_BOOTSTRAP_KEY="false",
        CTXPACK_RATE_LIMIT_PER_MINUTE="0",
        CTXPACK_AUDIT_PRUNE_INTERVAL_SECONDS="0",
        # As in make_settings: a server's index job would run whole-database passes every
        # minute, dropping the indexes other tests built for their small namespaces.
        CTXPACK_NAMESPACE_INDEX_INTERVAL_SECONDS="0",
        CTXPACK_LOG_LEVEL="WARNING",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    return env


@contextmanager
def serve_process(pg_url: str, log_path: Path, **env: str) -> Iterator[str]:
    """``ctxpack serve`` in a subprocess on a free port, with ``server_env`` plus ``env``
    (``CTXPACK_...`` names); yields its base URL once /healthz answers, stops it after."""
    port = free_port()
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "service", "serve", "--no-migrate", "--port", str(port)],
            cwd=ROOT,
            env={**server_env(pg_url), **env},
            stdout=log,
            stderr=subprocess.STDOUT,
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


@pytest.fixture(scope="session")
def live_server(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``ctxpack serve`` in a subprocess on a free port; yields its base URL."""
    with serve_process(pg_url, tmp_path_factory.mktemp("live") / "serve.log") as base:
        yield base


async def audit_transports(sql: SqlRows, key: Key) -> list[tuple[str, int, str | None]]:
    """The audit rows of ``key``'s org, oldest first: (action, status code, transport), the
    transport being what a failure row records (``None`` on a success row)."""
    found = await sql(
        "SELECT action, status_code, details->>'transport' FROM audit_events WHERE org_id = :o "
        "ORDER BY created_at", o=key.org_id,
    )  # fmt: skip
    return [tuple(r) for r in found]


@contextmanager
def tokenizing_threads(sync: Any) -> Iterator[list[bool]]:
    """While open, records for each ``count_tokens`` call of the embedder ``sync`` whether it
    ran on the main thread (the event loop's): a test asserts that none did."""
    seen: list[bool] = []
    original = sync.count_tokens

    def spy(text: str) -> int:
        seen.append(threading.current_thread() is threading.main_thread())
        return original(text)  # type: ignore[no-any-return]

    sync.count_tokens = spy
    try:
        yield seen
    finally:
        del sync.count_tokens
