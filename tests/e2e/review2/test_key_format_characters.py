"""Review 2: memory keys accepted bidi overrides and other Unicode format characters, so two
keys that look the same differ and a key reads backwards in the console. Refused (422, key)."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import KeyFactory

TEXT = "Release notes are drafted in the wiki and copied to GitHub on tag."


@pytest.mark.parametrize(
    "bad", ["deploy\u202eyalp", "deploy\u200bnotes", "\u2066deploy\u2069", "dep\u00adloy", "a\ufeffb",
            "c1\u0085control", "line\u2028break", "para\u2029graph"],
)
async def test_format_characters_in_keys_are_refused(
    client: httpx.AsyncClient, make_key: KeyFactory, bad: str
) -> None:
    key = await make_key()
    response = await client.post(
        "/v1/remember", json={"namespace": "n", "content": TEXT, "key": bad}, headers=key.headers
    )
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == "key"
    batch = await client.post(
        "/v1/remember/batch",
        json={"items": [{"namespace": "n", "content": TEXT, "key": bad}]},
        headers=key.headers,
    )
    assert batch.status_code == 422 and batch.json()["error"]["field"] == "items.0.key"
    fine = await client.post(
        "/v1/remember",
        json={"namespace": "n", "content": TEXT, "key": "déploiement/notes v2 — 发布"},
        headers=key.headers,
    )
    assert fine.status_code == 201, fine.text
