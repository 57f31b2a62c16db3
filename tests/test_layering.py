"""The import rules of ``service/``, checked by walking every module's syntax tree:

- no import cycles (imports inside functions count; ``if TYPE_CHECKING:`` blocks do not);
- the transports, ``api/``, ``mcp/`` and ``console/``, never import each other (the app
  factory mounts them) and never import ``store/`` (they reach the database through ``domain/`` and the
  call runner);
- ``domain/`` knows no FastAPI, Starlette or MCP types;
- ``config`` and ``schemas/`` import no ``domain/`` (they sit below it);
- SQL text lives in ``store/`` only: no ``sqlalchemy.text`` and no string that reads as a SQL
  statement anywhere else.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "service"
TRANSPORTS = ("service.api", "service.mcp", "service.console")
SQL = re.compile(
    r"^\s*(SELECT\s.+\sFROM\s|INSERT\s+INTO\s|UPDATE\s+\w+\s+SET\s|DELETE\s+FROM\s|"
    r"CREATE\s+(TABLE|INDEX|EXTENSION)\s|ALTER\s+TABLE\s|LISTEN\s|NOTIFY\s|WITH\s+\w+\s+AS\s*\()"
    r"|pg_notify\(|pg_attribute|::regclass",
    re.IGNORECASE | re.DOTALL,
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk_runtime(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node, skipping ``if TYPE_CHECKING:`` bodies."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                todo.extend(child.orelse)
                continue
            todo.append(child)


def _resolve(name: str) -> str | None:
    """The service module ``name`` refers to (the longest known prefix)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(module: str) -> set[str]:
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in _walk_runtime(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            names = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for name in names:
            if name.startswith("service"):
                target = _resolve(name)
                if target is not None and target != module:
                    found.add(target)
    return found


GRAPH = {m: _imports(m) for m in MODULES}


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(GRAPH[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    return found


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_walk_sees_the_package() -> None:
    assert "service.app" in MODULES and "service.calls" in MODULES
    assert "service.calls" in GRAPH["service.api.deps"]
    assert "service.resources" in GRAPH["service.app"]


def test_no_import_cycles() -> None:
    assert _cycles() == []


def test_transports_do_not_import_each_other() -> None:
    bad = [
        (m, t)
        for m, targets in GRAPH.items()
        for t in targets
        for a in TRANSPORTS
        for b in TRANSPORTS
        if a != b and _in(m, a) and _in(t, b)
    ]
    assert bad == []


def test_transports_do_not_import_the_store() -> None:
    bad = [
        (m, t)
        for m, targets in GRAPH.items()
        if any(_in(m, p) for p in TRANSPORTS)
        for t in targets
        if _in(t, "service.store")
    ]
    assert bad == []


def test_config_and_schemas_import_no_domain() -> None:
    """``config`` and ``schemas`` sit below ``domain``: settings and request models are read
    by every layer, so an import of the domain from them drags the rules into all of them."""
    bad = {
        (m, t)
        for m, targets in GRAPH.items()
        if m == "service.config" or _in(m, "service.schemas")
        for t in targets
        if _in(t, "service.domain")
    }
    assert bad == set()
    # the walk sees the schemas' imports (the namespace grammar sits beside them)
    assert "service.schemas.namespaces" in GRAPH["service.schemas.memories"]


def test_domain_knows_no_transport_types() -> None:
    bad = []
    for module, path in MODULES.items():
        if not _in(module, "service.domain"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            bad += [
                (module, n)
                for n in names
                if n.split(".")[0] in {"fastapi", "starlette", "mcp"}
                or any(_in(n, p) for p in TRANSPORTS)
            ]
    assert bad == []


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
        # a bare string statement anywhere is documentation too
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            ids.add(id(node.value))
    return ids


def test_sql_lives_in_the_store() -> None:
    bad = []
    for module, path in MODULES.items():
        if _in(module, "service.store"):
            continue
        tree = ast.parse(path.read_text())
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "sqlalchemy":
                bad += [(module, "sqlalchemy.text") for a in node.names if a.name == "text"]
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docs
                and SQL.search(node.value)
            ):
                bad.append((module, node.value[:60]))
    assert bad == []


def test_the_rules_catch_what_they_should() -> None:
    """The SQL pattern recognises statements, and not prose."""
    assert SQL.search("SELECT id FROM memories WHERE org_id = :org")
    assert SQL.search("SELECT pg_notify(:channel, :hash)")
    assert SQL.search("LISTEN ctxpack_keys")
    assert not SQL.search("select the memories that matter")
    assert not SQL.search("Update the namespace")


def _private_imports(module: str) -> list[str]:
    """``from service.x import _y`` in ``module`` where ``service.x`` is another module."""
    tree = ast.parse(MODULES[module].read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("service"):
            if node.module == module:
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"{module}: from {node.module} import {alias.name}")
    return found


def test_no_private_name_is_imported_across_modules() -> None:
    """A private name used elsewhere is public in all but name: make it public or move it."""
    found = [line for m in sorted(MODULES) for line in _private_imports(m)]
    assert found == []


def test_the_benchmarks_and_tools_import_no_private_name() -> None:
    """The same rule for ``bench/`` and ``tools/``: they reach the service, and each other,
    through public names only (a private name there is one the service may change freely)."""
    found = []
    for path in sorted([*(ROOT / "bench").rglob("*.py"), *(ROOT / "tools").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                ("service", "bench", "tools")
            ):
                found += [
                    f"{path.relative_to(ROOT)}: from {node.module} import {a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    assert found == []


def test_one_store_method_writes_memory_rows() -> None:
    """``MemoryRepository.insert_rows`` is the only INSERT into memories (the benchmarks'
    bulk COPY in store/bulk.py aside): a write rule can't be skipped by another INSERT."""
    writes = re.compile(r"insert\(\s*Memory\s*\)|(?i:INSERT\s+INTO\s+memories\b)|(?<![\w.])Memory\(")
    found = [
        name for name, path in MODULES.items()
        if name not in ("service.store.memories", "service.store.models")
        and writes.search(path.read_text())
    ]
    assert found == []
    assert len(writes.findall(MODULES["service.store.memories"].read_text())) == 1
