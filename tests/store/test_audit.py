"""store/audit.py: the SQL of audit rows. A listing's filter covers a namespace and what lies
under it segment-wise (a ``_`` in a namespace is a letter, not a wildcard), a key's limits
(its namespaces, its projects, and always the rows it wrote itself), and keyset pages that
concurrent inserts never shift; erasure replaces whole strings, never parts of others."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi import FastAPI

from service.store.audit import AuditFilter, AuditRepository, uuid_array_text

T0 = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.fixture
async def repo(app: FastAPI) -> AsyncIterator[AuditRepository]:
    async with app.state.ctx.sessionmaker() as session:
        yield AuditRepository(session)
        await session.rollback()


async def add(repo: AuditRepository, org: uuid.UUID, n: int, **values: Any) -> uuid.UUID:
    row: dict[str, Any] = {
        "org_id": org, "action": "remember", "outcome": "ok", "status_code": 200,
        "latency_ms": 1.0, "created_at": T0 + timedelta(minutes=n), **values,
    }  # fmt: skip
    return await repo.add(**row)


async def test_a_namespace_filter_is_segment_wise_and_underscore_is_a_letter(
    repo: AuditRepository,
) -> None:
    org = uuid.uuid4()
    names = ["a_b", "a_b:s1", "axb", "a_bx", "a_b_c"]
    ids = {ns: await add(repo, org, n, namespace=ns) for n, ns in enumerate(names)}
    found = await repo.list(AuditFilter(org, namespace_prefix="a_b"), limit=10)
    assert {r.id for r in found} == {ids["a_b"], ids["a_b:s1"]}
    assert await repo.count(AuditFilter(org, namespace_prefix="a%")) == 0


async def test_a_keys_limits_bound_what_it_sees_but_its_own_rows(repo: AuditRepository) -> None:
    org, me, other = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    billing = await add(repo, org, 0, key_id=other, namespace="bob", request={"project": "billing"})
    search = await add(repo, org, 1, key_id=other, namespace="alice", request={"project": "search"})
    shared = await add(repo, org, 2, key_id=other, namespace="alice", request={})
    mine = await add(repo, org, 3, key_id=me, namespace="bob", request={"project": "search"})
    by_project = AuditFilter(org, own_key_id=me, key_projects=("billing",))
    assert {r.id for r in await repo.list(by_project, limit=10)} == {billing, mine}
    by_namespace = AuditFilter(org, own_key_id=me, key_namespaces=("alice",))
    assert {r.id for r in await repo.list(by_namespace, limit=10)} == {search, shared, mine}
    assert await repo.get(by_project, search) is None
    assert await repo.get(AuditFilter(uuid.uuid4()), billing) is None  # another org


async def test_keyset_pages_never_shift_when_rows_arrive(repo: AuditRepository) -> None:
    org = uuid.uuid4()
    for n in range(5):
        await add(repo, org, n)
    first = await repo.list(AuditFilter(org), limit=2)
    await add(repo, org, 10)  # newer than everything listed
    after = (first[-1].created_at, first[-1].id)
    second = await repo.list(AuditFilter(org), limit=2, after=after)
    assert [r.created_at for r in first + second] == [T0 + timedelta(minutes=n) for n in (4, 3, 2, 1)]
    oldest = await repo.list(AuditFilter(org), limit=2, ascending=True)
    assert [r.created_at for r in oldest] == [T0, T0 + timedelta(minutes=1)]


async def test_erasure_replaces_whole_strings_in_the_rows_naming_the_memory(
    repo: AuditRepository,
) -> None:
    org, memory, other = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    named = await add(
        repo, org, 0, memory_ids=[memory],
        request={"name": "Pager rota", "tags": ["Pager rota", "Pager rota v2"]},
        details={"Pager rota": 1},
    )  # fmt: skip
    untouched = await add(repo, org, 1, memory_ids=[other], request={"name": "Pager rota"})
    changed = await repo.erase_strings(org, memory, ["Pager rota"], "[erased]")
    assert changed == 1
    await repo.session.flush()
    repo.session.expire_all()
    row = await repo.get(AuditFilter(org), named)
    assert row is not None
    assert row.request == {"name": "[erased]", "tags": ["[erased]", "Pager rota v2"]}
    assert row.details == {"[erased]": 1}
    kept = await repo.get(AuditFilter(org), untouched)
    assert kept is not None and kept.request == {"name": "Pager rota"}
    assert await repo.recorded_names(org, other) == ["Pager rota"]


async def test_memory_ids_are_found_stored_or_as_tombstones(repo: AuditRepository) -> None:
    org, erased, unknown = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    await add(repo, org, 0, memory_ids=[erased], outcome="deleted")
    assert await repo.memory_ids_among(org, [erased, unknown]) == {erased}
    assert await repo.memory_ids_among(uuid.uuid4(), [erased]) == set()
    assert await repo.memory_ids_among(org, []) == set()


async def test_queued_rows_go_in_with_one_statement_stamped_by_their_age(
    repo: AuditRepository,
) -> None:
    org, key = uuid.uuid4(), uuid.uuid4()
    memories = [uuid.uuid4(), uuid.uuid4()]
    base: dict[str, Any] = {
        "org_id": org, "key_id": key, "caller": "k", "action": "context", "namespace": "alice",
        "outcome": "ok", "status_code": 200, "redaction_count": 1, "rejection_count": 0,
        "latency_ms": 2.5,
    }  # fmt: skip
    rows = [
        {**base, "id": uuid.uuid4(), "request": '{"goal": "caf\\u00e9"}', "details": "{}",
         "memory_ids": uuid_array_text(memories), "age_seconds": 60.0},
        {**base, "id": uuid.uuid4(), "key_id": None, "namespace": None, "request": "{}",
         "details": '{"items": [{"id": "x", "score": 0.5}]}', "memory_ids": uuid_array_text([]),
         "age_seconds": 0.0},
    ]  # fmt: skip
    now = await repo.db_now()
    await repo.record_queued(rows)
    found = {r.id: r for r in await repo.list(AuditFilter(org), limit=10)}
    old, new = found[rows[0]["id"]], found[rows[1]["id"]]
    assert (old.request, old.memory_ids, old.key_id, old.latency_ms) == (
        {"goal": "café"}, memories, key, 2.5
    )
    assert (new.details, new.memory_ids, new.key_id, new.namespace) == (
        {"items": [{"id": "x", "score": 0.5}]}, [], None, None
    )
    # now() is the transaction's start, as db_now read it: the ages are exact.
    assert (now - old.created_at, new.created_at) == (timedelta(seconds=60), now)
