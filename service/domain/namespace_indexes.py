"""The namespace index job: a namespace that holds more than ``exact_scan_max_rows``
memories gets a vector (HNSW) and a full-text (GIN) index of its own, so its scopes are
ranked through graphs that hold nothing else; a namespace that shrank to half that loses
them. What the indexes are and how statements reach them: store/namespace_indexes.py.

The job runs once at start-up and then every ``namespace_index_interval_seconds`` (0: off;
``ctxpack db index`` runs one pass by hand). A namespace above the threshold whose indexes
are not built yet is scanned exactly, which gives the same packs, slower: the job only ever
changes speed. A failed pass is logged and retried at the next interval.
"""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy.ext.asyncio import AsyncEngine

from service.store import namespace_indexes
from service.store.namespace_indexes import SyncReport

log = logging.getLogger("ctxpack.namespace_indexes")


async def index_namespaces(
    engine: AsyncEngine, min_rows: int, max_indexed: int, *, rebuild: bool = False
) -> SyncReport:
    """One pass: build the indexes of namespaces above ``min_rows`` memories (the biggest
    ``max_indexed``), drop those of namespaces at half that or fewer; ``rebuild`` (by hand
    only: ``ctxpack db index --rebuild``): rebuild the graphs built with other parameters
    than today's. Index names only are logged: they are hashes, never an org's or a
    namespace's name."""
    report = await namespace_indexes.sync(
        engine, min_rows, max_indexed=max_indexed, rebuild=rebuild
    )
    if report.built or report.dropped or report.rebuilt or report.tuned:
        log.info(
            "namespace_indexes_synced",
            extra={
                "built": list(report.built),
                "dropped": list(report.dropped),
                "rebuilt": list(report.rebuilt),
                "tuned": list(report.tuned),
            },
        )
    return report


async def run_namespace_indexing(
    engine: AsyncEngine, *, min_rows: int, max_indexed: int, interval_seconds: float
) -> None:
    """``index_namespaces`` now and then every ``interval_seconds`` until cancelled."""
    while True:
        try:
            await index_namespaces(engine, min_rows, max_indexed)
        except Exception as exc:  # logged, and retried at the next interval
            # The SQLSTATE says what failed (a deadlock with other DDL, a name taken...)
            # without the message, which may quote a namespace.
            sqlstate = getattr(getattr(exc, "orig", None), "sqlstate", None)
            log.exception("namespace_index_sync_failed", extra={"sqlstate": sqlstate})
        await asyncio.sleep(interval_seconds)
