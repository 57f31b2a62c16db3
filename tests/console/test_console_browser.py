"""The console in a real browser: headless Chromium (Debian package) driven by Selenium,
against a real server on a socket and the embedded Postgres. Skipped, with the reason shown,
when Chromium or chromedriver is absent (`.ci/run` installs them)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from service.app import create_app
from service.domain import keys as key_service
from service.embedding.fake import FakeEmbedder
from tests.conftest import Key, KeyFactory, make_settings
from tests.console import live

REASON = live.browser_missing()
pytestmark = [pytest.mark.asyncio, pytest.mark.skipif(REASON is not None, reason=REASON or "")]

if REASON is None:
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By


@pytest.fixture(scope="module")
def base_url(pg_url: str) -> Iterator[str]:
    app = create_app(make_settings(pg_url), embedder=FakeEmbedder(), database_url=pg_url)
    with live.live_server(app) as url:
        yield url


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    with live.chromium() as d:
        yield d


@pytest.fixture
async def browser(driver: Any, base_url: str) -> AsyncIterator[Any]:
    driver.delete_all_cookies()
    yield driver
    driver.delete_all_cookies()


@pytest.fixture
def api(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=30) as c:
        yield c


def remember(api: httpx.Client, key: Key, **body: Any) -> str:
    payload = {
        "namespace": "alice:s1",
        "type": "decision",
        "content": "We chose Postgres 17 for the billing service because of logical replication.",
        **body,
    }
    r = api.post("/v1/remember", json=payload, headers=key.headers)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def text_of(driver: Any, css: str) -> str:
    return str(driver.find_element(By.CSS_SELECTOR, css).text)


def page(driver: Any) -> str:
    return str(
        driver.find_element(By.CSS_SELECTOR, "[data-page], #error-page").get_attribute("data-page")
        or "error"
    )


async def test_sign_in_browse_and_filter(
    browser: Any, base_url: str, api: httpx.Client, key: Key
) -> None:
    remember(api, key)
    remember(
        api,
        key,
        type="gotcha",
        namespace="alice:s2",
        content="Gotcha: the search indexer drops documents larger than 10 MB without an error.",
    )
    live.sign_in(browser, base_url, key.key)
    assert "2" in text_of(browser, "#total")
    browser.find_element(By.CSS_SELECTOR, '[data-nav="namespaces"]').click()
    live.wait_for(browser, lambda d: d.find_elements(By.ID, "tree"))
    assert "alice" in text_of(browser, "#tree") and "s2" not in text_of(browser, "#tree")
    browser.find_element(By.CSS_SELECTOR, '#tree a[title="open"]').click()
    live.wait_for(browser, lambda d: "s2" in d.find_element(By.ID, "tree").text)
    browser.find_element(By.CSS_SELECTOR, '[data-nav="memories"]').click()
    live.wait_for(browser, lambda d: d.find_elements(By.ID, "memories"))
    assert len(browser.find_elements(By.CSS_SELECTOR, "#memories tbody tr[data-id]")) == 2
    browser.find_element(By.CSS_SELECTOR, 'select[name="type"] option[value="gotcha"]').click()
    browser.find_element(By.ID, "apply").click()
    live.wait_for(
        browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#memories tbody tr[data-id]")) == 1
    )
    assert "indexer" in text_of(browser, "#memories tbody")
    browser.find_element(By.NAME, "type").find_element(By.CSS_SELECTOR, 'option[value=""]').click()
    browser.find_element(By.NAME, "q").send_keys("replication")
    browser.find_element(By.ID, "apply").click()
    live.wait_for(browser, lambda d: "billing" in d.find_element(By.ID, "memories").text)
    browser.find_element(By.CSS_SELECTOR, "#memories tbody a").click()
    live.wait_for(browser, lambda d: d.find_elements(By.ID, "content"))
    assert "logical replication" in text_of(browser, "#content")


async def test_pack_preview_matches_the_api(
    browser: Any, base_url: str, api: httpx.Client, key: Key
) -> None:
    for i, text in enumerate(
        [
            "We chose Postgres 17 for the billing service because of logical replication.",
            "Billing invoices are generated nightly by the scheduler at 02:00 UTC.",
            "Gotcha: the billing webhook retries three times and then drops the event.",
        ]
    ):
        remember(api, key, content=text, type=["decision", "procedure", "gotcha"][i])
    live.sign_in(browser, base_url, key.key)
    browser.get(base_url + "/ui/pack")
    browser.find_element(By.NAME, "goal").send_keys("fix the billing webhook")
    browser.find_element(By.NAME, "namespace").send_keys("alice:s1")
    browser.find_element(By.ID, "preview").click()
    live.wait_for(browser, lambda d: d.find_elements(By.ID, "pack-result"))
    shown = [
        e.get_attribute("data-id") for e in browser.find_elements(By.CSS_SELECTOR, "tr.pack-item")
    ]
    expected = api.post(
        "/v1/context",
        json={"goal": "fix the billing webhook", "namespace": "alice:s1"},
        headers=key.headers,
    ).json()
    assert shown == [str(i["id"]) for s in expected["sections"] for i in s["items"]]
    assert text_of(browser, "#markdown") == expected["markdown"].strip() or expected[
        "markdown"
    ].strip() in text_of(browser, "#markdown")
    assert text_of(browser, "#tokens") == str(expected["markdown_tokens"])
    assert text_of(browser, "#gated-out") == str(expected["gated_out"])
    browser.find_element(By.ID, "audit-link").click()
    live.wait_for(browser, lambda d: d.find_elements(By.ID, "audit-id"))
    assert "context" in browser.find_element(By.TAG_NAME, "h1").text


async def test_gate_rejected_edit_shows_the_reason(
    browser: Any, base_url: str, api: httpx.Client, key: Key
) -> None:
    mid = remember(api, key)
    live.sign_in(browser, base_url, key.key)
    browser.get(f"{base_url}/ui/memories/{mid}")
    browser.find_element(By.ID, "edit").click()
    box = live.wait_for(browser, lambda d: d.find_element(By.ID, "content"))
    box.clear()
    box.send_keys("ok")
    browser.find_element(By.ID, "save").click()
    live.wait_for(browser, lambda d: d.find_elements(By.ID, "gate-rejected"))
    reasons = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#gate-rejected code.reason")]
    assert reasons, "no gate reason shown"
    assert (
        api.get(f"/v1/memories/{mid}", headers=key.headers).json()["content"].startswith("We chose")
    )


async def test_forget(browser: Any, base_url: str, api: httpx.Client, key: Key) -> None:
    mid = remember(api, key)
    live.sign_in(browser, base_url, key.key)
    browser.get(f"{base_url}/ui/memories/{mid}")
    browser.find_element(By.ID, "forget").click()
    live.wait_for(browser, lambda d: d.find_elements(By.ID, "forget-form"))
    browser.find_element(By.ID, "confirm").click()
    browser.find_element(By.ID, "do-forget").click()
    live.wait_for(browser, lambda d: d.find_elements(By.ID, "forgotten"))
    assert api.get(f"/v1/memories/{mid}", headers=key.headers).status_code == 404


async def test_audit_replay_shows_the_diff(
    browser: Any, base_url: str, api: httpx.Client, key: Key
) -> None:
    deploy = "blue green deploy pipeline: switch traffic only after the health checks pass"
    goal = "Fix the blue green deploy pipeline health checks"
    remember(api, key, namespace="alice", content=f"{deploy}, decided in the March review")
    pack = api.post(
        "/v1/context", json={"goal": goal, "namespace": "alice"}, headers=key.headers
    ).json()
    assert pack["total_items"] == 1
    remember(
        api,
        key,
        namespace="alice",
        content=f"Health checks of the {deploy} now probe the database too",
    )
    live.sign_in(browser, base_url, key.key)
    browser.get(base_url + "/ui/audit?action=context")
    browser.find_element(By.CSS_SELECTOR, f'tr[data-id="{pack["audit_id"]}"] a').click()
    live.wait_for(browser, lambda d: d.find_elements(By.ID, "replay"))
    browser.find_element(By.ID, "replay").click()
    live.wait_for(browser, lambda d: d.find_elements(By.ID, "diff-summary"))
    assert "1 added" in text_of(browser, "#diff-summary")
    assert browser.find_elements(By.CSS_SELECTOR, "#after li.added")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#before li")) == 1


async def test_read_only_key_sees_no_edit_controls_and_forged_post_is_refused(
    browser: Any, base_url: str, api: httpx.Client, key: Key, make_key: KeyFactory
) -> None:
    mid = remember(api, key)
    reader = await make_key(org=key.org, scopes=["read"])
    live.sign_in(browser, base_url, reader.key)
    browser.get(f"{base_url}/ui/memories/{mid}")
    live.wait_for(browser, lambda d: d.find_elements(By.ID, "content"))
    assert not browser.find_elements(By.ID, "edit-controls")
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-nav="keys"]')
    # A forged form with the session's own CSRF token: the server still refuses it.
    browser.execute_script(
        """const f = document.createElement('form'); f.method = 'post';
           f.action = '/ui/memories/' + arguments[0] + '/forget';
           for (const [k, v] of [['csrf', document.querySelector('input[name=csrf]').value], ['confirm', 'yes']]) {
             const i = document.createElement('input'); i.type = 'hidden'; i.name = k; i.value = v; f.appendChild(i); }
           document.body.appendChild(f); f.submit();""",
        mid,
    )
    live.wait_for(browser, lambda d: d.find_elements(By.ID, "error-page"))
    assert "403" in text_of(browser, "#error-page h1")
    assert api.get(f"/v1/memories/{mid}", headers=key.headers).status_code == 200


async def test_stored_payloads_are_inert(
    browser: Any, base_url: str, api: httpx.Client, key: Key
) -> None:
    mid = remember(
        api,
        key,
        content="Decision: the console must show stored markup such as "
        "<script>window.__pwned=1;fetch('/pwned-script')</script> and the image payload "
        '<img src=/pwned-img onerror="window.__pwned=2;alert(2)"> as plain text, because '
        "agents store whatever they read and the people who review memories must stay safe.",
        name="<img src=/pwned-name onerror=alert(3)>",
        url="javascript:window.__pwned=4;alert(4)",
        tags=["<script>alert(5)</script>"],
        metadata={"note": "<svg onload=alert(6)>"},
    )
    live.sign_in(browser, base_url, key.key)
    for path in (f"/ui/memories/{mid}", "/ui/memories", "/ui/", f"/ui/memories/{mid}/edit"):
        browser.get(base_url + path)
        live.wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "[data-page]"))
        with pytest.raises(NoAlertPresentException):
            browser.switch_to.alert.text  # noqa: B018
        assert browser.execute_script("return window.__pwned === undefined")
        resources = browser.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)"
        )
        assert not [r for r in resources if "pwned" in r], resources
        assert not browser.find_elements(By.CSS_SELECTOR, 'a[href^="javascript"]')
    browser.get(f"{base_url}/ui/memories/{mid}")
    assert "javascript:window.__pwned=4" in text_of(browser, "#url")
    assert "<script>" in text_of(browser, "#content")


async def test_sign_out(browser: Any, base_url: str, key: Key) -> None:
    live.sign_in(browser, base_url, key.key)
    browser.find_element(By.ID, "signout").click()
    live.wait_for(browser, lambda d: d.find_elements(By.ID, "signin"))
    browser.get(base_url + "/ui/memories")
    assert browser.find_elements(By.ID, "signin")


async def test_revocation_ends_the_session(
    browser: Any, base_url: str, key: Key, make_key: KeyFactory, app: Any
) -> None:
    second = await make_key(org=key.org, scopes=["read"])
    live.sign_in(browser, base_url, second.key)
    browser.get(base_url + "/ui/memories")
    assert browser.find_elements(By.ID, "memories")
    async with app.state.ctx.sessionmaker() as session:
        await key_service.revoke_key(session, str(second.key_id))
        await session.commit()
    browser.get(base_url + "/ui/memories")
    assert browser.find_elements(By.ID, "signin")


async def test_another_orgs_id_is_not_found(
    browser: Any, base_url: str, api: httpx.Client, key: Key, make_key: KeyFactory
) -> None:
    other = await make_key()
    theirs = remember(api, other)
    live.sign_in(browser, base_url, key.key)
    browser.get(f"{base_url}/ui/memories/{theirs}")
    foreign = text_of(browser, "#error-page")
    browser.get(f"{base_url}/ui/memories/{uuid.uuid4()}")
    assert text_of(browser, "#error-page") == foreign
    assert "404" in foreign and theirs not in browser.page_source


async def test_swagger_docs_work_offline(browser: Any, base_url: str) -> None:
    browser.get(base_url + "/docs")
    live.wait_for(
        browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".swagger-ui .info .title"), 60
    )
    assert "ctxpack" in text_of(browser, ".swagger-ui .info .title")
    live.wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".opblock"), 30)
    resources = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
    )
    assert resources and all(r.startswith(base_url) for r in resources), resources
