"""Audit rows: one per API call."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from service.store.models import AuditEvent


class AuditRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(self, **values: Any) -> uuid.UUID:
        audit_id = values.pop("id", None) or uuid.uuid4()
        await self.session.execute(insert(AuditEvent).values(id=audit_id, **values))
        return audit_id
