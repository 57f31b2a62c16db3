"""Seeding for context tests: memories and relations written straight through the models,
so a test controls every column (created_at, superseded_by, agent_id...) and embeddings come
from the same fake embedder the app uses (over ``document_text(name, content)``, as remember does)."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy import insert

from service.domain.remember import document_text
from service.embedding.fake import FakeEmbedder
from service.store.models import Memory, Relation
from tests.conftest import Key

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
