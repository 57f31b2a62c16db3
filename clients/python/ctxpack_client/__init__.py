"""ctxpack-client: a typed client for the ctxpack memory service.

    from ctxpack_client import Client
    client = Client("http://127.0.0.1:8080", api_key="ctxp_...")   # or CTXPACK_URL / CTXPACK_API_KEY
    client.remember("Staging's database is on port 6543, not 5432.", "alice", key="staging-db", type="gotcha")
    print(client.context("connect to the staging database", "alice:s2").markdown)
"""

from ctxpack_client import models
from ctxpack_client._client import AsyncClient, Client
from ctxpack_client.errors import (
    APIError,
    Conflict,
    CtxpackError,
    Forbidden,
    GateRejected,
    InternalError,
    NamespaceAccessDenied,
    NotFound,
    PayloadTooLarge,
    ProjectAccessDenied,
    RateLimited,
    ScopeDenied,
    TransportError,
    Unauthorized,
    Unavailable,
    ValidationError,
)

__all__ = [
    "APIError", "AsyncClient", "Client", "Conflict", "CtxpackError", "Forbidden", "GateRejected",
    "InternalError", "NamespaceAccessDenied", "NotFound", "PayloadTooLarge", "ProjectAccessDenied",
    "RateLimited", "ScopeDenied", "TransportError", "Unauthorized", "Unavailable",
    "ValidationError", "models",
]
__version__ = "0.1.0"
