"""The request-text guard: what no endpoint can store or should parse is refused, with 422
naming the field and before any work.

``JsonGuard`` refuses a body that is not UTF-8 (RFC 8259); a NUL character or a lone UTF-16
surrogate anywhere in a JSON body or a query parameter (Postgres text and jsonb reject NUL;
UTF-8 has no surrogates); JSON nested deeper than ``MAX_JSON_DEPTH`` (Python's parser would
recurse until it fails, which FastAPI answers with a 400). Bodies are checked with C-speed
scans first and parsed only when those find something; a typical call pays a few
microseconds. The MCP stdio transport has no HTTP in front of it, so the schemas and domain
keep their own checks; this guard covers every HTTP endpoint at once.

Request size is ``RequestGuard``'s (service/app.py): 413 over ``max_body_bytes``, before any
work; fields have their own bounds in the schemas (422). Per-key rate limits are
``service/domain/rate_limit.py``, applied by the call runner (``service/calls.py``).
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qsl

import anyio.to_thread
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.errors import error_response

MAX_JSON_DEPTH = 32
"""Deepest JSON accepted in any body: metadata's own limit (8) inside a batch or an MCP
envelope is about 12."""

# A string token runs to its closing quote or, unterminated, to the end of the body: a string
# that never closes must not be retried from every later quote (quadratic: 40 KB of ``\"``
# held the event loop for 5 s).
_STRING = rb'"(?:[^"\\]|\\.)*+(?:"|\\?\Z)'
_TOKENS = re.compile(_STRING + rb"|[\[\]{},:]", re.DOTALL)
_STRINGS = re.compile(_STRING, re.DOTALL)
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))
_ONE_BRACKET_KIND = bytes.maketrans(b"{}", b"[]")
OFF_LOOP_BYTES = 64 * 1024
"""Bodies larger than this are checked in a worker thread, not on the event loop."""
_SUSPECT_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})")
_BAD_TEXT = re.compile("[\x00\ud800-\udfff]")
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def _text_problem(text: str) -> str | None:
    found = _BAD_TEXT.search(text)
    if found is None:
        return None
    if found.group() == "\x00":
        return "NUL characters are not allowed in text"
    return "lone surrogate code points (\\ud800-\\udfff) are not valid text"


def _surely_shallow(body: bytes, max_depth: int) -> bool:
    """True when every container of ``body`` closes within ``max_depth`` levels, decided at C
    speed: strings dropped, brackets alone kept, then ``max_depth`` passes each removing the
    innermost (empty) pairs. False (too deep or unbalanced) leaves it to ``_too_deep``."""
    brackets = _STRINGS.sub(b"", body).translate(_ONE_BRACKET_KIND, _NOT_BRACKETS)
    for _ in range(max_depth):
        if not brackets:
            return True
        brackets = brackets.replace(b"[]", b"")
    return not brackets


def _too_deep(body: bytes, max_depth: int) -> tuple[str, str] | None:
    """The path at which ``body`` nests deeper than ``max_depth``, found without parsing
    (so without recursion): a scan over its strings, brackets, colons and commas."""
    # Each open container: [is_object, label (key or index), expecting_key, last string].
    stack: list[list[Any]] = []
    for token in _TOKENS.finditer(body):
        raw = token.group()
        top = stack[-1] if stack else None
        if raw[:1] == b'"':
            if top is not None and top[0] and top[2]:
                top[3] = raw
        elif raw in (b"{", b"["):
            stack.append([raw == b"{", None if raw == b"{" else 0, True, b'""'])
            if len(stack) > max_depth:
                labels = [str(f[1]) for f in stack[:-1] if f[1] is not None]
                return ".".join(labels) or "body", f"JSON nests deeper than {max_depth} levels"
        elif raw in (b"}", b"]"):
            if stack:
                stack.pop()
        elif top is not None and raw == b":" and top[0]:
            try:
                top[1] = json.loads(top[3])
            except ValueError:
                top[1] = "?"
            top[2] = False
        elif top is not None and raw == b",":
            if top[0]:
                top[2] = True
            else:
                top[1] += 1
    return None


def _bad_text_in(value: Any) -> tuple[str, str] | None:
    """The path of the first string (key or value) in ``value`` that Postgres cannot
    store, walking without recursion."""
    todo: list[tuple[tuple[str, ...], Any]] = [((), value)]
    while todo:
        path, item = todo.pop()
        if isinstance(item, str):
            problem = _text_problem(item)
            if problem:
                return ".".join(path) or "body", problem
        elif isinstance(item, dict):
            for key, child in item.items():
                problem = _text_problem(key)
                if problem:
                    return ".".join((*path, key.encode("utf-8", "replace").decode())), problem
                todo.append(((*path, key), child))
        elif isinstance(item, list):
            todo.extend(((*path, str(i)), child) for i, child in enumerate(item))
    return None


def json_body_problem(body: bytes, max_depth: int = MAX_JSON_DEPTH) -> tuple[str, str] | None:
    """``(field, message)`` for a JSON body no endpoint may accept (not UTF-8, too deep,
    NUL or a lone surrogate in a string), else None (malformed JSON is left to the
    endpoint, which answers it)."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return "body", f"the body is not UTF-8 (byte {exc.start})"
    if body.count(b"[") + body.count(b"{") > max_depth and not _surely_shallow(body, max_depth):
        problem = _too_deep(body, max_depth)
        if problem is not None:
            return problem
    if _SUSPECT_ESCAPE.search(body) is None:
        return None
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return _bad_text_in(value)


def query_problem(query_string: bytes) -> tuple[str, str] | None:
    """``(parameter, message)`` for a query parameter holding a NUL, else None."""
    if b"%00" not in query_string:
        return None
    for name, value in parse_qsl(query_string.decode("latin-1"), keep_blank_values=True):
        problem = _text_problem(name) or _text_problem(value)
        if problem:
            return (name if "\x00" not in name else "query"), problem
    return None


class JsonGuard:
    """Pure ASGI middleware, inside ``RequestGuard`` (which bounds the body it reads): 422
    for NUL, lone surrogates and over-deep nesting, before the app sees the request."""

    def __init__(self, app: ASGIApp, max_depth: int = MAX_JSON_DEPTH) -> None:
        self.app = app
        self.max_depth = max_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        problem = query_problem(scope.get("query_string") or b"")
        if problem is None and scope.get("method") in _BODY_METHODS and _is_json(scope):
            body, receive = await _buffered(receive)
            if len(body) > OFF_LOOP_BYTES:
                problem = await anyio.to_thread.run_sync(json_body_problem, body, self.max_depth)
            else:
                problem = json_body_problem(body, self.max_depth)
        if problem is None:
            await self.app(scope, receive, send)
            return
        field, message = problem
        response = error_response(
            422, {"code": "validation_error", "message": f"{field}: {message}", "field": field}
        )
        await response(scope, receive, send)


def _is_json(scope: Scope) -> bool:
    for name, value in scope.get("headers") or []:
        if name == b"content-type":
            return b"json" in value.lower()
    return True  # FastAPI parses a body without a content type as JSON


async def _buffered(receive: Receive) -> tuple[bytes, Receive]:
    """Read the whole body; return it and a ``receive`` that replays it."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay
