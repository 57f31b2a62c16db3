"""The operation table (service/operations.py) is what the faces say: every MCP tool's audit
action and hints are its operation's, every declared HTTP route exists and answers the
declared model, and the console runs only declared operations."""

from __future__ import annotations

import re

from fastapi import FastAPI

from service import operations
from service.mcp.tools import TOOLS
from service.operations import OPERATIONS


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


def test_each_mcp_backend_method_runs_the_operation_of_its_name() -> None:
    """The backends take the audit action, pool, HTTP route and model from the table, so a
    method must name its own operation."""
    from service.mcp.backends import LocalBackend, RemoteBackend

    for backend, through in ((LocalBackend, "_call"), (RemoteBackend, "_forward")):
        for spec in TOOLS:
            method = getattr(backend, spec.operation.name, None)
            if method is None:  # wake runs through context
                continue
            ran = _runs(method, through)
            assert [getattr(operations, n) for n in ran] == [spec.operation], (backend, spec.name)


def test_each_console_page_declares_the_operation_it_runs() -> None:
    """A page's refusal is audited as its declared operation: it must be the one it runs."""
    from service.console import pages

    declared = dict(pages._PAGE_OPERATIONS)
    assert declared
    for page, op in declared.items():
        ran = {getattr(operations, n) for n in _runs(page, "calls.run")}
        assert ran <= {op}, page.__name__
        assert ran, f"{page.__name__} declares {op.name} and runs nothing"
