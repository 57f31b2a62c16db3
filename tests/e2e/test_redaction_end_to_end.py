"""The generated secret corpus stored through the API, in every field a write or a context
call keeps or echoes: no secret in the database (every text, varchar, json and array column
of every table), the responses, the audit trail or the logs."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text

from bench.redaction_corpus import Sample, secret_samples
from tests.conftest import Key, KeyFactory
from tests.e2e.hardening.test_logs import everything_in

SAMPLES = secret_samples()
NS = "redact-e2e"


def _item(i: int, s: Sample) -> dict[str, Any]:
    body = s.text
    item: dict[str, Any] = {
        "namespace": NS,
        "content": f"Case {i} of the {s.format} format, kept for the incident review: {body}",
        "metadata": {
            "note": body,
            body[:200]: i,
            "password": {"v": s.secrets[-1], "old": [s.secrets[-1]]},
            "nested": {"deeper": {"text": body}},
        },
        "related": [],
    }
    if len(body) <= 300:
        item["name"] = body
    if len(body) <= 128:
        item["domain"] = body
    if len(body) <= 200:
        item["origin"] = body
    if len(body) <= 64:
        item["tags"] = [body, "ops"]
    item["source"] = body[:2000]
    item["url"] = body[:2000]
    return item


async def _dump(app: FastAPI) -> str:
    """Every text-like column of every table, as text: what pg_dump would show of them."""
    parts: list[str] = []
    async with app.state.ctx.sessionmaker() as session:
        columns = (
            await session.execute(
                text(
                    "SELECT table_name, column_name FROM information_schema.columns "
                    "WHERE table_schema = 'public' AND (data_type IN "
                    "('text', 'character varying', 'json', 'jsonb', 'ARRAY', 'USER-DEFINED'))"
                )
            )
        ).all()
        assert columns
        for table, column in columns:
            rows = await session.execute(
                text(f'SELECT "{column}"::text FROM "{table}" WHERE "{column}" IS NOT NULL')
            )
            parts.extend(r[0] for r in rows)
    return "\n".join(parts)


async def test_no_corpus_secret_survives_anywhere(
    app: FastAPI, client: httpx.AsyncClient, key: Key, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="httpx")
    caplog.set_level(logging.DEBUG)
    h = key.headers
    bodies: list[str] = []

    async def call(method: str, url: str, **kwargs: Any) -> httpx.Response:
        response = await client.request(method, url, headers=h, **kwargs)
        assert response.status_code < 500, response.text
        bodies.append(response.text)
        return response

    items = [_item(i, s) for i, s in enumerate(SAMPLES)]
    created: list[str] = []
    for start in range(0, len(items), 50):
        response = await call(
            "POST", "/v1/remember/batch", json={"items": items[start : start + 50]}
        )
        assert response.status_code == 200, response.text
        created += [r["id"] for r in response.json()["items"] if r.get("id")]
    assert len(created) > len(items) // 2  # most pass the gate, so every field was stored
    redacted = sum(len(r["redactions"]) > 0 for r in response.json()["items"])
    assert redacted > 0

    for i, s in enumerate(SAMPLES[::4]):
        await call("POST", "/v1/remember", json=items[i * 4] | {"namespace": f"{NS}:single"})
        await call(
            "POST",
            "/v1/artifacts",
            json={
                "namespace": NS,
                "name": s.text[:200],
                "body": {
                    s.text[:200]: {"password": {"v": s.secrets[-1]}},
                    "rows": [{s.text[:200]: s.text}],
                },
            },
        )
        goal = f"How do we rotate what this note holds: {s.text}"[:4000]
        await call(
            "POST",
            "/v1/context",
            json={"namespace": NS, "goal": goal, "domain": s.text[:128], "layer": "recall"},
        )
    for memory_id, s in zip(created[:40], SAMPLES[:40], strict=False):
        await call(
            "PATCH",
            f"/v1/memories/{memory_id}",
            json={
                "content": f"Updated after the rotation, for the record: {s.text}",
                "tags": ["rotated"] + ([s.text] if len(s.text) <= 64 else []),
                "metadata": {s.text[:100]: {"secret": s.secrets[-1]}},
            },
        )
    for memory_id in created[:20]:
        await call("GET", f"/v1/memories/{memory_id}")
    await call("GET", "/v1/memories", params={"namespace": f"{NS}:*", "limit": 200})
    audit = await call("GET", "/v1/audit", params={"limit": 200})
    for event in audit.json()["items"][:50]:
        await call("GET", f"/v1/audit/{event['id']}")

    everything = {
        "responses": "\n".join(bodies),
        "database": await _dump(app),
        "logs": "\n".join(everything_in(r) for r in caplog.records),
    }
    leaks = [
        (where, s.format, secret)
        for s in SAMPLES
        for secret in s.secrets
        for where, haystack in everything.items()
        if secret in haystack
    ]
    # Where each leak sits, for the failure message (the secrets are generated, not real).
    context = [
        everything[where][
            max(0, everything[where].find(secret) - 120) : everything[where].find(secret) + 60
        ]
        for where, _, secret in leaks[:5]
    ]
    assert leaks == [], context


async def test_identifiers_holding_a_secret_are_refused(
    client: httpx.AsyncClient, make_key: KeyFactory
) -> None:
    key = await make_key()
    aws = "AKIA" + "Z9" * 8
    for extra, field in (
        ({"project": aws}, "project"),
        ({"agent_id": aws}, "agent_id"),
    ):
        response = await client.post(
            "/v1/remember",
            json={"namespace": NS, "content": "The billing export runs nightly at 02:00.", **extra},
            headers=key.headers,
        )
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["field"] == field
        assert aws not in response.text
        assert "AWS_ACCESS_KEY" in error["message"]
    listed = await client.get("/v1/memories", params={"namespace": NS}, headers=key.headers)
    assert listed.json()["total"] == 0
    context = await client.post(
        "/v1/context",
        json={"namespace": NS, "goal": "billing export", "agent_id": aws},
        headers=key.headers,
    )
    assert context.status_code == 422
    assert aws not in context.text


async def test_read_only_key_gets_403_before_its_goal_is_touched(
    client: httpx.AsyncClient, make_key: KeyFactory
) -> None:
    key = await make_key(scopes=["read"], namespaces=["alice"])
    goal = "-----BEGIN RSA PRIVATE KEY-----" + " " * 3000 + " password=Hunter22x"
    response = await client.post(
        "/v1/context", json={"namespace": "bob", "goal": goal}, headers=key.headers
    )
    assert response.status_code == 403
    assert "Hunter22x" not in response.text
    audit = await client.get("/v1/audit", params={"limit": 5}, headers=key.headers)
    assert "Hunter22x" not in audit.text


async def test_oversize_content_is_refused_before_redaction(
    client: httpx.AsyncClient, key: Key
) -> None:
    content = "password: x\n" * 200_000  # 2.4 MB, under the body limit
    response = await client.post(
        "/v1/remember", json={"namespace": NS, "content": content}, headers=key.headers
    )
    assert response.status_code == 422
    assert [r["code"] for r in response.json()["error"]["reasons"]] == ["oversize"]


async def test_a_namespace_holding_a_secret_is_refused(
    app: FastAPI, client: httpx.AsyncClient, key: Key
) -> None:
    # A namespace segment takes [A-Za-z0-9_.-]: an AWS key id or a GitHub token fits. It is
    # an identifier (it scopes reads), so it is refused like project and agent_id.
    aws = "AKIA" + "Z9" * 8
    namespace = f"{NS}:{aws}"
    remembered = await client.post(
        "/v1/remember",
        json={"namespace": namespace, "content": "The billing export runs nightly at 02:00."},
        headers=key.headers,
    )
    artifact = await client.post(
        "/v1/artifacts",
        json={"namespace": namespace, "name": "export", "body": {"rows": 3}},
        headers=key.headers,
    )
    context = await client.post(
        "/v1/context",
        json={"namespace": namespace, "goal": "billing export"},
        headers=key.headers,
    )
    for response in (remembered, artifact, context):
        assert response.status_code == 422, response.text
        assert response.json()["error"]["field"] == "namespace"
        assert aws not in response.text
        assert "AWS_ACCESS_KEY" in response.json()["error"]["message"]
    assert aws not in await _dump(app)


async def test_list_filters_holding_a_secret_stay_out_of_the_audit_row(
    app: FastAPI, client: httpx.AsyncClient, key: Key
) -> None:
    secret = "Hunter22xQ"
    aws = "AKIA" + "Z9" * 8
    namespace = f"{NS}:filters"
    stored = await client.post(
        "/v1/remember",
        json={
            "namespace": namespace,
            "content": "The billing export runs nightly at 02:00.",
            "tags": [f"password={secret}"],
        },
        headers=key.headers,
    )
    assert stored.status_code == 201, stored.text
    # A tag filter is matched as the tag is stored: redacted.
    listed = await client.get(
        "/v1/memories",
        params={"namespace": namespace, "tag": f"password={secret}"},
        headers=key.headers,
    )
    assert listed.status_code == 200, listed.text
    assert [m["id"] for m in listed.json()["items"]] == [stored.json()["id"]]
    # Identifiers holding a secret are refused, as on writes, naming the field only.
    for field in ("project", "agent_id", "key"):
        refused = await client.get(
            "/v1/memories", params={"namespace": namespace, field: aws}, headers=key.headers
        )
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["field"] == field
        assert aws not in refused.text
    dump = await _dump(app)
    assert secret not in dump
    assert aws not in dump
