"""A replay sees only what both the replaying key and the recorded call's key may see."""

from __future__ import annotations

import pytest

from service.domain.audit.replay import narrow_prefixes, narrow_projects


@pytest.mark.parametrize(
    ("a", "b", "both"),
    [
        ((), (), ()),
        ((), ("alice",), ("alice",)),
        (("alice",), (), ("alice",)),
        (("alice",), ("alice:s1",), ("alice:s1",)),
        (("alice:s1",), ("alice",), ("alice:s1",)),
        (("alice", "bob"), ("bob:s2", "carol"), ("bob:s2",)),
        (("alice:s1", "alice:s2"), ("alice",), ("alice:s1", "alice:s2")),
        (("alice",), ("alicex",), None),
        (("alice:s1",), ("alice:s2",), None),
    ],
)
def test_narrow_prefixes(
    a: tuple[str, ...], b: tuple[str, ...], both: tuple[str, ...] | None
) -> None:
    assert narrow_prefixes(a, b) == both


@pytest.mark.parametrize(
    ("a", "b", "both"),
    [
        ((), (), ()),
        (("p1",), (), ("p1",)),
        ((), ("p2",), ("p2",)),
        (("p1", "p2"), ("p2", "p3"), ("p2",)),
        (("p1",), ("p2",), None),
    ],
)
def test_narrow_projects(
    a: tuple[str, ...], b: tuple[str, ...], both: tuple[str, ...] | None
) -> None:
    assert narrow_projects(a, b) == both
