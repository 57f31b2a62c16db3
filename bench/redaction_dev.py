"""The redactor's development corpus for the shapes of issue 29, finding 7.

Written from what these formats look like in the wild (provider docs, CLI manuals, config
files, API responses), by the engineer who wrote the rules, and used to tune them. It is
therefore **not** a measure of how the rules generalise: that is what the blind corpus
(``bench/redaction_blind/``) is for, and it is kept out of any tuning loop.

* ``secret_samples()``: texts holding secrets in the families the review listed (non-PEM
  key armour, provider tokens without a keyword, connection strings, JSON named by
  structure, CLI password arguments, SQL, cookies, JWTs, prose in several languages,
  PINs, tables, ``.env`` names, DSNs), and secrets after a neutral key (the generic
  high-entropy rule). Each carries the substrings that must not survive.
* ``ordinary_samples()``: tool output and notes full of ids, hashes and numbers (GitHub,
  npm, kubectl, docker, AWS, Stripe, OpenAI responses, lock files, HTTP headers, logs),
  each with the substrings that must survive verbatim.

Values are drawn from ``random.Random(SEED)``: fake, never issued.

    python -m bench.redaction_dev            # survivors and false redactions per family
"""

from __future__ import annotations

import base64
import json
import random
import string
import sys
from collections import defaultdict
from dataclasses import dataclass

__all__ = ["DevSample", "ordinary_samples", "secret_samples"]

SEED = 2911


@dataclass(frozen=True)
class DevSample:
    """One text; ``secrets`` must not survive redaction, ``keep`` must survive verbatim."""

    family: str
    text: str
    secrets: tuple[str, ...] = ()
    keep: tuple[str, ...] = ()


_ALNUM = string.ascii_letters + string.digits
_B64 = _ALNUM + "+/"
_URLSAFE = _ALNUM + "_-"
_HEX = "0123456789abcdef"
_LOWER_DIGITS = string.ascii_lowercase + string.digits


class _R:
    def __init__(self) -> None:
        self.r = random.Random(SEED)

    def s(self, n: int, alphabet: str = _ALNUM) -> str:
        # Every generated token carries an upper, a lower and a digit when its alphabet
        # has them (real tokens almost always do; a draw without one is a word).
        while True:
            out = "".join(self.r.choice(alphabet) for _ in range(n))
            if alphabet is _HEX or alphabet is _LOWER_DIGITS or n < 8:
                return out
            if (
                any(c.isdigit() for c in out)
                and any(c.isupper() for c in out)
                and any(c.islower() for c in out)
            ):
                return out

    def hex(self, n: int) -> str:
        while True:
            out = "".join(self.r.choice(_HEX) for _ in range(n))
            if any(c.isalpha() for c in out) and any(c.isdigit() for c in out):
                return out

    def uuid(self) -> str:
        h = self.hex(32)
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"

    def b64(self, nbytes: int) -> str:
        return base64.b64encode(bytes(self.r.randrange(256) for _ in range(nbytes))).decode()

    def pw(self) -> str:
        words = ["Falcon", "Marmot", "Basalt", "Quokka", "Zephyr", "Puffin", "Orchid", "Tundra"]
        return (
            f"{self.r.choice(words)}{self.r.choice('!#%&*+?')}{self.r.randrange(10, 99)}{self.s(3)}"
        )


def secret_samples() -> list[DevSample]:
    """Secret-bearing texts, by family."""
    g = _R()
    out: list[DevSample] = []

    def add(family: str, text: str, *secrets: str) -> None:
        out.append(DevSample(family, text, secrets=tuple(secrets)))

    # -- Private keys in non-PEM armour.
    for kind in ("", "ENCRYPTED "):
        body = [g.b64(48)[:64] for _ in range(4)]
        add(
            "key_armour",
            f"---- BEGIN SSH2 {kind}PRIVATE KEY ----\n"
            'Comment: "rsa-key-20240501"\n'
            + "\n".join(body)
            + f"\n---- END SSH2 {kind}PRIVATE KEY ----\n",
            *body,
        )
    priv = [g.b64(48)[:64] for _ in range(2)]
    mac = g.hex(64)
    add(
        "key_armour",
        "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: eddsa-key-20240501\n"
        f"Public-Lines: 2\n{g.b64(48)[:64]}\n{g.b64(20)}\nPrivate-Lines: 2\n{priv[0]}\n{priv[1]}\n"
        f"Private-MAC: {mac}\n",
        *priv,
        mac,
    )
    priv2 = [g.b64(48)[:64] for _ in range(3)]
    add(
        "key_armour",
        "my old putty key (id_rsa.ppk):\nPuTTY-User-Key-File-2: ssh-rsa\nEncryption: aes256-cbc\n"
        f"Comment: imported-openssh-key\nPublic-Lines: 1\n{g.b64(40)}\nPrivate-Lines: 3\n"
        + "\n".join(priv2)
        + f"\nPrivate-MAC: {g.hex(40)}",
        *priv2,
    )
    body3 = g.b64(60)
    add(
        "key_armour",
        json.dumps(
            {
                "key": f"---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----\n{body3}\n---- END SSH2 ENCRYPTED PRIVATE KEY ----"
            }
        ),
        body3[:40],
    )

    # -- Provider tokens with a known prefix and no keyword near.
    sentry_key = g.hex(32)
    add(
        "provider_prefix",
        f"Sentry.init({{ dsn: 'https://{sentry_key}@o4505123.ingest.us.sentry.io/4505123456' }})",
        sentry_key,
    )
    sntrys = "sntrys_" + g.s(120, _URLSAFE)
    add("provider_prefix", f"ran `sentry-cli releases new` with {sntrys}", sntrys)
    sntryu = "sntryu_" + g.hex(64)
    add("provider_prefix", f"personal one: {sntryu} (expires never)", sntryu)
    atl = "ATATT3xFfGF0" + g.s(180, _URLSAFE) + "=" + g.hex(8).upper()
    add("provider_prefix", f"jira cli configured with {atl}", atl)
    glrt = "glrt-" + g.s(20, _URLSAFE)
    add("provider_prefix", f"gitlab-runner register --url https://gitlab.com --token {glrt}", glrt)
    gldt = "gldt-" + g.s(20, _URLSAFE)
    add(
        "provider_prefix",
        f"deploy with git clone https://gitlab+deploy-token-42:{gldt}@gitlab.com/acme/app.git; also {gldt}",
        gldt,
    )
    glptt = "glptt-" + g.hex(40)
    add(
        "provider_prefix",
        f"curl -X POST -F ref=main https://gitlab.com/api/v4/projects/9/trigger/pipeline -F {glptt}",
        glptt,
    )
    gr = "GR1348941" + g.s(20, _URLSAFE)
    add("provider_prefix", f"old registration {gr} still works on 15.x runners", gr)
    gocspx = "GOCSPX-" + g.s(28, _URLSAFE)
    add(
        "provider_prefix",
        f"Google OAuth client 1234-abc.apps.googleusercontent.com / {gocspx}",
        gocspx,
    )
    azure = g.s(3, _ALNUM) + "8Q~" + g.s(34, _ALNUM + "_~.-")
    add("provider_prefix", f"app registration secret value {azure} (copy it now)", azure)
    sg = "SG." + g.s(22, _URLSAFE) + "." + g.s(43, _URLSAFE)
    add("provider_prefix", f"mail relay uses {sg}", sg)
    mg = "key-" + g.hex(32)
    add("provider_prefix", f"mailgun: {mg}", mg)
    mg2 = f"{g.hex(32)}-{g.hex(8)}-{g.hex(8)}"
    add("provider_prefix", f"mg domain sandbox123.mailgun.org, sending {mg2}", mg2)
    brevo = "xkeysib-" + g.hex(64) + "-" + g.s(16)
    add("provider_prefix", f"Brevo {brevo}", brevo)
    hvs = "hvs." + g.s(90, _URLSAFE)
    add("provider_prefix", f"VAULT_ADDR=https://vault:8200 vault login {hvs}", hvs)
    hvr = "hvs." + g.s(24)
    add("provider_prefix", f"root {hvr}", hvr)
    tfc = g.s(14) + ".atlasv1." + g.s(67, _URLSAFE)
    add(
        "provider_prefix",
        f'credentials "app.terraform.io" {{ value = "{tfc}" }} -- or just {tfc}',
        tfc,
    )
    discord = (
        f"https://discord.com/api/webhooks/{g.r.randrange(10**17, 10**18)}/{g.s(68, _URLSAFE)}"
    )
    add("provider_prefix", f"notify: {discord}", discord.rsplit("/", 1)[1])
    teams = (
        f"https://acme.webhook.office.com/webhookb2/{g.uuid()}@{g.uuid()}/IncomingWebhook/"
        f"{g.hex(32)}/{g.uuid()}"
    )
    add("provider_prefix", f"Teams channel hook {teams}", teams.split("IncomingWebhook/")[1])
    slack = f"https://hooks.slack.com/services/T{g.s(8).upper()}/B{g.s(8).upper()}/{g.s(24)}"
    add("provider_prefix", f"alerts go to {slack}", slack.rsplit("/", 1)[1])
    bk = "bkua_" + g.hex(40)
    add("provider_prefix", f"buildkite agent {bk}", bk)

    # -- Connection strings.
    add("connection", "postgres://app:p@ss/w0rd!@db.internal:5432/app", "p@ss/w0rd!")
    add("connection", "DATABASE_URL='mysql://root:Sup3r@Secret@10.0.0.4:3306/shop'", "Sup3r@Secret")
    add("connection", "redis://:a/b@c9Q2z@cache:6379/0", "a/b@c9Q2z")
    add("connection", "sqlplus scott/Tiger#2024@ORCL", "Tiger#2024")
    add("connection", "expdp system/Manag3r_9@//db-host:1521/XEPDB1 schemas=HR", "Manag3r_9")
    add("connection", "jdbc:oracle:thin:app_user/Orcl-Pw-77@db.example.com:1521:PROD", "Orcl-Pw-77")
    pg = g.pw()
    add("connection", f"~/.pgpass:\ndb.internal:5432:app:app_user:{pg}\n*:*:*:postgres:{pg}x", pg)
    heroku = g.uuid()
    add("connection", f"machine api.heroku.com login me@example.com password {heroku}", heroku)
    heroku = g.uuid()
    add(
        "connection", f"machine api.heroku.com\n  login me@example.com\n  password {heroku}", heroku
    )
    dsn_key = g.s(32)
    add("connection", f"DSN: https://{dsn_key}@events.acme-tracker.io/42", dsn_key)

    # -- JSON named by structure.
    tok = g.s(40, _URLSAFE)
    add(
        "json_structure",
        json.dumps({"headers": {"Authorization": f"token {tok}", "Accept": "application/json"}}),
        tok,
    )
    auth = base64.b64encode(f"ci-bot:{g.pw()}".encode()).decode()
    add(
        "json_structure",
        json.dumps({"auths": {"registry.acme.io": {"auth": auth}}}, indent=2),
        auth,
    )
    kid = g.hex(40)
    add(
        "json_structure",
        json.dumps(
            {
                "type": "service_account",
                "project_id": "acme-prod",
                "private_key_id": kid,
                "client_email": "ci@acme-prod.iam.gserviceaccount.com",
            }
        ),
        kid,
    )
    hdr = g.s(32)
    add(
        "json_structure",
        json.dumps({"request": {"method": "GET", "headers": {"X-Vendor-Auth": hdr}}}),
        hdr,
    )
    opaque = g.s(36, _URLSAFE)
    add(
        "json_structure",
        json.dumps({"integration": {"name": "pagerduty", "routing": opaque}}),
        opaque,
    )
    ak = g.s(40, _B64)
    add("json_structure", f'{{"Credentials": {{"Signer": "{ak}", "Region": "eu-west-1"}}}}', ak)

    # -- CLI password arguments.
    cli = [
        (
            "ldapsearch -x -H ldap://ldap.acme.io -D cn=admin,dc=acme,dc=io -w {pw} -b dc=acme,dc=io",
        ),
        ("keytool -importkeystore -srckeystore a.p12 -srcstorepass {pw} -deststorepass {pw2}",),
        ("keytool -genkeypair -alias app -keystore app.jks -storepass {pw} -keypass {pw2}",),
        ("openssl pkcs12 -export -in c.pem -inkey k.pem -out c.p12 -passout pass:{pw}",),
        ("az login --service-principal -u http://ci-app -p {pw} --tenant acme.onmicrosoft.com",),
        ("net user svc_backup {pw} /add /domain",),
        ("htpasswd -bc /etc/nginx/.htpasswd admin {pw}",),
        ("htpasswd -nb alice {pw}",),
        ("rabbitmqctl add_user monitoring {pw}",),
        ("rabbitmqctl change_password guest {pw}",),
        ("smbclient //fileserver/share -U ACME\\\\svc%{pw}",),
        ("echo '{pw}' | docker login registry.acme.io -u ci --password-stdin",),
        ('echo "{pw}" | helm registry login ghcr.io --username bot --password-stdin',),
        ("resp = requests.get(url, auth=('admin', '{pw}'))",),
        ('session.auth = HTTPBasicAuth("svc", "{pw}")',),
        ('sqlcmd -S tcp:db,1433 -U sa -P {pw} -Q "SELECT 1"',),
        ("mongosh mongodb://db:27017 -u admin -p {pw} --authenticationDatabase admin",),
        ("mosquitto_pub -h mqtt.local -u sensor -P {pw} -t temp -m 21",),
        ("ipmitool -I lanplus -H 10.0.0.9 -U ADMIN -P {pw} chassis status",),
        ("cqlsh cassandra.local -u cassandra -p {pw}",),
        ("influx -username admin -password {pw} -execute 'SHOW DATABASES'",),
        ("zip -P {pw} backup.zip db.sql",),
        ("7z a -p{pw} secrets.7z notes/",),
        ("xfreerdp /v:10.0.0.5 /u:Administrator /p:{pw}",),
        ("psexec \\\\\\\\host -u admin -p {pw} cmd",),
        ("gpg --batch --passphrase {pw} -d file.gpg",),
        ("aws configure set aws_secret_access_key {b64}",),
        ("mysql --user=root --password={pw} -e 'select 1'",),
    ]
    for (template,) in cli:
        pw, pw2, b64v = g.pw(), g.pw(), g.s(40, _B64)
        text = template.format(pw=pw, pw2=pw2, b64=b64v)
        secrets = [v for v in (pw, pw2, b64v) if v in text]
        add("cli_password", text, *secrets)

    # -- SQL, cookies, JWTs.
    for template in (
        "CREATE USER 'app'@'%' IDENTIFIED BY '{pw}';",
        "ALTER USER reporting IDENTIFIED BY {pw};",
        "CREATE USER bob IDENTIFIED WITH mysql_native_password BY '{pw}';",
        "CREATE ROLE app LOGIN PASSWORD '{pw}';",
        "SET PASSWORD FOR 'u'@'localhost' = '{pw}';",
    ):
        pw = g.pw()
        add("sql", template.format(pw=pw), pw)
    for template in (
        "Cookie: sessionid={v}; csrftoken={v2}",
        "Set-Cookie: JSESSIONID={v}; Path=/; HttpOnly",
        "curl -b 'PHPSESSID={v}' https://intranet.local/admin",
        "Cookie: _ga=GA1.2.1234567.1700000000; connect.sid=s%3A{v}.{v2}",
        "set-cookie: laravel_session={v}; expires=Wed, 01 May 2024 10:00:00 GMT; path=/",
    ):
        v, v2 = g.s(32, _LOWER_DIGITS), g.s(43, _URLSAFE)
        text = template.format(v=v, v2=v2)
        add("cookie", text, *[x for x in (v, v2) if x in text])

    def b64url(obj: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    jwt_spaced = (
        base64.urlsafe_b64encode(b'{ "alg": "HS256", "typ": "JWT" }').decode().rstrip("=")
        + "."
        + base64.urlsafe_b64encode(b'{ "sub": "42", "exp": 1900000000 }').decode().rstrip("=")
        + "."
        + g.s(43, _URLSAFE)
    )
    add("jwt", f"token in the log: {jwt_spaced}", jwt_spaced)
    jwt_pretty = (
        base64.urlsafe_b64encode(b'{\n  "alg": "RS256"\n}').decode().rstrip("=")
        + "."
        + base64.urlsafe_b64encode(b'{\n  "sub": "svc"\n}').decode().rstrip("=")
        + "."
        + g.s(86, _URLSAFE)
    )
    add("jwt", f"x {jwt_pretty} y", jwt_pretty)
    jwt_none = b64url({"alg": "none"}) + "." + b64url({"sub": "admin", "role": "root"}) + "."
    add("jwt", f"unsigned: {jwt_none} accepted by the old lib", jwt_none.rstrip("."))

    # -- Prose: contractions, dashes, appositions, other languages, PINs.
    prose = [
        "the wifi password's {pw}, don't share it",
        "Admin password — {pw} — rotate after the demo",
        "the password, {pw}, is on the sticky note",
        "Das Passwort für den Server ist {pw}",
        "Kennwort: {pw}",
        "Le mot de passe du routeur est {pw}",
        "mot de passe : {pw}",
        "La contraseña del wifi es {pw}",
        "clave: {pw}",
        "A senha do banco é {pw}",
        "La password dell'admin è {pw}",
        "parola d'ordine: {pw}",
        "Het wachtwoord is {pw}",
        "wachtwoord = {pw}",
        "Passwort lautet {pw}",
    ]
    for template in prose:
        pw = g.pw()
        add("prose", template.format(pw=pw), pw)
    for template in (
        "PIN: {n}",
        "my card PIN is {n}",
        "the door passcode is {n}",
        "Geheimzahl {n}",
        "code PIN : {n}",
        "SIM PIN {n}, PUK {n2}",
        "Passcode: {n}",
    ):
        n, n2 = str(g.r.randrange(1000, 999999)), str(g.r.randrange(10**7, 10**8))
        text = template.format(n=n, n2=n2)
        add("pin", text, *[x for x in (n, n2) if x in text])

    # -- Tables and CSV with a password column.
    rows = [("alice", g.pw(), "admin"), ("bob", g.pw(), "dev"), ("carol", g.pw(), "ops")]
    add(
        "table",
        "user,password,role\n" + "\n".join(",".join(r) for r in rows),
        *[r[1] for r in rows],
    )
    add(
        "table",
        "user\tpassword\trole\n" + "\n".join("\t".join(r) for r in rows),
        *[r[1] for r in rows],
    )
    add(
        "table",
        "| Service | Login | Password | Notes |\n|---|---|---|---|\n"
        + "\n".join(f"| {s} | {u} | {p} | ok |" for (u, p, s) in rows),
        *[r[1] for r in rows],
    )
    pins = [str(g.r.randrange(1000, 9999)) for _ in range(3)]
    add(
        "table",
        "name;pin;floor\n"
        + "\n".join(f"{n};{p};3" for n, p in zip(("a", "b", "c"), pins, strict=True)),
        *pins,
    )
    toks = [g.s(24) for _ in range(2)]
    add(
        "table",
        " username | api_token \n----------+-----------\n svc1 | "
        + toks[0]
        + "\n svc2 | "
        + toks[1],
        *toks,
    )
    pwds = [g.pw() for _ in range(2)]
    add(
        "table",
        '"host","user","passwd"\n"db1","root","' + pwds[0] + '"\n"db2","app","' + pwds[1] + '"',
        *pwds,
    )

    # -- .env names.
    for name, value in (
        ("ATM_PIN", str(g.r.randrange(1000, 9999))),
        ("DEVICE_PASSCODE", str(g.r.randrange(100000, 999999))),
        ("AUTH_SALT", g.s(40, _B64)),
        ("PASSWORD_SALT", g.s(16)),
        ("SMTP_PASS", g.pw()),
    ):
        add("env_names", f"# .env\nAPP_ENV=prod\n{name}={value}\n", value)

    # -- Recovery and backup codes, OTP seeds, IBANs.
    gh_codes = [f"{g.hex(5)}-{g.hex(5)}" for _ in range(4)]
    add("recovery_codes", "GitHub recovery codes (keep safe):\n" + "\n".join(gh_codes), *gh_codes)
    goog = [f"{g.r.randrange(1000, 9999)} {g.r.randrange(1000, 9999)}" for _ in range(3)]
    add("recovery_codes", "Backup codes: " + ", ".join(goog), *goog)
    scratch = [str(g.r.randrange(10**7, 10**8)) for _ in range(3)]
    add("recovery_codes", "emergency scratch codes:\n  " + "\n  ".join(scratch), *scratch)
    seed = "".join(g.r.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(32))
    add("recovery_codes", f"otpauth://totp/ACME:ana@acme.io?secret={seed}&issuer=ACME", seed)

    def iban(country: str, bban: str) -> str:
        numeric = "".join(str(int(c, 36)) for c in bban + country + "00")
        return f"{country}{98 - int(numeric) % 97:02d}{bban}"

    de = iban("DE", f"{g.r.randrange(10**7, 10**8)}{g.r.randrange(10**9, 10**10)}")
    add("iban", f"Überweisung an {de} bis Freitag", de)
    gb = iban("GB", f"NWBK{g.r.randrange(10**5, 10**6)}{g.r.randrange(10**7, 10**8)}")
    grouped = " ".join(gb[i : i + 4] for i in range(0, len(gb), 4))
    add("iban", f"IBAN: {grouped}", grouped)
    nl = iban("NL", f"ABNA{g.r.randrange(10**9, 10**10)}")
    add("iban", json.dumps({"payee": "Acme BV", "iban": nl}), nl)

    # -- Secrets after a neutral key: the generic high-entropy rule.
    for template in (
        '{{"vendor": "acme", "credential_blob": "{v}"}}',
        "X-Acme-Signature-Key: {v}",
        "vendor.license={v}",
        "--upstream-auth {v}",
        "<ClientAssertion>{v}</ClientAssertion>",
        "routing_value: {v}",
        "webhook_signing = '{v}'",
        "ACME_CONN={v}",
    ):
        v = g.s(32, _B64 if "Assertion" in template else _ALNUM)
        add("generic_entropy", template.format(v=v), v)
    return out


def ordinary_samples() -> list[DevSample]:
    """Tool output and notes full of ids, hashes and numbers, with what must survive."""
    g = _R()
    g.r.seed(SEED + 1)
    out: list[DevSample] = []

    def add(family: str, text: str, *keep: str) -> None:
        out.append(DevSample(family, text, keep=tuple(keep)))

    sha, tree, node = (
        g.hex(40),
        g.hex(40),
        base64.b64encode(b"04:User" + str(g.r.randrange(10**6)).encode()).decode(),
    )
    gh_user = {
        "login": "octocat", "id": 583231, "node_id": node, "avatar_url": "https://avatars.githubusercontent.com/u/583231?v=4",
        "gravatar_id": "", "type": "User", "site_admin": False,
    }  # fmt: skip
    add("github", json.dumps(gh_user, indent=2), node)
    commit = {
        "sha": sha,
        "node_id": "C_kwDOA" + g.s(30),
        "commit": {
            "tree": {"sha": tree},
            "message": "fix: retry",
            "verification": {
                "verified": True,
                "reason": "valid",
                "signature": "-----BEGIN PGP SIGNATURE-----\n\n"
                + g.b64(48)
                + "\n-----END PGP SIGNATURE-----",
                "payload": "tree " + tree,
            },
        },
    }
    add("github", json.dumps(commit), sha, tree, commit["node_id"])
    run = {
        "id": 9087654321,
        "head_sha": g.hex(40),
        "check_suite_node_id": "CS_kwDOB" + g.s(24),
        "workflow_id": 1234567,
        "run_attempt": 1,
        "display_title": "Bump deps",
        "event": "push",
    }
    add("github", json.dumps(run), run["head_sha"], run["check_suite_node_id"])
    pr = {
        "number": 42,
        "merge_commit_sha": g.hex(40),
        "head": {"ref": "feature/x", "sha": g.hex(40)},
        "node_id": "PR_kwDOB" + g.s(20),
        "mergeable_state": "clean",
    }
    add("github", json.dumps(pr, separators=(",", ":")), pr["merge_commit_sha"], pr["node_id"])
    gql = {
        "data": {
            "repository": {
                "issues": {
                    "pageInfo": {
                        "endCursor": base64.b64encode(
                            b"cursor:v2:" + bytes(g.r.randrange(256) for _ in range(20))
                        ).decode(),
                        "hasNextPage": True,
                    },
                    "nodes": [{"id": "I_kwDOA" + g.s(16), "title": "Crash on start"}],
                }
            }
        }
    }
    add("github", json.dumps(gql), gql["data"]["repository"]["issues"]["pageInfo"]["endCursor"])

    integrity = "sha512-" + g.b64(64)
    npm = {
        "name": "left-pad",
        "version": "1.3.0",
        "dist": {
            "integrity": integrity,
            "shasum": g.hex(40),
            "tarball": "https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz",
            "signatures": [
                {"keyid": "SHA256:" + g.b64(32).rstrip("="), "sig": "MEUCIQ" + g.b64(60)}
            ],
        },
        "_id": "left-pad@1.3.0",
        "gitHead": g.hex(40),
    }
    add(
        "npm",
        json.dumps(npm, indent=2),
        integrity,
        npm["dist"]["signatures"][0]["keyid"],
        npm["dist"]["signatures"][0]["sig"],
    )
    add(
        "npm",
        f'"node_modules/react": {{\n  "version": "18.3.1",\n  "resolved": "https://registry.npmjs.org/react/-/react-18.3.1.tgz",\n  "integrity": "{integrity}"\n}}',
        integrity,
    )
    add("npm", f'left-pad@^1.3.0:\n  version "1.3.0"\n  integrity {integrity}', integrity)

    pod_hash = g.s(10, _LOWER_DIGITS)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"web-{pod_hash}-x2x9z",
            "uid": g.uuid(),
            "resourceVersion": "48213377",
            "labels": {"pod-template-hash": pod_hash},
            "generateName": f"web-{pod_hash}-",
        },
        "status": {
            "containerStatuses": [
                {
                    "containerID": "containerd://" + g.hex(64),
                    "imageID": "docker.io/library/nginx@sha256:" + g.hex(64),
                }
            ],
            "podIP": "10.244.1.17",
        },
    }
    add(
        "kubectl",
        json.dumps(pod, indent=2),
        pod["metadata"]["name"],
        pod["metadata"]["uid"],
        pod["status"]["containerStatuses"][0]["containerID"],
    )
    add(
        "kubectl",
        f"NAME                  READY   STATUS    RESTARTS   AGE\nweb-{pod_hash}-x2x9z   1/1     Running   0          3d\napi-{g.s(9, _LOWER_DIGITS)}-k8q2m   1/1     Running   2          1h",
        f"web-{pod_hash}-x2x9z",
    )
    cont = base64.b64encode(json.dumps({"start": 500, "rv": "48213377"}).encode()).decode()
    add(
        "kubectl",
        json.dumps(
            {"kind": "PodList", "metadata": {"continue": cont, "resourceVersion": "48213377"}}
        ),
        cont,
    )

    add(
        "docker",
        json.dumps(
            [
                {
                    "Id": g.hex(64),
                    "Image": "sha256:" + g.hex(64),
                    "NetworkSettings": {
                        "SandboxKey": "/var/run/docker/netns/" + g.hex(12),
                        "EndpointID": g.hex(64),
                        "MacAddress": "02:42:ac:11:00:02",
                    },
                }
            ]
        ),
        "MacAddress",
    )
    add(
        "docker",
        f"Digest: sha256:{g.hex(64)}\nStatus: Downloaded newer image for python:3.12-slim",
        "python:3.12-slim",
    )

    upload_id = g.s(80, _URLSAFE)
    add(
        "aws",
        json.dumps(
            {
                "Bucket": "acme-logs",
                "Key": "2024/05/01/app.log.gz",
                "UploadId": upload_id,
                "ETag": '"' + g.hex(32) + '"',
                "VersionId": g.s(32, _URLSAFE),
            }
        ),
        upload_id,
    )
    next_token = base64.b64encode(
        json.dumps({"NextToken": None, "boto_truncate_amount": 2}).encode()
    ).decode() + g.s(40)
    add(
        "aws",
        json.dumps(
            {
                "Reservations": [
                    {
                        "ReservationId": "r-0" + g.hex(16),
                        "OwnerId": "123456789012",
                        "Instances": [
                            {"InstanceId": "i-0" + g.hex(16), "ImageId": "ami-0" + g.hex(16)}
                        ],
                    }
                ],
                "NextToken": next_token,
            }
        ),
        next_token,
    )
    add(
        "aws",
        f'x-amz-request-id: {g.s(16).upper()}\nx-amz-id-2: {g.b64(57)}\nETag: "{g.hex(32)}"',
        "x-amz-request-id",
    )

    stripe = {
        "id": "ch_3" + g.s(23),
        "object": "charge",
        "amount": 2000,
        "balance_transaction": "txn_3" + g.s(23),
        "customer": "cus_" + g.s(14),
        "payment_intent": "pi_3" + g.s(23),
        "payment_method": "pm_1" + g.s(23),
        "receipt_url": "https://pay.stripe.com/receipts/payment/" + g.s(60, _URLSAFE),
    }
    add(
        "stripe",
        json.dumps(stripe, indent=2),
        stripe["balance_transaction"],
        stripe["customer"],
        stripe["payment_intent"],
        stripe["payment_method"],
    )
    oai = {
        "id": "chatcmpl-" + g.s(29),
        "object": "chat.completion",
        "created": 1714557330,
        "model": "gpt-4o-2024-08-06",
        "system_fingerprint": "fp_" + g.hex(10),
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "tool_calls": [{"id": "call_" + g.s(24), "type": "function"}],
                }
            }
        ],
    }
    add("llm_api", json.dumps(oai), oai["id"], oai["choices"][0]["message"]["tool_calls"][0]["id"])
    anth = {
        "id": "msg_01" + g.s(22),
        "type": "message",
        "model": "claude-sonnet-4-20250514",
        "content": [{"type": "tool_use", "id": "toolu_01" + g.s(22), "name": "get_weather"}],
        "usage": {"input_tokens": 472, "output_tokens": 91},
    }
    add("llm_api", json.dumps(anth), anth["id"], anth["content"][0]["id"])
    add(
        "llm_api",
        f"request-id: req_011C{g.s(20)}\nanthropic-organization-id: {g.uuid()}",
        "request-id",
    )

    add(
        "lockfiles",
        f"github.com/google/uuid v1.6.0 h1:{g.b64(32)}\ngithub.com/google/uuid v1.6.0/go.mod h1:{g.b64(32)}",
        "github.com/google/uuid v1.6.0",
    )
    h = g.hex(64)
    add("lockfiles", f"requests==2.32.3 \\\n    --hash=sha256:{h}", h)
    add(
        "lockfiles",
        f'[[package]]\nname = "serde"\nversion = "1.0.203"\nchecksum = "{g.hex(64)}"',
        "1.0.203",
    )
    zh = g.hex(64)
    add("lockfiles", f'  hashes = [\n    "h1:{g.b64(32)}",\n    "zh:{zh}",\n  ]', zh)

    add(
        "headers",
        f'HTTP/2 200\netag: W/"{g.hex(40)}"\nx-github-request-id: D0A2:3F6B:{g.hex(6).upper()}:{g.hex(7).upper()}:66A1B2C3\ntraceparent: 00-{g.hex(32)}-{g.hex(16)}-01\ncf-ray: {g.hex(16)}-FRA',
        "traceparent",
    )
    dig = g.b64(32)
    add(
        "headers",
        f"Digest: sha-256={dig}\nContent-MD5: {g.b64(16)}\nx-goog-hash: crc32c={g.b64(4)},md5={g.b64(16)}",
        dig,
    )
    add(
        "headers",
        f"X-Hub-Signature-256: sha256={g.hex(64)}\nX-GitHub-Delivery: {g.uuid()}",
        "X-GitHub-Delivery",
    )
    add("headers", f"Content-Security-Policy: script-src 'self' 'nonce-{g.b64(16)}'", "script-src")

    ulid = "01HX" + "".join(g.r.choice("0123456789ABCDEFGHJKMNPQRSTVWXYZ") for _ in range(22))
    add(
        "logs",
        f"2024-05-01T10:00:00Z INFO job={ulid} request_id={g.uuid()} trace={g.hex(32)} span={g.hex(16)} took=12ms",
        ulid,
    )
    add(
        "logs",
        f'level=info msg="cache hit" key=v1-deps-linux-{g.hex(16)} size=1048576',
        "cache hit",
    )
    img = "data:image/png;base64," + g.b64(90)
    add("logs", f'<img src="{img}">', img)
    add(
        "logs",
        f"commit {g.hex(40)}\nAuthor: Ana <ana@acme.io>\n\n    fix(api): retry\n\n    Change-Id: I{g.hex(40)}\n",
        "fix(api): retry",
    )
    pubkey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + g.b64(24).rstrip("=") + " ana@laptop"
    add("keys_public", json.dumps({"key": pubkey, "title": "laptop", "id": 1234}), pubkey)
    add(
        "keys_public",
        json.dumps(
            {
                "public_key": "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE" + g.b64(48),
                "fingerprint": "SHA256:" + g.b64(32).rstrip("="),
            }
        ),
        "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE",
    )
    add(
        "prose_words",
        "Pin the version to 2.3.1 and pin 4 cores to the worker; PIN entry UI is done.",
        "2.3.1",
        "4 cores",
    )
    add(
        "prose_words",
        "Backup codes: 10 left. The backup key 2048 bits is fine; recovery codes are in 1Password.",
        "2048 bits",
    )
    add(
        "prose_words",
        "SKU DE12ABCD3456 and GB82 build 7788 passed; ISO code FR76 is a label.",
        "DE12ABCD3456",
        "FR76",
    )
    add(
        "prose_words",
        "The password policy (min 12 chars) ships in 2.4; passcode screens were redesigned.",
        "min 12 chars",
    )
    add(
        "prose_words",
        "Das Passwort muss mindestens 12 Zeichen haben. Le mot de passe est oublié? Réinitialisez-le.",
        "mindestens 12 Zeichen",
    )
    add(
        "prose_words",
        "The key, 2024-05-01, is when the rotation starts; password-reset-v2 is live.",
        "2024-05-01",
        "password-reset-v2",
    )
    add(
        "tables",
        "name,version,sha256\nserde,1.0.203," + g.hex(64) + "\ntokio,1.38.0," + g.hex(64),
        "1.0.203",
    )
    add(
        "tables",
        "| metric | p50 | p95 |\n|---|---|---|\n| recall_ms | 12.6 | 40.1 |\n| password_checks | 3 | 9 |",
        "12.6",
        "password_checks",
    )
    add(
        "tables",
        "user,password_last_changed,mfa\nalice,2024-03-01,yes\nbob,2024-01-15,no",
        "2024-03-01",
    )
    add("tables", "id,has_password,token_count\n1,true,512\n2,false,77", "512")
    add(
        "code",
        'password = os.environ["DB_PASSWORD"]\ntoken = get_token(scope="read")\nauth = None',
        "os.environ",
    )
    add(
        "code",
        "def login(user: str, password: str) -> Session:\n    return client.auth(user, password)",
        "client.auth(user, password)",
    )
    add("code", "requests.get(url, auth=(user, os.environ['PW']))", "auth=(user, os.environ['PW'])")
    add("code", "docker run -u 1000 -p 8080:80 -w /app -e MODE=prod app:latest", "8080:80")
    add("code", "ssh -l deploy -p 2222 bastion.acme.io", "2222")
    add(
        "code",
        "sqlplus / as sysdba; then lodash/fp@4.17.21 and @types/node@20.11.5",
        "lodash/fp@4.17.21",
    )
    add(
        "code",
        "See https://www.npmjs.com:443/package/@types/node and https://host:8080/path@x",
        "https://host:8080/path@x",
    )
    add("code", "mysql -u app -P 3306 -h db -p billing", "3306")
    return out


def measure() -> dict[str, dict[str, list[int]]]:
    """Per family: [texts, values, survived] for secrets, [texts, keep, altered] for ordinary."""
    from service.domain.redaction import REDACTOR

    secret: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for sample in secret_samples():
        text = REDACTOR.redact(sample.text).text
        row = secret[sample.family]
        row[0] += 1
        row[1] += len(sample.secrets)
        row[2] += sum(s in text for s in sample.secrets)
    ordinary: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for sample in ordinary_samples():
        text = REDACTOR.redact(sample.text).text
        row = ordinary[sample.family]
        row[0] += 1
        row[1] += len(sample.keep)
        row[2] += sum(k not in text for k in sample.keep)
    return {"secret": dict(secret), "ordinary": dict(ordinary)}


def main() -> int:
    figures = measure()
    total = [0, 0, 0]
    print(f"{'secret family':22} texts values survived")
    for family, row in sorted(figures["secret"].items()):
        print(f"{family:22} {row[0]:5} {row[1]:6} {row[2]:8}")
        total = [a + b for a, b in zip(total, row, strict=True)]
    print(f"{'all':22} {total[0]:5} {total[1]:6} {total[2]:8}\n")
    total = [0, 0, 0]
    print(f"{'ordinary family':22} texts   keep  altered")
    for family, row in sorted(figures["ordinary"].items()):
        print(f"{family:22} {row[0]:5} {row[1]:6} {row[2]:8}")
        total = [a + b for a, b in zip(total, row, strict=True)]
    print(f"{'all':22} {total[0]:5} {total[1]:6} {total[2]:8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
