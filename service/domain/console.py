"""The rules behind the web console (service/console): its sign-in sessions, and the read
models of its pages that no API endpoint already serves.

Sessions. Signing in with an API key creates a session row and gives the browser a random
256-bit token (the cookie); only the token's SHA-256 is stored, and the key itself is never
kept, logged or sent back. A session lives ``SESSION_HOURS`` at most, ends at sign-out, and
ends at once when its key is revoked (every lookup joins the active key). Each session has
its own CSRF token, which every state-changing form must carry.

Reach. Every read here is bound to the caller's org, namespace prefixes and projects, like
the API's: a memory, audit row or key of another org, or outside the key's limits, is
"not found", exactly as one that does not exist. The overview needs ``read``; the keys page
needs ``admin``, and an admin key limited to projects or namespaces may only see, create and
revoke keys within its own limits (a key can never mint a wider one).
"""

from __future__ import annotations

import dataclasses
import hashlib
import secrets
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from service.domain import audit as audit_service
from service.domain import auth, namespaces
from service.domain import keys as key_service
from service.domain.audit import AuditContext
from service.domain.audit.record import AuditAction
from service.domain.auth import Caller
from service.domain.caller_cache import CallerCache
from service.domain.facets import facet_of
from service.domain.rate_limit import Limiter
from service.errors import InvalidInput, NotFound, PermissionDenied
from service.store.audit import AuditRepository
from service.store.console import ConsoleReadRepository, ConsoleSessionRepository
from service.store.models import ApiKey, Memory
from service.store.retrieval import Scope

SESSION_HOURS = 12
SERIES_DAYS = 14
TOP_NAMESPACES = 15
RECENT_WRITES = 10
TREE_USERS_PER_PAGE = 100


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class ConsoleSession:
    """A live console session: who it acts as, and its CSRF token."""

    caller: Caller
    csrf_token: str
    session_id: uuid.UUID | None


async def start_session(session: AsyncSession, caller: Caller) -> tuple[str, ConsoleSession]:
    """Open a session for an authenticated ``caller``. Returns the cookie's token (never
    stored) and the session."""
    token = secrets.token_urlsafe(32)
    csrf = secrets.token_urlsafe(32)
    row = await ConsoleSessionRepository(session).create(
        org_id=caller.org_id,
        key_id=caller.key_id,
        token_hash=_hash(token),
        csrf_token=csrf,
        expires_at=datetime.now(UTC) + timedelta(hours=SESSION_HOURS),
    )
    return token, ConsoleSession(caller=caller, csrf_token=csrf, session_id=row.id)


async def resume_session(session: AsyncSession, token: str) -> ConsoleSession | None:
    """The live session behind a cookie's token, or None (unknown, expired, key revoked)."""
    if not token or len(token) > 100:
        return None
    found = await ConsoleSessionRepository(session).active(_hash(token))
    if found is None:
        return None
    row, key = found
    return ConsoleSession(
        caller=key_service.caller_of(key), csrf_token=row.csrf_token, session_id=row.id
    )


async def end_session(session: AsyncSession, token: str) -> None:
    """Sign out: the session row goes, so the cookie is worthless even if kept."""
    await ConsoleSessionRepository(session).end(_hash(token))


# --- overview -----------------------------------------------------------------------------


@dataclass
class Overview:
    total: int
    by_namespace: list[tuple[str, int]]
    by_type: list[tuple[str, int]]
    by_facet: list[tuple[str, int]]
    recent: list[Memory]
    days: list[str]
    rejections: dict[str, list[int]]
    redactions: dict[str, list[int]]
    pack_calls: list[int]
    gated_out: list[int]


def _series(days: list[str], rows: list[tuple[datetime, str, int]]) -> dict[str, list[int]]:
    index = {d: i for i, d in enumerate(days)}
    out: dict[str, list[int]] = {}
    for day, name, n in rows:
        i = index.get(day.date().isoformat())
        if i is not None:
            out.setdefault(name, [0] * len(days))[i] += n
    return dict(sorted(out.items(), key=lambda kv: -sum(kv[1])))


async def overview(session: AsyncSession, caller: Caller, now: datetime | None = None) -> Overview:
    """Counts by namespace, type and facet; the latest writes; and per-day series of the
    last ``SERIES_DAYS`` days: gate rejections by reason, redactions by label, pack calls and
    the candidates they gated out. Bound to the caller's reach."""
    caller.require("read")
    repo = ConsoleReadRepository(session)
    pre, proj = caller.namespace_prefixes, caller.projects
    by_type = await repo.counts_by("type", caller.org_id, pre, proj, 100)
    facets: dict[str, int] = {}
    for t, n in by_type:
        facets[facet_of(t)] = facets.get(facet_of(t), 0) + n
    now = now or datetime.now(UTC)
    start = (now - timedelta(days=SERIES_DAYS - 1)).replace(
        hour=0, minute=0, second=0, microsecond=0
    )
    days = [(start + timedelta(days=i)).date().isoformat() for i in range(SERIES_DAYS)]
    f = dataclasses.replace(audit_service.visibility(caller), since=start)
    await audit_service.settle(session)
    packs = await repo.pack_series(f)
    pack_calls = [0] * SERIES_DAYS
    gated = [0] * SERIES_DAYS
    for day, n, g in packs:
        if day.date().isoformat() in days:
            i = days.index(day.date().isoformat())
            pack_calls[i] += n
            gated[i] += g
    return Overview(
        total=sum(n for _, n in by_type),
        by_namespace=await repo.counts_by("namespace", caller.org_id, pre, proj, TOP_NAMESPACES),
        by_type=by_type,
        by_facet=sorted(facets.items(), key=lambda kv: -kv[1]),
        recent=await repo.recent(caller.org_id, pre, proj, RECENT_WRITES),
        days=days,
        rejections=_series(days, await repo.rejection_series(f)),
        redactions=_series(days, await repo.redaction_series(f)),
        pack_calls=pack_calls,
        gated_out=gated,
    )


# --- namespaces -------------------------------------------------------------------------


@dataclass
class NamespaceNode:
    name: str
    path: str
    own: int = 0
    total: int = 0
    children: list[NamespaceNode] = field(default_factory=list)


async def namespace_tree(
    session: AsyncSession, caller: Caller, *, open_user: str | None, page: int
) -> tuple[list[NamespaceNode], int]:
    """The user -> session -> task tree of the namespaces holding memories: one page of
    ``TREE_USERS_PER_PAGE`` users (by name) with their subtree's count, and the user
    ``open_user`` (if on the page) opened into its sessions and tasks, each node with its
    own count and its subtree's. Returns the roots and the number of users."""
    caller.require("read")
    repo = ConsoleReadRepository(session)
    pre, proj = caller.namespace_prefixes, caller.projects
    users, total = await repo.user_counts(
        caller.org_id, pre, proj, (page - 1) * TREE_USERS_PER_PAGE, TREE_USERS_PER_PAGE
    )
    roots = [NamespaceNode(name=u, path=u, total=n) for u, n in users]
    for root in roots:
        if root.path != open_user:
            continue
        nodes = {root.path: root}
        for ns, n in await repo.subtree_counts(caller.org_id, pre, proj, root.path):
            for path in namespaces.ancestors(ns)[1:]:
                if path not in nodes:
                    node = nodes[path] = NamespaceNode(name=path.rsplit(":", 1)[-1], path=path)
                    nodes[path.rpartition(":")[0]].children.append(node)
                nodes[path].total += n
            nodes[ns].own += n
    return roots, total


# --- a memory's surroundings --------------------------------------------------------------


async def supersession_chain(
    session: AsyncSession, caller: Caller, memory_id: uuid.UUID
) -> list[tuple[uuid.UUID, str, uuid.UUID | None]]:
    """The chain of memories that replaced one another through ``memory_id``, oldest first;
    only memories within the key's reach appear."""
    caller.require("read")
    return await ConsoleReadRepository(session).supersession(
        caller.org_id, memory_id, caller.namespace_prefixes, caller.projects
    )


async def nearest_misses(
    session: AsyncSession,
    caller: Caller,
    *,
    namespace: str,
    project: str | None,
    agent_id: str | None,
    vector: list[float],
    exclude: list[uuid.UUID],
    k: int = 5,
) -> list[tuple[uuid.UUID, str, str, float]]:
    """The memories a pack's scope holds that are closest to its query by cosine but were not
    in the pack: (id, type, name, cosine). Same scope as the pack (its namespace and
    ancestors, the key's projects, no other agent's diary, not superseded)."""
    caller.require("read")
    scope = Scope(
        org_id=caller.org_id,
        namespaces=caller.visible_namespaces(namespace),
        project=project,
        key_projects=list(caller.projects),
        agent_id=agent_id,
    )
    return await ConsoleReadRepository(session).nearest_misses(scope, vector, exclude, k)


# --- keys (admin) -------------------------------------------------------------------------


def _within_limits(caller: Caller, projects: list[str], prefixes: list[str]) -> bool:
    """True when a key limited to ``projects``/``prefixes`` reaches no further than ``caller``."""
    if caller.projects and (not projects or not set(projects) <= set(caller.projects)):
        return False
    if caller.namespace_prefixes:
        if not prefixes:
            return False
        allowed = list(caller.namespace_prefixes)
        if not all(namespaces.allowed(p, allowed) for p in prefixes):
            return False
    return True


@dataclass(frozen=True)
class KeyView:
    id: uuid.UUID
    name: str
    prefix: str
    scopes: list[str]
    projects: list[str]
    namespace_prefixes: list[str]
    created_at: datetime
    revoked_at: datetime | None
    is_self: bool


def _view(row: ApiKey, caller: Caller) -> KeyView:
    return KeyView(
        id=row.id,
        name=row.name,
        prefix=row.key_prefix,
        scopes=sorted(row.scopes),
        projects=list(row.projects),
        namespace_prefixes=list(row.namespace_prefixes),
        created_at=row.created_at,
        revoked_at=row.revoked_at,
        is_self=row.id == caller.key_id,
    )


async def list_keys(session: AsyncSession, caller: Caller) -> list[KeyView]:
    """The org's keys within the admin's limits (never a secret: names, prefixes, limits)."""
    caller.require("admin")
    rows = await ConsoleReadRepository(session).keys(caller.org_id)
    return [
        _view(r, caller)
        for r in rows
        if _within_limits(caller, list(r.projects), list(r.namespace_prefixes))
    ]


async def create_key(
    session: AsyncSession,
    caller: Caller,
    ctx: AuditContext,
    *,
    name: str,
    scopes: list[str],
    projects: list[str],
    namespace_prefixes: list[str],
) -> key_service.CreatedKey:
    """Create a key in the caller's org, reaching no further than the caller's own key.
    The clear key is returned once and never stored; the audit row holds its id only."""
    caller.require("admin")
    name = name.strip()
    if not name or len(name) > 200 or "\x00" in name:
        raise InvalidInput("name", "a key name is 1-200 characters")
    if not scopes:
        raise InvalidInput("scopes", "choose at least one scope")
    for project in projects:
        if not auth_slug(project):
            raise InvalidInput("projects", "a project id is 1-128 characters of [A-Za-z0-9_.-]")
    prefixes = [namespaces.parse_namespace(p, "namespace_prefixes") for p in namespace_prefixes]
    if not _within_limits(caller, projects, prefixes):
        raise PermissionDenied("A key may only create keys within its own projects and namespaces")
    org = await ConsoleReadRepository(session).org_name(caller.org_id)
    created = await key_service.create_key(
        session,
        org=org,
        name=name,
        scopes=scopes,
        projects=projects,
        namespace_prefixes=prefixes,
    )
    ctx.request = {
        "name": name,
        "scopes": sorted(scopes),
        "projects": projects,
        "namespace_prefixes": prefixes,
    }
    await audit_service.record(
        session, ctx, outcome="created", status_code=201, details={"key_id": str(created.key_id)}
    )
    return created


async def revoke_key(
    session: AsyncSession,
    caller: Caller,
    ctx: AuditContext,
    key_id: uuid.UUID,
    *,
    cache: CallerCache | None = None,
) -> None:
    """Revoke a key of the caller's org within its limits; its console sessions end at once.
    Another org's key, or one outside the limits, is not found."""
    caller.require("admin")
    row = await ConsoleReadRepository(session).key(caller.org_id, key_id)
    if row is None or not _within_limits(caller, list(row.projects), list(row.namespace_prefixes)):
        raise NotFound(f"No key {key_id}")
    if row.revoked_at is not None:
        raise InvalidInput("key_id", "this key is already revoked")
    await key_service.revoke_key(session, str(key_id), cache=cache)
    await ConsoleSessionRepository(session).end_for_key(caller.org_id, key_id)
    ctx.request = {"key_id": str(key_id)}
    await audit_service.record(
        session, ctx, outcome="revoked", status_code=200, details={"key_id": str(key_id)}
    )


async def memory_names(
    session: AsyncSession, caller: Caller, ids: list[uuid.UUID]
) -> dict[uuid.UUID, str]:
    """Names of the memories among ``ids`` that the caller may read (others are left out)."""
    caller.require("read")
    return await ConsoleReadRepository(session).names(
        caller.org_id, ids, caller.namespace_prefixes, caller.projects
    )


def auth_slug(value: str) -> bool:
    import re

    return re.fullmatch(r"[A-Za-z0-9_.\-]{1,128}", value) is not None


def scopes_of(values: list[str]) -> list[str]:
    """Validate a scope list from a form."""
    for s in values:
        if s not in auth.SCOPES:
            raise InvalidInput("scopes", f"unknown scope; one of {', '.join(auth.SCOPES)}")
    return sorted(set(values))


# --- sign-in attempts --------------------------------------------------------------------

SIGN_IN_ORG = uuid.uuid5(uuid.NAMESPACE_URL, "ctxpack:console-sign-in")
"""Where refused sign-ins are throttled and audited: an unknown key names no org, so they
live under this reserved id (no org has it; operators read them with SQL or the CLI)."""


def _sign_in_bucket(address: str) -> uuid.UUID:
    return uuid.uuid5(SIGN_IN_ORG, address)


async def admit_sign_in(limiter: Limiter | None, address: str) -> float:
    """Take one sign-in attempt for the client ``address`` from the shared limiter (every
    attempt counts, so guessing keys from one address is slow whatever the outcome).
    Returns 0 when it may go ahead, else the seconds until it may."""
    if limiter is None:
        return 0.0
    return await limiter.acquire(SIGN_IN_ORG, _sign_in_bucket(address))


async def record_refused_sign_in(
    session: AsyncSession, address: str, *, status_code: int, outcome: str
) -> None:
    """An audit row for a sign-in that failed (401: unknown or revoked key) or was
    throttled (429): the client's address, never the key that was tried."""
    await AuditRepository(session).add(
        org_id=SIGN_IN_ORG,
        caller="console",
        action=AuditAction.CONSOLE_LOGIN,
        request={"client": address[:200]},
        outcome=outcome,
        status_code=status_code,
        latency_ms=0.0,
    )
