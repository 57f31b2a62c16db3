"""GET /metrics: Prometheus text with request counts and latency per route template, gate
rejections by reason, redactions by label; request ids on every response."""

from __future__ import annotations

import uuid

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import AppFactory, Key

FACT = "Deploys to staging need the VPN because the bastion only accepts internal addresses."


async def scrape(client: httpx.AsyncClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_requests_counted_by_route_template(client: httpx.AsyncClient, key: Key) -> None:
    before = await scrape(client)
    missing = uuid.uuid4()
    response = await client.get(f"/v1/memories/{missing}", headers=key.headers)
    assert response.status_code == 404
    await client.get("/v1/no-such-endpoint", headers=key.headers)
    after = await scrape(client)
    route = {"method": "GET", "route": "/v1/memories/{memory_id}"}
    assert value(after, "ctxpack_http_requests_total", **route, status="404") == (
        value(before, "ctxpack_http_requests_total", **route, status="404") + 1
    )
    assert value(after, "ctxpack_http_request_duration_seconds_count", **route) >= 1
    assert (
        value(after, "ctxpack_http_requests_total", method="GET", route="unmatched", status="404")
        >= 1
    )
    text = (await client.get("/metrics")).text
    assert str(missing) not in text
    assert "no-such-endpoint" not in text
    assert key.key not in text
    assert str(key.org_id) not in text


async def test_gate_rejections_redactions_and_writes(client: httpx.AsyncClient, key: Key) -> None:
    before = await scrape(client)
    token = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
    stored = await client.post(
        "/v1/remember",
        json={"namespace": "alice", "content": f"{FACT} The CI token is {token} for now."},
        headers=key.headers,
    )
    assert stored.status_code == 201, stored.text
    rejected = await client.post(
        "/v1/remember", json={"namespace": "alice", "content": "ok"}, headers=key.headers
    )
    assert rejected.status_code == 422
    reasons = [r["code"] for r in rejected.json()["error"]["reasons"]]
    batch = await client.post(
        "/v1/remember/batch",
        json={
            "items": [
                {"namespace": "alice", "content": "hmm"},
                {"namespace": "bob", "content": FACT},
            ]
        },
        headers=key.headers,
    )
    assert batch.json()["rejected"] == 1
    after = await scrape(client)

    def grew(name: str, by: float = 1, **labels: str) -> bool:
        return value(after, name, **labels) - value(before, name, **labels) >= by

    assert grew("ctxpack_redactions_total", label="GITHUB_TOKEN")
    for reason in reasons:
        assert grew("ctxpack_gate_rejections_total", reason=reason)
    assert grew("ctxpack_memory_writes_total", by=2, status="created")
    assert grew("ctxpack_memory_writes_total", by=2, status="rejected")
    assert token not in (await client.get("/metrics")).text


async def test_request_id_is_echoed_or_made(client: httpx.AsyncClient) -> None:
    given = await client.get("/healthz", headers={"X-Request-ID": "trace-42.a_b"})
    assert given.headers["X-Request-ID"] == "trace-42.a_b"
    made = await client.get("/healthz", headers={"X-Request-ID": "bad id\twith spaces"})
    assert made.headers["X-Request-ID"] != "bad id\twith spaces"
    assert len(made.headers["X-Request-ID"]) == 32
    refused = await client.post(
        "/v1/remember", content=b"x" * 10, headers={"Content-Length": "999999999"}
    )
    assert refused.status_code == 413
    assert refused.headers["X-Request-ID"]


async def test_metrics_can_be_turned_off(app_with: AppFactory) -> None:
    async with app_with(metrics_enabled=False) as client:
        assert (await client.get("/metrics")).status_code == 404
        assert (await client.get("/healthz")).headers["X-Request-ID"]


async def test_metrics_is_not_in_the_api_schema(client: httpx.AsyncClient) -> None:
    schema = (await client.get("/openapi.json")).json()
    assert "/metrics" not in schema["paths"]


async def test_context_packs_are_measured(client: httpx.AsyncClient, key: Key) -> None:
    await client.post(
        "/v1/remember", json={"namespace": "alice", "content": FACT}, headers=key.headers
    )
    before = await scrape(client)
    pack = await client.post(
        "/v1/context",
        json={"goal": "staging deploys VPN bastion", "namespace": "alice"},
        headers=key.headers,
    )
    assert pack.status_code == 200, pack.text
    after = await scrape(client)
    assert value(after, "ctxpack_pack_items_count") == value(before, "ctxpack_pack_items_count") + 1
    assert (
        value(after, "ctxpack_pack_tokens_count") == value(before, "ctxpack_pack_tokens_count") + 1
    )
