"""console/mount.py: the console is served at /ui with its static files at /ui/static and its
security headers (a CSP without inline script or style, no framing) on its pages."""

from __future__ import annotations

import httpx


async def test_the_console_and_its_files_are_served_with_its_headers(
    client: httpx.AsyncClient,
) -> None:
    page = await client.get("/ui/login")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp or "default-src 'self'" in csp
    assert "unsafe-inline" not in csp
    css = await client.get("/ui/static/console.css")
    assert css.status_code == 200 and "text/css" in css.headers["content-type"]
