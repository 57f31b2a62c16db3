"""The bench's PostgreSQL server, which every system in a run shares, is sized as ctxpack
sizes the embedded server it ships with, and a run records the size it measured on."""

from __future__ import annotations

from bench import peers
from service.store.database import default_shared_buffers_mb


def test_the_bench_server_has_the_shipped_shared_buffers() -> None:
    server, url = peers.start_postgres()
    try:
        versions = peers.server_versions(url)
    finally:
        server.cleanup()
    mb = default_shared_buffers_mb()
    shown = versions["shared_buffers"]
    assert shown == (f"{mb // 1024}GB" if mb % 1024 == 0 else f"{mb}MB"), shown
    assert versions["postgresql"].startswith("18")
