"""POST /v1/context: what the route answers before and around the domain's pack, a 422
naming the field, the 403s of scope and reach, and the audit row of a refused call (the pack's
own rules are tests/domain/test_context.py)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from service.domain.facets import INTENTS, LAYERS
from service.schemas.context import Intent, Layer
from service.store.models import AuditEvent
from tests.conftest import Key, KeyFactory

GOAL = "Fix the blue green deploy pipeline health checks"


async def test_namespace_outside_key_prefixes_is_403(
    client: httpx.AsyncClient, make_key: KeyFactory
) -> None:
    narrow = await make_key(namespaces=["alice:s1"])
    response = await client.post(
        "/v1/context", json={"goal": GOAL, "namespace": "bob"}, headers=narrow.headers
    )
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "namespace_access_denied"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"goal": GOAL, "namespace": "alice", "intent": "hack"}, "intent"),
        ({"goal": GOAL, "namespace": "alice", "layer": "everything"}, "layer"),
        ({"goal": "   ", "namespace": "alice"}, "goal"),
        ({"goal": "", "namespace": "alice"}, "goal"),
        ({"namespace": "alice"}, "goal"),
        ({"goal": GOAL, "namespace": "alice::t"}, "namespace"),
        ({"goal": GOAL, "namespace": "a:b:c:d"}, "namespace"),
        ({"goal": GOAL, "namespace": "al ice"}, "namespace"),
        ({"goal": GOAL}, "namespace"),
        ({"goal": GOAL, "namespace": "alice", "retrieval": "magic"}, "retrieval"),
        (
            {"goal": GOAL, "namespace": "alice", "markdown_token_budget": 32001},
            "markdown_token_budget",
        ),
        ({"goal": GOAL, "namespace": "alice", "domain": "ops\x00"}, "domain"),
        ({"goal": "deploy\x00", "namespace": "alice"}, "goal"),
        ({"goal": GOAL, "namespace": "alice", "surprise": 1}, "surprise"),
    ],
)
async def test_bad_input_is_422_naming_the_field(
    client: httpx.AsyncClient, key: Key, body: dict[str, Any], field: str
) -> None:
    response = await client.post("/v1/context", json=body, headers=key.headers)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field


def test_schema_literals_match_the_domain() -> None:
    assert set(Intent.__args__) == set(INTENTS)  # type: ignore[attr-defined]
    assert set(Layer.__args__) == set(LAYERS)  # type: ignore[attr-defined]


async def test_read_scope_is_required(client: httpx.AsyncClient, make_key: KeyFactory) -> None:
    writer = await make_key(scopes=["write"])
    response = await client.post(
        "/v1/context", json={"goal": GOAL, "namespace": "alice"}, headers=writer.headers
    )
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "scope_denied"


async def test_failed_call_is_audited_too(
    client: httpx.AsyncClient, make_key: KeyFactory, app: FastAPI
) -> None:
    limited = await make_key(projects=["p2"])
    response = await client.post(
        "/v1/context",
        json={"goal": GOAL, "namespace": "alice", "project": "p1"},
        headers=limited.headers,
    )
    assert response.status_code == 403
    async with app.state.ctx.sessionmaker() as session:
        rows = (
            (await session.execute(select(AuditEvent).where(AuditEvent.org_id == limited.org_id)))
            .scalars()
            .all()
        )
    assert [(r.action, r.status_code) for r in rows] == [("context", 403)]
