"""Orgs, API keys and projects."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from service.store.models import ApiKey, Org, Project


class KeyRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def get_or_create_org(self, name: str) -> Org:
        stmt = insert(Org).values(org_id=uuid.uuid4(), name=name).on_conflict_do_nothing(
            index_elements=["name"]
        )
        await self.session.execute(stmt)
        org = (await self.session.execute(select(Org).where(Org.name == name))).scalar_one()
        return org

    async def org_by_name(self, name: str) -> Org | None:
        return (await self.session.execute(select(Org).where(Org.name == name))).scalar_one_or_none()

    async def ensure_projects(self, org_id: uuid.UUID, projects: list[str]) -> None:
        if not projects:
            return
        stmt = insert(Project).values([{"org_id": org_id, "id": p} for p in projects])
        await self.session.execute(stmt.on_conflict_do_nothing(index_elements=["org_id", "id"]))

    async def create_key(
        self,
        *,
        org_id: uuid.UUID,
        name: str,
        key_prefix: str,
        key_hash: str,
        scopes: list[str],
        projects: list[str],
        namespace_prefixes: list[str],
    ) -> ApiKey:
        key = ApiKey(
            org_id=org_id,
            id=uuid.uuid4(),
            name=name,
            key_prefix=key_prefix,
            key_hash=key_hash,
            scopes=scopes,
            projects=projects,
            namespace_prefixes=namespace_prefixes,
        )
        self.session.add(key)
        await self.session.flush()
        return key

    async def active_by_hash(self, key_hash: str) -> ApiKey | None:
        stmt = select(ApiKey).where(ApiKey.key_hash == key_hash, ApiKey.revoked_at.is_(None))
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def list_keys(self, org_id: uuid.UUID | None = None) -> list[tuple[ApiKey, str]]:
        stmt = select(ApiKey, Org.name).join(Org, Org.org_id == ApiKey.org_id)
        if org_id is not None:
            stmt = stmt.where(ApiKey.org_id == org_id)
        rows = await self.session.execute(stmt.order_by(Org.name, ApiKey.created_at))
        return [(k, n) for k, n in rows.all()]

    async def revoke(self, key_id: uuid.UUID) -> str | None:
        """Revoke an active key; returns its hash, or None when there was no such key."""
        stmt = (
            update(ApiKey)
            .where(ApiKey.id == key_id, ApiKey.revoked_at.is_(None))
            .values(revoked_at=datetime.now(UTC))
            .returning(ApiKey.key_hash)
        )
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def count_keys(self) -> int:
        return int((await self.session.execute(select(func.count()).select_from(ApiKey))).scalar_one())
