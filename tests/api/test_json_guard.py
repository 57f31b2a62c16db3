"""api/json_guard.py: request text the API refuses before any work (NUL characters, lone
surrogates, JSON nested beyond its depth), found by a linear scan that runs off the event loop
for large bodies; and a body that is not JSON names the body."""

from __future__ import annotations

import pytest

from tests.conftest import AppFactory, KeyFactory


def test_json_body_problem_finds_nul_surrogates_and_depth() -> None:
    from service.api.json_guard import json_body_problem, query_problem

    assert json_body_problem(b'{"content": "fine \\u00e9 \\ud83d\\ude00"}') is None
    assert json_body_problem(b'{"content": "an escaped backslash: \\\\u0000"}') is None
    assert json_body_problem(b'{"items": [{"content": "x\\u0000"}]}') == (
        "items.0.content",
        "NUL characters are not allowed in text",
    )
    field, message = json_body_problem(b'{"metadata": {"\\udc00": 1}}')  # type: ignore[misc]
    assert field.startswith("metadata.")
    assert "surrogate" in message
    deep = b'{"metadata": {"x": ' + b"[" * 40 + b"]" * 40 + b"}}"
    assert json_body_problem(deep) == (
        "metadata.x." + ".".join(["0"] * 30),
        "JSON nests deeper than 32 levels",
    )
    assert (
        json_body_problem(b'{"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}') is None
    )  # in a string
    assert json_body_problem(b"{not json \\u0000") is None  # left to the endpoint
    assert query_problem(b"tag=%00") == ("tag", "NUL characters are not allowed in text")
    assert query_problem(b"tag=a%20b") is None


def test_json_guard_is_linear_on_unterminated_strings() -> None:
    """A string that never closes (every quote escaped) was retried from each later quote:
    40 KB of ``\\"`` held the event loop for 5 s, before any key was looked at."""
    import time

    from service.api.json_guard import json_body_problem

    body = b'{"a": "' + b'\\"' * 30_000 + b"[]" * 40
    started = time.perf_counter()
    json_body_problem(body)
    assert time.perf_counter() - started < 1.0
    many = b"[" + b"[]," * 300_000 + b"[]"  # unbalanced: the exact scan, still linear
    started = time.perf_counter()
    assert json_body_problem(many) is None
    assert time.perf_counter() - started < 3.0
    shallow = b"[" + b'[{"k": "[[[["}],' * 50_000 + b"[]]"
    assert json_body_problem(shallow) is None
    deep = b'{"x": ' + b'[{"k": ' * 17 + b"1" + b"}]" * 17 + b"}"
    assert json_body_problem(deep) == (
        "x." + ".".join(["0.k"] * 15) + ".0",
        "JSON nests deeper than 32 levels",
    )


async def test_large_bodies_are_checked_off_the_event_loop(
    app_with: AppFactory, make_key: KeyFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard's scan of a large body runs in a worker thread: /healthz answers while it
    works (a slow scan stands in for a hostile 4 MB body)."""
    import asyncio
    import time

    from service.api import json_guard

    real = json_guard.json_body_problem

    def slow(body: bytes, max_depth: int = json_guard.MAX_JSON_DEPTH) -> tuple[str, str] | None:
        time.sleep(1.5)
        return real(body, max_depth)

    monkeypatch.setattr(json_guard, "json_body_problem", slow)
    key = await make_key()
    body = b'{"namespace": "alice", "content": "' + b"word " * 20_000 + b'"}'
    async with app_with() as client:
        started = time.perf_counter()
        post = asyncio.create_task(
            client.post(
                "/v1/remember",
                content=body,
                headers={**key.headers, "Content-Type": "application/json"},
            )
        )
        await asyncio.sleep(0.2)  # the post is in the guard's scan by now
        health = await client.get("/healthz")
        assert health.status_code == 200
        assert time.perf_counter() - started < 1.2  # the scan takes 1.5 s
        await post


async def test_a_body_that_is_not_json_names_the_body(
    app_with: AppFactory, make_key: KeyFactory
) -> None:
    """FastAPI reports malformed JSON at ``("body", <character offset>)``: the error named a
    field ``5`` (review E)."""
    key = await make_key()
    async with app_with() as client:
        response = await client.post(
            "/v1/remember",
            content=b'{"a": nope}',
            headers={**key.headers, "Content-Type": "application/json"},
        )
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert error["field"] == "body"
    assert error["errors"] == [
        {"field": "body", "message": "the body is not valid JSON at character 6: Expecting value"}
    ]
