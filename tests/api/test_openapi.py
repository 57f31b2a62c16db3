"""api/openapi.py: the OpenAPI document says what every /v1 operation may answer besides its
own answers: 429 (the key's rate limit) everywhere, 413 where the operation takes a body, both
with the error tree's body schema; paths outside /v1 are left as they are."""

from __future__ import annotations

from tests.conftest import AppFactory


async def test_429_and_413_are_in_the_openapi_schema(app_with: AppFactory) -> None:
    async with app_with() as client:
        schema = (await client.get("/openapi.json")).json()
    remember = schema["paths"]["/v1/remember"]["post"]["responses"]
    assert {"413", "429"} <= set(remember)
    listing = schema["paths"]["/v1/memories"]["get"]["responses"]
    assert "429" in listing
    assert "413" not in listing
    assert "ErrorResponse" in schema["components"]["schemas"]


async def test_the_probes_are_left_as_they_are(app_with: AppFactory) -> None:
    async with app_with() as client:
        schema = (await client.get("/openapi.json")).json()
    assert "429" not in schema["paths"]["/healthz"]["get"]["responses"]
    assert schema["components"]["schemas"]["ErrorResponse"]["properties"]["error"]
