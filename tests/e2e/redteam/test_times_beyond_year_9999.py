"""A date-time of year 9999 with a negative offset (``9999-12-31T23:00:00-05:00``) is year
10000 in UTC (review G): PostgreSQL stored it, and every later read of the memory failed
(psycopg cannot return a timestamp after year 9999), so one PATCH made a memory, and any list
or pack holding it, unreadable. Such times are refused, naming the field."""

from __future__ import annotations

import httpx

from tests.conftest import KeyFactory

TEXT = "The staging database lives on port 5433, not the default 5432."
BEYOND = "9999-12-31T23:00:00-05:00"


async def test_a_time_beyond_year_9999_in_utc_is_refused(
    client: httpx.AsyncClient, make_key: KeyFactory
) -> None:
    key = await make_key()
    made = await client.post(
        "/v1/remember", json={"namespace": "a", "type": "gotcha", "content": TEXT}, headers=key.headers
    )
    mid = made.json()["id"]
    for field in ("expires_at", "valid_at"):
        patched = await client.patch(f"/v1/memories/{mid}", json={field: BEYOND}, headers=key.headers)
        assert patched.status_code == 422, patched.text
        assert patched.json()["error"]["field"] == field
        written = await client.post(
            "/v1/remember",
            json={"namespace": "a", "type": "gotcha", "content": TEXT + " Again.", field: BEYOND},
            headers=key.headers,
        )
        assert written.status_code == 422 and written.json()["error"]["field"] == field
    assert (await client.get(f"/v1/memories/{mid}", headers=key.headers)).status_code == 200
    listed = await client.get("/v1/memories", params={"namespace": "a"}, headers=key.headers)
    assert listed.status_code == 200 and len(listed.json()["items"]) == 1
    # Year 9999 itself stays valid.
    late = await client.patch(
        f"/v1/memories/{mid}", json={"expires_at": "9999-12-31T23:00:00Z"}, headers=key.headers
    )
    assert late.status_code == 200, late.text
