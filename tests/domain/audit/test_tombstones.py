"""Tombstones: an erased memory's id stays in the trail; its name does not."""

from __future__ import annotations

import uuid

from fastapi import FastAPI
from sqlalchemy import select

from service.domain.audit import erase_from_trail
from service.store.models import AuditEvent
from tests.conftest import KeyFactory
from tests.domain.audit.conftest import Seed


async def test_erasing_keeps_the_id_and_drops_the_name(
    app: FastAPI, make_key: KeyFactory, seed: Seed
) -> None:
    key, other = await make_key(), await make_key()
    memory, neighbour = uuid.uuid4(), uuid.uuid4()
    name = 'Alice\'s "plan" for Q3'
    wrote = await seed(
        key.org_id,
        1,
        memory_ids=[memory, neighbour],
        request={"items": [{"name": name, "namespace": "alice"}, {"name": "other"}]},
        details={"items": [{"id": str(memory), "status": "created"}], name: 1},
    )
    returned = await seed(
        key.org_id, 2, action="context", memory_ids=[memory], details={"names": [name]}
    )
    unrelated = await seed(key.org_id, 3, memory_ids=[neighbour], request={"name": name})
    foreign = await seed(other.org_id, 1, memory_ids=[memory], request={"name": name})

    async with app.state.ctx.sessionmaker() as session:
        changed = await erase_from_trail(session, key.org_id, memory, [name, None, ""])
        await session.commit()
    assert changed == 2

    async with app.state.ctx.sessionmaker() as session:
        rows = {
            r.id: r
            for r in (
                await session.execute(
                    select(AuditEvent).where(
                        AuditEvent.id.in_([wrote, returned, unrelated, foreign])
                    )
                )
            ).scalars()
        }
    assert rows[wrote].request == {
        "items": [{"name": "[erased]", "namespace": "alice"}, {"name": "other"}]
    }
    assert rows[wrote].details == {
        "items": [{"id": str(memory), "status": "created"}],
        "[erased]": 1,
    }
    assert rows[wrote].memory_ids == [memory, neighbour]
    assert rows[returned].details == {"names": ["[erased]"]}
    # Rows that do not name the memory, and other orgs' rows, are left alone.
    assert rows[unrelated].request == {"name": name}
    assert rows[foreign].request == {"name": name}


async def test_nothing_to_erase(app: FastAPI, make_key: KeyFactory) -> None:
    key = await make_key()
    async with app.state.ctx.sessionmaker() as session:
        assert await erase_from_trail(session, key.org_id, uuid.uuid4(), [None]) == 0
        assert await erase_from_trail(session, key.org_id, uuid.uuid4(), ["x"]) == 0
