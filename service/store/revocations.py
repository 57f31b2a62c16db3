"""Key revocations between processes: ``NOTIFY ctxpack_keys`` when a revocation commits, and
the ``LISTEN`` connection each server keeps to hear them.

The SQL lives here; what a revocation means for the cache is ``service.domain.caller_cache``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import psycopg
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

log = logging.getLogger("service.domain.caller_cache")

CHANNEL = "ctxpack_keys"
RECONNECT_SECONDS = 1.0
POLL_SECONDS = 0.5  # how often the listener looks at the stop flag


async def notify_revocation(session: AsyncSession, key_hash: str) -> None:
    """Tell every listening server that ``key_hash`` is revoked, when ``session`` commits
    (Postgres delivers a NOTIFY on commit, never on rollback)."""
    await session.execute(
        text("SELECT pg_notify(:channel, :hash)"), {"channel": CHANNEL, "hash": key_hash}
    )


class RevocationListener:
    """A LISTEN connection that reconnects until stopped.

    Args:
        libpq_url: a plain ``postgresql://`` URL.
        on_revoked: called with a key hash, or None for "anything may have changed" (on
            every (re)connect and disconnect).
        on_live: called with True when listening, False when the connection is down.
    """

    def __init__(
        self,
        libpq_url: str,
        on_revoked: Callable[[str | None], None],
        on_live: Callable[[bool], None],
    ) -> None:
        self.libpq_url = libpq_url
        self.on_revoked = on_revoked
        self.on_live = on_live
        self.connecting = False

    async def run(self, stop: asyncio.Event) -> None:
        """Listen until ``stop`` is set."""
        while not stop.is_set():
            try:
                self.connecting = True
                try:
                    conn = await psycopg.AsyncConnection.connect(self.libpq_url, autocommit=True)
                finally:
                    self.connecting = False
                async with conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self.on_revoked(None)  # anything revoked while we were away
                    self.on_live(True)
                    log.info("auth_cache_live")
                    while not stop.is_set():
                        async for notify in conn.notifies(timeout=POLL_SECONDS):
                            self.on_revoked(notify.payload or None)
            except (OSError, psycopg.Error) as exc:
                log.warning("auth_cache_listener_down", extra={"error": type(exc).__name__})
            finally:
                self.on_live(False)
                self.on_revoked(None)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), RECONNECT_SECONDS)
