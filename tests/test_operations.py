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
    """The operations ``fn``'s source runs through ``<through>(...)`` (a pattern:
    ``calls.run(...)``, ``calls.call(...)``): the names after ``operations.``."""
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
        ran = {getattr(operations, n) for n in _runs(page, r"calls\.(?:run|call)")}
        assert ran <= {op}, page.__name__
        assert ran, f"{page.__name__} declares {op.name} and runs nothing"


def _domain_targets(fn: object) -> set[object]:
    """The functions ``fn`` (an operation's ``call``) awaits: ``module.function(...)``
    resolved in ``fn``'s module."""
    import ast
    import inspect
    import textwrap

    names = fn.__globals__  # type: ignore[attr-defined]
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))  # type: ignore[arg-type]
    return {
        getattr(names[node.func.value.id], node.func.attr)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in names
    }


def _face_calls(module: object) -> list[tuple[str, object]]:
    """``(where, function)`` for each ``name.attr(...)`` or ``name(...)`` call in
    ``module``'s source, resolved in its globals and its imports (inside functions too)."""
    import ast
    import importlib
    import inspect

    tree = ast.parse(inspect.getsource(module))  # type: ignore[arg-type]
    names = dict(vars(module))
    for node in ast.walk(tree):  # imports inside functions too
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            source = importlib.import_module(node.module)
            for alias in node.names:
                if hasattr(source, alias.name):
                    names.setdefault(alias.asname or alias.name, getattr(source, alias.name))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        target = None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in names:
            target = getattr(names[func.value.id], func.attr, None)
        elif isinstance(func, ast.Name) and func.id in names:
            target = names[func.id]
        if target is not None:
            found.append((f"{module.__name__}:{node.lineno}", target))  # type: ignore[attr-defined]
    return found


# A face that does more than the operation takes, named with the reason.
SPELLED_OUT = {
    # the console's memory list searches text (``text_query``), which GET /v1/memories and
    # the MCP tool do not take
    ("service.console.pages", "list_memories"),
    # PATCH and replay declare no domain call yet (their arguments are a path id plus a body)
    ("service.api.memories", "update_memory"),
    ("service.console.pages", "update_memory"),
}


def test_every_face_reaches_an_operation_through_the_table() -> None:
    """A face (an HTTP route, the console, the MCP backends, the CLI and its lifecycle
    commands) never calls the domain
    function an operation declares: it runs ``Operation.answer``, so a face cannot drift
    from the table (its action, its call, its arguments)."""
    import importlib
    import pkgutil

    import service.api
    import service.cli
    import service.console
    import service.lifecycle
    import service.mcp

    declared = {
        target: op
        for op in OPERATIONS.values()
        if op.call is not None
        for target in _domain_targets(op.call)
    }
    assert operations.memory_service.delete_memory in declared  # type: ignore[attr-defined]
    assert len({op.name for op in declared.values()}) >= 12
    modules = [
        importlib.import_module(info.name)
        for package in (service.api, service.console, service.mcp, service.cli, service.lifecycle)
        for info in pkgutil.iter_modules(package.__path__, package.__name__ + ".")
    ]
    bad = [
        f"{where} calls {getattr(target, '__name__', target)} ({declared[target].name})"
        for module in modules
        for where, target in _face_calls(module)
        if target in declared
        and (module.__name__, getattr(target, "__name__", "")) not in SPELLED_OUT
    ]
    assert bad == []


def test_the_http_routes_open_the_audit_context_of_their_operation() -> None:
    """Each route of a declared operation audits as that operation (``audited(op)``)."""
    import importlib
    import inspect
    import pkgutil

    from fastapi.routing import APIRoute

    import service.api

    routes: dict[str, APIRoute] = {}
    for info in pkgutil.iter_modules(service.api.__path__, "service.api."):
        router = getattr(importlib.import_module(info.name), "router", None)
        for route in router.routes if router is not None else []:
            if isinstance(route, APIRoute):
                routes.update({f"{method} {route.path}": route for method in route.methods})
    for op in OPERATIONS.values():
        if not op.http or op is operations.WAKE:  # wake is POST /v1/context with layer=wake
            continue
        source = inspect.getsource(routes[op.http].endpoint)
        assert f"audited(operations.{_name_of(op)})" in source, op.name


def _name_of(op: object) -> str:
    return next(name for name in dir(operations) if getattr(operations, name) is op)
