"""``ctxpack mcp`` over stdio, with the SDK's stdio client launching it as a subprocess:
against the database directly, and with ``--url`` against a running ctxpack."""

from __future__ import annotations

import subprocess
import sys

import pytest
from mcp import Client, StdioServerParameters

from tests.conftest import ROOT, Key, KeyFactory, server_env
from tests.mcp.conftest import exercise_every_tool, structured

FACT = "The billing service retries webhooks three times with exponential backoff."


def params(pg_url: str, key: str, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "service", "mcp", *extra],
        env={**server_env(pg_url), "CTXPACK_API_KEY": key},
        cwd=ROOT,
    )


@pytest.mark.parametrize("remote", [False, True], ids=["database", "url"])
async def test_every_tool_over_stdio(pg_url: str, live_server: str, key: Key, remote: bool) -> None:
    extra = ("--url", live_server) if remote else ()
    async with Client(params(pg_url, key.key, *extra)) as client:
        await exercise_every_tool(client, live_server, key.key, "billing")
        invalid = await client.call_tool("list_memories", {"limit": 0})
        assert structured(invalid)["error"]["code"] == "validation_error"
        assert structured(invalid)["error"]["field"] == "limit"


async def test_stdio_key_limits(pg_url: str, make_key: KeyFactory) -> None:
    reader = await make_key(scopes=["read"])
    async with Client(params(pg_url, reader.key)) as client:
        refused = await client.call_tool("remember", {"content": FACT, "namespace": "billing"})
    assert structured(refused)["error"]["code"] == "scope_denied"
    assert structured(refused)["error"]["status"] == 403


@pytest.mark.parametrize("remote", [False, True], ids=["database", "url"])
def test_bad_key_exits_before_serving(pg_url: str, live_server: str, remote: bool) -> None:
    extra = ["--url", live_server] if remote else []
    done = subprocess.run(
        [sys.executable, "-m", "service", "mcp", *extra],
        env={**server_env(pg_url), "CTXPACK_API_KEY": "ctxp_not-a-key"},
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stdout == b""
    assert b"unauthorized" in done.stderr


def test_missing_key_exits(pg_url: str) -> None:
    env = server_env(pg_url)
    env.pop("CTXPACK_API_KEY", None)
    done = subprocess.run(
        [sys.executable, "-m", "service", "mcp"],
        env=env,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert b"CTXPACK_API_KEY" in done.stderr


def test_the_old_key_name_is_read_with_a_warning(pg_url: str) -> None:
    env = server_env(pg_url)
    env.pop("CTXPACK_API_KEY", None)
    done = subprocess.run(
        [sys.executable, "-m", "service", "mcp"],
        env={**env, "CTXPACK_KEY": "ctxp_not-a-key"},
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert b"CTXPACK_KEY is deprecated; set CTXPACK_API_KEY" in done.stderr
    assert b"unauthorized" in done.stderr  # the key was read, and checked
