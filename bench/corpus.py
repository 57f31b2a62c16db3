"""The speed stores' synthetic agent-memory text: decisions, gotchas, procedures, constraints,
episodes and preferences about made-up projects, ``PER_USER`` per user namespace (``u00042``),
a ticket number in each so that every text is distinct, a share of LoCoMo turns mixed in; the
extra items measured writes send (new to the store on every run: ``extra_items``' mark); and
the goals context calls and peer searches ask.
"""

from __future__ import annotations

import random

PER_USER = 100  # speed corpus: memories per user (100k memories over 1,000 users)

# -------------------------------------------------------------------------- speed corpus

_PROJECTS = (
    "billing auth search checkout ingest reports mobile-app data-pipeline notifications "
    "admin-portal payments onboarding analytics gateway scheduler inventory crm docs-site "
    "ml-platform support-desk"
).split()
_COMPONENTS = [
    "the refresh-token rotation",
    "the Postgres connection pool",
    "the Stripe webhook handler",
    "the nightly export job",
    "the rate limiter",
    "the feature-flag service",
    "the CSV importer",
    "the search indexer",
    "the S3 upload path",
    "the session cache",
    "the GraphQL gateway",
    "the email queue",
    "the PDF renderer",
    "the audit log writer",
    "the retry middleware",
    "the OAuth callback",
    "the tenant migration script",
    "the websocket fan-out",
    "the invoice numbering",
    "the image thumbnailer",
    "the Kafka consumer group",
    "the cron scheduler",
    "the password reset flow",
    "the SSO metadata sync",
    "the billing proration",
    "the geo-IP lookup",
    "the Redis lock",
    "the API pagination",
    "the Terraform state",
    "the CI cache",
]
_TECH = [
    "Redis",
    "Postgres advisory locks",
    "Kafka",
    "SQS",
    "a plain cron job",
    "Celery",
    "pgvector",
    "ClickHouse",
    "a Go sidecar",
    "gRPC",
    "server-sent events",
    "a materialized view",
    "an outbox table",
    "Temporal",
    "DuckDB",
    "a token bucket in Postgres",
    "S3 lifecycle rules",
]
_REASONS = [
    "it keeps the write path in one transaction",
    "the team already runs it in production",
    "it halves p99 latency in our load test",
    "the vendor SDK leaks connections otherwise",
    "it avoids a second datastore to operate",
    "compliance wants every change auditable",
    "the old approach double-charged customers twice last quarter",
    "it survives a pod restart without losing work",
    "it is the only option under the budget",
    "support tickets dropped after the pilot",
]
_CONDITIONS = [
    "two requests arrive within the same millisecond",
    "the upstream returns a 429",
    "the file has a UTF-8 BOM",
    "daylight saving time starts",
    "the tenant has more than 10k users",
    "the token expires mid-request",
    "the queue is paused during a deploy",
    "a customer uploads a file larger than 2 GB",
    "the replica lags by more than 5 seconds",
    "the cache is cold after a failover",
    "the locale is set to Turkish",
    "the webhook is delivered twice",
]
_FIXES = [
    "wrap it in a retry with jitter",
    "take a row lock before updating",
    "normalise the input first",
    "pin the client library to the previous minor version",
    "bump the timeout to 30 seconds",
    "make the handler idempotent on the event id",
    "warm the cache before switching traffic",
    "compare timestamps in UTC only",
    "stream the file instead of buffering it",
    "read from the primary for this query",
]
_PEOPLE = "Alice Bruno Chen Dana Emeka Farah Greta Hiro Ines Jonas Kemi Luis Mara Nadia Omar Priya".split()
_TASKS = [
    "cut a release",
    "rotate the signing keys",
    "restore a tenant from backup",
    "add a new payment provider",
    "run the data backfill",
    "onboard a new engineer",
    "upgrade Postgres",
    "rebuild the search index",
    "debug a stuck job",
    "roll back a deploy",
]
_STEPS = [
    "freeze merges on main",
    "run the migration dry-run",
    "take a snapshot of the database",
    "announce it in the ops channel",
    "scale the workers down to zero",
    "check the error budget",
    "update the runbook",
    "tag the commit",
    "flip the feature flag for staff only",
    "verify the dashboards",
    "drain the queue",
    "ask security for a review",
]
_PREFS = [
    "small pull requests with one reviewer",
    "integration tests over mocks",
    "explicit SQL over the ORM for reports",
    "feature flags for every risky change",
    "async stand-ups written in the channel",
    "typed settings with defaults in one place",
]


def _synthetic(rng: random.Random, user: int, j: int, locomo_texts: list[str]) -> tuple[str, str]:
    """One realistic memory (type, text). Ticket numbers keep every text distinct."""
    proj = rng.choice(_PROJECTS)
    ticket = f"{proj.split('-')[0].upper()}-{1000 + user * PER_USER + j}"
    comp = rng.choice(_COMPONENTS)
    kind = rng.random()
    if kind < 0.15:
        return "episode", f"{rng.choice(locomo_texts)} ({rng.choice(_PEOPLE)}, note {ticket})"
    if kind < 0.32:
        return "decision", (
            f"We decided to use {rng.choice(_TECH)} for {comp} in {proj} because "
            f"{rng.choice(_REASONS)} ({ticket})."
        )
    if kind < 0.50:
        return "gotcha", (
            f"{comp[0].upper()}{comp[1:]} in {proj} breaks when {rng.choice(_CONDITIONS)}; "
            f"{rng.choice(_FIXES)} (seen in {ticket})."
        )
    if kind < 0.64:
        a, b, c = rng.sample(_STEPS, 3)
        return "procedure", (
            f"To {rng.choice(_TASKS)} for {proj}: {a}, then {b}, and finally {c}. See {ticket}."
        )
    if kind < 0.76:
        return "constraint", (
            f"{comp[0].upper()}{comp[1:]} in {proj} must stay backward compatible for two "
            f"releases because {rng.choice(_REASONS)} ({ticket})."
        )
    if kind < 0.88:
        return "episode", (
            f"{rng.choice(_PEOPLE)} reported that {comp} in {proj} was slow when "
            f"{rng.choice(_CONDITIONS)}; fixed in {ticket} so we {rng.choice(_FIXES)}."
        )
    return (
        "domain",
        f"{rng.choice(_PEOPLE)} prefers {rng.choice(_PREFS)} when working on {proj} ({ticket}).",
    )


def user_ns(user: int) -> str:
    return f"u{user:05d}"


def corpus_for(users: range, seed: int, locomo_texts: list[str]) -> list[tuple[str, str, str, str]]:
    """(namespace, item id, type, text) for PER_USER memories of each user in ``users``."""
    out = []
    for u in users:
        rng = random.Random(seed * 1_000_003 + u)
        for j in range(PER_USER):
            typ, text = _synthetic(rng, u, j, locomo_texts)
            out.append((user_ns(u), f"{user_ns(u)}-{j}", typ, text))
    return out


def extra_items(
    tag: str, n: int, n_users: int, seed: int, locomo_texts: list[str], mark: int
) -> list[tuple[str, str, str, str]]:
    """``n`` further distinct memories for measured writes, spread over existing users.

    ``mark`` is the number of memories the store held before these writes: it seeds the
    draw and tags each text and item id, so the writes of a run against a store kept from
    an earlier run are new to it (that run's raised the count) rather than duplicates the
    service would catch before embedding them (bench/measured_writes.py)."""
    rng = random.Random(f"{tag}-{seed}-{mark}")
    out = []
    for i in range(n):
        u = rng.randrange(n_users)
        typ, text = _synthetic(rng, u, 0, locomo_texts)
        out.append((user_ns(u), f"{tag}-{mark}.{i}", typ, f"{text} [{tag} {mark}.{i}]"))
    return out


def goals(n: int, n_users: int, seed: int) -> list[tuple[str, str]]:
    """(namespace, goal) pairs for context calls and peer searches."""
    rng = random.Random(f"goals-{seed}-{n_users}")
    forms = [
        lambda: f"why does {rng.choice(_COMPONENTS)} fail in {rng.choice(_PROJECTS)}",
        lambda: f"how do we {rng.choice(_TASKS)} for {rng.choice(_PROJECTS)}",
        lambda: f"what did we decide about {rng.choice(_COMPONENTS)}",
        lambda: f"fix {rng.choice(_COMPONENTS)} when {rng.choice(_CONDITIONS)}",
    ]
    return [(user_ns(rng.randrange(n_users)), rng.choice(forms)()) for _ in range(n)]
