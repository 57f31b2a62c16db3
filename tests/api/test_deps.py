"""api/deps.py: the routes' dependencies, each one step of the call runner. A read goes to the
primary only when the caller asks (``X-Ctxpack-Consistency: primary``, any case); the key is
the Bearer token; a call's audit context carries its operation's action and its caller, and
starts when the request did."""

from __future__ import annotations

import uuid

import pytest
from starlette.requests import Request

from service.api.deps import audited, bearer_token, wants_primary
from service.domain.auth import Caller
from service.errors import AuthenticationError
from service.operations import FORGET


def request(**headers: str) -> Request:
    raw = [(k.lower().replace("_", "-").encode(), v.encode()) for k, v in headers.items()]
    return Request({"type": "http", "headers": raw})


@pytest.mark.parametrize(
    ("value", "primary"),
    [("primary", True), (" Primary ", True), ("replica", False), ("", False), (None, False)],
)
def test_a_read_goes_to_the_primary_only_when_asked(value: str | None, primary: bool) -> None:
    headers = {} if value is None else {"x_ctxpack_consistency": value}
    assert wants_primary(request(**headers)) is primary


def test_the_key_is_the_bearer_token() -> None:
    assert bearer_token(request(authorization="Bearer  ctxp_abc ")) == "ctxp_abc"
    assert bearer_token(request(authorization="bearer ctxp_abc")) == "ctxp_abc"
    for bad in ("", "Bearer", "Bearer   ", "Basic abc"):
        with pytest.raises(AuthenticationError):
            bearer_token(request(authorization=bad))
    with pytest.raises(AuthenticationError):
        bearer_token(request())


async def test_an_audit_context_has_its_operations_action_and_the_requests_start() -> None:
    caller = Caller(uuid.uuid4(), uuid.uuid4(), "k", frozenset({"write"}))
    incoming = request()
    incoming.state.started = 12.5
    ctx = await audited(FORGET)(incoming, caller)
    assert (ctx.action, ctx.caller, ctx.started) == (FORGET.action, caller, 12.5)
    assert incoming.state.audit is ctx
