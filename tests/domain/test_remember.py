"""domain/remember.py: ``remember`` and ``remember_batch``, the write path's callers for new
memories, called as the faces call them. One memory: stored with its derived name, redacted,
audited; its exact copy in reach is a duplicate of it; a gate rejection stores nothing; the
text of a superseded memory re-asserted supersedes its chain's current end. A batch: at most
``max_batch_items``, a rejection is that item's outcome only, the audit row counts them. What
every write path shares is tests/domain/writes/test_every_path.py."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from service.domain.audit import AuditContext
from service.domain.auth import Caller
from service.domain.remember import document_text, remember, remember_batch
from service.errors import GateRejected, InvalidInput, ScopeDenied
from service.schemas.memories import RememberBatchRequest, RememberRequest
from tests.conftest import Key, KeyFactory, SqlRows
from tests.domain.conftest import caller_of

FACT = "The staging database listens on port 5433; the default 5432 is the legacy cluster."
NEWER = "The staging database moved to port 6543 after the November migration."
SECRET = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"




async def write(app: FastAPI, session: AsyncSession, caller: Caller, **fields: object):  # type: ignore[no-untyped-def]
    res = app.state.ctx
    req = RememberRequest.model_validate({"namespace": "alice", **fields})
    return await remember(
        session, res.embedder, res.settings, caller, req, AuditContext("remember", caller)  # type: ignore[arg-type]
    )


async def test_a_memory_is_stored_redacted_named_and_audited(
    app: FastAPI, session: AsyncSession, key: Key, sql: SqlRows
) -> None:
    caller = await caller_of(session, key)
    out = await write(app, session, caller, content=f"{FACT} The bot token is {SECRET}.")
    await session.commit()
    assert out.status == "created" and out.namespace == "alice" and out.type == "episode"
    assert out.name is not None and out.name.startswith("The staging database listens on port")
    assert [r.label for r in out.redactions] == ["GITHUB_TOKEN"]
    (stored,) = await sql("SELECT content FROM memories WHERE id = :i", i=out.id)
    assert SECRET not in stored[0]
    (row,) = await sql(
        "SELECT outcome, status_code, redaction_count FROM audit_events WHERE id = :a",
        a=out.audit_id,
    )
    assert tuple(row) == ("created", 201, 1)


async def test_an_exact_copy_in_reach_is_a_duplicate_and_out_of_reach_is_not(
    app: FastAPI, session: AsyncSession, key: Key
) -> None:
    caller = await caller_of(session, key)
    first = await write(app, session, caller, content=FACT, project="billing")
    again = await write(app, session, caller, content=f"  {FACT}  ", project="billing")
    assert (again.status, again.id) == ("duplicate", first.id)
    # A reader of a shared memory may not read project billing's: stored again, shared.
    shared = await write(app, session, caller, content=FACT)
    assert shared.status == "created" and shared.id != first.id
    # A reader of project billing reads shared memories too: a duplicate of the shared copy.
    search = await write(app, session, caller, content=FACT, project="search")
    assert (search.status, search.id) == ("duplicate", shared.id)


async def test_a_rejected_or_unauthorised_write_stores_nothing(
    app: FastAPI, session: AsyncSession, key: Key, make_key: KeyFactory, sql: SqlRows
) -> None:
    caller = await caller_of(session, key)
    with pytest.raises(GateRejected) as rejected:
        await write(app, session, caller, content="ok")
    assert {r["code"] for r in rejected.value.details["reasons"]} == {"fragment"}
    reader = await caller_of(session, await make_key(org=key.org, scopes=["read"]))
    with pytest.raises(ScopeDenied):
        await write(app, session, reader, content=FACT)
    await session.commit()
    assert await sql("SELECT 1 FROM memories WHERE org_id = :o", o=key.org_id) == []


async def test_re_asserting_a_superseded_fact_supersedes_the_current_one(
    app: FastAPI, session: AsyncSession, key: Key, sql: SqlRows
) -> None:
    caller = await caller_of(session, key)
    old = await write(app, session, caller, content=FACT)
    new = await write(app, session, caller, content=NEWER, supersedes=str(old.id))
    back = await write(app, session, caller, content=FACT)
    assert back.status == "created" and back.id != old.id
    # the chain's current end, not the old copy, and the answer says so
    assert back.warnings == [
        f"this text had been superseded; stored again as current, superseding {new.id}"
    ]
    await session.commit()
    (row,) = await sql("SELECT superseded_by FROM memories WHERE id = :i", i=new.id)
    assert row[0] == back.id


async def test_a_batch_stores_each_item_and_a_rejection_is_that_items_only(
    app: FastAPI, session: AsyncSession, key: Key, sql: SqlRows
) -> None:
    caller = await caller_of(session, key)
    res = app.state.ctx
    req = RememberBatchRequest.model_validate({"items": [
        {"namespace": "alice", "content": FACT},
        {"namespace": "alice", "content": "ok"},
        {"namespace": "alice", "content": FACT},
        {"namespace": "alice", "content": NEWER},
    ]})  # fmt: skip
    out = await remember_batch(
        session, res.embedder, res.settings, caller, req,
        AuditContext("remember_batch", caller), res.text_workers,  # type: ignore[arg-type]
    )  # fmt: skip
    await session.commit()
    assert [i.status for i in out.items] == ["created", "rejected", "duplicate", "created"]
    assert out.items[2].id == out.items[0].id
    assert (out.created, out.duplicates, out.rejected) == (2, 1, 1)
    (row,) = await sql(
        "SELECT outcome, rejection_count, details->'counts' FROM audit_events WHERE id = :a",
        a=out.audit_id,
    )
    assert row[0] == "partial" and row[1] == 1
    assert row[2] == {"created": 2, "duplicate": 1, "rejected": 1}


async def test_a_batch_beyond_its_bound_is_refused_whole(
    app: FastAPI, session: AsyncSession, key: Key
) -> None:
    caller = await caller_of(session, key)
    res = app.state.ctx
    items = [{"namespace": "alice", "content": f"{FACT} ({n})"} for n in range(res.settings.max_batch_items + 1)]
    with pytest.raises(InvalidInput) as refused:
        await remember_batch(
            session, res.embedder, res.settings, caller,
            RememberBatchRequest.model_validate({"items": items}),
            AuditContext("remember_batch", caller), res.text_workers,  # type: ignore[arg-type]
        )  # fmt: skip
    assert refused.value.details["field"] == "items"


def test_the_embedded_text_is_the_name_over_the_content_unless_it_begins_it() -> None:
    assert document_text("Port", FACT) == f"Port\n{FACT}"
    assert document_text("The staging database listens…", FACT) == FACT
    assert document_text("", FACT) == FACT
