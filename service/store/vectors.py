"""How vectors go into SQL. Two forms, both here:

- **One vector** (a goal's, a single write's probe): its pgvector text literal,
  ``[x1,x2,...]``, bound as a parameter and cast in the statement (``CAST(:q AS vector)``),
  which Postgres types as ``vector`` and parses once. pgvector stores float32, so each
  value is rounded to float32 first (as pgvector's own parse would round it) and written
  with 9 significant digits, which read back as exactly that float32. One ``%`` format per
  dimension count writes a whole vector in one call, 2.7x faster than ``repr`` per float.
- **A batch's vectors** (a batch write's duplicate probe and its INSERT): one
  ``VectorBatch``, bound as a single ``real[]`` parameter in Postgres' binary format (the
  float32s as they are, no text), each vector read back in the statement by ``vector_at``
  (a slice, cast to ``vector``). Written as 500 text literals in a ``text[]``, a batch
  cost 60 ms of formatting in Python and 75 ms of dumping and parsing (``array_in`` char by
  char, then ``strtof`` per value) per statement; bound in binary, 14 ms for both. The
  values are the model's float32s either way.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg.adapt import Dumper
from psycopg.pq import Format

_FORMATS: dict[int, str] = {}


def vector_literal(vector: Sequence[float] | np.ndarray) -> str:
    """``vector``'s literal."""
    values = np.asarray(vector, dtype=np.float32).tolist()
    fmt = _FORMATS.get(len(values))
    if fmt is None:
        fmt = _FORMATS[len(values)] = "[" + ",".join(["%.9g"] * len(values)) + "]"
    return fmt % tuple(values)


class VectorBatch:
    """Vectors of one dimension as one float32 matrix, bound as a ``real[]`` parameter (a
    row after another) and read back per row by ``vector_at``. Rows are numbered from 1 in
    SQL, from 0 here (``row``)."""

    __slots__ = ("matrix",)

    def __init__(self, vectors: Sequence[Sequence[float]] | np.ndarray) -> None:
        matrix = np.asarray(vectors, dtype=np.float32)
        if matrix.ndim != 2:
            if matrix.size:
                raise ValueError("a VectorBatch takes vectors of one dimension, one per row")
            matrix = matrix.reshape(0, 0)  # no vectors at all
        self.matrix = matrix

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    def __len__(self) -> int:
        return int(self.matrix.shape[0])

    def __iter__(self) -> Iterator[np.ndarray]:
        return iter(self.matrix)

    def row(self, i: int) -> np.ndarray:
        """Vector ``i`` (0-based), a view of the matrix."""
        row: np.ndarray = self.matrix[i]
        return row


# Postgres' own type oids (pg_type.dat): the same on every server and Citus node.
FLOAT4_OID = 700
FLOAT4_ARRAY_OID = 1021
_HEADER = struct.Struct(">iiiii")  # ndim, has-nulls, element oid, length, lower bound
_ELEMENTS = np.dtype([("length", ">i4"), ("value", ">f4")])


class VectorBatchDumper(Dumper):
    """A ``VectorBatch`` as the binary input of a one-dimensional ``real[]``: the array
    header, then each float32 big-endian behind its length (4)."""

    format = Format.BINARY
    oid = FLOAT4_ARRAY_OID

    def dump(self, obj: Any) -> bytes:
        flat = obj.matrix.ravel()
        if not flat.size:
            return struct.pack(">iii", 0, 0, FLOAT4_OID)
        elements = np.empty(flat.size, dtype=_ELEMENTS)
        elements["length"] = 4
        elements["value"] = flat
        return _HEADER.pack(1, 0, FLOAT4_OID, flat.size, 1) + elements.tobytes()


# Every psycopg connection opened from now on binds a VectorBatch this way.
psycopg.adapters.register_dumper(VectorBatch, VectorBatchDumper)


def vector_at(batch: str, position: str, dim: str) -> str:
    """SQL for the vector at 1-based ``position`` (SQL) of the ``VectorBatch`` parameter
    ``batch`` (say ``:vecs``) whose vectors have ``dim`` (SQL) values; NULL when
    ``position`` is."""
    start = f"({position} - 1) * CAST({dim} AS int) + 1"
    end = f"{position} * CAST({dim} AS int)"
    return f"CAST((CAST({batch} AS real[]))[{start} : {end}] AS vector)"
