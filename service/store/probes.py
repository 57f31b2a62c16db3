"""Probes of the database itself: is it reachable, and does it hold ctxpack's schema with the
embedding width the model produces."""

from __future__ import annotations

import psycopg
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine


async def ping(engine: AsyncEngine) -> None:
    """One round trip; raises whatever the driver raises when the database does not answer."""
    async with engine.connect() as conn:
        await conn.execute(text("SELECT 1"))


async def embedding_dims(engine: AsyncEngine) -> int | None:
    """The declared width of ``memories.embedding``, or None when the table does not exist."""
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                text(
                    "SELECT atttypmod FROM pg_attribute "
                    "WHERE attrelid = to_regclass('memories') AND attname = 'embedding'"
                )
            )
        ).first()
    return None if row is None else int(row[0])


async def has_citus(libpq_url: str) -> bool:
    """True when the database is a Citus coordinator (it has the ``citus`` extension)."""
    async with await psycopg.AsyncConnection.connect(libpq_url, autocommit=True) as conn:
        cur = await conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'")
        return await cur.fetchone() is not None
