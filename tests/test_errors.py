"""errors.py: one error tree. Each error has its HTTP status and a stable code, renders as
the API's ``error`` body, and the tree drawn in the module docstring is the tree in the code
(a new error, or a changed code, must be drawn there)."""

from __future__ import annotations

import inspect
import re

from service import errors
from service.errors import CtxpackError, GateRejected, InvalidInput, SharedMemoryReadOnly

DRAWN = re.compile(
    r"^(?P<indent>[\s│]*)(?P<branch>[├└]── )?(?P<name>\w+) \((?P<status>\d{3}) (?P<code>\w+)"
)


def classes() -> dict[str, type[CtxpackError]]:
    return {
        name: cls for name, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, CtxpackError)
    }  # fmt: skip


def drawn() -> dict[str, tuple[int, str, int]]:
    """The docstring's tree: name -> (status, code, depth)."""
    out = {}
    for line in (errors.__doc__ or "").splitlines():
        match = DRAWN.match(line)
        if match:
            depth = len(match["indent"]) + (1 if match["branch"] else 0)
            out[match["name"]] = (int(match["status"]), match["code"], depth)
    return out


def test_the_drawn_tree_is_the_code() -> None:
    tree = drawn()
    assert set(tree) == set(classes())
    for name, cls in classes().items():
        status, code, _ = tree[name]
        assert (cls.status_code, cls.code) == (status, code), name
    # a child is drawn below its parent
    for name, cls in classes().items():
        parent = cls.__mro__[1]
        if parent is not Exception:
            assert tree[name][2] > tree[parent.__name__][2], name


def test_an_error_renders_as_its_body() -> None:
    error = InvalidInput("items.3.namespace", "bad namespace", errors=[{"field": "x"}])
    assert (error.status_code, error.field) == (422, "items.3.namespace")
    assert error.to_dict() == {
        "code": "validation_error", "message": "bad namespace", "field": "items.3.namespace",
        "errors": [{"field": "x"}],
    }  # fmt: skip
    rejected = GateRejected([{"code": "fragment", "hint": "say more"}])
    assert rejected.to_dict()["reasons"] == [{"code": "fragment", "hint": "say more"}]
    assert "fragment" in rejected.message and rejected.to_dict()["field"] == "content"


def test_a_shared_memory_refusal_is_a_project_refusal_naming_its_field() -> None:
    refused = SharedMemoryReadOnly("supersedes")
    assert refused.code == "project_access_denied" and refused.status_code == 403
    assert refused.to_dict()["field"] == "supersedes"
