"""Review 2, finding 8: one 3.9 MB artifact cost 3.8 s of CPU and one batch 3.0 s, before any
bound. The text one write call has redacted is now at most ``max_scanned_bytes``: above it, a
413 naming the field, before any scan and with nothing written."""

from __future__ import annotations

from tests.conftest import AppFactory, KeyFactory


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
