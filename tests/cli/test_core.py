"""The ctxpack command: keys create prints the key alone; list and revoke work."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import anyio.to_thread
import httpx
import pytest

from service.cli import main


def test_keys_create_list_revoke(pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "create", "--org", "cli-org", "--project", "p1", "--namespace", "alice",
                 "--scope", "read", "--database-url", pg_url]) == 0
    out = capsys.readouterr().out
    assert re.fullmatch(r"ctxp_[A-Za-z0-9_\-]{43}\n", out), out
    key = out.strip()

    assert main(["keys", "list", "--org", "cli-org", "--database-url", pg_url]) == 0
    listing = capsys.readouterr().out
    assert key not in listing  # never the secret
    assert key[:12] in listing
    row = next(line for line in listing.splitlines() if "cli-org" in line).split("\t")
    key_id = row[0]
    assert row[4] == "read" and row[5] == "p1" and row[6] == "alice" and row[7] == "active"

    assert main(["keys", "revoke", key_id, "--database-url", pg_url]) == 0
    assert main(["keys", "list", "--org", "cli-org", "--database-url", pg_url]) == 0
    assert "revoked" in capsys.readouterr().out
    # Revoking again is a clean error, not a traceback.
    assert main(["keys", "revoke", key_id, "--database-url", pg_url]) == 2
    assert "not_found" in capsys.readouterr().err


def test_bad_scope_and_namespace_are_refused(pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["keys", "create", "--org", "x", "--scope", "root", "--database-url", pg_url])
    assert main(["keys", "create", "--org", "x", "--namespace", "a::b", "--database-url", pg_url]) == 2
    assert "validation_error" in capsys.readouterr().err


def test_help_explains_each_command() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "service", "--help"], capture_output=True, text=True, check=True
    )
    for command in ("serve", "db", "keys"):
        assert command in result.stdout


def test_db_current(pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["db", "current", "--database-url", pg_url]) == 0


def test_db_index_says_what_it_built_dropped_and_rebuilt(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """One pass of the namespace index job by hand; ``--rebuild`` also rebuilds the graphs
    built with other parameters (tests/store/test_namespace_indexes.py shows it does)."""
    assert main(["db", "index", "--rebuild", "--database-url", pg_url]) == 0
    out = capsys.readouterr().out
    assert re.fullmatch(
        r"namespace indexes: \d+ built, \d+ dropped, \d+ rebuilt, \d+ tuned\n", out
    ), out


async def test_created_key_authenticates(pg_url: str, client: httpx.AsyncClient, capsys: pytest.CaptureFixture[str]) -> None:
    # The CLI runs its own event loop: call it from a worker thread, as a separate process would.
    args = ["keys", "create", "--org", "cli-auth", "--database-url", pg_url]
    assert await anyio.to_thread.run_sync(main, args) == 0
    key = capsys.readouterr().out.strip()
    response = await client.get("/v1/whoami", headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 200
    assert response.json()["scopes"] == ["read", "write"]


def test_sigterm_after_uvicorns_shutdown_exits_through_atexit() -> None:
    """uvicorn re-raises SIGTERM after its graceful shutdown; serve's handler turns it into
    SystemExit so that atexit (which stops the embedded Postgres) runs."""
    import signal

    from service.cli import core as cli

    with pytest.raises(SystemExit) as exc:
        cli._exit_on_signal(signal.SIGTERM, None)
    assert exc.value.code == 128 + signal.SIGTERM


@pytest.mark.parametrize(
    "argv",
    [
        ["db", "current"],
        ["db", "huge-pages"],
        ["keys", "list"],
        ["db", "index"],
    ],
)
def test_a_database_that_cannot_be_reached_is_one_line_not_a_traceback(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"postgresql://nobody-here@/ctxpack?host={tmp_path}"
    assert main([*argv, "--database-url", url]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ctxpack: error: unavailable: database: "), err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert str(tmp_path) in err  # libpq's own words: where it tried
