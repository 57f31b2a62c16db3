"""Whether PostgreSQL's shared memory sits on huge pages, and reserving the pages it needs.

PostgreSQL asks for huge pages for its shared memory (``huge_pages = try``, its default and the
embedded server's) and quietly takes 4 kB pages when the kernel has none reserved, which is
the default on Linux (``vm.nr_hugepages = 0``; reserving needs root). On 4 kB pages every
backend walks page tables for each buffer it touches, and on a virtual machine those walks
are slow once other work has pushed them out of the caches: a context call over a scope of
tens of thousands of memories touches a few thousand random buffers. Measured on the
2-core VM this project is built on (docs/context.md, "Fifteenth session"): the big-scope
layout's p50 1.42-1.46x the small layout's with the pages reserved, against 1.47-1.54x
without (``bench.context_speed --layouts``, eight runs each way) on a store written to over
days; on a store seeded afresh every call was slower with them (the ratio fell only because
the small layout slowed more), and the bench's scope table showed no gain. So nothing here
reserves pages by itself or recommends them: it reports, and reserves when asked.

``status`` reads what the server reports (``huge_pages_status``, PostgreSQL 17 and later, and
``shared_memory_size_in_huge_pages``, the pages its shared memory needs). ``kernel_pool`` and
``reserve`` read and raise the kernel's pool on this machine, for a server on it: ``ctxpack db
huge-pages [--reserve]``. The server takes the pages at its next start.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import psycopg

log = logging.getLogger(__name__)

MEMINFO = Path("/proc/meminfo")
NR_HUGEPAGES = Path("/proc/sys/vm/nr_hugepages")


@dataclass(frozen=True)
class ServerPages:
    """What the server says: ``on``, ``off`` or ``unknown`` (before PostgreSQL 17), and the
    huge pages its shared memory needs (``None`` where the platform has none)."""

    status: str
    needed: int | None


@dataclass(frozen=True)
class KernelPool:
    """The kernel's huge-page pool (``/proc/meminfo``): pages reserved, free, and their size."""

    total: int
    free: int
    page_kb: int


def status(conn: psycopg.Connection) -> ServerPages:
    """The server's huge-page status and the pages its shared memory needs."""
    row = conn.execute(
        "SELECT current_setting('huge_pages_status', true),"
        " current_setting('shared_memory_size_in_huge_pages', true)"
    ).fetchone()
    state, needed = row if row is not None else (None, None)
    pages = int(needed) if needed not in (None, "") and int(needed) > 0 else None
    return ServerPages(status=state or "unknown", needed=pages)


def kernel_pool() -> KernelPool | None:
    """The kernel's pool, or ``None`` where there is no ``/proc/meminfo`` (not Linux)."""
    try:
        text = MEMINFO.read_text()
    except OSError:
        return None
    fields: dict[str, int] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        value = rest.split()
        if value and value[0].isdigit():
            fields[name.strip()] = int(value[0])
    if "HugePages_Total" not in fields:
        return None
    return KernelPool(
        total=fields["HugePages_Total"],
        free=fields.get("HugePages_Free", 0),
        page_kb=fields.get("Hugepagesize", 0),
    )


def shortfall(server: ServerPages, pool: KernelPool | None) -> int:
    """Huge pages to add to the pool before the server's next start puts its shared memory on
    them: none when it already runs on them, when it needs none, or when the free pages
    cover it."""
    if server.status == "on" or server.needed is None or pool is None:
        return 0
    return max(0, server.needed - pool.free)


def reserve(more: int) -> KernelPool:
    """Grow the kernel's pool by ``more`` pages and return it as the kernel left it (it may
    give fewer than asked when memory is fragmented). Writing ``vm.nr_hugepages`` needs
    root: ``PermissionError`` otherwise."""
    current = int(NR_HUGEPAGES.read_text().split()[0])
    NR_HUGEPAGES.write_text(f"{current + more}\n")
    pool = kernel_pool()
    if pool is None:
        raise OSError(f"{MEMINFO} has no huge-page counts")
    return pool


def advice(server: ServerPages, pool: KernelPool | None, *, local: bool) -> str | None:
    """What to do so the server's shared memory goes onto huge pages, in one sentence, or
    ``None`` when there is nothing to do (it is on them, or the platform has none). ``local``:
    the server runs on this machine (the embedded one), so this machine's pool is its pool."""
    if server.status == "on" or server.needed is None:
        return None
    if not local:
        return (
            f"reserve {server.needed} huge pages on the database's host "
            "(vm.nr_hugepages, as root) and restart its PostgreSQL"
        )
    if pool is None:
        return None
    more = shortfall(server, pool)
    if more == 0:
        return "the kernel's pool has room: restart ctxpack and its embedded Postgres takes them"
    return (
        f"`ctxpack db huge-pages --reserve` as root adds the {more} huge pages it needs "
        f"(sysctl vm.nr_hugepages={pool.total + more}); then restart ctxpack"
    )


def observe(url: str, *, local: bool) -> tuple[ServerPages, KernelPool | None]:
    """The server's report and, for a server on this machine (``local``: the embedded one),
    this machine's pool; ``None`` for the pool of a server elsewhere."""
    with psycopg.connect(url, autocommit=True) as conn:
        server = status(conn)
    return server, kernel_pool() if local else None


def log_at_start(url: str, *, local: bool) -> None:
    """One log line as ``serve`` starts: the server's huge-page status, the pages it needs and,
    when they are not in use, what to do (``advice``). A report, so a database that cannot
    answer it only costs the line."""
    try:
        server, pool = observe(url, local=local)
    except psycopg.Error as exc:
        log.warning("postgres_huge_pages_unread", extra={"error": type(exc).__name__})
        return
    log.info(
        "postgres_huge_pages",
        extra={
            "status": server.status,
            "needed": server.needed,
            "advice": advice(server, pool, local=local),
        },
    )
