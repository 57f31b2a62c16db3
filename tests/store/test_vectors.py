"""store/vectors.py: one vector reaches SQL as a pgvector text literal whose values read back
as exactly the float32s pgvector stores (each value rounded to float32, 9 significant
digits); a batch's vectors as one binary real[] (``VectorBatch``), each read back by
``vector_at`` as exactly the float32s it holds."""

from __future__ import annotations

import numpy as np
from fastapi import FastAPI
from sqlalchemy import text

from service.store.vectors import VectorBatch, vector_at, vector_literal


def _awkward_float32s(n: int) -> np.ndarray:
    """Finite float32s: the extremes and subnormals first, then ``n`` small normals and ``n``
    random bit patterns, shuffled together (the non-finite ones dropped)."""
    rng = np.random.default_rng(11)
    extremes = np.array([1e-45, -1e-40, 3.4028235e38, -1.1754944e-38, 0.0, -0.0], np.float32)
    rest = np.concatenate(
        [
            rng.standard_normal(n).astype(np.float32) / 20,
            rng.integers(0, 2**31 - 1, n, dtype=np.int64).astype(np.uint32).view(np.float32),
        ]
    )
    values = np.concatenate([extremes, rng.permutation(rest)])
    return values[np.isfinite(values)]


def test_a_literal_reads_back_as_the_float32_of_each_value() -> None:
    values = [0.1, -2.0, 1e-07, 0.30000000000000004, 3]
    literal = vector_literal(values)
    assert literal == "[0.100000001,-2,1.00000001e-07,0.300000012,3]"
    parsed = np.array([float(x) for x in literal[1:-1].split(",")], dtype=np.float32)
    assert parsed.tolist() == np.asarray(values, dtype=np.float32).tolist()
    assert vector_literal([]) == "[]"


def test_every_float32_survives_the_literal() -> None:
    # A model's vector is float32: its literal must name each value exactly, whatever its
    # magnitude (subnormals, the extremes and values whose shortest text is 9 digits).
    values = _awkward_float32s(4000)
    literal = vector_literal(values.tolist())
    parsed = np.array([float(x) for x in literal[1:-1].split(",")]).astype(np.float32)
    assert parsed.tobytes() == values.tobytes()


async def test_pgvector_reads_the_literal(app: FastAPI) -> None:
    async with app.state.ctx.sessionmaker() as session:
        dims, norm = (
            await session.execute(
                text("SELECT vector_dims(CAST(:q AS vector)), vector_norm(CAST(:q AS vector))"),
                {"q": vector_literal([3.0, 4.0])},
            )
        ).one()
    assert (dims, norm) == (2, 5.0)


async def test_a_batch_reads_back_vector_by_vector_as_the_float32s_it_holds(app: FastAPI) -> None:
    dim = 5
    matrix = _awkward_float32s(40 * dim)[: 40 * dim].reshape(40, dim)
    batch = VectorBatch([row.tolist() for row in matrix])
    assert (len(batch), batch.dim) == (40, dim)
    sql = text(
        f"SELECT u.pos, CAST({vector_at(':vecs', 'u.pos', ':dim')} AS real[])"
        " FROM unnest(CAST(:positions AS int[])) AS u(pos)"
    )
    async with app.state.ctx.sessionmaker() as session:
        rows = (
            await session.execute(
                sql, {"vecs": batch, "dim": dim, "positions": [*range(1, 41), None]}
            )
        ).all()
    read = dict(rows)
    assert read.pop(None) is None  # no position, no vector
    for pos, values in read.items():
        assert np.asarray(values, np.float32).tobytes() == matrix[pos - 1].tobytes()


async def test_an_empty_batch_binds(app: FastAPI) -> None:
    batch = VectorBatch([])
    async with app.state.ctx.sessionmaker() as session:
        n = (
            await session.execute(
                text("SELECT cardinality(CAST(:vecs AS real[]))"), {"vecs": batch}
            )
        ).scalar_one()
    assert (len(batch), n) == (0, 0)


def test_a_batch_is_its_rows() -> None:
    batch = VectorBatch([[0.5, -1.0], [0.25, 2.0]])
    assert [row.tolist() for row in batch] == [[0.5, -1.0], [0.25, 2.0]]
    assert batch.row(1).tolist() == [0.25, 2.0]
    assert vector_literal(batch.row(0)) == "[0.5,-1]"
