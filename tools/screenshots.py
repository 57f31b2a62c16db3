#!/usr/bin/env python3
"""`make screenshots`: a PNG of each console page (and /docs), taken in headless Chromium on a
seeded demo store, written to docs/screenshots/.

Starts an embedded Postgres in a temporary directory, migrates it, serves ctxpack on a free
port (the real all-MiniLM-L6-v2 model by default; `--embedder fake` for a quick run), writes
a small demo store through the HTTP API (memories in a few namespaces, relations, a
supersession, a redacted secret, gate rejections, context calls), then signs in and visits
each page. Needs Debian's chromium and chromium-driver.

Usage:
    python tools/screenshots.py [--out docs/screenshots] [--embedder fake]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from service.app import create_app  # noqa: E402
from service.config import Settings  # noqa: E402
from service.domain import keys as key_service  # noqa: E402
from service.store.database import (  # noqa: E402
    create_engine,
    ensure_database,
    make_sessionmaker,
    start_embedded,
    upgrade,
    with_database,
)
from tests.console import live  # noqa: E402

DEMO = [
    (
        "alice",
        "decision",
        "We chose Postgres 17 for the billing service because logical replication feeds the reporting replica.",
        ["billing", "db"],
    ),
    (
        "alice",
        "constraint",
        "Billing invoices must be generated in UTC; the scheduler runs the job nightly at 02:00.",
        ["billing"],
    ),
    (
        "alice:s1",
        "gotcha",
        "The billing webhook retries three times and then silently drops the event; check the dead-letter queue.",
        ["billing", "webhooks"],
    ),
    (
        "alice:s1",
        "procedure",
        "To rotate the Stripe webhook secret: create the new secret, deploy it, then revoke the old one after an hour.",
        ["billing", "ops"],
    ),
    (
        "alice:s1",
        "decision",
        "Payments retries use exponential backoff with jitter, capped at five minutes.",
        ["payments"],
    ),
    (
        "alice:s1:t1",
        "task",
        "Migrate the invoice PDF renderer off the deprecated wkhtmltopdf binary.",
        ["billing"],
    ),
    (
        "alice:s2",
        "pattern",
        "Feature flags for billing changes are rolled out to five percent of orgs first, then to all.",
        ["flags"],
    ),
    (
        "alice:s2",
        "verification",
        "Verified: the reporting replica lags the primary by under two seconds at peak load.",
        ["db"],
    ),
    (
        "bob",
        "rule",
        "Never run schema migrations during the backup window between 01:00 and 01:30 UTC.",
        ["db", "ops"],
    ),
    (
        "bob:s1",
        "claim",
        "The search indexer drops documents larger than 10 MB without logging an error.",
        ["search"],
    ),
    (
        "bob:s1",
        "idea",
        "Split the notifications service so that email bounces no longer block push delivery.",
        ["notifications"],
    ),
    (
        "bob:s1",
        "artifact",
        "Runbook for the gateway: restart order is auth, then gateway, then the edge proxies.",
        ["gateway"],
    ),
    (
        "bob:s2",
        "episode",
        "Incident on Tuesday: the export job overlapped with the backup and timed out after 30 minutes.",
        ["incident"],
    ),
    (
        "carol",
        "domain",
        "Analytics events are retained for 13 months; raw clickstream for 30 days only.",
        ["analytics"],
    ),
    (
        "carol:s1",
        "plan",
        "Plan: move the mailer to the new queue, then retire the cron-based sender in December.",
        ["mailer"],
    ),
]


async def _make_key(url: str, settings: Settings) -> str:
    engine = create_engine(url, settings)
    try:
        async with make_sessionmaker(engine)() as session:
            created = await key_service.create_key(
                session, org="demo", name="demo-admin", scopes=["read", "write", "admin"]
            )
            await key_service.create_key(session, org="demo", name="agent-reader", scopes=["read"])
            await session.commit()
            return created.key
    finally:
        await engine.dispose()


def seed(api: httpx.Client, headers: dict[str, str]) -> dict[str, Any]:
    ids = []
    for ns, typ, text, tags in DEMO:
        r = api.post(
            "/v1/remember",
            json={
                "namespace": ns,
                "type": typ,
                "content": text,
                "tags": tags,
                "agent_id": None,
                "project": "shop",
                "origin": "demo-agent",
                "url": "https://wiki.example.com/billing",
            },
            headers=headers,
        )
        r.raise_for_status()
        ids.append(r.json()["id"])
    newer = api.post(
        "/v1/remember",
        json={
            "namespace": "alice",
            "type": "decision",
            "project": "shop",
            "content": "Billing moved to Postgres 17 with a second replica for the finance dashboards.",
            "supersedes": ids[0],
            "related": [{"id": ids[1], "relationship": "depends_on"}],
        },
        headers=headers,
    )
    newer.raise_for_status()
    api.post(
        "/v1/remember",
        json={
            "namespace": "alice:s1",
            "type": "gotcha",
            "content": "Deploys fail when the CI token ghp_"
            + "x" * 36
            + " expires; it is rotated monthly.",
        },
        headers=headers,
    ).raise_for_status()
    for bad in (
        "ok",
        "Thinking... let me check the logs first, then maybe retry",
        "a3f9c0d1e2b4" * 8,
    ):
        api.post("/v1/remember", json={"namespace": "alice:s1", "content": bad}, headers=headers)
    pack = None
    for goal in (
        "Fix the billing webhook that drops events",
        "Which database does billing use?",
        "Plan the mailer migration",
    ):
        r = api.post("/v1/context", json={"goal": goal, "namespace": "alice:s1"}, headers=headers)
        r.raise_for_status()
        pack = pack or r.json()
    api.post(
        "/v1/remember",
        json={
            "namespace": "alice:s1",
            "type": "gotcha",
            "content": "The billing webhook handler must be idempotent: Stripe can deliver the same event twice.",
        },
        headers=headers,
    ).raise_for_status()
    return {"memory": newer.json()["id"], "pack": pack, "first": ids[2]}


def shoot(base: str, key: str, demo: dict[str, Any], out: Path) -> list[Path]:
    from selenium.webdriver.common.by import By

    out.mkdir(parents=True, exist_ok=True)
    written = []
    with live.chromium(width=1280, height=860) as d:

        def snap(name: str) -> None:
            path = out / f"{name}.png"
            d.save_screenshot(str(path))
            written.append(path)

        d.get(base + "/ui/login")
        snap("login")
        live.sign_in(d, base, key)
        snap("overview")
        d.get(base + "/ui/namespaces?open=alice")
        snap("namespaces")
        d.get(base + "/ui/memories?ns=alice")
        snap("memories")
        d.get(base + f"/ui/memories/{demo['memory']}")
        snap("memory")
        d.get(base + f"/ui/memories/{demo['first']}/edit")
        box = d.find_element(By.ID, "content")
        box.clear()
        box.send_keys("ok")
        d.find_element(By.ID, "save").click()
        live.wait_for(d, lambda x: x.find_elements(By.ID, "gate-rejected"))
        snap("edit-rejected")
        d.get(base + "/ui/pack?namespace=alice:s1")
        d.find_element(By.NAME, "goal").send_keys("Fix the billing webhook that drops events")
        d.find_element(By.ID, "preview").click()
        live.wait_for(d, lambda x: x.find_elements(By.ID, "pack-result"))
        snap("pack")
        d.get(base + "/ui/audit")
        snap("audit")
        d.get(base + f"/ui/audit/{demo['pack']['audit_id']}")
        snap("audit-row")
        d.find_element(By.ID, "replay").click()
        live.wait_for(d, lambda x: x.find_elements(By.ID, "diff-summary"))
        snap("replay")
        d.get(base + "/ui/keys")
        snap("keys")
        d.get(base + "/docs")
        live.wait_for(d, lambda x: x.find_elements(By.CSS_SELECTOR, ".opblock"), 60)
        snap("docs")
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--embedder", default="minilm", choices=["minilm", "fake"])
    args = parser.parse_args()
    reason = live.browser_missing()
    if reason:
        raise SystemExit(reason)
    with tempfile.TemporaryDirectory(prefix="ctxpack-shots-") as tmp:
        root = Path(tmp)
        root.chmod(0o755)
        server = start_embedded(root, cleanup_mode="stop")
        admin = server.get_uri()
        ensure_database(admin, "ctxpack_demo")
        url = with_database(admin, "ctxpack_demo")
        upgrade(url)
        settings = Settings(
            database_url=url,
            embedder=args.embedder,
            migrate_on_start=False,
            print_bootstrap_key=False,
            rate_limit_per_minute=0,
            data_dir=root,
        )
        key = asyncio.run(_make_key(url, settings))
        app = create_app(settings, database_url=url)
        with live.live_server(app) as base, httpx.Client(base_url=base, timeout=60) as api:
            demo = seed(api, {"Authorization": f"Bearer {key}"})
            for path in shoot(base, key, demo, args.out):
                print(f"{path.relative_to(ROOT)}  {path.stat().st_size // 1024} KB")


if __name__ == "__main__":
    main()
