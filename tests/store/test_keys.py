"""store/keys.py: ``KeyRepository``, the SQL of orgs, keys and projects: an org made once
by name, projects ensured without duplicates, active keys by hash, a revocation that answers
the revoked key's hash once."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from fastapi import FastAPI
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from service.store.keys import KeyRepository
from service.store.models import Project


@pytest.fixture
async def repo(app: FastAPI) -> AsyncIterator[KeyRepository]:
    async with app.state.ctx.sessionmaker() as session:
        yield KeyRepository(session)
        await session.rollback()


async def make_key(repo: KeyRepository, org_id: uuid.UUID, key_hash: str) -> uuid.UUID:
    row = await repo.create_key(
        org_id=org_id, name="k", key_prefix=key_hash[:12], key_hash=key_hash,
        scopes=["read"], projects=[], namespace_prefixes=[],
    )  # fmt: skip
    return row.id


async def test_an_org_is_made_once_by_name(repo: KeyRepository) -> None:
    name = f"org-{uuid.uuid4().hex[:12]}"
    assert await repo.org_by_name(name) is None
    first = await repo.get_or_create_org(name)
    again = await repo.get_or_create_org(name)
    assert first.org_id == again.org_id
    found = await repo.org_by_name(name)
    assert found is not None and found.org_id == first.org_id


async def test_projects_are_ensured_without_duplicates(repo: KeyRepository) -> None:
    org = await repo.get_or_create_org(f"org-{uuid.uuid4().hex[:12]}")
    await repo.ensure_projects(org.org_id, ["billing"])
    await repo.ensure_projects(org.org_id, ["billing", "search"])
    await repo.ensure_projects(org.org_id, [])
    session: AsyncSession = repo.session
    count = await session.execute(
        select(Project.id, func.count()).where(Project.org_id == org.org_id).group_by(Project.id)
    )
    assert sorted(count.all()) == [("billing", 1), ("search", 1)]


async def test_a_revoked_key_is_no_longer_active_and_revokes_once(repo: KeyRepository) -> None:
    org = await repo.get_or_create_org(f"org-{uuid.uuid4().hex[:12]}")
    key_hash = uuid.uuid4().hex * 2
    key_id = await make_key(repo, org.org_id, key_hash)
    active = await repo.active_by_hash(key_hash)
    assert active is not None and active.id == key_id
    assert await repo.revoke(key_id) == key_hash
    assert await repo.active_by_hash(key_hash) is None
    assert await repo.revoke(key_id) is None
    assert await repo.revoke(uuid.uuid4()) is None


async def test_keys_are_listed_with_their_orgs_name(repo: KeyRepository) -> None:
    name = f"org-{uuid.uuid4().hex[:12]}"
    org = await repo.get_or_create_org(name)
    ids = [await make_key(repo, org.org_id, uuid.uuid4().hex * 2) for _ in range(2)]
    listed = await repo.list_keys(org.org_id)
    assert sorted(row.id for row, _ in listed) == sorted(ids)
    assert {org_name for _, org_name in listed} == {name}
    assert await repo.count_keys() >= 2
