"""Exceptions: one class per stable error code of the server (service/errors.py).

    CtxpackError                     any error answer, or no answer
    ├── TransportError               no HTTP answer (connection refused, timeout)
    └── APIError                     an HTTP error answer: status, code, message, field
        ├── Unauthorized             401 unauthorized
        ├── Forbidden                403 forbidden
        │   ├── ProjectAccessDenied  403 project_access_denied
        │   ├── NamespaceAccessDenied 403 namespace_access_denied
        │   └── ScopeDenied          403 scope_denied
        ├── NotFound                 404 not_found
        ├── Conflict                 409 conflict (existing_id when the server names it)
        ├── PayloadTooLarge          413 payload_too_large
        ├── ValidationError          422 validation_error (field)
        ├── GateRejected             422 gate_rejected (reasons: [{code, hint}])
        ├── RateLimited              429 rate_limited (retry_after, seconds)
        ├── InternalError            500 internal_error
        └── Unavailable              503 unavailable

An unknown code maps to the class of its status (or APIError), so a newer server's codes
still raise something catchable.
"""

from __future__ import annotations

from typing import Any


class CtxpackError(Exception):
    """Base of every error this client raises."""


class TransportError(CtxpackError):
    """The server could not be reached, or did not answer in time."""


class APIError(CtxpackError):
    """The server answered with an error: ``status``, stable ``code``, ``message``, ``field``."""

    status: int = 0
    code: str = "http_error"

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        field: str | None = None,
        body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        if code is not None:
            self.code = code
        self.field = field
        self.body = body or {}
        self.headers = headers or {}

    def __str__(self) -> str:
        where = f" [{self.field}]" if self.field else ""
        return f"{self.status} {self.code}{where}: {self.message}"


class Unauthorized(APIError):
    status, code = 401, "unauthorized"


class Forbidden(APIError):
    status, code = 403, "forbidden"


class ProjectAccessDenied(Forbidden):
    code = "project_access_denied"


class NamespaceAccessDenied(Forbidden):
    code = "namespace_access_denied"


class ScopeDenied(Forbidden):
    code = "scope_denied"


class NotFound(APIError):
    status, code = 404, "not_found"


class Conflict(APIError):
    status, code = 409, "conflict"

    @property
    def existing_id(self) -> str | None:
        value = self.body.get("existing_id")
        return str(value) if value is not None else None


class PayloadTooLarge(APIError):
    status, code = 413, "payload_too_large"


class ValidationError(APIError):
    status, code = 422, "validation_error"


class GateRejected(APIError):
    """The write gate refused the content; ``reasons`` is ``[{code, hint}]``."""

    status, code = 422, "gate_rejected"

    @property
    def reasons(self) -> list[dict[str, str]]:
        return list(self.body.get("reasons") or [])

    @property
    def reason_codes(self) -> list[str]:
        return [r.get("code", "") for r in self.reasons]

    def __str__(self) -> str:
        hints = "; ".join(f"{r.get('code')}: {r.get('hint')}" for r in self.reasons)
        return f"{super().__str__()}{' - ' + hints if hints else ''}"


class RateLimited(APIError):
    """Too many calls; ``retry_after`` is the server's wait in seconds (Retry-After)."""

    status, code = 429, "rate_limited"

    @property
    def retry_after(self) -> float | None:
        value = self.body.get("retry_after", self.headers.get("retry-after"))
        try:
            return float(value) if value is not None else None
        except (TypeError, ValueError):
            return None


class InternalError(APIError):
    status, code = 500, "internal_error"


class Unavailable(APIError):
    status, code = 503, "unavailable"


BY_CODE: dict[str, type[APIError]] = {
    cls.code: cls
    for cls in (
        Unauthorized, Forbidden, ProjectAccessDenied, NamespaceAccessDenied, ScopeDenied,
        NotFound, Conflict, PayloadTooLarge, ValidationError, GateRejected, RateLimited,
        InternalError, Unavailable,
    )
}
BY_STATUS: dict[int, type[APIError]] = {
    401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict, 413: PayloadTooLarge,
    422: ValidationError, 429: RateLimited, 500: InternalError, 503: Unavailable,
}


def from_response(status: int, payload: Any, headers: dict[str, str]) -> APIError:
    """The exception for an error answer: by its ``error.code``, else by its status."""
    body = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(body, dict):
        body = {"code": BY_STATUS.get(status, APIError).code, "message": f"HTTP {status}"}
    code = str(body.get("code") or "http_error")
    cls = BY_CODE.get(code) or BY_STATUS.get(status, APIError)
    return cls(
        str(body.get("message") or code),
        status=status,
        code=code,
        field=body.get("field"),
        body=body,
        headers={k.lower(): v for k, v in headers.items()},
    )
