"""store/memories.py:insert_rows, the one statement that writes memory rows: the rows travel as
one array per column (``ROW_ARRAYS``) and come back as the model wrote them, whatever the
values hold; one statement text serves any number of rows."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from service.store.memories import ROW_ARRAYS, MemoryRepository, insert_rows_sql
from service.store.models import EMBEDDING_DIMS, Memory
from tests.conftest import Key


def _row(owner: Key, n: int, **extra: Any) -> dict[str, Any]:
    rng = np.random.default_rng(n)
    vector = rng.standard_normal(EMBEDDING_DIMS)
    return {
        "org_id": owner.org_id,
        "id": uuid.uuid4(),
        "namespace": "rows",
        "type": "decision",
        "name": f"row {n}",
        "content": f"Row {n} says what it says.",
        "content_hash": f"{n:064x}",
        "embedding": (vector / np.linalg.norm(vector)).tolist(),
        "project": None,
        "domain": None,
        "agent_id": None,
        "tags": [],
        "source": None,
        "origin": None,
        "url": None,
        "valid_at": None,
        "expires_at": None,
        "meta": {},
        **extra,
    }


def test_every_column_of_a_memory_but_the_generated_one_can_be_written() -> None:
    columns = {c.name for c in Memory.__table__.columns if c.computed is None}
    assert {a.column for a in ROW_ARRAYS.values()} == columns


def test_one_statement_text_for_any_number_of_rows() -> None:
    keys = ("org_id", "id", "namespace")
    assert insert_rows_sql(keys, "duplicates") == insert_rows_sql(list(keys), "duplicates")
    assert ":namespace" in insert_rows_sql(keys, None)
    assert "ON CONFLICT" not in insert_rows_sql(keys, None)


async def test_rows_come_back_as_they_were_written(app: FastAPI, key: Key) -> None:
    when = datetime(2026, 3, 1, 12, 30, tzinfo=UTC)
    tricky = 'a "quoted", {braced} \\ back\'slash, NULL, ünïcode 🎉'
    rows = [
        _row(key, 1),
        _row(
            key,
            2,
            name=tricky,
            content=tricky + " and more.",
            project="p1",
            domain="infra",
            agent_id="agent-7",
            tags=["a", tricky, "", "NULL"],
            source="https://example.test/s",
            origin="cli",
            url="https://example.test/u",
            valid_at=when,
            expires_at=when + timedelta(days=400),
            meta={"nested": {"list": [1, 2.5, None, True]}, "text": tricky},
        ),
        # Another set of keys in the same call: an import's times and a keyed write's key.
        _row(key, 3, created_at=when, updated_at=when, key="the-key"),
    ]
    async with app.state.ctx.sessionmaker() as session:
        inserted = await MemoryRepository(session).insert_rows(rows, skip=None)
        await session.commit()
        assert sorted(mid for mid, _ in inserted) == sorted(r["id"] for r in rows)
        assert dict(inserted)[rows[1]["id"]] == (
            "rows",
            "p1",
            "agent-7",
            rows[1]["content_hash"],
        )
        stored = {
            m.id: m
            for m in (
                await session.execute(select(Memory).where(Memory.org_id == key.org_id))
            ).scalars()
        }
    for row in rows:
        memory = stored[row["id"]]
        for name, value in row.items():
            column = ROW_ARRAYS[name].column
            got = getattr(memory, "meta" if column == "metadata" else column)
            if name == "embedding":
                want = np.asarray(value, dtype=np.float32)
                assert np.asarray(got, dtype=np.float32).tobytes() == want.tobytes()
            else:
                assert got == value, name
    assert stored[rows[0]["id"]].key is None
    assert stored[rows[0]["id"]].created_at > when


async def test_a_key_that_is_no_column_is_refused(app: FastAPI, key: Key) -> None:
    async with app.state.ctx.sessionmaker() as session:
        with pytest.raises(ValueError, match="not a memories column"):
            await MemoryRepository(session).insert_rows([_row(key, 4, colour="red")], skip=None)


async def test_duplicates_are_skipped_within_one_call_and_against_the_store(
    app: FastAPI, key: Key
) -> None:
    first = _row(key, 5)
    again = {**_row(key, 6), "content_hash": first["content_hash"]}
    other = _row(key, 7)
    async with app.state.ctx.sessionmaker() as session:
        repo = MemoryRepository(session)
        inserted = await repo.insert_many([first, again])
        assert list(inserted.values()) == [first["id"]]
        later = await repo.insert_many(
            [{**_row(key, 8), "content_hash": first["content_hash"]}, other]
        )
        assert list(later.values()) == [other["id"]]
        await session.rollback()


async def test_a_key_that_is_no_column_is_refused_in_any_row(app: FastAPI, key: Key) -> None:
    # The second row shares the first's columns but carries one more: it is refused too,
    # not written without it.
    async with app.state.ctx.sessionmaker() as session:
        with pytest.raises(ValueError, match="colour"):
            await MemoryRepository(session).insert_rows(
                [_row(key, 9), _row(key, 10, colour="red")], skip=None
            )
