"""Review 2, finding 8: one 3.9 MB artifact cost 3.8 s of CPU and one batch 3.0 s, before any
bound; review 29 found the same class on the tool-result envelope and assembly (a 2.95 MB tool
result, 8.4 s). The text one call redacts or tokenizes is now at most ``max_scanned_bytes``
whatever the endpoint or face (domain/scan_bound.py): above it, a 413 ``payload_too_large``
naming the field, before any scan and with nothing written. A text counts its UTF-8 bytes, a
JSON value its compact JSON; an assemble call's parts count together."""

from __future__ import annotations

import json
from typing import Any

import httpx
from mcp import Client

from service.mcp.backends import LocalBackend, bearer_key
from service.mcp.server import build_server
from tests.conftest import AppFactory, Key, KeyFactory, SqlRows, tokenizing_threads
from tests.mcp.conftest import structured

LIMIT = 64 * 1024
IDS = len(b"c1") + len(b"dump")
"""The identifiers of a ``result(...)`` (checked for secrets, so counted too)."""


def compact(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def result(call_id: str, body: Any, budget: int = 200) -> dict[str, Any]:
    return {"tool_call_id": call_id, "tool_name": "dump", "result": body, "budget_tokens": budget}


def calling(*ids: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "dump", "arguments": "{}"}}
            for i in ids
        ],
    }


def log_text(size: int) -> str:
    """A log of exactly ``size`` UTF-8 bytes, with two-byte characters in it."""
    line = "café deploy step ok; FAILED once, retried\n"
    text = line * (size // len(line.encode()) + 1)
    raw = text.encode()[:size]
    while True:
        try:
            out = raw.decode()
            break
        except UnicodeDecodeError:
            raw = raw[:-1]
    return out + "x" * (size - len(out.encode()))


def object_of_compact_size(size: int) -> dict[str, Any]:
    """A JSON object whose compact JSON is exactly ``size`` bytes (sent with spaces, so larger
    on the wire)."""
    rows = [{"pod": f"web-{n}", "phase": "Running"} for n in range(size // 40)]
    value: dict[str, Any] = {"rows": rows, "note": ""}
    value["note"] = "n" * (size - compact(value))
    assert compact(value) == size
    return value


def error_of(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 413, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == "payload_too_large"
    return error


async def test_an_artifact_over_the_scan_bound_is_413(
    app_with: AppFactory, make_key: KeyFactory
) -> None:
    key = await make_key()
    async with app_with(max_scanned_bytes=64 * 1024) as client:
        rows = [{"host": f"runner-{n}", "note": "disk nearly full " * 4} for n in range(1500)]
        big = await client.post(
            "/v1/artifacts",
            json={"namespace": "n", "name": "Inventory", "body": {"rows": rows}},
            headers=key.headers,
        )
        assert big.status_code == 413, big.text
        assert big.json()["error"]["code"] == "payload_too_large"
        assert big.json()["error"]["field"] == "body"
        small = await client.post(
            "/v1/artifacts",
            json={"namespace": "n", "name": "Inventory", "body": {"rows": rows[:50]}},
            headers=key.headers,
        )
        assert small.status_code == 201, small.text
        listed = await client.get("/v1/memories", params={"namespace": "n"}, headers=key.headers)
        assert len(listed.json()["items"]) == 1


async def test_a_batch_over_the_scan_bound_is_413(
    app_with: AppFactory, make_key: KeyFactory
) -> None:
    key = await make_key()
    async with app_with(max_scanned_bytes=64 * 1024) as client:
        items = [
            {"namespace": "n", "type": "procedure",
             "content": f"Step {n}: rotate the runner's disk cache and restart the agent. " * 20}
            for n in range(60)
        ]
        big = await client.post("/v1/remember/batch", json={"items": items}, headers=key.headers)
        assert big.status_code == 413, big.text
        assert big.json()["error"]["field"] == "items"
        fine = await client.post(
            "/v1/remember/batch", json={"items": items[:20]}, headers=key.headers
        )
        assert fine.status_code == 200, fine.text
        listed = await client.get(
            "/v1/memories", params={"namespace": "n", "limit": 100}, headers=key.headers
        )
        assert len(listed.json()["items"]) == 20


async def test_a_tool_result_at_the_bound_passes_and_one_byte_over_is_413(
    app_with: AppFactory, make_key: KeyFactory
) -> None:
    key = await make_key()
    async with app_with(max_scanned_bytes=LIMIT) as client:
        at = await client.post(
            "/v1/tool-results", json=result("c1", log_text(LIMIT - IDS)), headers=key.headers
        )
        assert at.status_code == 200, at.text
        assert at.json()["bytes_before"] == LIMIT - IDS
        over = await client.post(
            "/v1/tool-results", json=result("c1", log_text(LIMIT - IDS + 1)), headers=key.headers
        )
        error = error_of(over)
        assert error["field"] == "result"
        assert str(LIMIT) in error["message"]


async def test_a_json_result_counts_as_compact_json(
    app_with: AppFactory, make_key: KeyFactory
) -> None:
    key = await make_key()
    async with app_with(max_scanned_bytes=LIMIT) as client:
        value = object_of_compact_size(LIMIT - IDS)
        assert len(json.dumps(value).encode()) > LIMIT  # as sent, with spaces
        at = await client.post("/v1/tool-results", json=result("c1", value), headers=key.headers)
        assert at.status_code == 200, at.text
        value["note"] += "n"
        over = await client.post(
            "/v1/tool-results", json=result("c1", value), headers=key.headers
        )
        assert error_of(over)["field"] == "result"
        # JSON sent as text counts as the text it is
        text = json.dumps(object_of_compact_size(LIMIT - 200), indent=1)
        assert len(text.encode()) > LIMIT
        as_text = await client.post(
            "/v1/tool-results", json=result("c1", text), headers=key.headers
        )
        assert error_of(as_text)["field"] == "result"


async def test_assemble_sums_its_tool_results_and_messages(
    app_with: AppFactory, make_key: KeyFactory
) -> None:
    key = await make_key()
    third = LIMIT // 3
    async with app_with(max_scanned_bytes=LIMIT) as client:

        async def assemble(**body: Any) -> httpx.Response:
            return await client.post(
                "/v1/assemble", json={"budget_tokens": 4000, **body}, headers=key.headers
            )

        ids = ["c0", "c1", "c2"]
        # the user message counts too, and each call's id, name and arguments ("{}"), in the
        # assistant message and in its tool result
        per_call = 2 * IDS + len(b"{}")
        sizes = [third, third, LIMIT - 2 * third - len(b"What failed?") - 3 * per_call]
        fits = await assemble(
            user_message="What failed?",
            messages=[calling(*ids)],
            tool_results=[result(i, log_text(n)) for i, n in zip(ids, sizes, strict=True)],
        )
        assert fits.status_code == 200, fits.text
        one_more = await assemble(
            user_message="What failed??",
            messages=[calling(*ids)],
            tool_results=[result(i, log_text(n)) for i, n in zip(ids, sizes, strict=True)],
        )
        error = error_of(one_more)
        assert error["field"] == "tool_results", "no part alone is over: the field holding most"
        assert str(LIMIT + 1) in error["message"]

        alone = await assemble(
            messages=[calling("c0", "c1")],
            tool_results=[result("c0", "short"), result("c1", log_text(LIMIT + 1))],
        )
        assert error_of(alone)["field"] == "tool_results.1.result"

        history = [
            {"role": "user" if n % 2 else "assistant", "content": log_text(LIMIT // 8)}
            for n in range(10)
        ]
        chat = await assemble(user_message="And now?", messages=history)
        assert error_of(chat)["field"] == "messages"
        arguments = await assemble(
            messages=[
                {"role": "user", "content": "Run it."},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c0",
                            "type": "function",
                            "function": {
                                "name": "dump",
                                "arguments": json.dumps({"log": log_text(LIMIT)}),
                            },
                        }
                    ],
                },
            ],
            tool_results=[result("c0", "ok")],
        )
        assert error_of(arguments)["field"] == "messages.1.tool_calls.0.function.arguments"


async def test_assemble_counts_the_task_state_it_reads(
    app_with: AppFactory, make_key: KeyFactory, sql: SqlRows
) -> None:
    key = await make_key()
    async with app_with(max_scanned_bytes=LIMIT) as client:
        ids = []
        for n in range(2):
            stored = await client.post(
                "/v1/artifacts",
                json={"namespace": "n", "name": f"inventory {n}",
                      "body": object_of_compact_size(LIMIT * 3 // 5)},
                headers=key.headers,
            )
            assert stored.status_code == 201, stored.text
            ids.append(stored.json()["artifact_id"])
        body = {
            "budget_tokens": 4000,
            "user_message": "Which pods run?",
            "task_state": [{"artifact_id": i, "namespace": "n"} for i in ids],
        }
        over = await client.post("/v1/assemble", json=body, headers=key.headers)
        assert error_of(over)["field"] == "task_state"
        rows = await sql(
            "SELECT id, action, status_code, details FROM audit_events WHERE org_id = :o "
            "AND action IN ('artifact', 'assemble') ORDER BY created_at",
            o=key.org_id,
        )
        # The bodies were read (the pack pool commits as it goes), so the trail says so, each
        # read part of the refused call; nothing was redacted or tokenized.
        refused = rows[-1]
        assert (refused.action, refused.status_code) == ("assemble", 413)
        reads = [r for r in rows if r.details.get("part_of") == str(refused.id)]
        assert [r.action for r in reads] == ["artifact", "artifact"]
        body["task_state"] = body["task_state"][:1]
        one = await client.post("/v1/assemble", json=body, headers=key.headers)
        assert one.status_code == 200, one.text


async def test_the_mcp_tools_answer_the_same_413(
    app_with: AppFactory, make_key: KeyFactory
) -> None:
    key = await make_key()
    async with app_with(max_scanned_bytes=LIMIT) as client:
        server = build_server(LocalBackend(client.app.state.ctx, bearer_key(key.key)))  # type: ignore[attr-defined]
        async with Client(server, raise_exceptions=True) as mcp:
            fine = await mcp.call_tool("tool_result", result("c1", log_text(LIMIT - IDS)))
            over = await mcp.call_tool("tool_result", result("c1", log_text(LIMIT - IDS + 1)))
            assembled = await mcp.call_tool(
                "assemble",
                {"budget_tokens": 4000, "messages": [calling("c1")],
                 "tool_results": [result("c1", object_of_compact_size(LIMIT + 1))]},
            )
    assert not fine.is_error, fine
    for answer, field in ((over, "result"), (assembled, "tool_results.0.result")):
        assert answer.is_error
        error = structured(answer)["error"]
        assert (error["code"], error["status"], error["field"]) == (
            "payload_too_large", 413, field
        )


async def test_tool_results_and_assembly_tokenize_off_the_event_loop(
    app_with: AppFactory, make_key: KeyFactory
) -> None:
    key: Key = await make_key()
    async with app_with(max_scanned_bytes=LIMIT) as client:
        stored = await client.post(
            "/v1/artifacts",
            json={"namespace": "n", "name": "inventory", "body": object_of_compact_size(8000)},
            headers=key.headers,
        )
        assert stored.status_code == 201, stored.text
        remembered = await client.post(
            "/v1/remember",
            json={"namespace": "n", "type": "gotcha",
                  "content": "The web pods restart when the config map changes; roll them."},
            headers=key.headers,
        )
        assert remembered.status_code == 201, remembered.text
        sync = client.app.state.ctx.embedder.sync  # type: ignore[attr-defined]
        with tokenizing_threads(sync) as seen:
            one = await client.post(
                "/v1/tool-results", json=result("c1", log_text(20_000)), headers=key.headers
            )
            assert one.status_code == 200, one.text
            assembled = await client.post(
                "/v1/assemble",
                json={
                    "budget_tokens": 600,
                    "system": "You fix deployments.",
                    "user_message": "Which web pods restart?",
                    "memory": {"namespace": "n", "goal": "web pods restart"},
                    "task_state": [{"artifact_id": stored.json()["artifact_id"]}],
                    "messages": [
                        {"role": "user", "content": "Check the pods. " * 200},
                        {"role": "assistant", "content": "Looking. " * 200},
                        calling("c1"),
                    ],
                    "tool_results": [result("c1", log_text(20_000))],
                },
                headers=key.headers,
            )
            assert assembled.status_code == 200, assembled.text
    assert seen and not any(seen), "a tool result or an assembly was tokenized on the event loop"
