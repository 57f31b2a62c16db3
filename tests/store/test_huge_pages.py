"""Huge pages for Postgres's shared memory (store/huge_pages.py, ``ctxpack db huge-pages``):
the server's own report, the kernel's pool read and grown, and what the command and the
serve log say. The kernel's files are stood in for by a small fake (writing the pool's size
moves its counts, up to what a fragmented memory would give); the server is the real one."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from service.cli import main
from service.cli.core import _huge_pages
from service.config import Settings
from service.errors import InvalidInput
from service.store import huge_pages
from service.store.database import libpq_url
from service.store.huge_pages import KernelPool, ServerPages

MEMINFO = """MemTotal:       24576000 kB
AnonHugePages:         0 kB
HugePages_Total:     {total}
HugePages_Free:      {free}
HugePages_Rsvd:        0
HugePages_Surp:        0
Hugepagesize:       2048 kB
"""


class FakeKernel:
    """``/proc/sys/vm/nr_hugepages`` and ``/proc/meminfo``: a write to the first sets the pool
    (at most ``cap`` pages, as a kernel with fragmented memory gives fewer than asked)."""

    def __init__(self, tmp_path: Path, total: int, free: int, cap: int = 10**6) -> None:
        self.meminfo = tmp_path / "meminfo"
        self.used = total - free
        self.cap = cap
        self.writes: list[str] = []
        self.set_total(total)

    def set_total(self, total: int) -> None:
        self.total = min(total, self.cap)
        self.meminfo.write_text(MEMINFO.format(total=self.total, free=self.total - self.used))

    def read_text(self) -> str:
        return f"{self.total}\n"

    def write_text(self, text: str) -> None:
        self.writes.append(text)
        self.set_total(int(text))


class ReadOnlyKernel(FakeKernel):
    def write_text(self, text: str) -> None:
        raise PermissionError(13, "Permission denied")


Install = Callable[..., FakeKernel]


@pytest.fixture
def kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Install:
    def install(
        total: int, free: int, cap: int = 10**6, cls: type[FakeKernel] = FakeKernel
    ) -> FakeKernel:
        fake = cls(tmp_path, total, free, cap)
        monkeypatch.setattr(huge_pages, "NR_HUGEPAGES", fake)
        monkeypatch.setattr(huge_pages, "MEMINFO", fake.meminfo)
        return fake

    return install


def server_pages(pg_url: str) -> ServerPages:
    with psycopg.connect(libpq_url(pg_url), autocommit=True) as conn:
        return huge_pages.status(conn)


def test_the_server_reports_its_status_and_the_pages_its_shared_memory_needs(pg_url: str) -> None:
    with psycopg.connect(libpq_url(pg_url), autocommit=True) as conn:
        reported = huge_pages.status(conn)
        row = conn.execute(
            "SELECT setting::bigint * 8192 FROM pg_settings WHERE name = 'shared_buffers'"
        ).fetchone()
    assert row is not None
    buffers = int(row[0])
    assert reported.status in ("on", "off")
    assert reported.needed is not None
    # The shared memory holds the buffers and more; a 2 MB page each (PostgreSQL's default).
    assert reported.needed * 2 * 2**20 >= buffers
    assert reported.needed * 2 * 2**20 < buffers + 512 * 2**20


def test_the_kernel_pool_is_read_from_meminfo(
    kernel: Install, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel(total=2200, free=190)
    assert huge_pages.kernel_pool() == KernelPool(total=2200, free=190, page_kb=2048)
    monkeypatch.setattr(huge_pages, "MEMINFO", tmp_path / "absent")
    assert huge_pages.kernel_pool() is None  # not Linux
    (tmp_path / "plain").write_text("MemTotal: 100 kB\n")
    monkeypatch.setattr(huge_pages, "MEMINFO", tmp_path / "plain")
    assert huge_pages.kernel_pool() is None  # a kernel without huge pages


def test_what_is_missing_and_what_to_do() -> None:
    off = ServerPages(status="off", needed=2127)
    empty = KernelPool(total=0, free=0, page_kb=2048)
    some = KernelPool(total=3000, free=1000, page_kb=2048)
    roomy = KernelPool(total=3000, free=2127, page_kb=2048)
    assert huge_pages.shortfall(off, empty) == 2127
    assert huge_pages.shortfall(off, some) == 1127
    assert huge_pages.shortfall(off, roomy) == 0
    assert huge_pages.shortfall(ServerPages("on", 2127), empty) == 0
    assert huge_pages.shortfall(ServerPages("off", None), empty) == 0  # no huge pages here
    assert huge_pages.shortfall(off, None) == 0

    assert "vm.nr_hugepages=4127" in (huge_pages.advice(off, some, local=True) or "")
    assert "--reserve" in (huge_pages.advice(off, empty, local=True) or "")
    assert "restart ctxpack" in (huge_pages.advice(off, roomy, local=True) or "")
    remote = huge_pages.advice(off, None, local=False) or ""
    assert "2127 huge pages on the database's host" in remote and "--reserve" not in remote
    assert huge_pages.advice(ServerPages("on", 2127), empty, local=True) is None
    assert huge_pages.advice(ServerPages("unknown", None), empty, local=True) is None


def test_reserve_grows_the_pool_and_says_what_the_kernel_gave(kernel: Install) -> None:
    fake = kernel(total=100, free=40)
    assert huge_pages.reserve(60) == KernelPool(total=160, free=100, page_kb=2048)
    assert fake.writes == ["160\n"]
    kernel(total=100, free=40, cap=120)  # fragmented: 20 more, not 60
    assert huge_pages.reserve(60).free == 60


def test_db_huge_pages_reports_and_reserves_for_the_embedded_server(
    kernel: Install, pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = server_pages(pg_url)
    if server.status == "on" or server.needed is None:
        pytest.skip("the test server's shared memory is already on huge pages")
    embedded = Settings(database_url=None, data_dir=tmp_path)

    fake = kernel(total=0, free=0)
    assert _huge_pages(embedded, pg_url, reserve=False) == 0
    out = capsys.readouterr().out
    assert "shared memory on huge pages: off" in out
    assert f"huge pages it needs: {server.needed}" in out
    assert f"adds the {server.needed} huge pages" in out
    assert fake.writes == []  # a report changes nothing

    assert _huge_pages(embedded, pg_url, reserve=True) == 0
    out = capsys.readouterr().out
    assert fake.writes == [f"{server.needed}\n"]
    assert f"pool now: {server.needed} reserved, {server.needed} free" in out
    assert "restart ctxpack" in out

    assert _huge_pages(embedded, pg_url, reserve=True) == 0  # nothing more to add
    assert fake.writes == [f"{server.needed}\n"]
    capsys.readouterr()

    fake = kernel(total=0, free=0, cap=server.needed // 2)
    assert _huge_pages(embedded, pg_url, reserve=True) == 1
    assert "fewer pages than asked" in capsys.readouterr().out

    kernel(total=0, free=0, cls=ReadOnlyKernel)
    with pytest.raises(InvalidInput) as refused:
        _huge_pages(embedded, pg_url, reserve=True)
    assert refused.value.field == "reserve"
    assert f"sysctl -w vm.nr_hugepages={server.needed}" in refused.value.message


def test_db_huge_pages_against_an_external_database_reports_and_reserves_nothing(
    kernel: Install, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = kernel(total=0, free=0)
    assert main(["db", "huge-pages", "--database-url", pg_url]) == 0
    out = capsys.readouterr().out
    assert "shared memory on huge pages:" in out
    assert "this machine's pool" not in out  # the database may be on another host
    assert main(["db", "huge-pages", "--reserve", "--database-url", pg_url]) == 2
    err = capsys.readouterr().err
    assert "validation_error" in err and "on its host" in err
    assert fake.writes == []


def test_serve_logs_the_status_and_what_to_do(
    kernel: Install, pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    server = server_pages(pg_url)
    kernel(total=0, free=0)
    with caplog.at_level(logging.INFO, logger="service.store.huge_pages"):
        huge_pages.log_at_start(libpq_url(pg_url), local=True)
    (record,) = [r for r in caplog.records if r.getMessage() == "postgres_huge_pages"]
    assert record.status == server.status  # type: ignore[attr-defined]
    assert record.needed == server.needed  # type: ignore[attr-defined]
    if server.status == "off":
        assert "--reserve" in record.advice  # type: ignore[attr-defined]


def test_serve_starts_when_the_status_cannot_be_read(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="service.store.huge_pages"):
        huge_pages.log_at_start("postgresql://nobody@/nowhere?host=/nonexistent", local=True)
    (record,) = [r for r in caplog.records if r.name == "service.store.huge_pages"]
    assert record.getMessage() == "postgres_huge_pages_unread"
    assert "nowhere" not in record.error  # type: ignore[attr-defined]
