"""The OpenAPI document's shared answers: every /v1 operation may answer 429 (the per-key
rate limit, ``service/domain/rate_limit.py``) and, when it takes a body, 413 (``RequestGuard``
in service/app.py)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

_ERROR_REF = {"$ref": "#/components/schemas/ErrorResponse"}


def document_limits(app: FastAPI) -> None:
    """Add the answers every /v1 operation may give to the OpenAPI schema: 429 (the rate
    limit), 413 for operations with a body (RequestGuard)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = build()
        from service.schemas.common import ErrorBody, ErrorResponse

        components = schema.setdefault("components", {}).setdefault("schemas", {})
        ref = "#/components/schemas/{model}"
        components.setdefault("ErrorBody", ErrorBody.model_json_schema(ref_template=ref))
        components.setdefault("ErrorResponse", ErrorResponse.model_json_schema(ref_template=ref))
        for path, operations in schema.get("paths", {}).items():
            if not path.startswith("/v1/"):
                continue
            for operation in operations.values():
                responses = operation.setdefault("responses", {})
                responses.setdefault(
                    "429",
                    {
                        "description": "Rate limited: the key exceeded its calls per minute "
                        "(see the Retry-After header)",
                        "content": {"application/json": {"schema": _ERROR_REF}},
                    },
                )
                if "requestBody" in operation:
                    responses.setdefault(
                        "413",
                        {
                            "description": "The request body is larger than max_body_bytes",
                            "content": {"application/json": {"schema": _ERROR_REF}},
                        },
                    )
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
