"""A seeded, generated corpus for the redactor: secrets in many formats, and ordinary notes.

Nothing here is a real credential: every value is drawn from ``random.Random(seed)`` in the
shape its provider documents. Committed as code, not as data, so the corpus is the same on
every machine and a reader can see how each text was made.

``secret_samples()``: at least 300 texts in 40+ formats, each with the exact substrings that
must not survive redaction (``Sample.secrets``), set in realistic surroundings (configs,
shell history, chat, tickets, JSON, YAML, logs...).

``ordinary_samples()``: at least 300 engineering notes that must pass untouched: commit
hashes in commit talk, UUIDs, versions, order numbers, timestamps, ports, digests, and the
words password/token/key/secret used the way engineers use them without a value.
"""

from __future__ import annotations

import base64
import random
import string
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Sample", "ordinary_samples", "secret_samples"]

SEED = 15
PER_FORMAT = 8


@dataclass(frozen=True)
class Sample:
    """One text; ``secrets`` are the substrings that must not survive (empty: ordinary)."""

    format: str
    text: str
    secrets: tuple[str, ...] = ()


_B64 = string.ascii_letters + string.digits + "+/"
_ALNUM = string.ascii_letters + string.digits
_URLSAFE = _ALNUM + "_-"
_HEX = "0123456789abcdef"
_UPPER_DIGITS = string.ascii_uppercase + string.digits
_HOSTS = [
    "db.internal",
    "pg-prod-2.eu-west-1.rds.amazonaws.com",
    "10.0.3.17",
    "redis-cache",
    "mq.acme.io",
]
_SERVICES = ["billing", "checkout", "search", "ingest", "auth-gateway", "reports", "notifier"]
_PEOPLE = ["Ana", "Bo", "Chen", "Dmitri", "Eve", "Farah", "Goran"]
_WORDS = ["Tr0ub4dor", "Kestrel", "Marmot", "Basalt", "Quokka", "Zephyr", "Puffin", "Orchid"]


class _Gen:
    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    def pick(self, seq: list[str] | str) -> str:
        return self.r.choice(seq)  # type: ignore[return-value]

    def chars(self, alphabet: str, n: int, *, digit: bool = True) -> str:
        while True:
            s = "".join(self.r.choice(alphabet) for _ in range(n))
            if not digit or any(c.isdigit() for c in s):
                if any(c.isalpha() for c in s) or not any(a.isalpha() for a in alphabet):
                    return s

    def password(self) -> str:
        sym = self.pick("!#%^*-_.+")
        return (
            f"{self.pick(_WORDS)}{sym}{self.chars(string.ascii_lowercase, 3, digit=False)}"
            f"{sym}{self.r.randint(10, 99)}"
        )

    def card(self) -> str:
        # A 16-digit Luhn-valid number with an arbitrary (often unknown) issuer prefix.
        digits = [self.r.randint(0, 9) for _ in range(15)]
        digits[0] = self.r.choice([1, 7, 8, 9, 4, 5])
        total = 0
        for i, d in enumerate(reversed(digits)):
            if i % 2 == 0:
                d = d * 2 - 9 if d > 4 else d * 2
            total += d
        digits.append((10 - total % 10) % 10)
        s = "".join(map(str, digits))
        return " ".join(s[i : i + 4] for i in range(0, 16, 4))

    def service(self) -> str:
        return self.pick(_SERVICES)

    def host(self) -> str:
        return self.pick(_HOSTS)

    def person(self) -> str:
        return self.pick(_PEOPLE)


# Each format: a name, a secret maker and templates. ``{s}`` is the secret; other fields
# are filled from the generator.
_Maker = Callable[[_Gen], str]


def _fmt(g: _Gen, template: str, secret: str) -> str:
    return template.format(
        s=secret, svc=g.service(), host=g.host(), who=g.person(), n=g.r.randint(2, 99)
    )


_FORMATS: list[tuple[str, _Maker, list[str]]] = [
    (
        "aws_access_key_id",
        lambda g: "AKIA" + g.chars(_UPPER_DIGITS, 16),
        [
            "aws_access_key_id = {s}\nregion = eu-west-1",
            "{who} pasted the key id {s} in #ops, rotating it now.",
            'export AWS_ACCESS_KEY_ID="{s}"',
            "The {svc} role still uses {s} (created {n} days ago).",
        ],
    ),
    (
        "aws_secret_access_key",
        lambda g: g.pick("/+") + g.chars(_B64, 39),
        [
            "aws_secret_access_key = {s}",
            "[default]\naws_access_key_id = AKIA{upper}\naws_secret_access_key={s}",
            "AWS_SECRET_ACCESS_KEY: {s}",
            "the aws secret for {svc} is {s}",
        ],
    ),
    (
        "aws_session_key_id",
        lambda g: "ASIA" + g.chars(_UPPER_DIGITS, 16),
        [
            "Temporary credentials: {s} (expires in {n} min).",
            '"AccessKeyId": "{s}",',
        ],
    ),
    (
        "github_pat_classic",
        lambda g: "ghp_" + g.chars(_ALNUM, 36),
        [
            "git clone https://{s}@github.com/acme/{svc}.git",
            "GITHUB_TOKEN={s}",
            "{who}'s token {s} has repo scope; revoke it after the migration.",
        ],
    ),
    (
        "github_pat_fine",
        lambda g: "github_pat_" + g.chars(_ALNUM + "_", 82),
        [
            "Use {s} for the release workflow of {svc}.",
            "gh auth login --with-token <<< {s}",
        ],
    ),
    (
        "github_oauth",
        lambda g: "gho_" + g.chars(_ALNUM, 36),
        [
            "oauth token for the bot: {s}",
            '{{"access_token": "{s}", "token_type": "bearer"}}',
        ],
    ),
    (
        "gitlab_pat",
        lambda g: "glpat-" + g.chars(_URLSAFE, 20),
        [
            "CI_JOB_TOKEN fallback: {s}",
            "gitlab token {s} (maintainer on {svc})",
        ],
    ),
    (
        "slack_bot",
        lambda g: (
            f"xoxb-{g.r.randint(10**11, 10**12)}-{g.r.randint(10**11, 10**12)}-{g.chars(_ALNUM, 24)}"
        ),
        [
            "SLACK_BOT_TOKEN={s}",
            "The {svc} alerts bot posts with {s}.",
        ],
    ),
    (
        "slack_webhook",
        lambda g: (
            f"T{g.chars(_UPPER_DIGITS, 8)}/B{g.chars(_UPPER_DIGITS, 8)}/{g.chars(_ALNUM, 24)}"
        ),
        [
            "Alerts go to https://hooks.slack.com/services/{s} (channel #{svc}).",
            'webhook_url: "https://hooks.slack.com/services/{s}"',
        ],
    ),
    (
        "stripe_live",
        lambda g: "sk_live_" + g.chars(_ALNUM, 24),
        [
            "STRIPE_SECRET_KEY={s}",
            "{who} used {s} in the {svc} staging test by mistake.",
        ],
    ),
    (
        "stripe_webhook",
        lambda g: "whsec_" + g.chars(_ALNUM, 32),
        [
            "Webhook signing secret for {svc}: {s}",
        ],
    ),
    (
        "openai",
        lambda g: "sk-proj-" + g.chars(_URLSAFE, 48),
        [
            "OPENAI_API_KEY={s}",
            'client = OpenAI(api_key="{s}")',
        ],
    ),
    (
        "anthropic",
        lambda g: "sk-ant-api03-" + g.chars(_URLSAFE, 60),
        [
            "ANTHROPIC_API_KEY={s}",
            "the eval harness reads {s} from the vault",
        ],
    ),
    (
        "google_api",
        lambda g: "AIza" + g.chars(_URLSAFE, 35),
        [
            "maps key {s} is restricted to *.acme.io",
            '<meta name="google-key" content="{s}">',
        ],
    ),
    (
        "jwt",
        lambda g: "eyJhbGciOiJIUzI1NiJ9.eyJ" + g.chars(_URLSAFE, 40) + "." + g.chars(_URLSAFE, 43),
        [
            "Authorization: Bearer {s}",
            "session cookie was {s}",
        ],
    ),
    (
        "bearer_header",
        lambda g: g.chars(_ALNUM, 40),
        [
            "curl -H 'Authorization: Bearer {s}' https://api.acme.io/v1/{svc}",
            "Authorization: Bearer {s}",
        ],
    ),
    (
        "basic_auth_header",
        lambda g: base64.b64encode(f"{g.service()}:{g.password()}".encode()).decode(),
        [
            "Authorization: Basic {s}",
        ],
    ),
    (
        "private_key_rsa",
        lambda g: "MIIE" + "\n".join(g.chars(_B64, 64) for _ in range(4)),
        [
            "-----BEGIN RSA PRIVATE KEY-----\n{s}\n-----END RSA PRIVATE KEY-----",
            "key.pem:\n-----BEGIN RSA PRIVATE KEY-----\n{s}\n",
        ],
    ),
    (
        "private_key_openssh",
        lambda g: "b3BlbnNzaC1rZXktdjEAAAAA" + "\n".join(g.chars(_B64, 70) for _ in range(3)),
        [
            "-----BEGIN OPENSSH PRIVATE KEY-----\n{s}\n-----END OPENSSH PRIVATE KEY-----",
        ],
    ),
    (
        "private_key_json_escaped",
        lambda g: "MIIEv" + "\\n".join(g.chars(_B64, 64) for _ in range(3)),
        [
            '{{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\\n{s}\\n-----END PRIVATE KEY-----\\n"}}',
        ],
    ),
    (
        "postgres_url",
        lambda g: g.password(),
        [
            "DATABASE_URL=postgres://app:{s}@{host}:5432/app",
            "psql postgresql://admin:{s}@{host}/{svc}",
        ],
    ),
    (
        "mysql_url",
        lambda g: g.password(),
        [
            "mysql://root:{s}@{host}:3306/shop",
        ],
    ),
    (
        "mongodb_srv",
        lambda g: g.password(),
        [
            "MONGO_URI=mongodb+srv://svc:{s}@cluster0.ab1cd.mongodb.net/prod",
        ],
    ),
    (
        "redis_url",
        lambda g: g.password(),
        [
            "REDIS_URL=redis://:{s}@{host}:6379/0",
        ],
    ),
    (
        "dotenv_password",
        lambda g: g.password(),
        [
            "DB_PASSWORD={s}\nDB_HOST={host}",
            "SMTP_PASSWORD='{s}'",
        ],
    ),
    (
        "yaml_password",
        lambda g: g.password(),
        [
            "database:\n  user: app\n  password: {s}\n  host: {host}",
            "spring.datasource.password: {s}",
        ],
    ),
    (
        "json_password",
        lambda g: g.password(),
        [
            '{{"user": "svc-{svc}", "password": "{s}", "port": 5432}}',
        ],
    ),
    (
        "toml_ini_password",
        lambda g: g.password(),
        [
            "[client]\nuser = backup\npassword = {s}",
            'password = "{s}"',
        ],
    ),
    (
        "xml_password",
        lambda g: g.password(),
        [
            "<datasource><username>app</username><password>{s}</password></datasource>",
        ],
    ),
    (
        "redis_requirepass",
        lambda g: g.password(),
        [
            "# redis.conf\nrequirepass {s}\nmaxmemory 2gb",
            "masterauth {s}",
        ],
    ),
    (
        "prose_password_is",
        lambda g: g.password(),
        [
            "the staging database password is {s}",
            "FYI the password for the {svc} admin is {s}, change it after login.",
            "{who}: the password is now {s}",
        ],
    ),
    (
        "cli_password_flag",
        lambda g: g.password(),
        [
            "mysqldump --user=root --password {s} shop > dump.sql",
            "./deploy.sh --password {s} --env prod",
        ],
    ),
    (
        "env_keyword_space",
        lambda g: g.password(),
        [
            "set -x PGPASSWORD {s}",
            "PGPASSWORD {s}",
        ],
    ),
    (
        "password_next_line",
        lambda g: g.password(),
        [
            "password:\n  {s}\n",
            "Login for the {svc} console\nuser: ops\npassword:\n{s}",
        ],
    ),
    (
        "curl_user",
        lambda g: g.password(),
        [
            "curl -u deploy:{s} https://nexus.acme.io/repository/",
        ],
    ),
    (
        "credit_card_any_issuer",
        lambda g: g.card(),
        [
            "Customer card {s}, exp 09/27, flagged for review.",
            "test charge on {s} failed",
        ],
    ),
    (
        "ssn",
        lambda g: f"{g.r.randint(100, 665)}-{g.r.randint(10, 99)}-{g.r.randint(1000, 9999)}",
        [
            "Employee SSN {s} on the onboarding form.",
        ],
    ),
    (
        "email",
        lambda g: (
            f"{g.person().lower()}.{g.chars(string.ascii_lowercase, 5, digit=False)}@example.com"
        ),
        [
            "Escalate to {s} if the {svc} job fails again.",
        ],
    ),
    (
        "phone",
        lambda g: f"+44 20 7946 {g.r.randint(1000, 9999)}",
        [
            "On-call phone for {svc}: {s}",
        ],
    ),
    (
        "api_key_keyword_entropy",
        lambda g: g.chars(_ALNUM, 32),
        [
            "datadog api key: {s}",
            "the {svc} api key is {s}",
            "x-api-key {s}",
        ],
    ),
    (
        "token_keyword_entropy",
        lambda g: g.chars(_URLSAFE, 28),
        [
            "the deploy token {s} expires Friday",
            'token="{s}"',
        ],
    ),
    (
        "hex_secret_keyword",
        lambda g: g.chars(_HEX, 40),
        [
            "client_secret: {s}",
            "the webhook secret is {s}",
        ],
    ),
    (
        "azure_storage",
        lambda g: g.chars(_B64, 86) + "==",
        [
            "DefaultEndpointsProtocol=https;AccountName=acmelogs;AccountKey={s};EndpointSuffix=core.windows.net",
        ],
    ),
    (
        "sendgrid",
        lambda g: "SG." + g.chars(_URLSAFE, 22) + "." + g.chars(_URLSAFE, 43),
        [
            "SENDGRID_API_KEY={s}",
            "mail relay uses {s}",
        ],
    ),
    (
        "npm_token",
        lambda g: "npm_" + g.chars(_ALNUM, 36),
        [
            "//registry.npmjs.org/:_authToken={s}",
        ],
    ),
    (
        "pypi_token",
        lambda g: "pypi-AgEIcHlwaS5vcmc" + g.chars(_URLSAFE, 60),
        [
            "twine upload -u __token__ -p {s} dist/*",
        ],
    ),
    (
        "telegram_bot",
        lambda g: f"{g.r.randint(10**8, 10**9)}:AA{g.chars(_URLSAFE, 33)}",
        [
            "bot token {s} posts deploy notices",
        ],
    ),
    (
        "twilio_api_key",
        lambda g: "SK" + g.chars(_HEX, 32),
        [
            "Twilio API key SID {s} for {svc} SMS",
        ],
    ),
    (
        "hashicorp_vault",
        lambda g: "hvs." + g.chars(_URLSAFE, 90),
        [
            "VAULT_TOKEN={s}",
            "vault login {s}",
        ],
    ),
    (
        "huggingface",
        lambda g: "hf_" + g.chars(_ALNUM, 34),
        [
            "HF_TOKEN={s} for the private model",
        ],
    ),
    (
        "digitalocean",
        lambda g: "dop_v1_" + g.chars(_HEX, 64),
        [
            "doctl auth init -t {s}",
        ],
    ),
    (
        "shopify",
        lambda g: "shpat_" + g.chars(_HEX, 32),
        [
            "Shopify admin token {s}",
        ],
    ),
    (
        "zero_width_split",
        lambda g: "ghp_" + g.chars(_ALNUM, 36),
        [
            "token: {zw}",
            "use {zw} for the bot",
        ],
    ),
    (
        "full_width",
        lambda g: g.password(),
        [
            "ｐａｓｓｗｏｒｄ＝{fw}",
            "{who} wrote password：{fw}",
        ],
    ),
    (
        "url_encoded",
        lambda g: g.password(),
        [
            "https://{host}/login?user=ops&password={pct}",
            "callback=https%3A%2F%2Fx.io%2F%3Fpassword%3D{pct}",
        ],
    ),
    (
        "base64_encoded",
        lambda g: g.password(),
        [
            "kubectl create secret generic db --from-literal=blob={b64}",
            "the config blob was {b64}",
        ],
    ),
]


def _variants(g: _Gen, secret: str, fmt: str) -> tuple[dict[str, str], tuple[str, ...]]:
    """Encoded forms of ``secret`` for the templates, and the substrings to look for."""
    extra: dict[str, str] = {"upper": g.chars(_UPPER_DIGITS, 16)}
    if fmt == "zero_width_split":
        cut = len(secret) // 2
        zw = secret[:cut] + "\u200b" + secret[cut:]
        return {"zw": zw, **extra}, (zw, secret, secret[cut:])
    if fmt == "full_width":
        fw = "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in secret)
        return {"fw": fw, **extra}, (fw, secret)
    if fmt == "url_encoded":
        pct = urllib.parse.quote(secret, safe="")
        return {"pct": pct, **extra}, (pct, secret)
    if fmt == "base64_encoded":
        b64 = base64.b64encode(f"password={secret}".encode()).decode()
        return {"b64": b64, **extra}, (b64, secret)
    return extra, (secret,)


def secret_samples(seed: int = SEED, per_format: int = PER_FORMAT) -> list[Sample]:
    """Secret-bearing texts: ``per_format`` per format, templates taken in turn."""
    g = _Gen(seed)
    out: list[Sample] = []
    for name, make, templates in _FORMATS:
        for i in range(per_format):
            secret = make(g)
            extra, secrets = _variants(g, secret, name)
            template = templates[i % len(templates)]
            text = template.format(
                s=secret,
                svc=g.service(),
                host=g.host(),
                who=g.person(),
                n=g.r.randint(2, 99),
                **extra,
            )
            out.append(Sample(name, text, secrets))
    return out


# --------------------------------------------------------------------------
# Ordinary notes.
# --------------------------------------------------------------------------

_ORDINARY: list[tuple[str, list[str]]] = [
    (
        "commit_talk",
        [
            "Reverted commit {sha40} because it broke the {svc} migrations.",
            "Fixed in {sha7}, cherry-picked onto release-{v} as {sha9}.",
            "git bisect points at {sha40}; the key rotation itself was fine.",
            "The token refresh bug was introduced in {sha12} and fixed in {sha12b}.",
            "Merge {sha40} into main after {who} approves.",
        ],
    ),
    (
        "uuid",
        [
            "Request id {uuid} timed out after {n} s in {svc}.",
            "The api key id {uuid} belongs to the {svc} service account (the secret itself is in Vault).",
            "Tenant {uuid} was migrated on {date}.",
        ],
    ),
    (
        "versions",
        [
            "Upgrade pydantic from {v} to {v2}; keep fastapi=={v3}.",
            "Postgres {pgv} with pgvector 0.8.0 runs the {svc} store.",
            "Node v{v} broke the token parser; pin {v2}.",
        ],
    ),
    (
        "order_numbers",
        [
            "Order {order} was refunded; invoice INV-{n}{n2}{n3} is void.",
            "Tracking number {digits16} was delayed twice.",
            "Ticket #{n}{n2} covers the password reset emails for order {order}.",
        ],
    ),
    (
        "timestamps",
        [
            "The job started at {date}T10:{n2:02d}:30Z and finished at {date}T11:02:{n3:02d}+02:00.",
            "Event ts={epoch} came before {epoch2} in the {svc} stream.",
            "Deployed {svc} at {date} 14:{n2:02d} UTC; rollback window closes at 16:00.",
        ],
    ),
    (
        "keyword_prose",
        [
            "Rotate the {svc} API key every {n} days and never paste it into tickets.",
            "The password policy requires 12 characters; the password field rejects emoji.",
            "Token budget for the pack is {n}00 tokens; max_tokens=2048 for the summary.",
            "Secrets live in Vault under secret/data/{svc}; ask {who} for access.",
            "The key insight: cache the wheel directory before the {svc} build.",
            "Password reset links expire after {n} minutes.",
            "Use the token from the CI vault, not a personal one.",
            "The secret sauce is batching the embeddings, {n} per call.",
            "Primary key is (org_id, id); the sort key is created_at.",
            "Credentials are injected by the {svc} sidecar at start-up.",
            "Our API keys are scoped to projects since {date}.",
            "The signing key was rotated on {date} in commit {sha7}.",
        ],
    ),
    (
        "config_without_secrets",
        [
            "timeout=30 retries: 5 pool_size={n} log_level=info region=eu-west-1",
            "password: ${{DB_PASSWORD}} and api_key=$OPENAI_API_KEY come from the environment.",
            "Set token=<your-token> in the example config, never the real one.",
            "Requests cpu: 500m, memory: 512Mi; limits cpu: 2, memory: 2Gi for {svc}.",
            "Connect with postgres://app@{host}:5432/app?sslmode=require for read-only checks.",
        ],
    ),
    (
        "digests_and_ids",
        [
            "Pinned python:3.12-slim@sha256:{sha64}.",
            "sha256 of the release tarball: {sha64}",
            "The ETag {hex32} changed after the {svc} deploy.",
            "Trace id {hex32} shows the slow span in {svc}.",
            "arn:aws:iam::{acct}:role/{svc}-reader in us-east-1.",
        ],
    ),
    (
        "ops_notes",
        [
            "Postgres listens on 5432, {svc} on 8080 and metrics on localhost:9090.",
            "{who} moved the {svc} cron from 02:00 to 03:{n2:02d} to avoid the backup.",
            "Disk on {host} hit {n}% at {date}; cleaned /var/log/{svc}.",
            "The {svc} p99 dropped from {n}{n2} ms to {n3} ms after the index on (org_id, created_at).",
            "Pods use 10.244.{n}.{n2} and 192.168.{n3}.254; the VIP is 172.16.0.1.",
            "Edit /etc/{svc}/config.toml and restart with systemctl restart {svc}.",
        ],
    ),
]


def ordinary_samples(seed: int = SEED, count: int = 330) -> list[Sample]:
    """Engineering notes that hold no secret and must be stored untouched."""
    g = _Gen(seed + 1)
    templates = [(name, t) for name, ts in _ORDINARY for t in ts]
    out: list[Sample] = []
    for i in range(count):
        name, template = templates[i % len(templates)]
        n2, n3 = g.r.randint(10, 59), g.r.randint(10, 59)
        text = template.format(
            sha40=g.chars(_HEX, 40),
            sha7=g.chars(_HEX, 7),
            sha9=g.chars(_HEX, 9),
            sha12=g.chars(_HEX, 12),
            sha12b=g.chars(_HEX, 12),
            sha64=g.chars(_HEX, 64),
            hex32=g.chars(_HEX, 32),
            uuid="-".join(g.chars(_HEX, k) for k in (8, 4, 4, 4, 12)),
            v=f"{g.r.randint(1, 20)}.{g.r.randint(0, 30)}.{g.r.randint(0, 9)}",
            v2=f"{g.r.randint(1, 20)}.{g.r.randint(0, 30)}.{g.r.randint(0, 9)}",
            v3=f"0.{g.r.randint(100, 120)}.{g.r.randint(0, 9)}",
            pgv=f"{g.r.randint(14, 18)}.{g.r.randint(0, 9)}",
            order=f"ORD-{g.r.randint(2020, 2026)}-{g.r.randint(100000, 999999)}",
            digits16="".join(str(g.r.randint(0, 9)) for _ in range(16)),
            date=f"2026-{g.r.randint(1, 12):02d}-{g.r.randint(1, 28):02d}",
            epoch=g.r.randint(1_700_000_000_000, 1_800_000_000_000),
            epoch2=g.r.randint(1_700_000_000_000, 1_800_000_000_000),
            acct=g.r.randint(10**11, 10**12 - 1),
            svc=g.service(),
            host=g.host(),
            who=g.person(),
            n=g.r.randint(2, 99),
            n2=n2,
            n3=n3,
        )
        out.append(Sample(name, text))
    return out


# --------------------------------------------------------------------------
# Adversarial inputs: shapes that make a backtracking regex or a per-line loop super-linear.
# --------------------------------------------------------------------------

ADVERSARIAL_CHARS = 20_000


def adversarial_inputs(size: int = ADVERSARIAL_CHARS) -> dict[str, str]:
    """Named texts of ``size`` characters built to stress the redactor and the gate."""

    def fill(unit: str, head: str = "", tail: str = "") -> str:
        body = size - len(head) - len(tail)
        return head + (unit * (body // len(unit) + 1))[:body] + tail

    return {
        "digit_run": fill("7"),
        "digits_spaced": fill("4111 "),
        "a_eq_a": fill("a="),
        "key_eq_key": fill("key="),
        "password_colon": fill("password: x\n"),
        "password_is": fill("password is "),
        "password_newline": fill("password:\n"),
        "base64_run": fill("QUJDRGVm"),
        "base64_keyword": fill("token Ab1Cd2Ef3Gh4Ij5K "),
        "hex_run": fill("9f86d081"),
        "begin_spaces": fill(" ", head="-----BEGIN RSA PRIVATE KEY-----"),
        "begin_repeated": fill("-----BEGIN RSA PRIVATE KEY-----\n"),
        "begin_bare": fill("-----BEGIN"),
        "email_no_domain": fill("a@"),
        "email_local_run": fill("a", tail="@"),
        "dotted_labels": fill("a.", tail="@b"),
        "scheme_run": fill("a.", tail="://x"),
        "nested_brackets": fill("["),
        "nested_objects": fill('{"a":'),
        "blank_lines": fill("\n"),
        "blank_lines_spaces": fill(" \n"),
        "curl_repeated": fill("curl "),
        "bearer_repeated": fill("Bearer "),
        "authorization": fill("Authorization: "),
        "phone_plus": fill("+1 "),
        "dashes": fill("-"),
        "at_signs": fill("@"),
        "sk_prefix": fill("sk-"),
        "eyj_prefix": fill("eyJ"),
        "xml_open": fill("<password>"),
        "percent_escapes": fill("%41"),
        "percent_keyword": fill("password%3D%41"),
        "full_width": fill("ｐ"),
        "full_width_keyword": fill("ｐａｓｓｗｏｒｄ＝ｘ "),
        "zero_width": fill("a\u200b"),
        "zero_width_keyword": fill("pass\u200bword=x "),
        "nbsp_keyword": fill("password\u00a0"),
        "thin_space_keyword": fill("token\u2009"),
        "password_words": fill("password "),
        "password_value_words": fill("the password is hunter two "),
        "mysql_flags": fill("mysql -u -h "),
        "sshpass_flags": fill("sshpass -x "),
        "docker_login": fill("docker login -u "),
        "yaml_blocks": fill("password: |\n\n"),
        "dotnet_add": fill('<add key="password" value="'),
        "stack_frames": fill('  File "x.py", line 1\n'),
        "log_lines": fill("2024-05-01T10:00:00 INFO x\n"),
        "prose": fill("The quick brown fox jumps over the lazy dog. "),
        # Issue 29's shapes: key contexts, CLI pairs, URLs, cookies, tables, armour.
        "user_flag_no_password": fill("-u x ", tail=" -p y"),
        "user_then_password_flags": fill("-u x -p "),
        "password_then_user_flags": fill(" -P x", tail=" -U y"),
        "url_userinfo_ats": fill("a://b:c@"),
        "url_colons": fill("ab://x:"),
        "url_at_run": fill("@", head="postgres://u:"),
        "cookie_pairs": fill("a=Ab1Cd2Ef3Gh4Ij5Kl6; ", head="Cookie: "),
        "cookie_headers": fill("Cookie: "),
        "table_rows": fill("alice,hunter22\n", head="user,password\n"),
        "table_headers": fill("password,x\n"),
        "table_pipes": fill("|", head="| password |\n"),
        "ppk_lines": fill("Private-Lines: 1\n"),
        "ssh2_begin": fill("---- BEGIN SSH2 PRIVATE KEY ----\n"),
        "json_key_tokens": fill('"k": "Ab1Cd2Ef3Gh4Ij5Kl6", '),
        "flag_tokens": fill("--x Ab1Cd2Ef3Gh4Ij5Kl6 "),
        "long_keys": fill("a" * 60 + "=Ab1Cd2Ef3Gh4Ij5Kl6 "),
        "oracle_slashes": fill("a/b@", head="sqlplus "),
        "pgpass_lines": fill("h:5432:d:u:p\n"),
        "netrc_words": fill("machine x login y ", tail="password"),
        "htpasswd_flags": fill("htpasswd -b "),
        "identified_by": fill("identified by "),
        "create_user_no_password": fill("create user x ", tail=" password 'x'"),
        "echo_pipes": fill("echo x | ", tail="--password-stdin"),
        "credential_literals": fill('auth=("a", '),
        "pin_words": fill("PIN "),
        "intl_keywords": fill("mot de passe Kennwort contraseña "),
        "dash_separators": fill("password — "),
        "webhook_paths": fill("https://x/hooks/"),
        "jwt_spaced_prefix": fill("eyAaaaaaaaaa."),
        "recovery_codes": fill("ab12 ", head="recovery codes: "),
        "recovery_words": fill("backup codes "),
        "iban_groups": fill("DE89 3704 "),
    }
