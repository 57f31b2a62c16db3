"""docs/architecture.md names, for each rule, the function that enforces it and the tests that
hold it. This test keeps that table honest: every ``file:function`` and every test it names
must exist, so a rename or a deleted test breaks the build rather than the document."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
# `domain/wake.py:build_wake_plan`, `service/calls.py:CallRunner.run`; bare names after it
# in the same cell (`select_wake`) belong to the last file named.
CODE = re.compile(r"`([\w/]+\.py)(?::([\w.]+))?`")
TEST = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?`")
FOLLOW = re.compile(r"`::(\w+)`")


def _names(path: Path) -> set[str]:
    """Every function, class and ``Class.method`` defined in ``path``, and its module-level
    assignments (a table may name an index or a constant)."""
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            names.update(
                f"{node.name}.{n.name}"
                for n in node.body
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            )
        if isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _everywhere() -> set[str]:
    """Every name defined in ``service/``, and every identifier its code or migrations
    spell out (settings, index names), for bare names in a cell."""
    names: set[str] = set()
    for path in [*(ROOT / "service").rglob("*.py"), *(ROOT / "migrations").rglob("*.py")]:
        text = path.read_text()
        names.update(re.findall(r"[A-Za-z_]\w*", text))
        if path.parts[-3:-1] != ("migrations", "versions"):
            names.update(_names(path))
    names.add("asyncio.to_thread")
    return names


def _resolve(rel: str) -> Path:
    for base in (ROOT, ROOT / "service"):
        if (base / rel).is_file():
            return base / rel
    raise AssertionError(f"docs/architecture.md names {rel}, which does not exist")


def _rows() -> list[list[str]]:
    rows = []
    for line in DOC.read_text().splitlines():
        if line.startswith("| **"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_the_table_covers_the_rules() -> None:
    rules = " ".join(row[0] for row in _rows())
    for rule in ("Write gate", "Redaction", "Namespace visibility", "Project scope", "Diary",
                 "Ranking", "Relevance floor", "Facets", "Markdown budget", "Audit", "Wake"):
        assert rule in rules, f"docs/architecture.md has no row for {rule}"


def test_every_function_named_exists() -> None:
    """``file:function`` must be defined in that file; a bare ``name`` after it in the same
    cell must be defined in one of the files the cell names, or somewhere in ``service/``
    (``Caller.visible_namespaces``), or be a name the code spells out (an index, a setting)."""
    missing = []
    for row in _rows():
        cell = row[1] if len(row) > 1 else ""
        tokens = re.findall(r"`[^`]+`", cell)
        files = [_resolve(m.group(1)) for t in tokens if (m := CODE.fullmatch(t))]
        known = set().union(*(_names(f) for f in files)) if files else set()
        known |= {n.split(".", 1)[1] for n in known if "." in n} | _everywhere()
        for token in tokens:
            code = CODE.fullmatch(token)
            if code:
                if code.group(2) and code.group(2) not in _names(_resolve(code.group(1))):
                    missing.append(f"{code.group(1)}:{code.group(2)}")
            elif files and re.fullmatch(r"`[A-Za-z_]\w*(\.\w+)?`", token):
                name = token.strip("`")
                if name not in known and not name.isupper():
                    missing.append(f"{cell[:40]}...: {name}")
    assert missing == []


def test_every_test_named_exists() -> None:
    missing = []
    for row in _rows():
        cell = row[2] if len(row) > 2 else ""
        current: Path | None = None
        for token in re.findall(r"`[^`]+`", cell):
            test = TEST.fullmatch(token)
            follow = FOLLOW.fullmatch(token)
            if test:
                current = ROOT / test.group(1)
                if not current.is_file():
                    missing.append(test.group(1))
                    current = None
                elif test.group(2) and test.group(2) not in _names(current):
                    missing.append(f"{test.group(1)}::{test.group(2)}")
            elif follow and current is not None and follow.group(1) not in _names(current):
                missing.append(f"{current.name}::{follow.group(1)}")
    assert missing == []
