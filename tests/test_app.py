"""app.py: ``create_app`` mounts the faces side by side on one set of resources: the probes,
the API under /v1, MCP at /mcp and the console at /ui; the lifespan opens the resources once
and closes them, and loads the embedder's batch lane before it is ready; a body over
``max_body_bytes`` is refused (413) before any work, even before the key is looked at."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastapi import FastAPI

from service import app as app_module
from service.app import create_app, state_of
from service.embedding.fake import FakeEmbedder
from tests.conftest import make_settings


async def test_the_faces_share_one_set_of_resources_opened_by_the_lifespan(pg_url: str) -> None:
    app = create_app(make_settings(pg_url), embedder=FakeEmbedder(), database_url=pg_url)
    assert {"/healthz", "/readyz", "/v1/remember", "/v1/context"} <= set(app.openapi()["paths"])
    assert "/mcp" in {getattr(r, "path", None) for r in app.router.routes}
    async with app.router.lifespan_context(app):
        resources = state_of(app)
        assert resources.has_embedder
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            assert (await client.get("/readyz")).json()["status"] == "ready"
            assert (await client.get("/v1/whoami")).status_code == 401
            assert (await client.get("/ui/login")).status_code == 200
    assert resources.engine.pool.checkedout() == 0


def test_the_api_document_says_how_to_authenticate(app: FastAPI) -> None:
    spec = app.openapi()
    assert "Authorization: Bearer" in spec["info"]["description"]


async def test_oversized_body_is_413_before_work(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    big = b"x" * (5 * 1024 * 1024)
    response = await client.post("/v1/whoami", content=big, headers=auth)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"


class _LanedEmbedder(FakeEmbedder):
    """A fake embedder with a batch lane, which records how it was asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.lane_asks: list[bool] = []

    def document_lane(self, *, wait: bool = True) -> None:
        self.lane_asks.append(wait)


async def test_the_server_is_ready_once_its_batch_lane_is_loaded(pg_url: str) -> None:
    """The bf16 batch lane is loaded before the lifespan yields (before /readyz answers): a
    server's first batches are not embedded in fp32 for want of it, and its first context
    calls do not share the CPU with its loading."""
    embedder = _LanedEmbedder()
    app = create_app(make_settings(pg_url), embedder=embedder, database_url=pg_url)
    async with app.router.lifespan_context(app):
        assert embedder.lane_asks == [True]


async def test_shutdown_leaves_a_job_that_does_not_stop_behind(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A background job stuck past its cancel (a statement that outlives it) must not hold
    # the process's shutdown: it waits JOB_STOP_SECONDS, logs the job and goes on.
    monkeypatch.setattr(app_module, "JOB_STOP_SECONDS", 0.2)
    release = asyncio.Event()

    async def stubborn() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            await release.wait()  # ignores its cancel until released

    app = FastAPI()
    async with app_module._background(app, "stubborn_task", "stubborn", stubborn()):
        task = app.state.stubborn_task
        await asyncio.sleep(0)
    assert app.state.stubborn_task is None
    assert not task.done()
    assert any(r.getMessage() == "background_job_not_stopped" for r in caplog.records)
    release.set()
    await task


async def test_shutdown_waits_for_a_job_that_stops() -> None:
    stopped: list[bool] = []

    async def polite() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            stopped.append(True)
            raise

    app = FastAPI()
    async with app_module._background(app, "polite_task", "polite", polite()):
        task = app.state.polite_task
        await asyncio.sleep(0)
    assert task.cancelled() and stopped == [True]
