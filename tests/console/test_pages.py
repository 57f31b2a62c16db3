"""The console over ASGI (no browser): sign-in, pages, scopes, CSRF, not-found, escaping.
The same flows in a real browser: test_console_browser.py."""

from __future__ import annotations

import uuid

import httpx
import pytest
from fastapi import FastAPI

from service.domain import keys as key_service
from service.errors import InvalidInput
from tests.conftest import Key, KeyFactory
from tests.console.conftest import csrf_of, sign_in
from tests.domain.test_expiry import expire_now

pytestmark = pytest.mark.asyncio


async def _remember(client: httpx.AsyncClient, key: Key, **body: object) -> str:
    payload = {
        "namespace": "alice:s1",
        "type": "decision",
        "content": "We chose Postgres 17 for the billing service because of logical replication.",
        **body,
    }
    r = await client.post("/v1/remember", json=payload, headers=key.headers)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def test_pages_need_a_session(client: httpx.AsyncClient) -> None:
    for path in ("/ui/", "/ui/memories", "/ui/audit", "/ui/namespaces", "/ui/pack", "/ui/keys"):
        r = await client.get(path, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/ui/login", path


async def test_sign_in_cookie_and_headers(client: httpx.AsyncClient, key: Key) -> None:
    form = await client.get("/ui/login")
    csp = form.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp
    r = await client.post(
        "/ui/login", data={"csrf": csrf_of(form.text), "key": key.key}, follow_redirects=False
    )
    cookie = r.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
    assert key.key not in cookie and key.key[5:20] not in cookie
    page = await client.get("/ui/")
    assert page.status_code == 200 and key.key not in page.text


async def test_bad_key_and_missing_login_csrf(client: httpx.AsyncClient, key: Key) -> None:
    form = await client.get("/ui/login")
    bad = await client.post("/ui/login", data={"csrf": csrf_of(form.text), "key": "ctxp_nope"})
    assert bad.status_code == 401 and "unknown or revoked" in bad.text
    client.cookies.clear()
    forged = await client.post("/ui/login", data={"csrf": "x", "key": key.key})
    assert forged.status_code == 403


async def test_every_page_renders(client: httpx.AsyncClient, key: Key) -> None:
    mid = await _remember(client, key, tags=["db"], url="https://example.com/x")
    await client.post(
        "/v1/context",
        json={"goal": "which database for billing", "namespace": "alice:s1"},
        headers=key.headers,
    )
    await sign_in(client, key.key)
    for path in (
        "/ui/",
        "/ui/namespaces",
        "/ui/memories",
        "/ui/memories?ns=alice&type=decision&q=postgres",
        f"/ui/memories/{mid}",
        f"/ui/memories/{mid}/edit",
        f"/ui/memories/{mid}/forget",
        "/ui/pack",
        "/ui/audit",
        "/ui/audit?action=context&since=2020-01-01&until=2100-01-01",
        "/ui/keys",
    ):
        r = await client.get(path)
        assert r.status_code == 200, (path, r.text[:500])
    listed = await client.get("/ui/memories?q=replication")
    assert mid in listed.text
    assert mid not in (await client.get("/ui/memories?q=kubernetes")).text


async def test_edit_goes_through_the_gate_and_is_audited(
    client: httpx.AsyncClient, key: Key
) -> None:
    mid = await _remember(client, key)
    csrf = await sign_in(client, key.key)
    form = await client.get(f"/ui/memories/{mid}/edit")
    fields = dict(
        __import__("re").findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', form.text)
    )
    base = {
        **fields,
        "csrf": csrf,
        "name": "We chose Postgres 17 for the billing service because of logical replication.",
        "type": "decision",
        "tags": "",
        "url": "",
        "source": "",
    }
    rejected = await client.post(
        f"/ui/memories/{mid}/edit", data={**base, "content": "ok", "name": "A name typed"}
    )
    assert rejected.status_code == 422 and "gate-rejected" in rejected.text
    assert 'value="A name typed"' in rejected.text  # the form comes back as it was sent
    ok = await client.post(
        f"/ui/memories/{mid}/edit",
        data={
            **base,
            "content": "Billing moved to Postgres 17; the password is hunter2hunter2 and token ghp_"
            + "a" * 36,
        },
    )
    assert ok.status_code == 200, ok.text
    assert "gate-accepted" in ok.text and "ghp_" + "a" * 36 not in ok.text
    trail = (await client.get("/v1/audit?action=memory_update", headers=key.headers)).json()[
        "items"
    ]
    assert [r["outcome"] for r in trail] == ["updated", "rejected"]
    assert trail[0]["redaction_count"] >= 1


async def test_read_only_key_sees_no_controls_and_forged_post_is_refused(
    client: httpx.AsyncClient, key: Key, make_key: KeyFactory
) -> None:
    mid = await _remember(client, key)
    reader = await make_key(org=key.org, scopes=["read"])
    csrf = await sign_in(client, reader.key)
    page = await client.get(f"/ui/memories/{mid}")
    assert page.status_code == 200 and "edit-controls" not in page.text
    assert "/ui/keys" not in page.text
    forged = await client.post(f"/ui/memories/{mid}/forget", data={"csrf": csrf, "confirm": "yes"})
    assert forged.status_code == 403
    assert (await client.get(f"/v1/memories/{mid}", headers=key.headers)).status_code == 200


async def test_csrf_required_on_state_changes(client: httpx.AsyncClient, key: Key) -> None:
    mid = await _remember(client, key)
    await sign_in(client, key.key)
    r = await client.post(f"/ui/memories/{mid}/forget", data={"csrf": "wrong", "confirm": "yes"})
    assert r.status_code == 403
    r = await client.post(f"/ui/memories/{mid}/forget", data={"confirm": "yes"})
    assert r.status_code == 403
    assert (await client.get(f"/v1/memories/{mid}", headers=key.headers)).status_code == 200


async def test_other_org_ids_are_not_found(
    client: httpx.AsyncClient, key: Key, make_key: KeyFactory
) -> None:
    other = await make_key()
    theirs = await _remember(client, other)
    await sign_in(client, key.key)
    missing = await client.get(f"/ui/memories/{uuid.uuid4()}")
    foreign = await client.get(f"/ui/memories/{theirs}")
    garbage = await client.get("/ui/memories/not-an-id")
    assert missing.status_code == foreign.status_code == garbage.status_code == 404
    assert missing.text == foreign.text == garbage.text
    their_audit = (await client.get("/v1/audit", headers=other.headers)).json()["items"][0]["id"]
    assert (await client.get(f"/ui/audit/{their_audit}")).text == (
        await client.get(f"/ui/audit/{uuid.uuid4()}")
    ).text


async def test_revocation_and_sign_out_end_the_session(
    client: httpx.AsyncClient, key: Key, make_key: KeyFactory, app: object
) -> None:
    second = await make_key(org=key.org, scopes=["read"])
    csrf = await sign_in(client, second.key)
    assert (await client.get("/ui/")).status_code == 200
    async with app.state.ctx.sessionmaker() as session:  # type: ignore[attr-defined]
        await key_service.revoke_key(session, str(second.key_id))
        await session.commit()
    assert (await client.get("/ui/", follow_redirects=False)).status_code == 303
    client.cookies.clear()
    csrf = await sign_in(client, key.key)
    out = await client.post("/ui/logout", data={"csrf": csrf}, follow_redirects=False)
    assert out.status_code == 303
    assert (await client.get("/ui/", follow_redirects=False)).status_code == 303


async def test_keys_page_creates_once_and_revokes(client: httpx.AsyncClient, key: Key) -> None:
    csrf = await sign_in(client, key.key)
    created = await client.post(
        "/ui/keys",
        data={
            "csrf": csrf,
            "name": "reader <b>",
            "scopes": ["read"],
            "projects": "",
            "namespaces": "alice",
        },
    )
    assert created.status_code == 200, created.text
    assert "reader &lt;b&gt;" in created.text
    new_key = __import__("re").search(r'id="new-key" value="(ctxp_[^"]+)"', created.text).group(1)
    assert (
        await client.get("/v1/whoami", headers={"Authorization": f"Bearer {new_key}"})
    ).status_code == 200
    listing = await client.get("/ui/keys")
    assert new_key not in listing.text
    kid = (await client.get("/v1/whoami", headers={"Authorization": f"Bearer {new_key}"})).json()[
        "key_id"
    ]
    r = await client.post(f"/ui/keys/{kid}/revoke", data={"csrf": csrf}, follow_redirects=False)
    assert r.status_code == 303
    assert (
        await client.get("/v1/whoami", headers={"Authorization": f"Bearer {new_key}"})
    ).status_code == 401


async def test_limited_admin_cannot_mint_a_wider_key(
    client: httpx.AsyncClient, make_key: KeyFactory
) -> None:
    admin = await make_key(namespaces=["alice"])
    csrf = await sign_in(client, admin.key)
    r = await client.post(
        "/ui/keys", data={"csrf": csrf, "name": "wide", "scopes": ["read"], "namespaces": ""}
    )
    assert r.status_code == 403


async def test_stored_markup_is_escaped(client: httpx.AsyncClient, key: Key) -> None:
    mid = await _remember(
        client,
        key,
        content="Decision: render <script>alert(1)</script> and <img src=x onerror=alert(2)> as text in the console.",
        name="<script>alert(3)</script>",
        url="javascript:alert(4)",
        tags=["<b>t</b>"],
    )
    await sign_in(client, key.key)
    for path in (f"/ui/memories/{mid}", "/ui/memories", "/ui/"):
        text = (await client.get(path)).text
        assert "<script>alert" not in text and "<img src=x" not in text and "<b>t</b>" not in text
        assert 'href="javascript:' not in text


async def test_swagger_docs_are_self_hosted(client: httpx.AsyncClient) -> None:
    page = await client.get("/docs")
    assert page.status_code == 200
    assert "cdn" not in page.text.lower() and "/docs/assets/swagger-ui-bundle.js" in page.text
    assert (await client.get("/docs/assets/swagger-ui-bundle.js")).status_code == 200
    assert (await client.get("/docs/assets/swagger-ui.css")).status_code == 200


async def test_overview_counts_and_series(client: httpx.AsyncClient, key: Key) -> None:
    await _remember(client, key)
    await _remember(
        client,
        key,
        type="gotcha",
        namespace="alice:s2",
        content="Gotcha: deploys fail when the token ghp_"
        + "b" * 36
        + " expires; rotate it monthly.",
    )
    refused = await client.post(
        "/v1/remember", json={"namespace": "alice", "content": "ok"}, headers=key.headers
    )
    assert refused.status_code == 422
    reason = refused.json()["error"]["reasons"][0]["code"]
    batch = await client.post(
        "/v1/remember/batch",
        json={"items": [{"namespace": "alice", "content": "hmm"}]},
        headers=key.headers,
    )
    assert batch.json()["rejected"] == 1
    await client.post(
        "/v1/context",
        json={"goal": "billing database", "namespace": "alice:s1"},
        headers=key.headers,
    )
    await sign_in(client, key.key)
    page = (await client.get("/ui/")).text
    assert '<strong id="total">2</strong>' in page
    assert "alice:s2" in page and "gotcha" in page and "gotchas" in page
    assert f"{reason} (" in page  # the rejections chart's legend
    assert "GITHUB_TOKEN (1)" in page  # the redactions chart's legend
    assert "pack calls (1)" in page


async def test_read_only_key_gets_no_edit_form_and_nul_is_refused(
    client: httpx.AsyncClient, key: Key, make_key: KeyFactory
) -> None:
    mid = await _remember(client, key)
    reader = await make_key(org=key.org, scopes=["read"])
    await sign_in(client, reader.key)
    assert (await client.get(f"/ui/memories/{mid}/edit")).status_code == 403
    assert (await client.get(f"/ui/memories/{mid}/forget")).status_code == 403
    client.cookies.clear()
    csrf = await sign_in(client, key.key)
    r = await client.post("/ui/pack", data={"csrf": csrf, "goal": "a\x00b", "namespace": "alice"})
    assert r.status_code == 422 and "goal" in r.text


async def test_cookie_is_secure_behind_https(app: object, key: Key) -> None:
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="https://console.test") as c:
        form = await c.get("/ui/login")
        r = await c.post(
            "/ui/login", data={"csrf": csrf_of(form.text), "key": key.key}, follow_redirects=False
        )
        assert r.status_code == 303
        assert "Secure" in r.headers["set-cookie"]
        assert "Path=/ui" in r.headers["set-cookie"]


async def test_expiry_is_shown_on_the_detail_and_the_list(
    client: httpx.AsyncClient, key: Key
) -> None:
    expiring = await _remember(
        client,
        key,
        name="Expiring note",
        content="The staging freeze lasts until the release branch is cut next Tuesday.",
        ttl_seconds=7200,
    )
    lasting = await _remember(client, key, name="Lasting note")
    got = (await client.get(f"/v1/memories/{expiring}", headers=key.headers)).json()
    when = got["expires_at"][:19].replace("T", " ")
    await sign_in(client, key.key)
    detail = (await client.get(f"/ui/memories/{expiring}")).text
    assert f'<dd id="expires">{when}</dd>' in detail
    forever = (await client.get(f"/ui/memories/{lasting}")).text
    assert '<dd id="expires">never</dd>' in forever
    listing = (await client.get("/ui/memories")).text
    row = listing.split(f'data-id="{expiring}"', 1)[1].split("</tr>", 1)[0]
    assert f"<td>{when}</td>" in row
    other = listing.split(f'data-id="{lasting}"', 1)[1].split("</tr>", 1)[0]
    assert other.endswith("<td></td>")


async def test_expired_memories_leave_the_overview_and_the_tree(
    client: httpx.AsyncClient, key: Key, pg_url: str
) -> None:
    gone = await _remember(
        client,
        key,
        name="Stale freeze note",
        namespace="zed:s9",
        content="The staging freeze lasts until the release branch is cut next Tuesday.",
        ttl_seconds=7200,
    )
    await _remember(client, key, name="Lasting note")
    expire_now(pg_url, gone)
    await sign_in(client, key.key)
    overview = (await client.get("/ui/")).text
    assert '<strong id="total">1</strong>' in overview
    assert "Stale freeze note" not in overview and "zed:s9" not in overview
    tree = (await client.get("/ui/namespaces?open=zed")).text
    assert "zed" not in tree


async def test_a_refused_form_is_audited_once_like_the_apis_422(
    client: httpx.AsyncClient, key: Key
) -> None:
    mid = await _remember(client, key)
    csrf = await sign_in(client, key.key)
    bad = await client.post(
        "/ui/pack", data={"csrf": csrf, "goal": "billing", "namespace": "alice", "limit": "99"}
    )
    assert bad.status_code == 422
    unticked = await client.post(f"/ui/memories/{mid}/forget", data={"csrf": csrf})
    assert unticked.status_code == 422

    packs = (await client.get("/v1/audit?action=context", headers=key.headers)).json()["items"]
    assert [p["status_code"] for p in packs] == [422]
    deletes = (await client.get("/v1/audit?action=delete", headers=key.headers)).json()["items"]
    assert [d["status_code"] for d in deletes] == [422]
    # A refusal inside the call (the gate) keeps its one row from the runner.
    form = await client.get(f"/ui/memories/{mid}/edit")
    fields = dict(
        __import__("re").findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', form.text)
    )
    await client.post(
        f"/ui/memories/{mid}/edit",
        data={**fields, "csrf": csrf, "content": "ok", "name": "n", "type": "decision"},
    )
    updates = (await client.get("/v1/audit?action=memory_update", headers=key.headers)).json()
    assert [u["status_code"] for u in updates["items"]] == [422]


async def test_a_key_name_or_project_holding_a_secret_is_refused(
    app: FastAPI, client: httpx.AsyncClient, key: Key
) -> None:
    """A key's name is the ``caller`` of every audit row it writes and its projects are
    kept as sent: a secret in either reached the trail verbatim (review E)."""
    token = "ghp_" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8"
    csrf = await sign_in(client, key.key)
    for field, data in (
        ("name", {"name": f"ci {token}", "projects": ""}),
        ("projects", {"name": "ci", "projects": "AKIAIOSFODNN7EXAMPLK"}),
    ):
        r = await client.post(
            "/ui/keys", data={"csrf": csrf, "scopes": ["read"], "namespaces": "", **data}
        )
        assert r.status_code == 422, r.text
        assert field in r.text
    trail = await client.get("/v1/audit", params={"full": "true"}, headers=key.headers)
    assert token not in trail.text and "AKIAIOSFODNN7EXAMPLK" not in trail.text
    with pytest.raises(InvalidInput):  # the CLI's path too
        async with app.state.ctx.sessionmaker() as session:
            await key_service.create_key(session, org="acme", name=f"ci {token}")


@pytest.mark.parametrize("stored", ["crlf", "lf", "cr"])
async def test_a_rename_only_edit_leaves_the_content_as_stored(
    client: httpx.AsyncClient, key: Key, stored: str
) -> None:
    """Review 2: a rename-only edit rewrote content stored with CRLF line ends (a browser
    sends a textarea's lines with CRLF; the form compared them with the stored text and
    found a change). An unchanged field is not written, whatever its line ends."""
    ends = {"crlf": "\r\n", "lf": "\n", "cr": "\r"}[stored]
    content = ends.join([
        "Rotating the staging TLS certificate:",
        "1. renew with cert-manager",
        "2. restart the ingress controller",
    ])
    mid = await _remember(client, key, type="procedure", content=content)
    csrf = await sign_in(client, key.key)
    form = await client.get(f"/ui/memories/{mid}/edit")
    fields = dict(
        __import__("re").findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', form.text)
    )
    sent = content.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\r\n")  # as a browser
    renamed = await client.post(
        f"/ui/memories/{mid}/edit",
        data={**fields, "csrf": csrf, "content": sent, "name": "Rotate the staging certificate",
              "type": "procedure", "tags": "", "url": "", "source": ""},
    )
    assert renamed.status_code == 200, renamed.text
    got = (await client.get(f"/v1/memories/{mid}", headers=key.headers)).json()
    assert got["name"] == "Rotate the staging certificate"
    assert got["content"] == content  # byte for byte, line ends included
