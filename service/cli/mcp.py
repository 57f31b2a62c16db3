"""``ctxpack mcp``: the MCP tools over stdio, for clients that launch their servers.

    CTXPACK_API_KEY=ctxp_... ctxpack mcp [--database-url URL | --data-dir D]
    CTXPACK_API_KEY=ctxp_... ctxpack mcp --url https://ctxpack.example.com

Without ``--url`` the tools run in this process against the database (the same one ``serve``
uses; it must be migrated, and the key created there). With ``--url`` every call goes to that
ctxpack's HTTP API with the key, and nothing local is opened. Either way the key is checked at
start-up (a bad key exits with status 2) and its limits apply to every call. The older
``CTXPACK_KEY`` is still read, with a warning (service/remote.py:api_key_from_env).

stdout carries the protocol only: while serving, anything else written to fd 1 goes to stderr,
where the JSON logs go too.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio

from service.cli.common import db_options
from service.config import Settings
from service.errors import AuthenticationError, CtxpackError

if TYPE_CHECKING:
    from service.mcp.backends import Backend

@asynccontextmanager
async def local_backend(settings: Settings, key: str) -> AsyncIterator[Backend]:
    """A backend on this machine's database, on the resources ``serve`` opens too (the
    model, both pools, the caller cache with its revocation listener, the rate limiter),
    with the key checked once up front."""
    from service.mcp.backends import LocalBackend, bearer_key
    from service.resources import open_resources

    async with open_resources(settings) as resources:
        await resources.runner.authenticate(key)
        yield LocalBackend(resources, bearer_key(key))


@asynccontextmanager
async def remote_backend(url: str, key: str) -> AsyncIterator[Backend]:
    """A backend forwarding to the ctxpack at ``url``, with the key checked once up front."""
    from service.mcp.backends import RemoteBackend
    from service.remote import CtxpackHttp

    async with CtxpackHttp(url, key, agent="ctxpack-mcp", timeout=60.0) as client:
        backend = RemoteBackend(client)
        await backend.whoami()
        yield backend


async def serve_stdio(settings: Settings, key: str, url: str | None) -> None:
    from mcp.server.stdio import stdio_server

    from service.mcp.server import build_server

    async with stdio_server() as (read, write):
        opened = remote_backend(url, key) if url else local_backend(settings, key)
        async with opened as backend:
            server = build_server(backend)
            await server.run(read, write, server.create_initialization_options())


def cmd_mcp(args: argparse.Namespace, settings: Settings) -> int:
    from service.logs import configure_logging
    from service.remote import KEY_ENV, RemoteError, api_key_from_env

    key = api_key_from_env()
    if not key:
        raise AuthenticationError(f"set {KEY_ENV} to an API key (see `ctxpack keys create`)")
    configure_logging(settings.log_level)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        anyio.run(serve_stdio, settings, key, args.url)
    except BaseException as exc:  # errors at start-up can come wrapped in exception groups
        cause = _expected(exc)
        if cause is None:
            raise
        if isinstance(cause, RemoteError):
            code, message = cause.body.get("code"), cause.body.get("message")
            sys.stderr.write(f"ctxpack: error: {code}: {message}\n")
            return 2
        raise cause from None
    return 0


def _expected(exc: BaseException) -> BaseException | None:
    """The ctxpack error (local or remote) inside ``exc``, unwrapping exception groups."""
    from service.remote import RemoteError

    if isinstance(exc, CtxpackError | RemoteError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _expected(inner)
            if found is not None:
                return found
    return None


def add_parsers(sub: Any) -> None:
    parser = sub.add_parser(
        "mcp",
        help="serve the MCP tools over stdio (key in CTXPACK_API_KEY)",
        description="Serve the MCP tools (remember, context, wake, recall_artifact, forget, "
        "erase_namespace, list_memories) over stdio. The API key comes from CTXPACK_API_KEY. "
        "Without --url the tools use the database directly (migrated, as `serve` leaves it); "
        "with --url they call that ctxpack over HTTP.",
    )
    parser.add_argument(
        "--url",
        help="base URL of a running ctxpack, e.g. http://127.0.0.1:8080 (default: local database)",
    )
    db_options(parser)
    parser.set_defaults(handler=cmd_mcp)

