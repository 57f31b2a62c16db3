"""Audit fixtures: rows inserted straight through the repository, as calls would record them."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi import FastAPI

from service.store.audit import AuditRepository

Seed = Callable[..., Awaitable[uuid.UUID]]

BASE_TIME = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def seed(app: FastAPI) -> Seed:
    """``await seed(org_id, minutes=0, **columns)``: insert one audit row stamped
    ``BASE_TIME + minutes`` and return its id."""

    async def insert(org_id: uuid.UUID, minutes: float = 0, **columns: Any) -> uuid.UUID:
        values: dict[str, Any] = {
            "org_id": org_id,
            "created_at": BASE_TIME + timedelta(minutes=minutes),
            "key_id": None,
            "caller": "seed",
            "action": "remember",
            "namespace": None,
            "request": {},
            "outcome": "ok",
            "status_code": 200,
            "memory_ids": [],
            "details": {},
            "redaction_count": 0,
            "rejection_count": 0,
            "latency_ms": 1.5,
        }
        values.update(columns)
        async with app.state.ctx.sessionmaker() as session:
            audit_id = await AuditRepository(session).add(**values)
            await session.commit()
        return audit_id

    return insert
