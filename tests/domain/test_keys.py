"""domain/keys.py: creating a key (its org and projects with it; scopes, namespace prefixes
and names checked; only the hash kept), authenticating it, revoking it (the caller cache
drops it at the commit) and listing keys, never their secret."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from fastapi import FastAPI
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from service.domain import keys
from service.domain.auth import hash_key
from service.domain.caller_cache import CallerCache
from service.errors import InvalidInput, NotFound
from service.store.models import ApiKey, Project
from tests.conftest import Key

SECRET = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"


@pytest.fixture
async def session(app: FastAPI) -> AsyncIterator[AsyncSession]:
    """A session of its own; what a test commits stays in its own orgs."""
    async with app.state.ctx.sessionmaker() as s:
        yield s


def org_name() -> str:
    return f"org-{uuid.uuid4().hex[:12]}"


async def test_a_key_is_created_with_its_org_and_projects_and_only_its_hash_is_kept(
    session: AsyncSession,
) -> None:
    org = org_name()
    created = await keys.create_key(session, org=org, projects=["billing", "search"])
    again = await keys.create_key(session, org=org, name="second", projects=["billing"])
    await session.commit()
    assert again.org_id == created.org_id and again.org_name == org
    row = (await session.execute(select(ApiKey).where(ApiKey.id == created.key_id))).scalar_one()
    assert row.key_hash == hash_key(created.key) and created.key not in str(vars(row))
    assert row.scopes == ["read", "write"]  # the default
    assert row.name == f"{org}-key"
    projects = await session.execute(
        select(Project.id).where(Project.org_id == created.org_id).order_by(Project.id)
    )
    assert projects.scalars().all() == ["billing", "search"]


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"scopes": ["read", "owner"]}, "scope"),
        ({"namespace_prefixes": ["Alice Smith"]}, "namespace"),
        ({"name": f"deploy {SECRET}"}, "name"),
        ({"projects": [SECRET]}, "projects"),
    ],
)
async def test_a_key_with_a_bad_scope_prefix_or_a_secret_in_its_names_is_refused(
    session: AsyncSession, options: dict[str, object], field: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        await keys.create_key(session, org=org_name(), **options)  # type: ignore[arg-type]
    assert refused.value.details["field"] == field


async def test_authenticate_finds_active_keys_only(session: AsyncSession) -> None:
    created = await keys.create_key(
        session, org=org_name(), scopes=["read"], projects=["billing"], namespace_prefixes=["alice"]
    )
    await session.commit()
    caller = await keys.authenticate(session, created.key)
    assert caller is not None
    assert (caller.org_id, caller.key_id) == (created.org_id, created.key_id)
    assert caller.scopes == frozenset({"read"})
    assert (caller.projects, caller.namespace_prefixes) == (("billing",), ("alice",))
    assert await keys.authenticate(session, "ctxp_" + "x" * 43) is None  # unknown
    assert await keys.authenticate(session, created.key.removeprefix("ctxp_")) is None
    assert await keys.authenticate(session, created.key + "x" * 200) is None  # no lookup
    await keys.revoke_key(session, str(created.key_id))
    await session.commit()
    assert await keys.authenticate(session, created.key) is None


async def test_a_revocation_empties_this_process_cache_when_it_commits(
    session: AsyncSession,
) -> None:
    created = await keys.create_key(session, org=org_name())
    await session.commit()
    cache = CallerCache(ttl_seconds=60)
    cache.set_live(True)
    caller = await keys.authenticate(session, created.key)
    assert caller is not None
    cache.put(hash_key(created.key), caller, cache.generation)
    await keys.revoke_key(session, str(created.key_id), cache=cache)
    assert cache.get(hash_key(created.key)) is caller  # not before the commit
    await session.commit()
    assert cache.get(hash_key(created.key)) is None


async def test_revoking_needs_an_active_keys_id(session: AsyncSession) -> None:
    with pytest.raises(InvalidInput) as bad:
        await keys.revoke_key(session, "not-a-uuid")
    assert bad.value.details["field"] == "key_id"
    with pytest.raises(NotFound):
        await keys.revoke_key(session, str(uuid.uuid4()))
    created = await keys.create_key(session, org=org_name())
    await keys.revoke_key(session, str(created.key_id))
    with pytest.raises(NotFound):  # revoked already
        await keys.revoke_key(session, str(created.key_id))
    await session.rollback()


async def test_keys_are_listed_by_org_and_an_unknown_org_has_none(
    session: AsyncSession,
) -> None:
    org = org_name()
    first = await keys.create_key(session, org=org, name="first")
    second = await keys.create_key(session, org=org, name="second")
    await keys.create_key(session, org=org_name())
    await session.commit()
    listed = await keys.list_keys(session, org)
    assert sorted((row.id, name) for row, name in listed) == sorted(
        [(first.key_id, org), (second.key_id, org)]
    )
    assert await keys.list_keys(session, org_name()) == []


async def test_the_bootstrap_key_is_made_only_on_a_database_without_keys(
    session: AsyncSession,
) -> None:
    await keys.create_key(session, org=org_name())
    assert await keys.bootstrap_admin_key(session) is None
    await session.rollback()


async def test_keys_are_stored_hashed(key: Key, pg_url: str) -> None:
    import psycopg

    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT key_hash, key_prefix FROM api_keys WHERE id = %s", (key.key_id,)).fetchall()
        dump = conn.execute("SELECT string_agg(t::text, ' ') FROM api_keys t").fetchone()
    assert rows and rows[0][0] != key.key
    assert key.key not in (dump[0] or "")
