"""console/calls.py: the console's one way into the domain, the call runner as the console
transport. Signing in authenticates the key as a Bearer key is and audits ``console_login``;
a page's call of an operation is audited under its action, a failure row naming the console;
every call, reads included, takes the key's rate limit first."""

from __future__ import annotations

import uuid

import pytest
from fastapi import FastAPI
from starlette.requests import Request

from service.console import calls
from service.domain.console import ConsoleSession
from service.errors import NotFound, RateLimited
from service.operations import FORGET
from service.schemas.memories import MemoryRef
from tests.conftest import AppFactory, Key, SqlRows, audit_transports


def page_request(app: FastAPI, path: str = "/ui/memories") -> Request:
    return Request({
        "type": "http", "app": app, "method": "POST", "path": path, "headers": [],
        "client": ("198.51.100.7", 1234), "query_string": b"",
    })  # fmt: skip


async def test_signing_in_is_a_bearer_check_and_an_audited_session(
    app: FastAPI, key: Key, sql: SqlRows
) -> None:
    assert await calls.sign_in(page_request(app), "ctxp_" + "x" * 43) is None
    signed = await calls.sign_in(page_request(app), f"  {key.key} ")
    assert signed is not None
    token, console = signed
    assert console.caller.key_id == key.key_id and console.csrf_token
    resumed = await calls.resume(page_request(app), token)
    assert resumed is not None and resumed.session_id == console.session_id
    assert await audit_transports(sql, key) == [("console_login", 200, None)]


async def test_a_pages_call_is_audited_under_its_operation_as_the_console(
    app: FastAPI, key: Key, sql: SqlRows
) -> None:
    signed = await calls.sign_in(page_request(app), key.key)
    assert signed is not None
    page = calls.ConsoleCalls(page_request(app), signed[1])
    with pytest.raises(NotFound):
        await page.call(FORGET, MemoryRef(memory_id=uuid.uuid4()))
    assert (await audit_transports(sql, key))[-1] == ("delete", 404, "console")


async def test_every_console_call_takes_the_keys_rate_limit(
    app_with: AppFactory, key: Key
) -> None:
    async with app_with(rate_limit_per_minute=1, rate_limit_burst=1) as client:
        application: FastAPI = client.app  # type: ignore[attr-defined]
        caller = await application.state.ctx.runner.authenticate(key.key)
        page = calls.ConsoleCalls(page_request(application), ConsoleSession(caller, "csrf", None))

        async def count(session: object) -> int:
            return 1

        assert await page.read(count) == 1  # type: ignore[arg-type]
        with pytest.raises(RateLimited):
            await page.read(count)  # type: ignore[arg-type]
