"""schemathesis against the OpenAPI schema, in process: for every operation, generated valid
and invalid requests get no 5xx, and every response (status, content type, headers, body)
is one the schema documents. A short run in the default suite; a long one marked slow."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from starlette.types import Receive, Scope, Send

from service.app import create_app
from service.config import Settings
from service.domain import keys as key_service
from service.embedding.fake import FakeEmbedder
from service.store.database import create_engine, make_sessionmaker
from tests.conftest import make_settings

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
]


class DeferredApp:
    """The ASGI app schemathesis calls. The schema is needed when tests are collected, the
    database only when they run, so the real app is plugged in by a fixture. schemathesis
    runs its lifespan (engine, embedder) on an event loop of its own."""

    target: Any = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.target is not None, "the api_app fixture has not run"
        await self.target(scope, receive, send)


APP = DeferredApp()
# The routes (and so the schema) do not depend on the database: build them to collect tests.
_OFFLINE = Settings(
    database_url="postgresql://collect-only@127.0.0.1:1/none",
    embedder="fake",
    migrate_on_start=False,
    print_bootstrap_key=False,
)
schema = schemathesis.openapi.from_dict(create_app(_OFFLINE).openapi())
schema.app = APP


async def _admin_key(pg_url: str) -> str:
    engine = create_engine(pg_url, make_settings(pg_url))
    try:
        async with make_sessionmaker(engine)() as session:
            created = await key_service.create_key(
                session, org="schemathesis", scopes=["read", "write", "admin"]
            )
            await session.commit()
    finally:
        await engine.dispose()
    return created.key


@pytest.fixture(scope="module")
def api_key(pg_url: str) -> str:
    if APP.target is None:
        APP.target = create_app(
            make_settings(pg_url, audit_prune_interval_seconds=0),
            embedder=FakeEmbedder(),
            database_url=pg_url,
        )
    return asyncio.run(_admin_key(pg_url))


def _run(case: Any, key: str) -> None:
    case.call_and_validate(headers={"Authorization": f"Bearer {key}"}, checks=CHECKS)


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_conforms(case: Any, api_key: str) -> None:
    _run(case, api_key)


@pytest.mark.slow
@schema.parametrize()
@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_conforms_long(case: Any, api_key: str) -> None:
    _run(case, api_key)


# --- regressions of failures schemathesis found (fixed) ------------------------------------------


def test_memory_404_is_documented() -> None:
    paths = schema.raw_schema["paths"]["/v1/memories/{memory_id}"]
    for method in ("get", "patch", "delete"):
        assert "404" in paths[method]["responses"], method


async def test_audit_time_filters_take_only_datetimes(client: Any, key: Any) -> None:
    response = await client.get("/v1/audit", params={"until": "0.5"}, headers=key.headers)
    assert response.status_code == 422
