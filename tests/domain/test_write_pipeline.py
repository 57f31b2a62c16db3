"""The write pipeline (validate -> redact -> gate -> hash) is one step shared by remember and
PATCH: the same hostile inputs get the same verdicts and the same redactions through both.

PATCH used to gate the raw redacted text, so a memory patched to nothing but a secret was
accepted as a "short fact" (``[GITHUB_TOKEN:REDACTED]``) where remember refused it as empty.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from service.config import Settings
from service.domain.write_pipeline import REDACTOR, WritePipeline, strip_placeholders
from tests.conftest import Key

TOKEN = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
HOSTILE = {
    "only_a_secret": TOKEN,
    "secrets_only": f"password={TOKEN} {TOKEN}",
    "fragment": "ok",
    "secret_in_a_fact": f"The deploy token is {TOKEN} and the staging DB runs on port 5433 since March.",
    "pii_in_a_fact": "Contact alice.smith@acme-corp.com about the billing migration to Stripe next quarter.",
    "log_dump": "\n".join(
        f"2026-01-0{i % 9 + 1} 12:00:0{i % 10} ERROR worker[{i}] connection refused to 10.0.0.{i}:5432"
        for i in range(12)
    ),
    "nul": "The cache is warmed at boot \x00 before the first request is served.",
}
BASE = "The staging cluster runs Postgres 17 with pgvector 0.8 since the March upgrade."


def _verdict(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    if response.status_code >= 400:
        error = body["error"]
        return {
            "status": response.status_code,
            "code": error["code"],
            "reasons": sorted(r["code"] for r in error.get("reasons", [])),
            "field": error.get("field"),
        }
    return {"status": "ok"}


async def _through_remember(
    client: httpx.AsyncClient, key: Key, content: str
) -> tuple[dict[str, Any], str | None]:
    namespace = f"w{uuid.uuid4().hex[:8]}"
    response = await client.post(
        "/v1/remember",
        json={"content": content, "namespace": namespace, "type": "claim"},
        headers=key.headers,
    )
    if response.status_code >= 400:
        return _verdict(response), None
    stored = await client.get(f"/v1/memories/{response.json()['id']}", headers=key.headers)
    return _verdict(response), stored.json()["content"]


async def _through_patch(
    client: httpx.AsyncClient, key: Key, content: str
) -> tuple[dict[str, Any], str | None]:
    namespace = f"w{uuid.uuid4().hex[:8]}"
    created = await client.post(
        "/v1/remember",
        json={"content": BASE, "namespace": namespace, "type": "claim"},
        headers=key.headers,
    )
    assert created.status_code == 201, created.text
    memory_id = created.json()["id"]
    response = await client.patch(
        f"/v1/memories/{memory_id}", json={"content": content}, headers=key.headers
    )
    stored = await client.get(f"/v1/memories/{memory_id}", headers=key.headers)
    content_after = stored.json()["content"]
    if response.status_code >= 400:
        assert content_after == BASE  # no partial write
        return _verdict(response), None
    return _verdict(response), content_after


@pytest.mark.parametrize("case", sorted(HOSTILE))
async def test_remember_and_patch_agree(client: httpx.AsyncClient, key: Key, case: str) -> None:
    content = HOSTILE[case]
    remembered = await _through_remember(client, key, content)
    patched = await _through_patch(client, key, content)
    assert remembered == patched
    _verdict_of, stored = remembered
    if stored is not None:
        assert TOKEN not in stored and "alice.smith" not in stored


async def test_a_patch_to_only_a_secret_is_refused(client: httpx.AsyncClient, key: Key) -> None:
    verdict, stored = await _through_patch(client, key, TOKEN)
    assert verdict == {
        "status": 422,
        "code": "gate_rejected",
        "reasons": ["empty"],
        "field": "content",
    }
    assert stored is None


def test_the_pipeline_is_one_object_per_configuration(settings: Settings) -> None:
    one = WritePipeline.for_settings(settings)
    assert WritePipeline.for_settings(settings) is one
    assert one.redactor is REDACTOR


def test_placeholders_are_stripped_before_gating(settings: Settings) -> None:
    pipeline = WritePipeline.for_settings(settings)
    clean = pipeline.run(type="claim", content=TOKEN, name=None)
    assert clean.content == "[GITHUB_TOKEN:REDACTED]"
    assert strip_placeholders(clean.content) == ""
    assert clean.redactions == {"GITHUB_TOKEN": 1}
    assert not clean.accepted and clean.hash == ""
    fact = pipeline.run(type="claim", content=HOSTILE["secret_in_a_fact"])
    assert fact.accepted and len(fact.hash) == 64
