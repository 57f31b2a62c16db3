"""resources.py: the process's resources, built once. Opening them checks the schema and that
the model is as wide as the embedding column (start-up fails with ``unavailable`` otherwise);
the limiter is the shared one by default, in memory when asked, none when the limit is 0; a
command opened without the model says so when something asks for it; the revocation listener
keeps the caller cache live while the resources are open."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from sqlalchemy.engine import make_url

from service.domain.rate_limit import RateLimiter, SharedRateLimiter
from service.embedding.fake import FakeEmbedder
from service.errors import ServiceUnavailable
from service.resources import open_resources
from service.store.database import ensure_database
from tests.conftest import make_settings


async def test_a_model_as_wide_as_the_column_opens_and_another_does_not(pg_url: str) -> None:
    settings = make_settings(pg_url)
    async with open_resources(settings, database_url=pg_url, embedder=FakeEmbedder(),
                              listen=False) as resources:  # fmt: skip
        assert resources.has_embedder and resources.embedder.dims == 384
        await resources.ping()
    with pytest.raises(ServiceUnavailable, match="384 dims, embedder returns 128"):
        async with open_resources(settings, database_url=pg_url, embedder=FakeEmbedder(128),
                                  listen=False):  # fmt: skip
            pass


async def test_a_database_without_the_schema_is_refused(pg_server: object) -> None:
    admin = pg_server.get_uri()  # type: ignore[attr-defined]
    empty = f"ctxpack_empty_{uuid.uuid4().hex[:8]}"
    ensure_database(admin, empty)
    url = make_url(admin).set(database=empty).render_as_string(hide_password=False)
    with pytest.raises(ServiceUnavailable, match="no ctxpack schema"):
        async with open_resources(make_settings(url), database_url=url, load_embedder=False,
                                  listen=False):  # fmt: skip
            pass


async def test_without_the_model_a_command_says_so(pg_url: str) -> None:
    async with open_resources(make_settings(pg_url), database_url=pg_url, load_embedder=False,
                              listen=False) as resources:  # fmt: skip
        assert not resources.has_embedder
        with pytest.raises(ServiceUnavailable, match="without the model"):
            _ = resources.embedder


@pytest.mark.parametrize(
    ("overrides", "kind"),
    [
        ({"rate_limit_per_minute": 60}, SharedRateLimiter),
        ({"rate_limit_per_minute": 60, "rate_limit_backend": "memory"}, RateLimiter),
        ({"rate_limit_per_minute": 0}, type(None)),
    ],
)
async def test_the_limiter_is_the_one_the_settings_ask_for(
    pg_url: str, overrides: dict[str, object], kind: type
) -> None:
    async with open_resources(make_settings(pg_url, **overrides), database_url=pg_url,
                              load_embedder=False, listen=False) as resources:  # fmt: skip
        assert isinstance(resources.limiter, kind)
        assert resources.runner is resources.runner  # built once


async def test_the_caller_cache_is_live_while_the_listener_runs(pg_url: str) -> None:
    settings = make_settings(pg_url, auth_cache_seconds=30)
    async with open_resources(settings, database_url=pg_url, load_embedder=False) as resources:
        for _ in range(300):
            if resources.callers.live:
                break
            await asyncio.sleep(0.1)
        assert resources.callers.enabled
    assert not resources.callers.live
