"""``bench.ranking_explain`` explains a wide scope's statement too: the pack pool sends it
through ``retrieval.pipelined_transaction`` (not ``session.execute``), and the tool's
wrapper of that path collects the plan while the pack comes out as the server's would."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from bench.ranking_explain import explaining_pipeline
from service.app import create_app
from service.embedding.fake import FakeEmbedder
from service.store import namespace_indexes, retrieval
from tests.conftest import Key, Seeder, make_settings


async def test_a_wide_packs_plan_is_collected(
    pg_url: str, key: Key, seed: Seeder, monkeypatch: pytest.MonkeyPatch, on_citus: bool
) -> None:
    if on_citus:
        pytest.skip("Citus ranks a wide scope through use_indexes, which session.execute runs")
    lines: list[str] = []
    monkeypatch.setattr(
        retrieval,
        "pipelined_transaction",
        explaining_pipeline(retrieval.pipelined_transaction, lines),
    )
    app = create_app(make_settings(pg_url), embedder=FakeEmbedder(), database_url=pg_url)
    async with app.router.lifespan_context(app):
        for n in range(3):
            await seed.add(f"The deploy pipeline runs health checks before traffic shifts ({n}).")
        await namespace_indexes.sync(app.state.ctx.engine, 0, org_id=key.org_id)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            response = await client.post(
                "/v1/context",
                json={"goal": "deploy pipeline health checks", "namespace": "alice:s1"},
                headers=key.headers,
            )
    assert response.status_code == 200, response.text
    assert response.json()["total_items"] == 3
    plan: Any = "\n".join(lines)
    # The wide statement (its full-text side split into rare and common lexemes), not the
    # narrow one (which reads its scope's rows once, into ``scoped``).
    assert "CTE split" in plan and "CTE scoped" not in plan
    assert "actual time" in plan and "Execution Time" in plan
