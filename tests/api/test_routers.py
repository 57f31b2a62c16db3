"""api/routers.py: the list of feature routers. Every /v1 operation it installs asks for a key
first: without one, each answers 401 with the error tree's body, whatever its parameters."""

from __future__ import annotations

import re
import uuid

import httpx
from fastapi import FastAPI


async def test_every_v1_operation_needs_a_key(app: FastAPI, client: httpx.AsyncClient) -> None:
    paths = app.openapi()["paths"]
    called = []
    for path, operations in paths.items():
        if not path.startswith("/v1/"):
            continue
        url = re.sub(r"{(\w+)}", lambda m: "alice" if m[1] == "namespace" else str(uuid.uuid4()), path)
        for method in operations:
            response = await client.request(method.upper(), url, json={})
            assert response.status_code == 401, (method, path, response.text)
            assert response.json()["error"]["code"] == "unauthorized"
            called.append(f"{method.upper()} {path}")
    assert {"POST /v1/remember", "POST /v1/context", "DELETE /v1/namespaces/{namespace}",
            "GET /v1/audit", "POST /v1/assemble", "GET /v1/whoami"} <= set(called)  # fmt: skip
