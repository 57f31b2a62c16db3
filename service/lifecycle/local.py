"""What the lifecycle commands need to work on the database directly: an engine, the
embedder, and an operator caller of one org (the CLI has the database's own credentials, so
it acts with every right in that org, as `ctxpack audit` does)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from service.config import Settings
from service.domain.auth import Caller
from service.embedding import AsyncEmbedder

# Audit rows written by the CLI carry this key id (no key was presented) and this caller.
OPERATOR_KEY_ID = uuid.UUID(int=0)
OPERATOR_NAME = "ctxpack-cli"


@dataclass
class LocalResources:
    settings: Settings
    sessionmaker: async_sessionmaker[AsyncSession]
    embedder: AsyncEmbedder | None


@contextlib.asynccontextmanager
async def open_local(
    settings: Settings, url: str, *, with_embedder: bool = True
) -> AsyncIterator[LocalResources]:
    """The engine (and, if asked, the embedder), built once for the command."""
    import anyio.to_thread

    from service.embedding import build_embedder
    from service.store.database import create_engine, make_sessionmaker

    engine = create_engine(url, settings)
    try:
        embedder = None
        if with_embedder:
            model = await anyio.to_thread.run_sync(build_embedder, settings)
            embedder = AsyncEmbedder(model, settings.embed_concurrency, settings.query_cache_size)
        yield LocalResources(settings, make_sessionmaker(engine), embedder)
    finally:
        await engine.dispose()


def operator(org_id: uuid.UUID) -> Caller:
    """Every right in ``org_id``, for the CLI."""
    return Caller(
        org_id=org_id,
        key_id=OPERATOR_KEY_ID,
        key_name=OPERATOR_NAME,
        scopes=frozenset({"read", "write", "admin"}),
    )


def model_id(settings: Settings) -> str:
    """The embedding model's name as an export header records it (without loading it)."""
    if settings.embedder in ("minilm", "minilm-torch"):
        return "all-MiniLM-L6-v2"
    if settings.embedder == "openai":
        return f"openai:{settings.embedder_model}"
    return str(settings.embedder)
