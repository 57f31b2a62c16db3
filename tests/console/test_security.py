"""Review 2: console sign-in had no throttling (40 failed attempts in 0.1 s all answered
401). Attempts are now limited per client address, shared by every process on the database
(like the key limit), refused ones audited (the address, never the key), and
``trusted_proxies`` says whose X-Forwarded-For names the client."""

from __future__ import annotations

import contextlib

import httpx
import pytest
from starlette.requests import Request

from service.console.security import client_address
from service.domain.console import SIGN_IN_ORG
from tests.conftest import AppFactory, Key, SqlRows
from tests.console.conftest import csrf_of

WRONG = "ctxp_" + "definitely-not-a-key-0123456789abcdef"


async def attempt(client: httpx.AsyncClient, key: str, forwarded: str | None = None) -> httpx.Response:
    form = await client.get("/ui/login")
    headers = {"X-Forwarded-For": forwarded} if forwarded else {}
    return await client.post(
        "/ui/login", data={"csrf": csrf_of(form.text), "key": key}, headers=headers,
        follow_redirects=False,
    )


async def refused_rows(sql: SqlRows, address: str) -> list[tuple[str, int]]:
    rows = await sql(
        "SELECT outcome, status_code, request::text FROM audit_events WHERE org_id = :o "
        "AND request->>'client' = :a ORDER BY created_at",
        o=SIGN_IN_ORG, a=address,
    )
    for row in rows:
        assert WRONG not in row[2]
    return [(r[0], r[1]) for r in rows]


async def test_attempts_are_limited_per_address_and_shared_by_processes(
    app_with: AppFactory, key: Key, sql: SqlRows
) -> None:
    address = "198.51.100.7"
    settings = {"console_sign_in_per_minute": 6, "console_sign_in_burst": 3,
                "trusted_proxies": ["127.0.0.1/32"]}
    async with contextlib.AsyncExitStack() as stack:
        one = await stack.enter_async_context(app_with(**settings))
        two = await stack.enter_async_context(app_with(**settings))
        answers = [
            (await attempt(client, WRONG, address)).status_code
            for client in (one, two, one, two, one)
        ]
        assert answers == [401, 401, 401, 429, 429]
        throttled = await attempt(two, key.key, address)  # even the right key, for now
        assert throttled.status_code == 429
        assert int(throttled.headers["retry-after"]) >= 1
        assert "Too many sign-in attempts" in throttled.text
        # Another address has its own allowance.
        assert (await attempt(one, key.key, "198.51.100.8")).status_code == 303
    rows = await refused_rows(sql, address)
    assert rows == [("failed", 401)] * 3 + [("rate_limited", 429)] * 3


async def test_x_forwarded_for_counts_only_behind_a_trusted_proxy(
    app_with: AppFactory, sql: SqlRows
) -> None:
    async with app_with(console_sign_in_per_minute=6, console_sign_in_burst=2) as client:
        # No trusted proxy: the header is the client's own word, and ignored.
        codes = [(await attempt(client, WRONG, f"203.0.113.{n}")).status_code for n in range(4)]
    assert codes == [401, 401, 429, 429]


def request_from(peer: str, forwarded: str | None) -> Request:
    headers = [(b"x-forwarded-for", forwarded.encode())] if forwarded else []
    return Request({"type": "http", "client": (peer, 1234), "headers": headers})


@pytest.mark.parametrize(
    ("peer", "forwarded", "trusted", "expected"),
    [
        ("10.0.0.5", "203.0.113.9", [], "10.0.0.5"),
        ("10.0.0.5", "203.0.113.9", ["10.0.0.0/8"], "203.0.113.9"),
        # A client writes its own X-Forwarded-For: the proxy appends the real address, which
        # is the rightmost untrusted one.
        ("10.0.0.5", "1.2.3.4, 203.0.113.9", ["10.0.0.0/8"], "203.0.113.9"),
        ("10.0.0.5", "203.0.113.9, 10.0.0.7", ["10.0.0.0/8"], "203.0.113.9"),
        ("192.0.2.1", "203.0.113.9", ["10.0.0.0/8"], "192.0.2.1"),
        ("10.0.0.5", "not-an-ip, 203.0.113.9", ["10.0.0.0/8"], "203.0.113.9"),
        ("::1", "2001:db8::1", ["::1"], "2001:db8::1"),
    ],
)
def test_client_address(peer: str, forwarded: str | None, trusted: list[str], expected: str) -> None:
    assert client_address(request_from(peer, forwarded), trusted) == expected
