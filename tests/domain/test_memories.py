"""domain/memories.py: reading, listing, changing and erasing single memories, called as the
faces call them (a caller, a unit of work, an audit context). Read reach answers 404 alike for
"absent" and "out of reach"; write reach is narrower (a key limited to projects never changes
a shared memory); a listing checks its filters before it runs; PATCH refuses an empty or null
change and a move that would hide a superseded memory from its readers; erasure leaves a
tombstone. The HTTP answers of the same rules are tests/api/test_memories.py."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from service.domain import memories
from service.domain.audit import AuditContext
from service.domain.auth import Caller
from service.errors import (
    Conflict,
    InvalidInput,
    NotFound,
    SharedMemoryReadOnly,
)
from service.schemas.memories import MemoryPatch
from tests.conftest import Key, KeyFactory, SqlRows
from tests.domain.conftest import caller_of

FACT = "The staging database listens on port 5433; the default 5432 is the legacy cluster."
OTHER = "Deploys freeze on Fridays after noon until the release manager signs off."
SECRET = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"

Remember = Callable[..., Awaitable[uuid.UUID]]


@pytest.fixture
async def session(app: FastAPI) -> AsyncIterator[AsyncSession]:
    async with app.state.ctx.sessionmaker() as s:
        yield s
        await s.rollback()




@pytest.fixture
def remember(client: httpx.AsyncClient) -> Remember:
    """``await remember(key, content, **fields)``: a memory stored over HTTP; its id."""

    async def store(key: Key, content: str = FACT, **fields: Any) -> uuid.UUID:
        body = {"namespace": "alice", "content": content, **fields}
        response = await client.post("/v1/remember", json=body, headers=key.headers)
        assert response.status_code == 201, response.text
        return uuid.UUID(response.json()["id"])

    return store


def ctx(action: str, caller: Caller) -> AuditContext:
    return AuditContext(action, caller)  # type: ignore[arg-type]


async def test_a_memory_out_of_reach_is_absent(
    session: AsyncSession, make_key: KeyFactory, remember: Remember
) -> None:
    owner = await make_key()
    memory_id = await remember(owner, namespace="alice:s1", project="billing")
    mine = await caller_of(session, owner)
    got = await memories.get_memory(session, mine, memory_id, ctx("memory_get", mine))
    assert (got.id, got.namespace, got.project) == (memory_id, "alice:s1", "billing")
    for limits in ({"namespaces": ["bob"]}, {"projects": ["search"]}, {}):
        other = await make_key(**({"org": owner.org} if limits else {}), **limits)
        outside = await caller_of(session, other)
        with pytest.raises(NotFound) as absent:
            await memories.get_memory(session, outside, memory_id, ctx("memory_get", outside))
        assert str(memory_id) in absent.value.message  # the same words as a missing id
    with pytest.raises(NotFound):
        await memories.get_memory(session, mine, uuid.uuid4(), ctx("memory_get", mine))


@pytest.mark.parametrize(
    ("filters", "field"),
    [
        ({"key": "db-port", "namespace": None}, "namespace"),
        ({"key": "db-port", "namespace": "alice:*"}, "namespace"),
        ({"offset": -1}, "offset"),
        ({"offset": 1_000_001}, "offset"),
        ({"limit": 0}, "limit"),
        ({"limit": memories.MAX_PAGE + 1}, "limit"),
        ({"text_query": "x" * 501}, "q"),
        ({"text_query": "port\x00"}, "q"),
        ({"project": SECRET}, "project"),
        ({"agent_id": SECRET}, "agent_id"),
    ],
)
async def test_a_listing_checks_its_filters_first(
    session: AsyncSession, key: Key, filters: dict[str, Any], field: str
) -> None:
    caller = await caller_of(session, key)
    query: dict[str, Any] = {
        "namespace": "alice", "type_": None, "project": None, "agent_id": None, "tag": None,
        "offset": 0, "limit": 20, **filters,
    }  # fmt: skip
    with pytest.raises(InvalidInput) as refused:
        await memories.list_memories(session, caller, ctx("list", caller), **query)
    assert refused.value.details["field"] == field


async def test_a_listing_pages_newest_first_within_reach(
    session: AsyncSession, key: Key, remember: Remember
) -> None:
    ids = [await remember(key, f"{FACT} Replica number {n} follows it.") for n in range(3)]
    await remember(key, OTHER, namespace="bob")
    caller = await caller_of(session, key)
    page = await memories.list_memories(
        session, caller, ctx("list", caller), namespace="alice", type_=None, project=None,
        agent_id=None, tag=None, offset=0, limit=2,
    )  # fmt: skip
    assert [m.id for m in page.items] == ids[::-1][:2]
    assert (page.total, page.has_more) == (3, True)


async def test_a_patch_must_change_something_and_never_null_a_required_field(
    app: FastAPI, session: AsyncSession, key: Key, remember: Remember
) -> None:
    memory_id = await remember(key)
    caller = await caller_of(session, key)
    res = app.state.ctx
    for patch, field in ((MemoryPatch(), "body"), (MemoryPatch(content=None), "content"),
                         (MemoryPatch(tags=None), "tags")):  # fmt: skip
        with pytest.raises(InvalidInput) as refused:
            await memories.update_memory(
                session, res.embedder, res.settings, caller, memory_id, patch,
                ctx("memory_update", caller),
            )
        assert refused.value.details["field"] == field


async def test_a_key_limited_to_projects_never_changes_or_erases_a_shared_memory(
    app: FastAPI, session: AsyncSession, key: Key, make_key: KeyFactory, remember: Remember
) -> None:
    shared = await remember(key)
    limited = await caller_of(session, await make_key(org=key.org, projects=["billing"]))
    res = app.state.ctx
    with pytest.raises(SharedMemoryReadOnly):
        await memories.update_memory(
            session, res.embedder, res.settings, limited, shared, MemoryPatch(tags=["x"]),
            ctx("memory_update", limited),
        )
    with pytest.raises(SharedMemoryReadOnly):
        await memories.delete_memory(session, limited, shared, ctx("delete", limited))


async def test_a_memory_that_supersedes_a_shared_one_stays_shared(
    app: FastAPI, session: AsyncSession, key: Key, remember: Remember
) -> None:
    old = await remember(key)
    new = await remember(key, f"{FACT} It moved to 6543 in November.", supersedes=str(old))
    caller = await caller_of(session, key)
    res = app.state.ctx
    with pytest.raises(InvalidInput) as refused:
        await memories.update_memory(
            session, res.embedder, res.settings, caller, new, MemoryPatch(project="billing"),
            ctx("memory_update", caller),
        )
    assert refused.value.details["field"] == "project"


async def test_a_content_change_onto_another_memory_is_a_conflict(
    app: FastAPI, session: AsyncSession, key: Key, remember: Remember
) -> None:
    first = await remember(key)
    second = await remember(key, OTHER)
    caller = await caller_of(session, key)
    res = app.state.ctx
    with pytest.raises(Conflict) as taken:
        await memories.update_memory(
            session, res.embedder, res.settings, caller, second, MemoryPatch(content=FACT),
            ctx("memory_update", caller),
        )
    assert str(first) in str(taken.value.to_dict())


async def test_a_patch_redacts_gates_and_keeps_its_audit_row_free_of_values(
    app: FastAPI, key: Key, remember: Remember, sql: SqlRows
) -> None:
    memory_id = await remember(key)
    res = app.state.ctx
    async with res.sessionmaker() as session:
        caller = await caller_of(session, key)
        out = await memories.update_memory(
            session, res.embedder, res.settings, caller, memory_id,
            MemoryPatch(content=f"{OTHER} The bot token is {SECRET}."),
            ctx("memory_update", caller),
        )  # fmt: skip
        await session.commit()
    assert SECRET not in out.content and "[GITHUB_TOKEN:REDACTED]" in out.content
    (row,) = await sql(
        "SELECT outcome, request::text FROM audit_events WHERE org_id = :o "
        "AND action = 'memory_update'", o=key.org_id,
    )  # fmt: skip
    assert row[0] == "updated" and '"fields": ["content"]' in row[1]
    assert SECRET not in row[1] and OTHER not in row[1]


async def test_erasure_leaves_only_a_tombstone(
    app: FastAPI, key: Key, remember: Remember, sql: SqlRows
) -> None:
    memory_id = await remember(key)
    res = app.state.ctx
    async with res.sessionmaker() as session:
        caller = await caller_of(session, key)
        gone = await memories.delete_memory(session, caller, memory_id, ctx("delete", caller))
        await session.commit()
    assert gone.deleted and gone.id == memory_id and gone.audit_id is not None
    assert await sql("SELECT 1 FROM memories WHERE id = :i", i=memory_id) == []
    async with res.sessionmaker() as session:
        with pytest.raises(NotFound):
            await memories.delete_memory(session, caller, memory_id, ctx("delete", caller))
