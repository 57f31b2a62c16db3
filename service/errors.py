"""One error tree. Every expected failure is a ``CtxpackError`` with an HTTP status and a
stable machine-readable code; the API renders it as ``{"error": {"code", "message", ...}}``,
the MCP adapter as a tool error carrying the same code.

    CtxpackError (500 internal_error)
    ├── AuthenticationError (401 unauthorized)
    ├── PermissionDenied (403 forbidden)
    │   ├── ProjectAccessDenied (403 project_access_denied)
    │   │   └── SharedMemoryReadOnly (403 project_access_denied: a project-less memory,
    │   │       written to by a key limited to projects)
    │   ├── NamespaceAccessDenied (403 namespace_access_denied)
    │   └── ScopeDenied (403 scope_denied)
    ├── NotFound (404 not_found)
    ├── Conflict (409 conflict)
    ├── PayloadTooLarge (413 payload_too_large)
    ├── InvalidInput (422 validation_error, names the field)
    ├── GateRejected (422 gate_rejected, lists reason codes with hints)
    ├── RateLimited (429 rate_limited)
    └── ServiceUnavailable (503 unavailable)
"""

from __future__ import annotations

from typing import Any, ClassVar


class CtxpackError(Exception):
    """Base of every error ctxpack raises on purpose."""

    status_code: ClassVar[int] = 500
    code: ClassVar[str] = "internal_error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        """The JSON body under ``"error"``: code, message and any details (field, reasons)."""
        return {"code": self.code, "message": self.message, **self.details}


class AuthenticationError(CtxpackError):
    status_code = 401
    code = "unauthorized"


class PermissionDenied(CtxpackError):
    status_code = 403
    code = "forbidden"


class ProjectAccessDenied(PermissionDenied):
    code = "project_access_denied"

    def __init__(self, project: str) -> None:
        super().__init__(f"Project access denied: {project}", field="project")


class SharedMemoryReadOnly(ProjectAccessDenied):
    """A key limited to projects tried to create, change, supersede or erase a shared
    (project-less) memory: it may read those, not write them."""

    def __init__(self, field: str = "project") -> None:
        PermissionDenied.__init__(
            self,
            "Project access denied: shared memories (no project) are read-only to a key "
            "limited to projects; name one of the key's projects",
            field=field,
        )


class NamespaceAccessDenied(PermissionDenied):
    code = "namespace_access_denied"

    def __init__(self, namespace: str) -> None:
        super().__init__(
            f"Namespace access denied: {namespace} is outside this key's namespace prefixes",
            field="namespace",
        )


class ScopeDenied(PermissionDenied):
    code = "scope_denied"

    def __init__(self, scope: str) -> None:
        super().__init__(f"This key lacks the '{scope}' scope", scope=scope)


class NotFound(CtxpackError):
    status_code = 404
    code = "not_found"


class Conflict(CtxpackError):
    status_code = 409
    code = "conflict"


class PayloadTooLarge(CtxpackError):
    status_code = 413
    code = "payload_too_large"


class InvalidInput(CtxpackError):
    """Bad input; ``field`` names the offending field as a dotted path (``items.3.namespace``)."""

    status_code = 422
    code = "validation_error"

    def __init__(self, field: str, message: str, **details: Any) -> None:
        super().__init__(message, field=field, **details)
        self.field = field


class GateRejected(CtxpackError):
    """The write gate refused the content; ``reasons`` is a list of ``{code, hint}``."""

    status_code = 422
    code = "gate_rejected"

    def __init__(self, reasons: list[dict[str, str]], field: str = "content") -> None:
        codes = ", ".join(r["code"] for r in reasons)
        super().__init__(f"Not stored: the write gate rejected it ({codes})", field=field, reasons=reasons)
        self.reasons = reasons


class RateLimited(CtxpackError):
    status_code = 429
    code = "rate_limited"


class ServiceUnavailable(CtxpackError):
    status_code = 503
    code = "unavailable"
