"""The console's pages under /ui: thin handlers that parse a form or query, make their
call through ``calls.ConsoleCalls`` (the same domain functions, scopes, rate limit, unit of
work and audit rows as the HTTP API) and render a template. No SQL and no rules here.

Every id in a URL is parsed here; a malformed id, an id of another org and an id that does
not exist all get the same not-found page.
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar, get_args

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from service import operations
from service.console import calls as console_calls
from service.console import charts, security
from service.console.calls import ConsoleCalls
from service.domain import audit as audit_service
from service.domain import console as console_service
from service.domain import memories as memory_service
from service.domain.audit import AuditContext
from service.domain.audit import replay as audit_replay
from service.domain.console import ConsoleSession
from service.errors import CtxpackError, GateRejected, InvalidInput, NotFound
from service.operations import Operation
from service.schemas.audit import AuditQuery
from service.schemas.context import ContextRequest, Intent, Layer
from service.schemas.memories import MemoryPatch, MemoryRef, MemoryType

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=str(HERE / "templates"))
MEMORY_TYPES = list(get_args(MemoryType))
INTENTS = list(get_args(Intent))
LAYERS = list(get_args(Layer))
PAGE_SIZE = 25
AUDIT_PAGE = 50


def _link(url: str | None) -> Markup:
    """A stored url as a link only when it is http(s); anything else (javascript:, data:,
    relative) is shown as inert text."""
    if not url:
        return Markup("")
    text = escape(url)
    lowered = url.strip().lower()
    if lowered.startswith(("http://", "https://")) and not any(c in url for c in "\"'<> \t\n"):
        return Markup(f'<a href="{text}" rel="noopener noreferrer nofollow">{text}</a>')
    return Markup(f'<span class="inert-url">{text}</span>')


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else ""


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False)


templates.env.filters["link"] = _link
templates.env.filters["when"] = _when
templates.env.filters["pretty"] = _pretty


class SignInRequired(Exception):
    """No live session: the page answers with a redirect to the sign-in form."""


class ConsoleRoute(APIRoute):
    """Renders the console's failures as pages (the API renders them as JSON)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except SignInRequired:
                return RedirectResponse("/ui/login", status_code=303)
            except NotFound:
                return _error(
                    request, 404, "Not found", "Nothing here, or nothing this key may see."
                )
            except CtxpackError as exc:
                await _audit_refusal(request, self.endpoint, exc)
                return _error(
                    request, exc.status_code, exc.code, exc.message, exc.details.get("field")
                )

        return route


# The audited call each page makes, declared on the page (``@audited(operation)``); pages
# without one are unaudited views.
_PAGE_OPERATIONS: dict[Callable[..., Any], Operation[Any, Any]] = {}

Page = TypeVar("Page", bound=Callable[..., Any])


def audited(operation: Operation[Any, Any]) -> Callable[[Page], Page]:
    """Declare the operation a page runs (service/operations.py): a refusal before the
    call runner (a bad form field) is audited as that operation's, as the API audits it."""

    def mark(page: Page) -> Page:
        _PAGE_OPERATIONS[page] = operation
        return page

    return mark


async def _audit_refusal(
    request: Request, page: Callable[..., Any], error: CtxpackError
) -> None:
    """A signed-in page's call refused before it reached the call runner (a bad form
    field, a missing confirmation): audited as the API audits the same call's 422. A
    failure inside the runner has its row already."""
    console: ConsoleSession | None = getattr(request.state, "console", None)
    action = _PAGE_OPERATIONS.get(page)
    if console is None or action is None or getattr(request.state, "console_call", False):
        return
    await ConsoleCalls(request, console).refuse(action.action, error)


def _error(
    request: Request, status: int, title: str, message: str, field: str | None = None
) -> HTMLResponse:
    console = getattr(request.state, "console", None)
    return templates.TemplateResponse(
        request,
        "error.html",
        {**_base(console), "status": status, "title": title, "message": message, "field": field},
        status_code=status,
    )


router = APIRouter(prefix="/ui", route_class=ConsoleRoute, include_in_schema=False)


def _base(console: ConsoleSession | None) -> dict[str, Any]:
    if console is None:
        return {"me": None, "csrf": "", "can_write": False, "is_admin": False}
    caller = console.caller
    return {
        "me": caller,
        "csrf": console.csrf_token,
        "can_write": "write" in caller.scopes or "admin" in caller.scopes,
        "is_admin": "admin" in caller.scopes,
    }


async def _session(request: Request) -> tuple[ConsoleSession, ConsoleCalls]:
    token = request.cookies.get(security.SESSION_COOKIE, "")
    console = await console_calls.resume(request, token) if token else None
    if console is None:
        raise SignInRequired()
    request.state.console = console
    return console, ConsoleCalls(request, console)


async def _form(request: Request, console: ConsoleSession) -> dict[str, str]:
    """The posted form, after its CSRF token is checked. Postgres text takes no NUL, so a
    field holding one is refused here, naming it (the API's JsonGuard does this for JSON)."""
    form = await request.form()
    values: dict[str, str] = {}
    for k, v in form.multi_items():
        if not isinstance(v, str):
            continue
        if "\x00" in v:
            raise InvalidInput(k, "NUL characters are not allowed in text")
        values[k] = v
    security.check_csrf(request, console.csrf_token, values.get("csrf"))
    return values


def _page(request: Request, console: ConsoleSession | None, name: str, **ctx: Any) -> HTMLResponse:
    return templates.TemplateResponse(request, name, {**_base(console), **ctx})


def _uuid(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise NotFound("not found") from None


def _opt(value: str | None) -> str | None:
    value = (value or "").strip()
    return value or None


def _int(value: str | None, field: str, default: int, lo: int, hi: int) -> int:
    if not _opt(value):
        return default
    try:
        n = int(str(value))
    except ValueError:
        raise InvalidInput(field, f"{field} must be a whole number") from None
    if not lo <= n <= hi:
        raise InvalidInput(field, f"{field} must be between {lo} and {hi}")
    return n


def _invalid(exc: ValidationError) -> InvalidInput:
    errors = exc.errors()
    if not errors:
        return InvalidInput("form", "form: invalid value")
    field = ".".join(str(p) for p in errors[0]["loc"]) or "form"
    return InvalidInput(field, f"{field}: {errors[0]['msg']}")


# --- sign-in ------------------------------------------------------------------------------


@router.get("/login", response_class=HTMLResponse)
async def login_form(request: Request) -> Response:
    token = security.new_login_token()
    response = _page(request, None, "login.html", login_csrf=token, failed=False)
    security.set_login_cookie(response, request, token)
    return response


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request) -> Response:
    form = await request.form()
    sent = form.get("csrf")
    security.check_csrf(
        request,
        request.cookies.get(security.LOGIN_CSRF_COOKIE, ""),
        sent if isinstance(sent, str) else None,
    )
    key = form.get("key")
    wait = await console_calls.admit_sign_in(request)
    if wait > 0:
        await console_calls.refused_sign_in(request, status_code=429, outcome="rate_limited")
        token = security.new_login_token()
        retry = max(1, math.ceil(wait))
        response = _page(
            request, None, "login.html", login_csrf=token, failed=True, throttled=retry
        )
        response.status_code = 429
        response.headers["Retry-After"] = str(retry)
        security.set_login_cookie(response, request, token)
        return response
    started = await console_calls.sign_in(request, key) if isinstance(key, str) and key else None
    if started is None:
        await console_calls.refused_sign_in(request, status_code=401, outcome="failed")
        token = security.new_login_token()
        response = _page(request, None, "login.html", login_csrf=token, failed=True)
        response.status_code = 401
        security.set_login_cookie(response, request, token)
        return response
    cookie, _ = started
    redirect = RedirectResponse("/ui/", status_code=303)
    security.set_session_cookie(redirect, request, cookie)
    redirect.delete_cookie(security.LOGIN_CSRF_COOKIE, path=security.PREFIX)
    return redirect


@router.post("/logout")
async def logout(request: Request) -> Response:
    console, _ = await _session(request)
    await _form(request, console)
    await console_calls.sign_out(request, console, request.cookies.get(security.SESSION_COOKIE, ""))
    response = RedirectResponse("/ui/login", status_code=303)
    security.clear_session_cookie(response, request)
    return response


# --- overview and namespaces -----------------------------------------------------------


@router.get("", response_class=HTMLResponse)
@router.get("/", response_class=HTMLResponse)
async def overview(request: Request) -> Response:
    console, calls = await _session(request)
    data = await calls.read(lambda s: console_service.overview(s, console.caller))
    return _page(
        request,
        console,
        "overview.html",
        data=data,
        ns_chart=charts.bars(data.by_namespace),
        type_chart=charts.bars(data.by_type),
        facet_chart=charts.bars(data.by_facet),
        rejections_chart=charts.stacked(data.days, data.rejections),
        redactions_chart=charts.stacked(data.days, data.redactions),
        packs_chart=charts.stacked(data.days, {"pack calls": data.pack_calls}),
        gated_chart=charts.stacked(data.days, {"gated out": data.gated_out}),
    )


@router.get("/namespaces", response_class=HTMLResponse)
async def namespaces(request: Request) -> Response:
    console, calls = await _session(request)
    open_user = _opt(request.query_params.get("open"))
    page = _int(request.query_params.get("page"), "page", 1, 1, 100_000)
    roots, total = await calls.read(
        lambda s: console_service.namespace_tree(s, console.caller, open_user=open_user, page=page)
    )
    per = console_service.TREE_USERS_PER_PAGE
    return _page(
        request,
        console,
        "namespaces.html",
        roots=roots,
        users=total,
        open_user=open_user,
        page=page,
        pages=max(1, -(-total // per)),
    )


# --- memories -----------------------------------------------------------------------------


@router.get("/memories", response_class=HTMLResponse)
@audited(operations.LIST_MEMORIES)
async def memories(request: Request) -> Response:
    console, calls = await _session(request)
    q = request.query_params
    filters = {k: _opt(q.get(k)) for k in ("ns", "type", "project", "agent", "tag", "q")}
    page = _int(q.get("page"), "page", 1, 1, 40_000)
    if filters["type"] is not None and filters["type"] not in MEMORY_TYPES:
        raise InvalidInput("type", "unknown memory type")
    ns = filters["ns"]
    namespace = None if ns is None else ns if ns == "*" or ns.endswith(":*") else ns + ":*"

    async def work(session: AsyncSession, ctx: AuditContext) -> Any:
        return await memory_service.list_memories(
            session,
            console.caller,
            ctx,
            namespace=namespace,
            type_=filters["type"],
            project=filters["project"],
            agent_id=filters["agent"],
            tag=filters["tag"],
            offset=(page - 1) * PAGE_SIZE,
            limit=PAGE_SIZE,
            text_query=filters["q"],
        )

    result = await calls.run(operations.LIST_MEMORIES, work)
    keep = {k: v for k, v in filters.items() if v}
    return _page(
        request,
        console,
        "memories.html",
        result=result,
        filters=filters,
        keep=keep,
        page=page,
        pages=max(1, -(-result.total // PAGE_SIZE)),
        types=MEMORY_TYPES,
    )


@router.get("/memories/{memory_id}", response_class=HTMLResponse)
@audited(operations.GET_MEMORY)
async def memory(request: Request, memory_id: str) -> Response:
    console, calls = await _session(request)
    mid = _uuid(memory_id)

    async def work(session: AsyncSession, ctx: AuditContext) -> Any:
        item = await operations.GET_MEMORY.answer(
            calls.state, session, console.caller, ctx, MemoryRef(memory_id=mid)
        )
        chain = await console_service.supersession_chain(session, console.caller, mid)
        trail = await audit_service.list_audit(
            session, console.caller, AuditQuery(memory_id=mid, limit=50)
        )
        return item, chain, trail

    item, chain, trail = await calls.run(operations.GET_MEMORY, work)
    return _page(request, console, "memory.html", m=item, chain=chain, trail=trail)


def _newlines(text: str) -> str:
    """``text`` with CRLF and lone CR line ends as LF: a browser sends a textarea's lines
    with CRLF whatever the stored text had."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _one_line(text: str) -> str:
    """``text`` as a browser sends an ``<input type=text>`` holding it: no line breaks."""
    return text.replace("\r", "").replace("\n", "")


def _content_sha(text: str) -> str:
    """The edit form's fingerprint of a memory's content, line ends aside: content that
    comes back with only its line ends changed is unchanged, and is not written."""
    return hashlib.sha256(_newlines(text).encode()).hexdigest()


@router.get("/memories/{memory_id}/edit", response_class=HTMLResponse)
@audited(operations.GET_MEMORY)
async def edit_form(request: Request, memory_id: str) -> Response:
    console, calls = await _session(request)
    console.caller.require("write")
    mid = _uuid(memory_id)
    item = await calls.call(operations.GET_MEMORY, MemoryRef(memory_id=mid))
    return _page(
        request,
        console,
        "edit.html",
        m=item,
        types=MEMORY_TYPES,
        content=item.content,
        sha=_content_sha(item.content),
        tags=", ".join(item.tags),
        rejected=None,
        sent=None,
    )


@router.post("/memories/{memory_id}/edit", response_class=HTMLResponse)
@audited(operations.UPDATE_MEMORY)
async def edit(request: Request, memory_id: str) -> Response:
    console, calls = await _session(request)
    form = await _form(request, console)
    mid = _uuid(memory_id)
    changes: dict[str, Any] = {}
    content = _newlines(form.get("content", ""))
    if _content_sha(content) != form.get("content_sha"):
        changes["content"] = content
    for field in ("name", "type", "url", "source"):
        new = form.get(field, "").strip()
        # A text input's value comes back with its line breaks stripped (HTML), the hidden
        # original with them: a stored value with a line break is unchanged if only those differ.
        if _one_line(new) != _one_line(form.get("orig_" + field, "").strip()):
            changes[field] = new or None
    tags = [t.strip() for t in form.get("tags", "").split(",") if t.strip()]
    orig_tags = [t.strip() for t in form.get("orig_tags", "").split(",") if t.strip()]
    if tags != [_one_line(t) for t in orig_tags]:
        changes["tags"] = tags
    try:
        patch = MemoryPatch.model_validate(changes)
    except ValidationError as exc:
        raise _invalid(exc) from None
    state = calls.state

    async def work(session: AsyncSession, ctx: AuditContext) -> Any:
        out = await memory_service.update_memory(
            session, state.embedder, state.settings, console.caller, mid, patch, ctx
        )
        return out, list(ctx.request.get("redactions", [])), ctx.audit_id

    try:
        item, redactions, audit_id = await calls.run(operations.UPDATE_MEMORY, work)
    except GateRejected as exc:
        # Re-show the form as sent (no second read: one call, one audit row).
        current = _Sent(
            id=mid,
            name=form.get("orig_name", ""),
            type=form.get("orig_type", ""),
            url=form.get("orig_url", ""),
            source=form.get("orig_source", ""),
            tags=[t.strip() for t in form.get("orig_tags", "").split(",") if t.strip()],
        )
        response = _page(
            request,
            console,
            "edit.html",
            m=current,
            types=MEMORY_TYPES,
            content=content,
            sha=form.get("content_sha", ""),
            tags=form.get("tags", ""),
            rejected=exc.reasons,
            sent=_Sent(
                id=mid,
                name=form.get("name", ""),
                type=form.get("type", ""),
                url=form.get("url", ""),
                source=form.get("source", ""),
                tags=[],
            ),
        )
        response.status_code = 422
        return response
    return _page(
        request,
        console,
        "edited.html",
        m=item,
        redactions=redactions,
        audit_id=audit_id,
        fields=sorted(changes),
    )


@router.get("/memories/{memory_id}/forget", response_class=HTMLResponse)
@audited(operations.GET_MEMORY)
async def forget_form(request: Request, memory_id: str) -> Response:
    console, calls = await _session(request)
    console.caller.require("write")
    mid = _uuid(memory_id)
    item = await calls.call(operations.GET_MEMORY, MemoryRef(memory_id=mid))
    return _page(request, console, "forget.html", m=item)


@router.post("/memories/{memory_id}/forget", response_class=HTMLResponse)
@audited(operations.FORGET)
async def forget(request: Request, memory_id: str) -> Response:
    console, calls = await _session(request)
    form = await _form(request, console)
    mid = _uuid(memory_id)
    if form.get("confirm") != "yes":
        raise InvalidInput("confirm", "tick the box to confirm")
    result = await calls.call(operations.FORGET, MemoryRef(memory_id=mid))
    return _page(request, console, "forgotten.html", result=result)


# --- pack preview ---------------------------------------------------------------------------


@router.get("/pack", response_class=HTMLResponse)
async def pack_form(request: Request) -> Response:
    console, _ = await _session(request)
    defaults = {
        "goal": "",
        "namespace": request.query_params.get("namespace", ""),
        "intent": "build",
        "layer": "recall",
        "limit": "",
        "budget": "4000",
    }
    return _page(
        request, console, "pack.html", form=defaults, intents=INTENTS, layers=LAYERS, pack=None
    )


@router.post("/pack", response_class=HTMLResponse)
@audited(operations.CONTEXT)
async def pack(request: Request) -> Response:
    console, calls = await _session(request)
    form = await _form(request, console)
    values: dict[str, Any] = {
        "goal": form.get("goal", ""),
        "namespace": form.get("namespace", "").strip(),
        "intent": form.get("intent", "build"),
        "layer": form.get("layer", "recall"),
        "markdown_token_budget": _int(form.get("budget"), "budget", 4000, 1, 32000),
    }
    if _opt(form.get("limit")):
        values["limit"] = _int(form.get("limit"), "limit", 24, 1, 50)
    try:
        req = ContextRequest.model_validate(values)
    except ValidationError as exc:
        raise _invalid(exc) from None
    state = calls.state

    async def work(session: AsyncSession, ctx: AuditContext) -> Any:
        resp = await operations.CONTEXT.answer(state, session, console.caller, ctx, req)
        misses: list[Any] = []
        if req.retrieval != "lexical":
            vector = await state.embedder.embed_query(resp.query)
            ids = [i.id for s in resp.sections for i in s.items]
            misses = await console_service.nearest_misses(
                session,
                console.caller,
                namespace=req.namespace,
                project=req.project,
                agent_id=req.agent_id,
                vector=vector,
                exclude=ids,
            )
        return resp, misses

    resp, misses = await calls.run(operations.CONTEXT, work)
    shown = {
        k: form.get(k, "") for k in ("goal", "namespace", "intent", "layer", "limit", "budget")
    }
    return _page(
        request,
        console,
        "pack.html",
        form=shown,
        intents=INTENTS,
        layers=LAYERS,
        pack=resp,
        misses=misses,
        floor=state.settings.relevance_floor,
    )


# --- audit ----------------------------------------------------------------------------------


AUDIT_FILTERS = ("action", "outcome", "namespace", "key_id", "memory_id", "since", "until")


@router.get("/audit", response_class=HTMLResponse)
async def audit(request: Request) -> Response:
    console, calls = await _session(request)
    q = request.query_params
    filters = {k: _opt(q.get(k)) for k in AUDIT_FILTERS}
    page = _int(q.get("page"), "page", 1, 1, 20_000)
    try:
        query = AuditQuery.model_validate(
            {
                **{k: v for k, v in filters.items() if v},
                "offset": (page - 1) * AUDIT_PAGE,
                "limit": AUDIT_PAGE,
            }
        )
    except ValidationError as exc:
        raise _invalid(exc) from None
    result = await calls.read(lambda s: audit_service.list_audit(s, console.caller, query))
    keep = {k: v for k, v in filters.items() if v}
    return _page(
        request,
        console,
        "audit.html",
        result=result,
        filters=filters,
        keep=keep,
        page=page,
        pages=max(1, -(-result.total // AUDIT_PAGE)),
    )


@router.get("/audit/{audit_id}", response_class=HTMLResponse)
async def audit_row(request: Request, audit_id: str) -> Response:
    console, calls = await _session(request)
    aid = _uuid(audit_id)
    row = await calls.read(lambda s: audit_service.get_audit(s, console.caller, aid))
    replayable = audit_replay.replayable(row.action, row.outcome)
    return _page(request, console, "audit_row.html", row=row, replayable=replayable)


@router.post("/audit/{audit_id}/replay", response_class=HTMLResponse)
@audited(operations.REPLAY)
async def replay(request: Request, audit_id: str) -> Response:
    console, calls = await _session(request)
    await _form(request, console)
    aid = _uuid(audit_id)
    state = calls.state

    async def work(session: AsyncSession, ctx: AuditContext) -> Any:
        result = await audit_replay.replay_context(
            session, state.embedder, state.settings, console.caller, ctx, aid
        )
        row = await audit_service.get_audit(session, console.caller, aid)
        before = audit_replay.recorded_pack(_RowView(row))  # type: ignore[arg-type]
        new_items = [i for s in result.pack.sections for i in s.items]
        names = await console_service.memory_names(session, console.caller, [b.id for b in before])
        names.update({i.id: i.name for i in new_items})
        return result, before, new_items, names

    result, before, after, names = await calls.run(operations.REPLAY, work)
    added = {i.id for i in result.diff.added}
    dropped = {i.id for i in result.diff.dropped}
    moved = {c.id: c for c in result.diff.rank_changes}
    return _page(
        request,
        console,
        "replay.html",
        result=result,
        before=before,
        after=after,
        names=names,
        added=added,
        dropped=dropped,
        moved=moved,
        replayed=aid,
    )


@dataclass
class _Sent:
    """The memory's fields as the edit form carried them."""

    id: uuid.UUID
    name: str
    type: str
    url: str
    source: str
    tags: list[str]


class _RowView:
    """An AuditEvent schema seen as the stored row ``recorded_pack`` reads."""

    def __init__(self, event: Any) -> None:
        self.action = event.action
        self.outcome = event.outcome
        self.details = event.details


# --- keys (admin) ---------------------------------------------------------------------------


@router.get("/keys", response_class=HTMLResponse)
async def keys(request: Request) -> Response:
    console, calls = await _session(request)
    rows = await calls.read(lambda s: console_service.list_keys(s, console.caller))
    return _page(request, console, "keys.html", keys=rows, created=None)


@router.post("/keys", response_class=HTMLResponse)
@audited(operations.KEY_CREATE)
async def create_key(request: Request) -> Response:
    console, calls = await _session(request)
    await _form(request, console)
    form = await request.form()  # parsed once: Starlette caches it
    scopes = console_service.scopes_of([str(s) for s in form.getlist("scopes")])
    projects = [p.strip() for p in str(form.get("projects", "")).split(",") if p.strip()]
    prefixes = [p.strip() for p in str(form.get("namespaces", "")).split(",") if p.strip()]
    name = str(form.get("name", ""))

    async def work(session: AsyncSession, ctx: AuditContext) -> Any:
        return await console_service.create_key(
            session,
            console.caller,
            ctx,
            name=name,
            scopes=scopes,
            projects=projects,
            namespace_prefixes=prefixes,
        )

    created = await calls.run(operations.KEY_CREATE, work)
    rows = await calls.read(lambda s: console_service.list_keys(s, console.caller))
    return _page(request, console, "keys.html", keys=rows, created=created)


@router.post("/keys/{key_id}/revoke", response_class=HTMLResponse)
@audited(operations.KEY_REVOKE)
async def revoke_key(request: Request, key_id: str) -> Response:
    console, calls = await _session(request)
    await _form(request, console)
    kid = _uuid(key_id)
    await calls.run(
        operations.KEY_REVOKE,
        lambda s, ctx: console_service.revoke_key(
            s, console.caller, ctx, kid, cache=calls.state.callers
        ),
    )
    if kid == console.caller.key_id:
        response = RedirectResponse("/ui/login", status_code=303)
        security.clear_session_cookie(response, request)
        return response
    return RedirectResponse("/ui/keys", status_code=303)
