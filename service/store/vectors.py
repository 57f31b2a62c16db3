"""The one way a vector goes into SQL: a pgvector text literal, ``[x1,x2,...]``, bound as a
parameter and cast in the statement (``CAST(:q AS vector)``).

Each float is written with ``repr``: the shortest text that reads back as the same double,
so the database sees exactly the vector the model returned (pgvector then stores float32).
"""

from __future__ import annotations

from collections.abc import Sequence


def vector_literal(vector: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"
