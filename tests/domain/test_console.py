"""domain/console.py: the console's sessions (a random token whose hash alone is kept, ended
by sign-out or by revoking its key), its keys page (an admin limited to projects or
namespaces sees, creates and revokes only keys within its limits, never a wider one), its
read models bound to the caller's reach, and the sign-in throttle's per-address buckets."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from service.domain import console
from service.domain import keys as key_service
from service.domain.audit import AuditContext
from service.domain.auth import Caller
from service.domain.rate_limit import RateLimiter
from service.errors import InvalidInput, NotFound, PermissionDenied, ScopeDenied
from tests.conftest import Key, KeyFactory, Seeder, SqlRows
from tests.domain.conftest import caller_of


def ctx(action: str, caller: Caller) -> AuditContext:
    return AuditContext(action, caller)  # type: ignore[arg-type]


async def test_a_session_is_a_token_whose_hash_alone_is_kept(
    session: AsyncSession, key: Key, sql: SqlRows
) -> None:
    caller = await caller_of(session, key)
    token, opened = await console.start_session(session, caller)
    await session.commit()
    assert opened.caller == caller and opened.csrf_token and opened.session_id
    resumed = await console.resume_session(session, token)
    assert resumed is not None and resumed.csrf_token == opened.csrf_token
    assert resumed.caller.key_id == key.key_id
    rows = await sql("SELECT token_hash FROM console_sessions WHERE id = :i", i=opened.session_id)
    assert rows and token not in str(rows)
    for bad in ("", "x" * 101, token + "x"):
        assert await console.resume_session(session, bad) is None
    await console.end_session(session, token)
    assert await console.resume_session(session, token) is None


async def test_revoking_a_key_ends_its_sessions_at_once(session: AsyncSession, key: Key) -> None:
    caller = await caller_of(session, key)
    token, _ = await console.start_session(session, caller)
    await key_service.revoke_key(session, str(key.key_id))
    await session.commit()
    assert await console.resume_session(session, token) is None


async def test_an_admin_limited_to_projects_mints_no_wider_key(
    session: AsyncSession, make_key: KeyFactory
) -> None:
    admin = await make_key(projects=["billing"])
    caller = await caller_of(session, admin)
    made = await console.create_key(
        session, caller, ctx("key_create", caller), name=" reader ", scopes=["read"],
        projects=["billing"], namespace_prefixes=[],
    )  # fmt: skip
    assert made.org_id == admin.org_id
    for projects in ([], ["billing", "search"]):
        with pytest.raises(PermissionDenied):
            await console.create_key(
                session, caller, ctx("key_create", caller), name="wider", scopes=["read"],
                projects=projects, namespace_prefixes=[],
            )  # fmt: skip


async def test_an_admin_limited_to_namespaces_mints_keys_under_them_only(
    session: AsyncSession, make_key: KeyFactory
) -> None:
    caller = await caller_of(session, await make_key(namespaces=["alice"]))
    await console.create_key(
        session, caller, ctx("key_create", caller), name="s1", scopes=["read"], projects=[],
        namespace_prefixes=["alice:s1"],
    )  # fmt: skip
    for prefixes in ([], ["bob"], ["alicex"]):
        with pytest.raises(PermissionDenied):
            await console.create_key(
                session, caller, ctx("key_create", caller), name="wider", scopes=["read"],
                projects=[], namespace_prefixes=prefixes,
            )  # fmt: skip


@pytest.mark.parametrize(
    ("form", "field"),
    [
        ({"name": "  "}, "name"),
        ({"name": "x" * 201}, "name"),
        ({"scopes": []}, "scopes"),
        ({"projects": ["not a slug"]}, "projects"),
        ({"namespace_prefixes": ["Bad Prefix"]}, "namespace_prefixes"),
    ],
)
async def test_a_key_form_is_checked(
    session: AsyncSession, key: Key, form: dict[str, Any], field: str
) -> None:
    caller = await caller_of(session, key)
    values: dict[str, Any] = {
        "name": "k", "scopes": ["read"], "projects": [], "namespace_prefixes": [], **form
    }
    with pytest.raises(InvalidInput) as refused:
        await console.create_key(session, caller, ctx("key_create", caller), **values)
    assert refused.value.details["field"] == field


async def test_keys_beyond_an_admins_limits_are_hidden_and_not_found(
    session: AsyncSession, key: Key, make_key: KeyFactory
) -> None:
    wide = await make_key(org=key.org, scopes=["read"])
    limited = await caller_of(session, await make_key(org=key.org, projects=["billing"]))
    inside = await make_key(org=key.org, scopes=["read"], projects=["billing"])
    listed = {k.id: k for k in await console.list_keys(session, limited)}
    assert inside.key_id in listed and limited.key_id in listed and listed[limited.key_id].is_self
    assert wide.key_id not in listed and key.key_id not in listed
    with pytest.raises(NotFound):
        await console.revoke_key(session, limited, ctx("key_revoke", limited), wide.key_id)
    await console.revoke_key(session, limited, ctx("key_revoke", limited), inside.key_id)
    with pytest.raises(InvalidInput):  # revoked already
        await console.revoke_key(session, limited, ctx("key_revoke", limited), inside.key_id)
    reader = await caller_of(session, wide)
    with pytest.raises(ScopeDenied):
        await console.list_keys(session, reader)


async def test_the_overview_and_names_stay_within_reach(
    app: FastAPI, session: AsyncSession, key: Key, make_key: KeyFactory
) -> None:
    seed = Seeder(app, key.org_id)
    mine = await seed.add("Alice's deploy notes say blue green only.", namespace="alice")
    theirs = await seed.add("Bob keeps the pager rota in the wiki.", namespace="bob")
    narrow = await caller_of(session, await make_key(org=key.org, namespaces=["alice"]))
    seen = await console.overview(session, narrow)
    assert seen.total == 1 and seen.by_namespace == [("alice", 1)]
    assert len(seen.days) == console.SERIES_DAYS and len(seen.pack_calls) == console.SERIES_DAYS
    assert await console.memory_names(session, narrow, [mine, theirs]) == {
        mine: "Alice's deploy notes say blue green only"
    }
    roots, users = await console.namespace_tree(session, narrow, open_user="alice", page=1)
    assert users == 1 and [(r.path, r.own, r.total) for r in roots] == [("alice", 1, 1)]


def test_form_scopes_and_project_ids() -> None:
    assert console.scopes_of(["write", "read", "read"]) == ["read", "write"]
    with pytest.raises(InvalidInput):
        console.scopes_of(["owner"])
    assert console.auth_slug("billing-2.x_y") and not console.auth_slug("a b")
    assert not console.auth_slug("x" * 129)


async def test_sign_in_attempts_are_throttled_per_address() -> None:
    assert await console.admit_sign_in(None, "198.51.100.7") == 0.0  # throttle off
    limiter = RateLimiter(per_minute=1, burst=2, clock=lambda: 0.0)
    waits = [await console.admit_sign_in(limiter, "198.51.100.7") for _ in range(3)]
    assert waits[:2] == [0.0, 0.0] and waits[2] > 0
    assert await console.admit_sign_in(limiter, "198.51.100.8") == 0.0


async def test_a_refused_sign_in_is_audited_with_the_address_only(
    session: AsyncSession, sql: SqlRows
) -> None:
    address = f"203.0.113.{uuid.uuid4().int % 250}"
    tag = uuid.uuid4().hex
    await console.record_refused_sign_in(session, f"{address} {tag}", status_code=401, outcome="failed")
    await session.commit()
    rows = await sql(
        "SELECT caller, action, outcome, status_code FROM audit_events WHERE org_id = :o "
        "AND request->>'client' = :c", o=console.SIGN_IN_ORG, c=f"{address} {tag}",
    )  # fmt: skip
    assert [tuple(r) for r in rows] == [("console", "console_login", "failed", 401)]
