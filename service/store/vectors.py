"""The one way a vector goes into SQL: a pgvector text literal, ``[x1,x2,...]``, bound as a
parameter and cast in the statement (``CAST(:q AS vector)``).

pgvector stores float32, so each value is rounded to float32 first (as pgvector's own parse
would round it) and written with 9 significant digits, which read back as exactly that
float32: the database sees the vector the model returned (the model computes in float32).
One ``%`` format per dimension count writes a whole vector in one call, 2.7x faster than
``repr`` per float (whose shortest text of a float32 held in a double runs to 17 digits). A
write binds its vectors twice (its duplicate probe, its INSERT): it writes them once
(``vector_literals``) and passes the literals, which ``vector_literal`` keeps as they are.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_FORMATS: dict[int, str] = {}


def vector_literal(vector: Sequence[float] | str) -> str:
    """``vector``'s literal; one already written (a ``str``, from ``vector_literals``) as it
    is."""
    if isinstance(vector, str):
        return vector
    values = np.asarray(vector, dtype=np.float32).tolist()
    fmt = _FORMATS.get(len(values))
    if fmt is None:
        fmt = _FORMATS[len(values)] = "[" + ",".join(["%.9g"] * len(values)) + "]"
    return fmt % tuple(values)


def vector_literals(vectors: Sequence[Sequence[float]]) -> list[str]:
    """``vector_literal`` of each of a batch's vectors, written once for the statements that
    all bind them (its duplicate probe and its INSERT). Callers run it in a worker thread:
    500 vectors are 65 ms of formatting, which the event loop should not wait on."""
    return [vector_literal(v) for v in vectors]
