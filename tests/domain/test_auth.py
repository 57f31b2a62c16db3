"""domain/auth.py: the key's shape and hash, and the caller's rules (scopes with admin over
all, project reach for reads and the narrower one for writes, namespace prefixes)."""

from __future__ import annotations

import hashlib
import uuid

import pytest

from service.domain.auth import Caller, display_prefix, generate_key, hash_key
from service.errors import (
    NamespaceAccessDenied,
    ProjectAccessDenied,
    ScopeDenied,
    SharedMemoryReadOnly,
)


def caller(
    scopes: tuple[str, ...] = ("read", "write"),
    projects: tuple[str, ...] = (),
    prefixes: tuple[str, ...] = (),
) -> Caller:
    return Caller(uuid.uuid4(), uuid.uuid4(), "k", frozenset(scopes), projects, prefixes)


def test_a_key_is_the_prefix_and_256_random_bits_stored_as_its_sha256() -> None:
    key = generate_key()
    assert key.startswith("ctxp_") and len(key) == len("ctxp_") + 43
    assert generate_key() != key
    assert hash_key(key) == hashlib.sha256(key.encode()).hexdigest()
    assert display_prefix(key) == key[:12] and display_prefix(key) in key


def test_a_scope_is_required_and_admin_implies_every_scope() -> None:
    reader = caller(("read",))
    reader.require("read")
    with pytest.raises(ScopeDenied):
        reader.require("write")
    admin = caller(("admin",))
    for scope in ("read", "write", "admin"):
        admin.require(scope)


def test_reads_reach_the_keys_projects_and_shared_memories() -> None:
    limited = caller(projects=("billing",))
    limited.check_project("billing")
    limited.check_project(None)  # shared memories are readable
    with pytest.raises(ProjectAccessDenied):
        limited.check_project("search")
    caller().check_project("anything")  # no limits: every project


def test_writes_reach_only_the_keys_projects_never_shared_memories() -> None:
    limited = caller(projects=("billing",))
    assert limited.may_write_project("billing")
    assert not limited.may_write_project(None)
    assert not limited.may_write_project("search")
    with pytest.raises(SharedMemoryReadOnly) as shared:
        limited.check_write_project(None, field="supersedes")
    assert shared.value.details.get("field") == "supersedes"
    with pytest.raises(ProjectAccessDenied) as other:
        limited.check_write_project("search")
    assert not isinstance(other.value, SharedMemoryReadOnly)
    unlimited = caller()
    assert unlimited.may_write_project(None) and unlimited.may_write_project("search")


def test_namespace_prefixes_bound_the_caller_segment_wise() -> None:
    alice = caller(prefixes=("alice",))
    alice.check_namespace("alice")
    alice.check_namespace("alice:s1:t1")
    for outside in ("alicex", "bob", "bob:alice"):
        with pytest.raises(NamespaceAccessDenied):
            alice.check_namespace(outside)


def test_a_read_sees_its_namespace_and_ancestors_within_the_prefixes() -> None:
    assert caller().visible_namespaces("alice:s1:t1") == ["alice", "alice:s1", "alice:s1:t1"]
    session_key = caller(prefixes=("alice:s1",))
    assert session_key.visible_namespaces("alice:s1:t1") == ["alice:s1", "alice:s1:t1"]
    with pytest.raises(NamespaceAccessDenied):
        session_key.visible_namespaces("alice:s2")
