"""Creating, listing and revoking API keys (used by the CLI and the bootstrap)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncSession

from service.domain import auth
from service.domain.caller_cache import CallerCache
from service.domain.namespaces import parse_namespace
from service.domain.redaction.fields import check_identifiers
from service.errors import InvalidInput, NotFound
from service.store import models
from service.store.keys import KeyRepository
from service.store.revocations import notify_revocation


@dataclass(frozen=True)
class CreatedKey:
    key: str
    key_id: uuid.UUID
    org_id: uuid.UUID
    org_name: str


async def create_key(
    session: AsyncSession,
    *,
    org: str,
    name: str | None = None,
    scopes: list[str] | None = None,
    projects: list[str] | None = None,
    namespace_prefixes: list[str] | None = None,
) -> CreatedKey:
    """Create ``org`` if needed and a key in it. Returns the clear key (shown once).

    Args:
        scopes: any of read, write, admin; default read + write.
        projects: limit the key to these projects (empty: all).
        namespace_prefixes: limit the key to these namespace prefixes (empty: all).
    """
    scopes = sorted(set(scopes or ["read", "write"]))
    for scope in scopes:
        if scope not in auth.SCOPES:
            raise InvalidInput("scope", f"unknown scope {scope!r}; one of {', '.join(auth.SCOPES)}")
    prefixes = [parse_namespace(p, "namespace") for p in (namespace_prefixes or [])]
    # The name is every audit row's ``caller`` and the projects are kept as sent: neither is
    # redacted, so one holding a secret is refused, like a memory's project.
    check_identifiers({"name": name})
    for project in projects or []:
        check_identifiers({"projects": project})
    repo = KeyRepository(session)
    org_row = await repo.get_or_create_org(org)
    await repo.ensure_projects(org_row.org_id, list(projects or []))
    clear = auth.generate_key()
    row = await repo.create_key(
        org_id=org_row.org_id,
        name=name or f"{org}-key",
        key_prefix=auth.display_prefix(clear),
        key_hash=auth.hash_key(clear),
        scopes=scopes,
        projects=list(projects or []),
        namespace_prefixes=prefixes,
    )
    return CreatedKey(key=clear, key_id=row.id, org_id=org_row.org_id, org_name=org_row.name)


async def authenticate(session: AsyncSession, key: str) -> auth.Caller | None:
    """The caller behind ``key``, or None when it is unknown or revoked."""
    if not key.startswith(auth.KEY_PREFIX) or len(key) > 200:
        return None
    row = await KeyRepository(session).active_by_hash(auth.hash_key(key))
    if row is None:
        return None
    return caller_of(row)


def caller_of(row: models.ApiKey) -> auth.Caller:
    """The caller an active key's row identifies (its org, scopes and limits)."""
    return auth.Caller(
        org_id=row.org_id,
        key_id=row.id,
        key_name=row.name,
        scopes=frozenset(row.scopes),
        projects=tuple(row.projects),
        namespace_prefixes=tuple(row.namespace_prefixes),
    )


async def revoke_key(
    session: AsyncSession, key_id: str, *, cache: CallerCache | None = None
) -> None:
    """Revoke a key. Every server drops it from its caller cache when ``session`` commits
    (NOTIFY); ``cache``, this process's own, drops it synchronously at that commit."""
    try:
        kid = uuid.UUID(key_id)
    except ValueError as exc:
        raise InvalidInput("key_id", "not a key id (a UUID, see `ctxpack keys list`)") from exc
    key_hash = await KeyRepository(session).revoke(kid)
    if key_hash is None:
        raise NotFound(f"no active key {key_id}")
    await notify_revocation(session, key_hash)
    if cache is not None:
        revoked = key_hash

        def after_commit(_session: object) -> None:
            cache.invalidate(revoked)

        event.listen(session.sync_session, "after_commit", after_commit, once=True)


async def list_keys(
    session: AsyncSession, org: str | None = None
) -> list[tuple[models.ApiKey, str]]:
    """Every key (never its secret) with its org's name, of one org when ``org`` is named
    (none when no org has that name)."""
    repo = KeyRepository(session)
    org_id = None
    if org:
        row = await repo.org_by_name(org)
        if row is None:
            return []
        org_id = row.org_id
    return await repo.list_keys(org_id)


async def bootstrap_admin_key(session: AsyncSession) -> CreatedKey | None:
    """On a database with no keys at all, create org 'default' and an admin key."""
    if await KeyRepository(session).count_keys() > 0:
        return None
    return await create_key(
        session, org="default", name="bootstrap-admin", scopes=["read", "write", "admin"]
    )
