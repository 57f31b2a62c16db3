"""The client's models against the running server's /openapi.json: for every schema the client
mirrors, the same properties, the same required ones, the same enums and compatible types; and
every endpoint and query parameter the client calls exists. If the server's API changes, this
fails until clients/python follows."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from ctxpack_client import errors
from ctxpack_client.models import SCHEMAS

CLIENT_SRC = Path(__file__).resolve().parents[2] / "clients" / "python" / "ctxpack_client"


@pytest.fixture(scope="module")
def openapi(ctxpack_server: str) -> dict[str, Any]:
    response = httpx.get(f"{ctxpack_server}/openapi.json", timeout=10)
    assert response.status_code == 200
    return response.json()


def _shape(schema: dict[str, Any], defs: dict[str, Any]) -> frozenset[str]:
    """A property's type as a set of names: JSON types, uuid/date-time formats, $ref names,
    enum values; nested arrays as ``array[...]``."""
    if "$ref" in schema:
        return frozenset({schema["$ref"].rsplit("/", 1)[-1]})
    if "anyOf" in schema or "oneOf" in schema:
        out: set[str] = set()
        for part in schema.get("anyOf") or schema.get("oneOf"):
            out |= _shape(part, defs)
        return frozenset(out)
    if "enum" in schema:
        return frozenset(f"enum:{v}" for v in schema["enum"])
    if "const" in schema:
        return frozenset({f"enum:{schema['const']}"})
    kind = schema.get("type")
    if kind == "array":
        return frozenset({"array[" + ",".join(sorted(_shape(schema.get("items", {}), defs))) + "]"})
    if kind == "string" and schema.get("format") in ("uuid", "date-time"):
        return frozenset({schema["format"]})
    if kind == "integer":
        return frozenset({"integer"})
    return frozenset({kind or "any"})


def test_every_client_model_matches_the_server(openapi: dict[str, Any]) -> None:
    server = openapi["components"]["schemas"]
    problems: list[str] = []
    for name, model in SCHEMAS.items():
        if name not in server:
            problems.append(f"{name}: not in the server's schemas")
            continue
        theirs = server[name]
        ours = model.model_json_schema(ref_template="#/components/schemas/{model}")
        defs = ours.get("$defs", {})
        if set(ours["properties"]) != set(theirs.get("properties", {})):
            problems.append(
                f"{name}: properties differ: client-only {sorted(set(ours['properties']) - set(theirs['properties']))}, "
                f"server-only {sorted(set(theirs['properties']) - set(ours['properties']))}"
            )
            continue
        if set(ours.get("required", [])) != set(theirs.get("required", [])):
            problems.append(f"{name}: required differ: {sorted(ours.get('required', []))} vs {sorted(theirs.get('required', []))}")
        for prop, spec in theirs["properties"].items():
            mine, server_shape = _shape(ours["properties"][prop], defs), _shape(spec, server)
            if mine != server_shape:
                problems.append(f"{name}.{prop}: {sorted(mine)} vs server {sorted(server_shape)}")
    assert not problems, "\n".join(problems)


def test_every_endpoint_and_parameter_the_client_calls_exists(openapi: dict[str, Any]) -> None:
    source = (CLIENT_SRC / "_client.py").read_text()
    calls = set(re.findall(r'"(GET|POST|PATCH|DELETE)", f?"(/v1/[^"]*)"', source))
    assert len(calls) >= 12
    paths = {re.sub(r"\{[^}]+\}", "{}", p): {m.upper() for m in ops} for p, ops in openapi["paths"].items()}
    for method, path in calls:
        normal = re.sub(r"\{[^}]+\}", "{}", path)
        assert method in paths.get(normal, set()), f"{method} {path} is not served"
    listed = {p["name"] for p in openapi["paths"]["/v1/memories"]["get"]["parameters"]}
    assert {"namespace", "type", "project", "agent_id", "tag", "key", "offset", "limit"} <= listed
    audit = {p["name"] for p in openapi["paths"]["/v1/audit"]["get"]["parameters"]}
    assert {"action", "cursor", "limit", "full"} <= audit


def test_every_stable_error_code_has_a_class() -> None:
    from service import errors as server_errors

    codes = {
        cls.code for cls in vars(server_errors).values()
        if isinstance(cls, type) and issubclass(cls, server_errors.CtxpackError)
    }
    assert codes <= set(errors.BY_CODE), codes - set(errors.BY_CODE)
    for code, cls in errors.BY_CODE.items():
        raised = errors.from_response(cls.status, {"error": {"code": code, "message": "m"}}, {})
        assert type(raised) is cls
    unknown = errors.from_response(409, {"error": {"code": "brand_new", "message": "m"}}, {})
    assert isinstance(unknown, errors.Conflict) and unknown.code == "brand_new"
