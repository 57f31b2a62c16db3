"""API keys and the caller they identify.

A key is ``ctxp_`` + 43 url-safe characters (256 random bits). Only its SHA-256 is stored:
with that much entropy a slow hash adds nothing, and auth stays one index lookup.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass, field

from service.domain import namespaces
from service.errors import (
    NamespaceAccessDenied,
    ProjectAccessDenied,
    ScopeDenied,
    SharedMemoryReadOnly,
)

KEY_PREFIX = "ctxp_"
SCOPES = ("read", "write", "admin")


def generate_key() -> str:
    """A new random API key, shown once and never stored."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def display_prefix(key: str) -> str:
    """The part of a key that may be shown in listings to recognise it."""
    return key[:12]


@dataclass(frozen=True)
class Caller:
    """Who is calling: the key's org, scopes and limits. Every domain call takes one."""

    org_id: uuid.UUID
    key_id: uuid.UUID
    key_name: str
    scopes: frozenset[str]
    projects: tuple[str, ...] = field(default_factory=tuple)
    namespace_prefixes: tuple[str, ...] = field(default_factory=tuple)

    def require(self, scope: str) -> None:
        """Raise ``ScopeDenied`` unless the key has ``scope`` (admin implies every scope)."""
        if scope not in self.scopes and "admin" not in self.scopes:
            raise ScopeDenied(scope)

    def check_project(self, project: str | None) -> None:
        """Raise ``ProjectAccessDenied`` when the key is limited to projects and ``project``
        is not one of them."""
        if project is not None and self.projects and project not in self.projects:
            raise ProjectAccessDenied(project)

    def may_write_project(self, project: str | None) -> bool:
        """Write reach, narrower than read reach: a key limited to projects writes only into
        those projects. Shared (project-less) memories are read-only to it: it reads and links
        to them, but cannot create, change, supersede, re-project or erase them; only a key
        without project limits writes those (docs/isolation.md)."""
        if not self.projects:
            return True
        return project is not None and project in self.projects

    def check_write_project(self, project: str | None, field: str = "project") -> None:
        """Raise unless the key may write memories of ``project`` (see ``may_write_project``):
        ``ProjectAccessDenied`` for another project, ``SharedMemoryReadOnly`` for none."""
        if self.may_write_project(project):
            return
        if project is None:
            raise SharedMemoryReadOnly(field)
        raise ProjectAccessDenied(project)

    def check_namespace(self, namespace: str) -> None:
        if not namespaces.allowed(namespace, list(self.namespace_prefixes)):
            raise NamespaceAccessDenied(namespace)

    def visible_namespaces(self, namespace: str) -> list[str]:
        """Namespaces a read at ``namespace`` covers (own + ancestors within the key's prefixes)."""
        self.check_namespace(namespace)
        return namespaces.visible_namespaces(namespace, list(self.namespace_prefixes))
