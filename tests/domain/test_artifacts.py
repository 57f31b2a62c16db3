"""domain/artifacts.py: a JSON artifact is its body and a memory of type ``artifact`` whose
content is the summary, stored, read by declared fields and erased together. The shape rules
(schema keys, a derived summary, the memory's hash from the artifact's id, the fields a read
declares) and the reach rules (a read names its namespace and sees only it and its ancestors;
erasure takes write reach) are checked here on the domain calls; the HTTP answers are
tests/api/test_artifacts.py."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from service.domain import artifacts
from service.domain.audit import AuditContext
from service.domain.auth import Caller
from service.errors import InvalidInput, NotFound, PayloadTooLarge, SharedMemoryReadOnly
from service.schemas.artifacts import ArtifactCreate
from tests.conftest import Key, KeyFactory, SqlRows
from tests.domain.conftest import caller_of

SECRET = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
BODY = {"tries": 3, "base_s": 2, "codes": [502, 503]}




def ctx(caller: Caller) -> AuditContext:
    return AuditContext("artifact", caller)  # type: ignore[arg-type]


async def store(app: FastAPI, session: AsyncSession, caller: Caller, **fields: Any):  # type: ignore[no-untyped-def]
    req = ArtifactCreate.model_validate({"namespace": "alice", "name": "retry table", "body": BODY, **fields})
    return await artifacts.store_artifact(
        session, app.state.ctx.embedder, caller, ctx(caller), req, app.state.ctx.settings.max_scanned_bytes
    )


def test_schema_keys_are_the_objects_or_its_items_first_seen() -> None:
    assert artifacts.schema_keys({"b": 1, "a": 2}) == ["b", "a"]
    assert artifacts.schema_keys([{"x": 1}, 7, {"y": 2, "x": 3}]) == ["x", "y"]
    assert artifacts.schema_keys([]) == []


def test_a_derived_summary_says_the_shape_and_size() -> None:
    assert artifacts.derive_summary("retry", {"a": 1}, ["a"], 7) == (
        "retry: JSON object with 1 key: a (7 bytes)."
    )
    many = [f"k{i}" for i in range(artifacts.SUMMARY_KEYS + 1)]
    assert artifacts.derive_summary("rows", [{}, {}], many, 9).endswith(" ... (9 bytes).")
    assert artifacts.derive_summary("rows", [1], [], 3) == "rows: JSON list of 1 item (3 bytes)."


def test_the_memorys_hash_is_its_artifacts_id_not_its_summary() -> None:
    one, two = uuid.uuid4(), uuid.uuid4()
    assert artifacts.memory_hash(one) != artifacts.memory_hash(two)
    assert artifacts.memory_hash(one) == artifacts.memory_hash(one)


def test_declared_fields_are_names_in_order_without_repeats() -> None:
    assert artifacts.parse_fields(None) is None
    assert artifacts.parse_fields(" b, a,b ,,") == ["b", "a"]
    for bad in (" , ", ",".join(f"f{i}" for i in range(artifacts.MAX_FIELDS + 1)), "a\x00"):
        with pytest.raises(InvalidInput) as refused:
            artifacts.parse_fields(bad)
        assert refused.value.details["field"] == "fields"


async def test_an_artifact_is_its_body_and_a_memory_stored_together_redacted(
    app: FastAPI, session: AsyncSession, key: Key, sql: SqlRows
) -> None:
    caller = await caller_of(session, key)
    made = await store(app, session, caller, body={**BODY, "token": SECRET})
    await session.commit()
    assert made.schema_keys == ["tries", "base_s", "codes", "token"] and made.redactions == 1
    assert made.summary.startswith("retry table: JSON object with 4 keys")
    (memory,) = await sql(
        "SELECT type, content, content_hash, metadata->>'artifact_id' FROM memories WHERE id = :i",
        i=made.memory_id,
    )
    assert tuple(memory) == (
        "artifact", made.summary, artifacts.memory_hash(made.artifact_id), str(made.artifact_id)
    )
    (body,) = await sql("SELECT body::text FROM artifacts WHERE id = :i", i=made.artifact_id)
    assert SECRET not in body[0]


async def test_a_body_beyond_the_scan_bound_is_refused_before_any_work(
    app: FastAPI, session: AsyncSession, key: Key
) -> None:
    caller = await caller_of(session, key)
    big = {"rows": ["x" * 1000] * (app.state.ctx.settings.max_scanned_bytes // 1000 + 1)}
    with pytest.raises(PayloadTooLarge):
        await store(app, session, caller, body=big)


async def test_a_read_gets_the_declared_fields_within_its_namespaces_reach(
    app: FastAPI, session: AsyncSession, key: Key
) -> None:
    caller = await caller_of(session, key)
    made = await store(app, session, caller, namespace="alice:s1")
    got = await artifacts.read_artifact(
        session, caller, ctx(caller), made.artifact_id, "codes,nope,tries", "alice:s1:t1"
    )
    assert got.fields == {"codes": [502, 503], "tries": 3} and got.missing == ["nope"]
    whole = await artifacts.read_artifact(session, caller, ctx(caller), made.artifact_id, None, None)
    assert whole.body == BODY
    with pytest.raises(NotFound):  # a sibling namespace does not see it
        await artifacts.read_artifact(session, caller, ctx(caller), made.artifact_id, None, "alice:s2")
    with pytest.raises(NotFound):
        await artifacts.read_artifact(session, caller, ctx(caller), uuid.uuid4(), None, None)


async def test_erasing_an_artifact_erases_its_memory_and_takes_write_reach(
    app: FastAPI, session: AsyncSession, key: Key, make_key: KeyFactory, sql: SqlRows
) -> None:
    caller = await caller_of(session, key)
    made = await store(app, session, caller)
    await session.commit()
    limited = await caller_of(session, await make_key(org=key.org, projects=["billing"]))
    with pytest.raises(SharedMemoryReadOnly):
        await artifacts.delete_artifact(session, limited, ctx(limited), made.artifact_id)
    gone = await artifacts.delete_artifact(session, caller, ctx(caller), made.artifact_id)
    await session.commit()
    assert gone.deleted and gone.memory_id == made.memory_id
    assert await sql("SELECT 1 FROM memories WHERE id = :i", i=made.memory_id) == []
    assert await sql("SELECT 1 FROM artifacts WHERE id = :i", i=made.artifact_id) == []
    with pytest.raises(NotFound):
        await artifacts.delete_artifact(session, caller, ctx(caller), made.artifact_id)
