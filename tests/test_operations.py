"""The operation table (service/operations.py) is what the faces say: every MCP tool's audit
action and hints are its operation's, every declared HTTP route exists and answers the
declared model, and the console runs only declared operations."""

from __future__ import annotations

import re
import uuid

from fastapi import FastAPI
from pydantic import BaseModel

from service import operations
from service.mcp.tools import TOOLS
from service.operations import OPERATIONS
from service.schemas.artifacts import ArtifactQuery
from service.schemas.lifecycle import NamespaceRef
from service.schemas.memories import MemoryQuery, MemoryRef, RememberRequest


def test_every_tool_is_an_operation_and_says_what_it_says() -> None:
    for spec in TOOLS:
        op = OPERATIONS[spec.name]
        tool = spec.to_tool()
        assert spec.operation is op
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint == op.read_only, spec.name
        assert tool.annotations.destructive_hint == op.destructive, spec.name
        assert tool.annotations.idempotent_hint == op.idempotent, spec.name
        assert not (op.read_only and op.destructive), spec.name


def test_every_declared_route_exists_with_its_model(app: FastAPI) -> None:
    paths = app.openapi()["paths"]
    for op in OPERATIONS.values():
        if not op.http:
            continue
        method, path = op.http.split(" ", 1)
        route = paths.get(path, {}).get(method.lower())
        assert route is not None, f"{op.name}: no route {op.http}"
        ok = next(v for k, v in route["responses"].items() if k.startswith("2"))
        schema = ok["content"]["application/json"]["schema"]
        assert schema["$ref"].rsplit("/", 1)[-1] == op.output.__name__, op.name
        # A read-only operation's route never writes with PUT/PATCH/DELETE.
        assert not (op.read_only and method in ("PATCH", "DELETE", "PUT")), op.name


def test_the_console_runs_only_declared_operations() -> None:
    import inspect

    from service.console import calls, pages

    source = inspect.getsource(pages) + inspect.getsource(calls)
    assert "AuditAction(" not in source  # no action made up from a string
    used = set(re.findall(r"operations\.([A-Z_]+)", source))
    declared = {name for name in dir(operations) if name.isupper()}
    assert used and used <= declared


def _runs(fn: object, through: str) -> set[str]:
    """The operations ``fn``'s source runs through ``self.<through>(...)`` or
    ``calls.run(...)``: the names after ``operations.``."""
    import inspect

    source = inspect.getsource(fn)  # type: ignore[arg-type]
    return set(re.findall(rf"{through}\(\s*(?:rc,\s*)?operations\.([A-Z_]+)", source))


def test_each_tool_operation_declares_what_the_backends_need() -> None:
    """The backends run an operation from its row alone: a tool's operation declares its
    arguments and domain call, and its route's parameters are fields of its arguments. The
    backends have one entry, ``run``, and no method per operation."""
    from service.mcp.backends import LocalBackend, RemoteBackend

    for spec in TOOLS:
        op = spec.operation
        assert op.request is not None and op.call is not None, op.name
        route = op.http.split(" ", 1)[1]
        assert set(re.findall(r"{(\w+)}", route)) <= set(op.request.model_fields), op.name
    for backend in (LocalBackend, RemoteBackend):
        assert not [name for name in OPERATIONS if hasattr(backend, name)], backend


class _Recording:
    """An HTTP client of ctxpack that records each call and answers an empty model."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, object, object]] = []

    async def call(
        self, method: str, path: str, model: type[BaseModel], *, json: object, params: object
    ) -> BaseModel:
        self.calls.append((method, path, json, params))
        return model.model_construct()


async def test_the_remote_backend_sends_each_argument_where_the_route_takes_it() -> None:
    """Route parameters in the path (quoted), the rest as the query of a GET or DELETE
    (unset ones left out), else as the JSON body (what the caller set)."""
    from service.mcp.backends import RemoteBackend

    client = _Recording()
    remote = RemoteBackend(client)  # type: ignore[arg-type]
    mid, aid = uuid.uuid4(), uuid.uuid4()
    await remote.run(None, operations.FORGET, MemoryRef(memory_id=mid))  # type: ignore[arg-type]
    await remote.run(None, operations.ERASE_NAMESPACE, NamespaceRef(namespace="al ice:s1"))  # type: ignore[arg-type]
    await remote.run(None, operations.RECALL_ARTIFACT, ArtifactQuery(artifact_id=aid, fields="a,b"))  # type: ignore[arg-type]
    await remote.run(None, operations.LIST_MEMORIES, MemoryQuery(type="decision", limit=5))  # type: ignore[arg-type]
    await remote.run(None, operations.REMEMBER, RememberRequest(content="x", namespace="alice"))  # type: ignore[arg-type]
    assert client.calls == [
        ("DELETE", f"/v1/memories/{mid}", None, None),
        ("DELETE", "/v1/namespaces/al%20ice:s1", None, None),
        ("GET", f"/v1/artifacts/{aid}", None, {"fields": "a,b"}),
        ("GET", "/v1/memories", None, {"type": "decision", "offset": 0, "limit": 5}),
        ("POST", "/v1/remember", {"content": "x", "namespace": "alice"}, None),
    ]


def test_each_console_page_declares_the_operation_it_runs() -> None:
    """A page's refusal is audited as its declared operation: it must be the one it runs."""
    from service.console import pages

    declared = dict(pages._PAGE_OPERATIONS)
    assert declared
    for page, op in declared.items():
        ran = {getattr(operations, n) for n in _runs(page, "calls.run")}
        assert ran <= {op}, page.__name__
        assert ran, f"{page.__name__} declares {op.name} and runs nothing"
