"""store/probes.py: the database answers, holds ctxpack's schema with the embedding width
the model produces (the app refuses to start on a mismatch), and says whether it is Citus."""

from __future__ import annotations

from fastapi import FastAPI

from service.store.database import libpq_url
from service.store.probes import embedding_dims, has_citus, ping


async def test_the_migrated_database_answers_with_the_models_width(
    app: FastAPI, pg_url: str, on_citus: bool
) -> None:
    engine = app.state.ctx.engine
    await ping(engine)
    assert await embedding_dims(engine) == app.state.ctx.embedder.dims == 384
    assert await has_citus(libpq_url(pg_url)) is on_citus
