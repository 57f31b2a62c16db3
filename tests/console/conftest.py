"""Console fixtures: sign a key in through the sign-in form, as a browser does."""

from __future__ import annotations

import re

import httpx

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def csrf_of(html: str) -> str:
    found = CSRF.search(html)
    assert found, "no CSRF token on the page"
    return found.group(1)


async def sign_in(client: httpx.AsyncClient, key: str) -> str:
    """Sign in with ``key``; returns the session's CSRF token (from the overview page)."""
    form = await client.get("/ui/login")
    response = await client.post(
        "/ui/login", data={"csrf": csrf_of(form.text), "key": key}, follow_redirects=False
    )
    assert response.status_code == 303, response.text
    page = await client.get("/ui/")
    assert page.status_code == 200
    return csrf_of(page.text)
