"""store/vectors.py: a vector reaches SQL as a pgvector text literal whose floats read back
as the very doubles the model returned (``repr``, the shortest exact text)."""

from __future__ import annotations

from fastapi import FastAPI
from sqlalchemy import text

from service.store.vectors import vector_literal


def test_a_literal_is_the_exact_shortest_text_of_each_float() -> None:
    values = [0.1, -2.0, 1e-07, 0.30000000000000004, 3]
    literal = vector_literal(values)
    assert literal == "[0.1,-2.0,1e-07,0.30000000000000004,3.0]"
    assert [float(x) for x in literal[1:-1].split(",")] == [float(v) for v in values]
    assert vector_literal([]) == "[]"


async def test_pgvector_reads_the_literal(app: FastAPI) -> None:
    async with app.state.ctx.sessionmaker() as session:
        dims, norm = (
            await session.execute(
                text("SELECT vector_dims(CAST(:q AS vector)), vector_norm(CAST(:q AS vector))"),
                {"q": vector_literal([3.0, 4.0])},
            )
        ).one()
    assert (dims, norm) == (2, 5.0)
