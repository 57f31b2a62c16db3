"""review29 (finding 8's class on the newer endpoints): the text one call has redacted is
bounded for writes (max_scanned_bytes, 1 MiB: 413 before any scan), but POST /v1/tool-results
and POST /v1/assemble redact up to max_body_bytes (4 MiB). Measured in-process on the loaded
review machine: a 2.95 MB prose tool result cost 8.4 s of CPU in one call (a 2.35 MB object of
secret-named keys, 4.0 s); the issue called 3.8 s for a 3.9 MB artifact High. Fixed: both
follow the writes' rule (domain/scan_bound.py), over max_scanned_bytes a 413 naming the field,
before any scan; tests/e2e/review2/test_bounded_text_work.py covers the class."""

from __future__ import annotations

import random
import string

import httpx

from tests.conftest import KeyFactory


def tok(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(n))


async def test_tool_result_text_work_is_bounded(client: httpx.AsyncClient, make_key: KeyFactory) -> None:
    key = await make_key()
    rng = random.Random(7)
    words = ["password", "token", "the", "deploy", "key", "secret", "user", "PIN"]
    prose = " ".join(rng.choice([*words, tok(rng, 12)]) for _ in range(200_000))  # ~1.3 MB
    body = {"tool_call_id": "c1", "tool_name": "dump", "budget_tokens": 500, "result": prose}
    r = await client.post("/v1/tool-results", json=body, headers=key.headers, timeout=600)
    assert r.status_code == 413, r.status_code
    assert r.json()["error"]["code"] == "payload_too_large"
    assert r.json()["error"]["field"] == "result"
    a = await client.post("/v1/assemble", json={
        "budget_tokens": 2000, "user_message": "What failed?",
        "messages": [{"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "dump", "arguments": "{}"}}]}],
        "tool_results": [body]}, headers=key.headers, timeout=600)
    assert a.status_code == 413, a.status_code
    assert a.json()["error"]["code"] == "payload_too_large"
    assert a.json()["error"]["field"] == "tool_results.0.result"
