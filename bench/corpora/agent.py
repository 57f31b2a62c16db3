"""An agent-style memory corpus: what a coding agent stores while it works on a project
(decisions, gotchas, procedures, plans, plus status notes), and the goals it later asks
with, each with the memories that answer it.

One ``group`` per project (its own namespace). Goals paraphrase the memory they need
(synonyms, another word order, an agent's task phrasing), and every project holds
distractors: the same component in several memories, the same symptom or task in several
components. ``session``: a stretch of work (consecutive memories, mostly one component).

    python -m bench.corpora.agent            # writes bench/corpora/agent.json
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.corpora import write

SEED = 30
PROJECTS = 12

# (component, what an agent may call it in a goal instead)
COMPONENTS = [
    ("billing service", "invoicing backend"), ("auth gateway", "login proxy"),
    ("search indexer", "indexing job"), ("notification worker", "push sender"),
    ("report exporter", "CSV export"), ("checkout API", "payment endpoint"),
    ("image resizer", "thumbnail service"), ("audit logger", "audit trail writer"),
    ("sync daemon", "replication agent"), ("admin dashboard", "back-office UI"),
    ("webhook dispatcher", "outbound hooks"), ("session store", "session cache"),
    ("pricing engine", "price calculator"), ("upload pipeline", "file ingestion"),
    ("feature-flag service", "toggle service"), ("rate limiter", "throttling middleware"),
    ("email sender", "mailer"), ("geo lookup", "location resolver"),
    ("inventory tracker", "stock counter"), ("recommendation job", "suggestions batch"),
]  # fmt: skip

# (role, its paraphrases, options): a decision picks one option over another.
CHOICES = [
    ("message queue", ["event bus", "broker for its events"], ["Kafka", "NATS", "RabbitMQ", "SQS"]),
    ("primary database", ["main datastore", "system of record"], ["Postgres", "MySQL", "DynamoDB", "MongoDB"]),
    ("cache", ["caching layer", "in-memory store"], ["Redis", "Memcached", "an in-process LRU"]),
    ("CI runner", ["build pipeline", "continuous integration"], ["GitHub Actions", "Buildkite", "GitLab CI"]),
    ("deployment target", ["hosting platform", "where it runs"], ["Kubernetes", "Nomad", "ECS", "a plain VM"]),
    ("HTTP client", ["library for outbound calls", "client for upstream requests"], ["httpx", "requests", "aiohttp"]),
    ("serialization format", ["wire format", "payload encoding"], ["Protobuf", "JSON", "MessagePack", "Avro"]),
    ("task scheduler", ["cron replacement", "job runner"], ["Celery", "Temporal", "Airflow", "systemd timers"]),
]  # fmt: skip
REASONS = [
    "the team already operates it", "it kept p99 latency under 50 ms in the spike",
    "it is cheaper at our volume", "the other option lacked exactly-once delivery",
    "licensing of the alternative was unclear", "it needs no extra infrastructure",
    "its client library is async-native", "ops asked for fewer moving parts",
]  # fmt: skip

# (symptom, paraphrases used in goals, cause, fix)
SYMPTOMS = [
    ("times out after 30 seconds", ["hangs until the request deadline", "keeps hitting the timeout"],
     "the connection pool is capped at 5", "raise pool_size to 20 and set pool_timeout"),
    ("leaks file descriptors", ["runs out of open files", "hits the ulimit on sockets"],
     "responses are never closed on the error path", "wrap the client call in a context manager"),
    ("returns stale data", ["serves outdated results", "shows old values after an update"],
     "the cache TTL is 24 hours and nothing invalidates it", "invalidate the key on write"),
    ("deadlocks under load", ["locks up when traffic spikes", "freezes with concurrent requests"],
     "two transactions lock rows in opposite order", "always lock the parent row first"),
    ("crashes with OOM on large uploads", ["runs out of memory on big files", "gets killed for memory with huge inputs"],
     "the whole body is read into memory", "stream the body in 1 MB chunks"),
    ("drops messages on restart", ["loses events when it is redeployed", "misses work after a rollout"],
     "offsets are committed before processing", "commit offsets only after the handler succeeds"),
    ("double-charges on retry", ["bills customers twice when a call is retried", "creates duplicate payments on retries"],
     "the retry resends without an idempotency key", "send a stable idempotency key per attempt"),
    ("fails its tests only on CI", ["is flaky in the pipeline but passes locally", "has tests that break on the build server"],
     "tests depend on the machine's time zone", "pin TZ=UTC in the test environment"),
    ("logs every request twice", ["writes duplicate log lines", "has doubled entries in the logs"],
     "the root logger and the app logger both have handlers", "set propagate to False on the app logger"),
    ("rejects valid tokens after a deploy", ["starts refusing good credentials after a release", "logs users out after shipping"],
     "the signing key is regenerated at start-up", "load the signing key from the secret store"),
]  # fmt: skip

# (task, paraphrases used in goals, steps)
TASKS = [
    ("rotate the API signing keys", ["roll over the signing secrets", "replace the token signing key"],
     ["generate the new key in the vault", "deploy with both keys accepted", "retire the old key after 24 hours"]),
    ("run the database migrations", ["apply the schema changes", "upgrade the tables"],
     ["take a snapshot", "run alembic upgrade head from the bastion", "check alembic current on every replica"]),
    ("cut a release", ["ship a new version", "publish a build to production"],
     ["bump the version in pyproject", "tag the commit", "let the pipeline promote the image"]),
    ("restore from backup", ["recover the data from a snapshot", "bring back yesterday's data"],
     ["stop the writers", "restore the latest snapshot into a new volume", "swap the volume and replay the WAL"]),
    ("add a feature flag", ["put a change behind a toggle", "gate new behaviour with a switch"],
     ["declare the flag in flags.yaml", "read it through the flag client", "default it off in production"]),
    ("onboard a new tenant", ["set up a new customer account", "provision a new organisation"],
     ["create the org row", "issue its API key", "seed the default settings"]),
    ("reindex the search data", ["rebuild the search index", "refresh the full-text index from scratch"],
     ["create the new index alias", "backfill from the primary database", "flip the alias and drop the old index"]),
    ("profile a slow endpoint", ["find out why a route is slow", "measure where request time goes"],
     ["enable py-spy on one pod", "capture a flame graph under load", "compare against the baseline trace"]),
]  # fmt: skip

MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
]
MILESTONES = [
    "shadow traffic", "dual writes", "read cut-over", "backfill", "load test",
    "canary at 5 percent", "decommission of the old path", "schema freeze",
]  # fmt: skip
NOISE = [
    "Standup: {comp} work continues, waiting on code review from Priya.",
    "Paired with Dana on the {comp} refactor; nothing blocking yet.",
    "Session note: read through the {comp} module, no changes made today.",
    "Task: write the missing docstrings in the {comp} package.",
    "Idea: the {comp} could expose a health endpoint with more detail.",
    "Reviewed the open pull requests touching the {comp}; two approved.",
    "Checked the {comp} dashboards after the deploy: no timeouts, no errors, memory flat.",
    "The {comp} tests are green again on CI after the rebase.",
    "Task: bump the {comp} dependencies and rerun the load test.",
    "Session note: the {comp} on-call handover is done, no open incidents.",
]  # fmt: skip


def _project(rng: random.Random, p: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    group = f"proj-{p:02d}"
    picked = rng.sample(COMPONENTS, 7)
    comps = [c for c, _ in picked]
    records: list[tuple[str, str, str, list[str], str]] = []  # comp, type, content, goals, category

    for comp, alias in picked:
        # Half the goals name the component as the memory does, half by another name.
        ask = comp if rng.random() < 0.5 else alias
        role, role_para, options = rng.choice(CHOICES)
        a, b = rng.sample(options, 2)
        reason = rng.choice(REASONS)
        records.append(
            (
                comp,
                "decision",
                f"Decision: the {comp} uses {a} rather than {b} as its {role}, because {reason}.",
                [
                    f"Which {rng.choice(role_para)} does the {ask} rely on, and why?",
                    f"Add a new consumer to the {ask}; check what we chose for the {rng.choice(role_para)}",
                    f"Why did we go with {a} instead of {b}?",
                ],
                "decision",
            )
        )
        for symptom, para, cause, fix in rng.sample(SYMPTOMS, rng.choice([1, 2])):
            records.append(
                (
                    comp,
                    "gotcha",
                    f"Gotcha: the {comp} {symptom}. Cause: {cause}. Fix: {fix}.",
                    [
                        f"The {ask} {rng.choice(para)}, how do I fix it?",
                        f"Debug: {ask} {rng.choice(para)} in staging since yesterday",
                        f"Resume work. Last session we looked at the {ask}. It {rng.choice(para)} "
                        f"again after the deploy, and the on-call asked for a fix today.",
                    ],
                    "gotcha",
                )
            )
        task, para, steps = rng.choice(TASKS)
        records.append(
            (
                comp,
                "procedure",
                f"Procedure to {task} for the {comp}: {steps[0]}; then {steps[1]}; finally {steps[2]}.",
                [
                    f"How do I {rng.choice(para)} for the {ask}?",
                    f"Steps to {rng.choice(para)} on the {ask}",
                    f"I need to {rng.choice(para)} ({ask}) before Friday, what is the procedure?",
                ],
                "procedure",
            )
        )
        if rng.random() < 0.6:
            _, _, options2 = rng.choice(CHOICES)
            target = rng.choice(options2)
            m1, m2 = rng.sample(MILESTONES, 2)
            month = rng.choice(MONTHS)
            records.append(
                (
                    comp,
                    "plan",
                    f"Plan: move the {comp} onto {target} by the end of {month}; {m1} first, then {m2}.",
                    [
                        f"What is the roadmap for migrating the {ask} to {target}?",
                        f"When is the {ask} migration due and what comes first?",
                        f"Plan the next phase of the {ask} move",
                    ],
                    "plan",
                )
            )
        for template in rng.sample(NOISE, 4):
            records.append((comp, "episode", template.format(comp=comp), [], "noise"))

    # Work happens component by component, with some interleaving.
    rng.shuffle(records)
    records.sort(key=lambda r: comps.index(r[0]) + rng.random() * 2.5)
    start = datetime(2026, 3, 2, 9, 0, tzinfo=UTC) + timedelta(days=3 * p)
    memories: list[dict[str, Any]] = []
    queries: list[dict[str, Any]] = []
    session, in_session = 1, 0
    for i, (_comp, mtype, content, goals, category) in enumerate(records):
        if in_session >= rng.randint(3, 6):
            session, in_session = session + 1, 0
        in_session += 1
        when = start + timedelta(days=session, minutes=7 * in_session)
        mid = f"{group}:m{i + 1}"
        memories.append({
            "id": mid, "group": group, "session": session, "timestamp": when.isoformat(),
            "content": content, "type": mtype,
        })  # fmt: skip
        if goals and rng.random() < 0.75:
            queries.append({
                "qid": f"{group}:q{len(queries)}", "group": group, "query": rng.choice(goals),
                "gold_ids": [mid], "category_name": category,
            })  # fmt: skip
    return memories, queries


def generate(seed: int = SEED, projects: int = PROJECTS) -> dict[str, Any]:
    """The corpus: ``{"memories": [...], "queries": [...]}``, the same for the same seed."""
    rng = random.Random(seed)
    memories: list[dict[str, Any]] = []
    queries: list[dict[str, Any]] = []
    for p in range(projects):
        m, q = _project(rng, p)
        memories += m
        queries += q
    return {"memories": memories, "queries": queries}


def main() -> int:
    corpus = generate()
    path = write("agent", corpus)
    print(f"{path}: {len(corpus['memories'])} memories, {len(corpus['queries'])} goals")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
