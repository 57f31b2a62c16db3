"""The console's browser-facing defences.

- Headers on every /ui and /docs response: a Content-Security-Policy with no inline script
  (``script-src 'self'``) and ``frame-ancestors 'none'``; no sniffing, no referrer, no cache.
- The session cookie: an opaque random token (never the key), HttpOnly, SameSite=Strict,
  Path=/ui, and Secure when the request came over https.
- The client of a sign-in (``client_address``): the connection's peer, or, when that peer
  is a trusted proxy (``trusted_proxies``), the rightmost address of ``X-Forwarded-For``
  that no trusted proxy added: a client cannot name itself someone else to dodge the
  sign-in limit.
- CSRF: every state-changing form carries the session's CSRF token; the sign-in form,
  before any session exists, a double-submit token (cookie and field must match). POSTs
  whose Origin names another site are refused as well.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Sequence

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.errors import PermissionDenied

SESSION_COOKIE = "ctxpack_console"
LOGIN_CSRF_COOKIE = "ctxpack_login_csrf"
PREFIX = "/ui"

CONSOLE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; font-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
# Swagger UI's page (FastAPI's) starts the bundle with one inline script, so /docs allows
# inline scripts, but nothing from another origin.
DOCS_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'"
)


class SecurityHeaders:
    """Pure ASGI middleware adding the headers above to /ui and /docs responses."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path == PREFIX or path.startswith(PREFIX + "/"):
            csp = CONSOLE_CSP
        elif path.startswith("/docs") or path.startswith("/redoc"):
            csp = DOCS_CSP
        else:
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [
                    (b"content-security-policy", csp.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                    (b"x-frame-options", b"DENY"),
                ]
                if not path.startswith(PREFIX + "/static/"):
                    headers.append((b"cache-control", b"no-store"))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)


def secure(request: Request) -> bool:
    return request.url.scheme == "https"


def set_session_cookie(response: Response, request: Request, token: str) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        token,
        httponly=True,
        samesite="strict",
        secure=secure(request),
        path=PREFIX,
    )


def clear_session_cookie(response: Response, request: Request) -> None:
    response.delete_cookie(
        SESSION_COOKIE, httponly=True, samesite="strict", secure=secure(request), path=PREFIX
    )


def new_login_token() -> str:
    return secrets.token_urlsafe(24)


def set_login_cookie(response: Response, request: Request, token: str) -> None:
    response.set_cookie(
        LOGIN_CSRF_COOKIE,
        token,
        httponly=True,
        samesite="strict",
        secure=secure(request),
        path=PREFIX,
        max_age=3600,
    )


def check_origin(request: Request) -> None:
    """Refuse a POST whose Origin header names another site (browsers send it on POST)."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return
    expected = f"{request.url.scheme}://{request.url.netloc}"
    if origin != expected:
        raise PermissionDenied("Cross-site request refused")


def check_csrf(request: Request, expected: str, sent: str | None) -> None:
    """Raise PermissionDenied unless the form's token matches the expected one."""
    check_origin(request)
    if not expected or not sent or not hmac.compare_digest(expected, sent):
        raise PermissionDenied("The form has expired or did not come from this console; reload it")


def _networks(trusted: Sequence[str]) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    return [ipaddress.ip_network(t.strip(), strict=False) for t in trusted if t.strip()]


def _is_trusted(address: str, networks: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return False
    return any(ip in n for n in networks)


def client_address(request: Request, trusted: Sequence[str]) -> str:
    """Who is signing in: the peer, unless the peer is a trusted proxy; then the rightmost
    ``X-Forwarded-For`` entry that is not itself a trusted proxy (entries to its left could
    have been written by the client)."""
    peer = request.client.host if request.client is not None else "unknown"
    networks = _networks(trusted)
    if not networks or not _is_trusted(peer, networks):
        return peer
    hops = [h.strip() for h in ",".join(request.headers.getlist("x-forwarded-for")).split(",")]
    for hop in reversed([h for h in hops if h]):
        if not _is_trusted(hop, networks):
            return hop[:100]
    return peer
