"""Write ``corpus.jsonl``: the held-out redaction corpus (``python -m bench.redaction_blind.generate``).

HELD OUT: written without reading the redactor's rules, its tests or its other corpora. Never
tune the redactor against it; it measures, it does not train (see README.md).

Every value is fake but shaped like the real thing (prefixes, lengths, alphabets, Luhn and
IBAN check digits). Each family is a function ``(rng, i) -> (text, values)``; ``i`` walks
through the family's templates so every template is used, ``rng`` (seeded per family) fills
in the values. The output is deterministic: the same seed writes the same file.

Lines: ``{"id", "kind": "secret"|"ordinary", "family", "text", "secrets"|"keep"}``.
``secrets`` are exact substrings that must not survive redaction; ``keep`` exact substrings
that must survive verbatim.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import random
import string
import uuid
from collections.abc import Callable
from pathlib import Path

SEED = 20261126
OUT = Path(__file__).with_name("corpus.jsonl")

B62 = string.ascii_letters + string.digits
B64 = B62 + "+/"
B64URL = B62 + "-_"
HEX = "0123456789abcdef"
UPPER_ALNUM = string.ascii_uppercase + string.digits
B32 = string.ascii_uppercase + "234567"

Gen = Callable[[random.Random, int], tuple[str, list[str]]]


# --------------------------------------------------------------------------- values


def rs(r: random.Random, alphabet: str, n: int) -> str:
    return "".join(r.choice(alphabet) for _ in range(n))


def hexs(r: random.Random, n: int) -> str:
    return rs(r, HEX, n)


def b64body(r: random.Random, nbytes: int) -> str:
    return base64.b64encode(r.randbytes(nbytes)).decode()


def b64url(r: random.Random, nbytes: int) -> str:
    return base64.urlsafe_b64encode(r.randbytes(nbytes)).decode().rstrip("=")


def uid(r: random.Random) -> str:
    return str(uuid.UUID(int=r.getrandbits(128), version=4))


WORDS = [
    "correct",
    "horse",
    "battery",
    "staple",
    "falcon",
    "river",
    "orange",
    "winter",
    "summer",
    "dragon",
    "monkey",
    "sunset",
    "harbor",
    "violet",
    "copper",
    "maple",
    "tiger",
    "rocket",
    "Sommer",
    "Sonne",
    "Katze",
    "Fruehling",
    "soleil",
    "chaton",
    "verano",
    "gato",
    "sol",
    "estrela",
    "gatto",
    "primavera",
    "fiets",
    "tulp",
    "Bremen",
    "Lisboa",
    "Milano",
]
SYMS = "!#$%&*+-=?@^_~."


def human_password(r: random.Random, syms: str = SYMS) -> str:
    w = r.choice(WORDS)
    style = r.randrange(4)
    if style == 0:
        return f"{w.capitalize()}{r.randrange(1990, 2027)}{r.choice(syms)}"
    if style == 1:
        return f"{w}{r.choice(syms)}{r.choice(WORDS).capitalize()}{r.randrange(10, 99)}"
    if style == 2:
        leet = w.replace("o", "0").replace("e", "3").replace("a", "4").replace("i", "1")
        return f"{leet.capitalize()}{r.choice(syms)}{r.randrange(100, 999)}"
    return f"{r.choice(WORDS)}-{r.choice(WORDS)}-{r.choice(WORDS)}-{r.randrange(10, 99)}"


def random_password(r: random.Random, n: int = 16, syms: str = "!#%^*-_=+") -> str:
    while True:
        p = rs(r, B62 + syms, n)
        if any(c.isdigit() for c in p) and any(c.isupper() for c in p):
            return p


def password(r: random.Random, syms: str = "!#%^*-_=+") -> str:
    if r.random() < 0.45:
        return human_password(r, syms)
    return random_password(r, r.randrange(12, 24), syms)


def safe_password(r: random.Random) -> str:
    """A password with no character that breaks URL, ODBC or shell syntax."""
    return password(r, syms="-_")


def luhn_complete(prefix: str, length: int, r: random.Random) -> str:
    body = prefix + "".join(r.choice(string.digits) for _ in range(length - len(prefix) - 1))
    total = 0
    for k, ch in enumerate(reversed(body)):
        d = int(ch)
        if k % 2 == 0:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return body + str((10 - total % 10) % 10)


def card(r: random.Random) -> str:
    kind = r.randrange(4)
    if kind == 0:
        return luhn_complete("4", 16, r)
    if kind == 1:
        return luhn_complete(str(r.randrange(51, 56)), 16, r)
    if kind == 2:
        return luhn_complete(r.choice(["34", "37"]), 15, r)
    return luhn_complete("6011", 16, r)


def group_card(n: str, sep: str) -> str:
    if len(n) == 15:
        return sep.join([n[:4], n[4:10], n[10:]])
    return sep.join(n[k : k + 4] for k in range(0, 16, 4))


def iban(r: random.Random, country: str) -> str:
    lengths = {"DE": 18, "FR": 23, "ES": 20, "NL": 14, "IT": 23, "GB": 18, "PT": 21, "BE": 12}
    n = lengths[country]
    if country == "NL":
        bban = rs(r, string.ascii_uppercase, 4) + rs(r, string.digits, 10)
    elif country == "GB":
        bban = rs(r, string.ascii_uppercase, 4) + rs(r, string.digits, 14)
    elif country == "IT":
        bban = r.choice(string.ascii_uppercase) + rs(r, string.digits, 22)
    else:
        bban = rs(r, string.digits, n)
    moved = bban + country + "00"
    num = int("".join(str(int(c, 36)) for c in moved))
    check = 98 - num % 97
    return f"{country}{check:02d}{bban}"


def spaced_iban(v: str) -> str:
    return " ".join(v[k : k + 4] for k in range(0, len(v), 4))


def ssn(r: random.Random) -> str:
    area = r.choice([n for n in range(1, 900) if n != 666])
    return f"{area:03d}-{r.randrange(1, 100):02d}-{r.randrange(1, 10000):04d}"


def jwt(r: random.Random) -> str:
    header = {"alg": r.choice(["HS256", "RS256", "ES256"]), "typ": "JWT"}
    payload = {
        "sub": uid(r),
        "iss": r.choice(["https://auth.example.com/", "https://id.acme.io", "ctxpack"]),
        "iat": 1764000000 + r.randrange(10**6),
        "exp": 1765000000 + r.randrange(10**6),
        "scope": r.choice(["read write", "admin", "openid profile email"]),
    }

    def enc(o: object) -> str:
        return (
            base64.urlsafe_b64encode(json.dumps(o, separators=(",", ":")).encode())
            .decode()
            .rstrip("=")
        )

    return f"{enc(header)}.{enc(payload)}.{b64url(r, 32)}"


def wrap64(body: str, width: int = 64) -> list[str]:
    return [body[k : k + width] for k in range(0, len(body), width)]


def key_lines(r: random.Random, nbytes: int, prefix: str = "", width: int = 64) -> list[str]:
    return wrap64(prefix + b64body(r, nbytes), width)


def key_secrets(lines: list[str]) -> list[str]:
    """The values a key leaks: its first body line and one from its middle."""
    return [lines[0], lines[len(lines) // 2]]


# --------------------------------------------------------------------------- secret families


def fam_openssh_key(r: random.Random, i: int) -> tuple[str, list[str]]:
    lines = key_lines(r, 300 + r.randrange(100), "b3BlbnNzaC1rZXktdjEAAAAA", 70)
    block = (
        "-----BEGIN OPENSSH PRIVATE KEY-----\n"
        + "\n".join(lines)
        + "\n-----END OPENSSH PRIVATE KEY-----"
    )
    t = [
        f"$ cat ~/.ssh/id_ed25519\n{block}\n$ ",
        f"Deploy key for the staging runner (do not lose):\n\n{block}\n",
        f"```\n{block}\n```\nadd that to the CI secrets as DEPLOY_KEY",
        "- name: write key\n  copy:\n    dest: /home/ci/.ssh/id_ed25519\n    content: |\n      "
        + block.replace("\n", "\n      "),
        f"Found in the backup tarball at home/ops/.ssh/id_rsa:\n{block}",
        f"Schlüssel für den Jump-Host:\n{block}\nbitte nicht weitergeben",
    ]
    return t[i % len(t)], key_secrets(lines)


def fam_pem_rsa_ec_key(r: random.Random, i: int) -> tuple[str, list[str]]:
    kinds = ["RSA PRIVATE KEY", "EC PRIVATE KEY", "PRIVATE KEY", "DSA PRIVATE KEY"]
    kind = kinds[i % len(kinds)]
    lines = key_lines(r, 180 + r.randrange(400), "MII" if kind != "EC PRIVATE KEY" else "MHcCAQEE")
    hdr = ""
    if i % 3 == 1 and kind == "RSA PRIVATE KEY":
        hdr = f"Proc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,{hexs(r, 32).upper()}\n\n"
    block = f"-----BEGIN {kind}-----\n{hdr}" + "\n".join(lines) + f"\n-----END {kind}-----"
    t = [
        "tls.key: |\n  " + block.replace("\n", "\n  "),
        f"openssl genrsa output saved to server.key:\n{block}",
        f"{block}\n-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBa\n-----END CERTIFICATE-----",
        f'PRIVATE_KEY="{block}"',
        f"la clé privée du certificat :\n{block}",
        f"Log dump (key material accidentally logged):\n2026-11-20T10:01:02Z DEBUG tls: loaded {block}",
    ]
    return t[i % len(t)], key_secrets(lines)


def fam_pkcs8_encrypted_key(r: random.Random, i: int) -> tuple[str, list[str]]:
    lines = key_lines(
        r, 1200 + r.randrange(200), "MIIFHDBOBgkqhkiG9w0BBQ0wQTApBgkqhkiG9w0BBQwwHAQI"
    )
    block = (
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\n"
        + "\n".join(lines)
        + "\n-----END ENCRYPTED PRIVATE KEY-----"
    )
    t = [
        f"keystore export (PKCS#8, passphrase in 1Password):\n{block}",
        f"<key>{block}</key>",
        f"signing.key contents\n\n{block}\n",
        f"> paste of the encrypted key so you can test decryption\n{block}",
        "cert-manager secret data:\n  tls.key: |\n    " + block.replace("\n", "\n    "),
        f"clave cifrada del servidor:\n{block}",
    ]
    return t[i % len(t)], key_secrets(lines)


def fam_ssh2_key(r: random.Random, i: int) -> tuple[str, list[str]]:
    lines = key_lines(r, 600 + r.randrange(200), "P2/56wAAA", 70)
    block = (
        "---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----\n"
        f'Comment: "{r.choice(["rsa-key-20240301", "2048-bit rsa, ops@bastion", "tectia key"])}"\n'
        + "\n".join(lines)
        + "\n---- END SSH2 ENCRYPTED PRIVATE KEY ----"
    )
    t = [
        f"Tectia key from the old bastion (SSH.com format):\n{block}",
        f"converted with ssh-keygen -i -f ops.key, source was:\n{block}",
        block,
        f"```\n{block}\n```",
        f"attachment: ops_key.ssh2\n{block}\n(end of attachment)",
        f"Der alte Schlüssel im SSH.com-Format:\n{block}",
    ]
    return t[i % len(t)], key_secrets(lines)


def fam_putty_ppk(r: random.Random, i: int) -> tuple[str, list[str]]:
    algo = ["ssh-rsa", "ssh-ed25519", "ecdsa-sha2-nistp256"][i % 3]
    pub = key_lines(r, 270 if algo == "ssh-rsa" else 51, "AAAA")
    priv = key_lines(r, 660 if algo == "ssh-rsa" else 48)
    mac = hexs(r, 64)
    version = 3 if i % 2 else 2
    extra = (
        "Key-Derivation: Argon2id\nArgon2-Memory: 8192\nArgon2-Passes: 13\nArgon2-Parallelism: 1\nArgon2-Salt: "
        + hexs(r, 32)
        + "\n"
        if version == 3 and i % 4 == 1
        else ""
    )
    enc = "aes256-cbc" if extra else "none"
    block = (
        f"PuTTY-User-Key-File-{version}: {algo}\nEncryption: {enc}\nComment: {r.choice(['imported-openssh-key', 'rsa-key-20231109', 'ops@win-jump'])}\n"
        f"Public-Lines: {len(pub)}\n"
        + "\n".join(pub)
        + "\n"
        + extra
        + f"Private-Lines: {len(priv)}\n"
        + "\n".join(priv)
        + f"\nPrivate-MAC: {mac}"
    )
    t = [
        f"C:\\Users\\ops\\keys\\jump.ppk:\n{block}",
        f"here's the ppk for WinSCP\n{block}",
        block,
        f"```text\n{block}\n```\nimport it in pageant",
        f"PuTTYgen saved this:\n\n{block}\n",
        f"fichier .ppk pour le serveur de recette :\n{block}",
    ]
    return t[i % len(t)], [priv[0], priv[len(priv) // 2]]


def fam_pgp_private(r: random.Random, i: int) -> tuple[str, list[str]]:
    lines = key_lines(r, 900, "lQdGBF")
    crc = "=" + b64body(r, 3)
    block = (
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n"
        + "\n".join(lines)
        + f"\n{crc}\n-----END PGP PRIVATE KEY BLOCK-----"
    )
    t = [
        f"gpg --export-secret-keys --armor release@acme.io\n{block}",
        f"release signing key backup:\n{block}",
        block,
        "GPG_PRIVATE_KEY: |\n  " + block.replace("\n", "\n  "),
        f"> secret key for the apt repo\n{block}",
        f"chiave privata GPG del repository:\n{block}",
    ]
    return t[i % len(t)], key_secrets(lines)


def fam_aws(r: random.Random, i: int) -> tuple[str, list[str]]:
    akid = r.choice(["AKIA", "ASIA"]) + rs(r, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)
    secret = rs(r, B64, 40)
    t = [
        f"[default]\naws_access_key_id = {akid}\naws_secret_access_key = {secret}\nregion = eu-west-1",
        f"export AWS_ACCESS_KEY_ID={akid}\nexport AWS_SECRET_ACCESS_KEY={secret}",
        f'{{"AccessKeyId": "{akid}", "SecretAccessKey": "{secret}", "Status": "Active"}}',
        f"creds for the backup bucket: {akid} / {secret}",
        f"s3 = boto3.client('s3', aws_access_key_id='{akid}', aws_secret_access_key='{secret}')",
        f"Zugangsdaten S3: Key-ID {akid}, geheimer Schlüssel {secret}",
    ]
    return t[i % len(t)], [akid, secret]


def fam_stripe(r: random.Random, i: int) -> tuple[str, list[str]]:
    k = r.choice(["sk_live_", "rk_live_", "sk_test_"]) + rs(r, B62, r.choice([24, 99]))
    wh = "whsec_" + rs(r, B62, 32)
    t = [
        f"STRIPE_SECRET_KEY={k}",
        f'stripe.api_key = "{k}"',
        f"curl https://api.stripe.com/v1/charges -u {k}:",
        f"webhook signing secret is {wh}, API key {k}",
        f"Use {k} for the payout job",
        f"la clave de Stripe en producción: {k}",
    ]
    text = t[i % len(t)]
    return text, [k] + ([wh] if wh in text else [])


def fam_twilio(r: random.Random, i: int) -> tuple[str, list[str]]:
    sid = "AC" + hexs(r, 32)
    tok = hexs(r, 32)
    sk = "SK" + hexs(r, 32)
    ksecret = rs(r, B62, 32)
    t = [
        (f"TWILIO_ACCOUNT_SID={sid}\nTWILIO_AUTH_TOKEN={tok}", [tok]),
        (f"client = Client('{sid}', '{tok}')", [tok]),
        (
            f"curl -X POST https://api.twilio.com/2010-04-01/Accounts/{sid}/Messages.json -u {sid}:{tok}",
            [tok],
        ),
        (f"twilio api key {sk} secret {ksecret}", [ksecret]),
        (f"auth token for twilio is {tok}", [tok]),
        (f"Twilio: SID {sid}, Token {tok} (nicht ins Repo!)", [tok]),
    ]
    return t[i % len(t)]


def fam_sendgrid_mailgun(r: random.Random, i: int) -> tuple[str, list[str]]:
    sg = f"SG.{b64url(r, 16)}.{b64url(r, 32)}"
    mg = "key-" + hexs(r, 32)
    mg2 = f"{hexs(r, 32)}-{hexs(r, 8)}-{hexs(r, 8)}"
    t = [
        (f"SENDGRID_API_KEY={sg}", [sg]),
        (f"sg = SendGridAPIClient('{sg}')", [sg]),
        (f"mailgun: api:{mg}", [mg]),
        (f"curl -s --user 'api:{mg2}' https://api.mailgun.net/v3/mg.example.com/messages", [mg2]),
        (f"smtp relay: user apikey, pass {sg}", [sg]),
        (f"MAILGUN_API_KEY: {mg2}", [mg2]),
    ]
    return t[i % len(t)]


def fam_slack(r: random.Random, i: int) -> tuple[str, list[str]]:
    bot = f"xoxb-{r.randrange(10**10, 10**12)}-{r.randrange(10**11, 10**13)}-{rs(r, B62, 24)}"
    user = f"xoxp-{r.randrange(10**10, 10**12)}-{r.randrange(10**10, 10**12)}-{r.randrange(10**11, 10**13)}-{hexs(r, 32)}"
    app = f"xapp-1-A{rs(r, UPPER_ALNUM, 10)}-{r.randrange(10**12, 10**13)}-{hexs(r, 64)}"
    t = [
        (f"SLACK_BOT_TOKEN={bot}", [bot]),
        (f"slack token {user}", [user]),
        (f'{{"ok": true, "access_token": "{bot}", "token_type": "bot"}}', [bot]),
        (f"socket mode: SLACK_APP_TOKEN={app} SLACK_BOT_TOKEN={bot}", [app, bot]),
        (f"curl -H 'Authorization: Bearer {bot}' https://slack.com/api/chat.postMessage", [bot]),
        (f"the bot posts as {bot}", [bot]),
    ]
    return t[i % len(t)]


def fam_webhook_urls(r: random.Random, i: int) -> tuple[str, list[str]]:
    slack_tok = rs(r, B62, 24)
    slack = f"https://hooks.slack.com/services/T{rs(r, UPPER_ALNUM, 8)}/B{rs(r, UPPER_ALNUM, 10)}/{slack_tok}"
    dtok = b64url(r, 51)
    discord = f"https://discord.com/api/webhooks/{r.randrange(10**17, 10**18)}/{dtok}"
    teams_tok = hexs(r, 32)
    teams = f"https://acme.webhook.office.com/webhookb2/{uid(r)}@{uid(r)}/IncomingWebhook/{teams_tok}/{uid(r)}"
    zap = f"https://hooks.zapier.com/hooks/catch/{r.randrange(10**6, 10**7)}/{rs(r, string.ascii_lowercase + string.digits, 6)}/"
    gchat_key = "AIza" + rs(r, B64URL, 35)
    gchat_tok = b64url(r, 32)
    gchat = f"https://chat.googleapis.com/v1/spaces/AAAA{rs(r, B62, 7)}/messages?key={gchat_key}&token={gchat_tok}"
    t = [
        (f"alerts go to {slack}", [slack_tok]),
        (f"DISCORD_WEBHOOK={discord}", [dtok]),
        (f"Teams connector: {teams}", [teams_tok]),
        (f'curl -X POST -d \'{{"text":"deploy ok"}}\' {slack}', [slack_tok]),
        (f"google chat webhook {gchat}", [gchat_key, gchat_tok]),
        (f'webhook_url = "{discord}"\nzap = "{zap}"', [dtok]),
    ]
    return t[i % len(t)]


def fam_discord_telegram(r: random.Random, i: int) -> tuple[str, list[str]]:
    first = base64.b64encode(str(r.randrange(10**17, 10**19)).encode()).decode().rstrip("=")
    dtok = f"{first}.{rs(r, B64URL, 6)}.{rs(r, B64URL, 38)}"
    ttok = f"{r.randrange(10**8, 10**10)}:AA{rs(r, B64URL, 33)}"
    t = [
        (f"DISCORD_TOKEN={dtok}", [dtok]),
        (f"client.run('{dtok}')", [dtok]),
        (f"telegram bot token: {ttok}", [ttok]),
        (
            f"curl https://api.telegram.org/bot{ttok}/sendMessage -d chat_id=-100123 -d text=hi",
            [ttok],
        ),
        (f'TELEGRAM_BOT_TOKEN = "{ttok}"', [ttok]),
        (f"o token do bot do Telegram é {ttok}", [ttok]),
    ]
    return t[i % len(t)]


def fam_git_hosts(r: random.Random, i: int) -> tuple[str, list[str]]:
    glpat = "glpat-" + rs(r, B64URL, 20)
    glrt = "glrt-" + rs(r, B64URL, 20)
    ghp = "ghp_" + rs(r, B62, 36)
    ghpat = f"github_pat_11{rs(r, UPPER_ALNUM, 22)}_{rs(r, B62, 59)}"
    atbb = "ATBB" + rs(r, B62, 32) + hexs(r, 8).upper()
    t = [
        (f"git clone https://oauth2:{glpat}@gitlab.example.com/group/app.git", [glpat]),
        (f"gitlab-runner register --url https://gitlab.com --token {glrt}", [glrt]),
        (f"export GITHUB_TOKEN={ghp}", [ghp]),
        (f"gh auth login --with-token <<< {ghpat}", [ghpat]),
        (f"bitbucket app password for ci-bot: {atbb}", [atbb]),
        (f'[remote "origin"]\n\turl = https://ci-bot:{atbb}@bitbucket.org/acme/api.git', [atbb]),
        (f"PRIVATE-TOKEN: {glpat}", [glpat]),
        (f"token GitHub (fine-grained) : {ghpat}", [ghpat]),
    ]
    return t[i % len(t)]


def fam_azure(r: random.Random, i: int) -> tuple[str, list[str]]:
    acct_key = b64body(r, 64)
    sas_raw = b64body(r, 32)
    sas = sas_raw.replace("+", "%2B").replace("/", "%2F").replace("=", "%3D")
    sb_key = b64body(r, 32)
    cs = f"DefaultEndpointsProtocol=https;AccountName=acmelogs{r.randrange(100)};AccountKey={acct_key};EndpointSuffix=core.windows.net"
    url = f"https://acmelogs.blob.core.windows.net/exports/report.csv?sv=2022-11-02&ss=b&srt=sco&sp=rl&se=2026-12-31T23:59:59Z&st=2026-11-01T00:00:00Z&spr=https&sig={sas}"
    sb = f"Endpoint=sb://acme-bus.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={sb_key}"
    client_secret = rs(r, B62 + "~._-", 3) + "8Q~" + rs(r, B62 + "~._-", 34)
    t = [
        (f'AZURE_STORAGE_CONNECTION_STRING="{cs}"', [acct_key]),
        (f"download link (expires end of year): {url}", [sas]),
        (f'"ServiceBus": "{sb}"', [sb_key]),
        (
            f'az ad sp credential reset output: {{"appId": "{uid(r)}", "password": "{client_secret}", "tenant": "{uid(r)}"}}',
            [client_secret],
        ),
        (f"azcopy copy ./dump '{url}'", [sas]),
        (f"Verbindungszeichenfolge Storage: {cs}", [acct_key]),
    ]
    return t[i % len(t)]


def fam_gcp_service_account(r: random.Random, i: int) -> tuple[str, list[str]]:
    lines = key_lines(r, 1190, "MIIEv")
    pk = "-----BEGIN PRIVATE KEY-----\\n" + "\\n".join(lines) + "\\n-----END PRIVATE KEY-----\\n"
    pkid = hexs(r, 40)
    proj = r.choice(["acme-prod-4821", "data-lake-77", "ctx-staging"])
    doc = (
        "{\n"
        '  "type": "service_account",\n'
        f'  "project_id": "{proj}",\n'
        f'  "private_key_id": "{pkid}",\n'
        f'  "private_key": "{pk}",\n'
        f'  "client_email": "deployer@{proj}.iam.gserviceaccount.com",\n'
        f'  "client_id": "{r.randrange(10**20, 10**21)}",\n'
        '  "auth_uri": "https://accounts.google.com/o/oauth2/auth",\n'
        '  "token_uri": "https://oauth2.googleapis.com/token"\n'
        "}"
    )
    oneline = json.dumps(json.loads(doc), separators=(",", ":"))
    gkey = "AIza" + rs(r, B64URL, 35)
    t = [
        (f"cat sa.json\n{doc}", key_secrets(lines)),
        (f"GOOGLE_CREDENTIALS='{oneline}'", key_secrets(lines)),
        (
            f"kubectl create secret generic gcp-sa --from-literal=key.json='{oneline}'",
            key_secrets(lines),
        ),
        (f"service account key for BigQuery loader:\n```json\n{doc}\n```", key_secrets(lines)),
        (f"maps api key {gkey}", [gkey]),
        (f'firebaseConfig = {{ apiKey: "{gkey}", authDomain: "{proj}.firebaseapp.com" }}', [gkey]),
    ]
    return t[i % len(t)]


def fam_paas_tokens(r: random.Random, i: int) -> tuple[str, list[str]]:
    heroku = uid(r)
    dop = "dop_v1_" + hexs(r, 64)
    dd_api, dd_app = hexs(r, 32), hexs(r, 40)
    nrak = "NRAK-" + rs(r, UPPER_ALNUM, 27)
    nrlic = hexs(r, 36) + "NRAL"
    t = [
        (f"HEROKU_API_KEY={heroku}", [heroku]),
        (f"doctl auth init -t {dop}", [dop]),
        (f"DD_API_KEY={dd_api}\nDD_APP_KEY={dd_app}", [dd_api, dd_app]),
        (f"newrelic: api key {nrak}, license_key: {nrlic}", [nrak, nrlic]),
        (f"digitalocean token: {dop}", [dop]),
        (f"datadog:\n  apiKey: {dd_api}\n  appKey: {dd_app}", [dd_api, dd_app]),
        (f"heroku auth:token -> {heroku}", [heroku]),
        (f"NEW_RELIC_LICENSE_KEY={nrlic}", [nrlic]),
    ]
    return t[i % len(t)]


def fam_sentry_vault_tfc(r: random.Random, i: int) -> tuple[str, list[str]]:
    sk = hexs(r, 32)
    dsn = f"https://{sk}@o{r.randrange(10**5, 10**6)}.ingest.sentry.io/{r.randrange(10**6, 10**7)}"
    hvs = "hvs." + rs(r, B62, 24) if i % 2 else "hvs.CAESI" + rs(r, B64URL, 80)
    tfc = f"{rs(r, B62, 14)}.atlasv1.{rs(r, B62, 67)}"
    sntrys = "sntrys_" + b64url(r, 60) + "_" + rs(r, B62, 43)
    t = [
        (f"SENTRY_DSN={dsn}", [sk]),
        (f'sentry_sdk.init(dsn="{dsn}", traces_sample_rate=0.1)', [sk]),
        (f"export VAULT_TOKEN={hvs}", [hvs]),
        (f'credentials "app.terraform.io" {{\n  token = "{tfc}"\n}}', [tfc]),
        (f"vault root token after init: {hvs}", [hvs]),
        (f"SENTRY_AUTH_TOKEN={sntrys}", [sntrys]),
        (f"TF_TOKEN_app_terraform_io={tfc}", [tfc]),
    ]
    return t[i % len(t)]


def fam_package_registries(r: random.Random, i: int) -> tuple[str, list[str]]:
    npm = "npm_" + rs(r, B62, 36)
    pypi = "pypi-AgEIcHlwaS5vcmc" + b64url(r, 110)
    dckr = "dckr_pat_" + rs(r, B64URL, 27)
    hf = "hf_" + rs(r, string.ascii_letters, 34)
    t = [
        (f"//registry.npmjs.org/:_authToken={npm}", [npm]),
        (f"[pypi]\n  username = __token__\n  password = {pypi}", [pypi]),
        (f"echo {dckr} | docker login -u acmebot --password-stdin", [dckr]),
        (f"HF_TOKEN={hf}", [hf]),
        (f"twine upload dist/* -u __token__ -p {pypi}", [pypi]),
        (f"huggingface-cli login --token {hf}", [hf]),
        (f"NPM_TOKEN: {npm}", [npm]),
        (f"Docker Hub access token: {dckr}", [dckr]),
    ]
    return t[i % len(t)]


def fam_ai_keys(r: random.Random, i: int) -> tuple[str, list[str]]:
    oai = "sk-proj-" + rs(r, B64URL, 124) if i % 2 else "sk-" + rs(r, B62, 48)
    ant = "sk-ant-api03-" + rs(r, B64URL, 93) + "AA"
    t = [
        (f"OPENAI_API_KEY={oai}", [oai]),
        (f"ANTHROPIC_API_KEY={ant}", [ant]),
        (f'client = OpenAI(api_key="{oai}")', [oai]),
        (
            f'curl https://api.anthropic.com/v1/messages -H "x-api-key: {ant}" -H "anthropic-version: 2023-06-01"',
            [ant],
        ),
        (f"I used {ant} for the eval run yesterday", [ant]),
        (f"mi chiave OpenAI è {oai}", [oai]),
        (f'  "env": {{"ANTHROPIC_API_KEY": "{ant}"}}', [ant]),
    ]
    return t[i % len(t)]


def fam_commerce(r: random.Random, i: int) -> tuple[str, list[str]]:
    shpat = r.choice(["shpat_", "shpss_", "shpca_"]) + hexs(r, 32)
    sq = "EAAA" + rs(r, B64URL, 60)
    sq_secret = "sq0csp-" + rs(r, B64URL, 43)
    pp_id = "A" + rs(r, B64URL, 79)
    pp_secret = "E" + rs(r, B64URL, 79)
    t = [
        (f"SHOPIFY_ACCESS_TOKEN={shpat}", [shpat]),
        (f"X-Shopify-Access-Token: {shpat}", [shpat]),
        (f"square:\n  access_token: {sq}\n  application_secret: {sq_secret}", [sq, sq_secret]),
        (f"PAYPAL_CLIENT_ID={pp_id}\nPAYPAL_CLIENT_SECRET={pp_secret}", [pp_secret]),
        (
            f'curl -u "{pp_id}:{pp_secret}" -d grant_type=client_credentials https://api-m.paypal.com/v1/oauth2/token',
            [pp_secret],
        ),
        (f"Square prod token {sq}", [sq]),
    ]
    return t[i % len(t)]


def fam_identity(r: random.Random, i: int) -> tuple[str, list[str]]:
    okta = "00" + rs(r, B64URL, 40)
    a0 = rs(r, B64URL, 64)
    cf_tok = rs(r, B64URL, 40)
    cf_global = hexs(r, 37)
    algolia = hexs(r, 32)
    mapbox = "sk.eyJ1IjoiYWNtZSIsImEiOiJ" + rs(r, B64URL, 20) + "In0." + rs(r, B64URL, 22)
    t = [
        (f"Authorization: SSWS {okta}", [okta]),
        (f"AUTH0_CLIENT_ID={rs(r, B62, 32)}\nAUTH0_CLIENT_SECRET={a0}", [a0]),
        (f"CLOUDFLARE_API_TOKEN={cf_tok}", [cf_tok]),
        (
            f"curl -H 'X-Auth-Email: ops@acme.io' -H 'X-Auth-Key: {cf_global}' https://api.cloudflare.com/client/v4/zones",
            [cf_global],
        ),
        (f"algolia admin api key: {algolia}", [algolia]),
        (f"MAPBOX_ACCESS_TOKEN={mapbox}", [mapbox]),
        (f"okta api token {okta}", [okta]),
        (f"auth0:\n  domain: acme.eu.auth0.com\n  clientSecret: {a0}", [a0]),
    ]
    return t[i % len(t)]


def fam_firebase(r: random.Random, i: int) -> tuple[str, list[str]]:
    server = f"AAAA{rs(r, B64URL, 7)}:APA91b{rs(r, B64URL, 134)}"
    db_secret = rs(r, B62, 40)
    t = [
        (f"FCM server key: {server}", [server]),
        (f"Authorization: key={server}", [server]),
        (f"firebase database secret {db_secret}", [db_secret]),
        (f"FIREBASE_TOKEN=1//{rs(r, B64URL, 100)}", []),
        (
            f"curl 'https://acme-default-rtdb.firebaseio.com/users.json?auth={db_secret}'",
            [db_secret],
        ),
        (f'"serverKey": "{server}"', [server]),
    ]
    text, vals = t[i % len(t)]
    if not vals:
        vals = [text.split("=", 1)[1]]
    return text, vals


def fam_jwt_bearer(r: random.Random, i: int) -> tuple[str, list[str]]:
    j = jwt(r)
    opaque = rs(r, B64URL, 43)
    t = [
        (f"Authorization: Bearer {j}", [j]),
        (f"the token that worked: {j}", [j]),
        (
            f'{{"access_token": "{j}", "token_type": "Bearer", "expires_in": 3600, "refresh_token": "{opaque}"}}',
            [j, opaque],
        ),
        (f'curl -H "Authorization: Bearer {opaque}" https://api.acme.io/v2/me', [opaque]),
        (j, [j]),
        (f"id_token={j}&state=xyz", [j]),
        (f"localStorage.setItem('auth', '{j}')", [j]),
    ]
    return t[i % len(t)]


def fam_basic_auth(r: random.Random, i: int) -> tuple[str, list[str]]:
    user = r.choice(["admin", "deploy", "grafana", "jenkins", "api"])
    pw = safe_password(r)
    b = base64.b64encode(f"{user}:{pw}".encode()).decode()
    t = [
        (f"Authorization: Basic {b}", [b]),
        (
            f"> GET /api/health HTTP/1.1\n> Host: ci.acme.io\n> Authorization: Basic {b}\n> User-Agent: curl/8.5.0",
            [b],
        ),
        (f"headers = {{'Authorization': 'Basic {b}'}}", [b]),
        (f'proxy_set_header Authorization "Basic {b}";', [b]),
        (f"requests.get(url, auth=('{user}', '{pw}'))", [pw]),
        (f"curl -u {user}:{pw} https://jenkins.acme.io/job/build/api/json", [pw]),
        (f"wget --http-user={user} --http-password={pw} https://repo.acme.io/artifact.zip", [pw]),
    ]
    return t[i % len(t)]


def fam_cookies(r: random.Random, i: int) -> tuple[str, list[str]]:
    sid = rs(r, string.ascii_lowercase + string.digits, 32)
    csrf = rs(r, B62, 64)
    connect = (
        "s%3A" + rs(r, B64URL, 32) + "." + rs(r, B64, 43).replace("+", "%2B").replace("/", "%2F")
    )
    php = rs(r, string.ascii_lowercase + string.digits, 26)
    jsess = hexs(r, 32).upper()
    t = [
        (f"Cookie: sessionid={sid}; csrftoken={csrf}", [sid, csrf]),
        (f"Set-Cookie: connect.sid={connect}; Path=/; HttpOnly; Secure", [connect]),
        (f"PHPSESSID={php}", [php]),
        (f"< Set-Cookie: JSESSIONID={jsess}; Path=/app; HttpOnly", [jsess]),
        (f'document.cookie = "session={sid}"', [sid]),
        (
            f"curl -b 'ASP.NET_SessionId={php}; .ASPXAUTH={hexs(r, 160).upper()}' https://intranet.acme.local/",
            [php],
        ),
        (
            f"copied my session cookie from devtools: __Secure-next-auth.session-token={rs(r, B64URL, 120)}",
            [],
        ),
    ]
    text, vals = t[i % len(t)]
    if not vals:
        vals = [text.rsplit("=", 1)[1]]
    if ".ASPXAUTH=" in text:
        vals.append(text.split(".ASPXAUTH=")[1].split("'")[0])
    return text, vals


def fam_kube_docker_config(r: random.Random, i: int) -> tuple[str, list[str]]:
    ckd = b64body(r, 1200)
    tok = jwt(r)
    user = r.choice(["ci", "robot$pusher", "_json_key", "AWS"])
    pw = safe_password(r)
    auth = base64.b64encode(f"{user}:{pw}".encode()).decode()
    stoken = (
        rs(r, string.ascii_lowercase + string.digits, 6)
        + "."
        + rs(r, string.ascii_lowercase + string.digits, 16)
    )
    t = [
        (
            f"users:\n- name: admin\n  user:\n    client-certificate-data: {b64body(r, 600)}\n    client-key-data: {ckd}",
            [ckd],
        ),
        (f"users:\n- name: sa\n  user:\n    token: {tok}", [tok]),
        (
            f'{{\n  "auths": {{\n    "registry.acme.io": {{\n      "auth": "{auth}"\n    }}\n  }}\n}}',
            [auth],
        ),
        (f"kubectl config set-credentials ci --token={tok}", [tok]),
        (
            f"kubeadm join 10.0.0.10:6443 --token {stoken} --discovery-token-ca-cert-hash sha256:{hexs(r, 64)}",
            [stoken],
        ),
        (
            f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ntype: Opaque\nstringData:\n  password: {pw}",
            [pw],
        ),
        (f"docker login registry.acme.io -u {user} -p {pw}", [pw]),
    ]
    return t[i % len(t)]


def fam_config_files(r: random.Random, i: int) -> tuple[str, list[str]]:
    pw = password(r, syms="!#%^*-_=+")
    tok = rs(r, B62, 40)
    t = [
        (
            f"database:\n  host: db.internal\n  port: 5432\n  user: app\n  password: {pw}\n  pool: 10",
            [pw],
        ),
        (f'[database]\nhost = "db.internal"\nuser = "app"\npassword = "{pw}"', [pw]),
        (f"[smtp]\nserver=mail.acme.io\nusername=notify\npasswd={pw}", [pw]),
        (f"<connection>\n  <user>app</user>\n  <password>{pw}</password>\n</connection>", [pw]),
        (
            f"spring.datasource.url=jdbc:postgresql://db:5432/app\nspring.datasource.username=app\nspring.datasource.password={pw}",
            [pw],
        ),
        (f"SECRET_KEY={tok}\nDEBUG=false", [tok]),
        (f'variable "db_password" {{\n  default = "{pw}"\n}}', [pw]),
        (f'db_password = "{pw}"\napi_token   = "{tok}"', [pw, tok]),
        (f'<add key="ApiSecret" value="{tok}" />', [tok]),
        (f"redis:\n  auth: {pw}", [pw]),
        (f"client_secret: '{tok}'", [tok]),
        (f'  "password": "{pw}",\n  "username": "svc-report"', [pw]),
    ]
    return t[i % len(t)]


def fam_env_dotfile(r: random.Random, i: int) -> tuple[str, list[str]]:
    pw = safe_password(r)
    tok = rs(r, B62, 32)
    t = [
        (f"POSTGRES_PASSWORD={pw}\nPOSTGRES_USER=app\nPOSTGRES_DB=app", [pw]),
        (
            f"services:\n  db:\n    image: mysql:8\n    environment:\n      MYSQL_ROOT_PASSWORD: {pw}",
            [pw],
        ),
        (f"ENV JWT_SECRET={tok}", [tok]),
        (f'- name: ADMIN_PASSWORD\n  value: "{pw}"', [pw]),
        (f"$ env | grep -i key\nAPI_KEY={tok}\nKEYBOARD_LAYOUT=us", [tok]),
        (f"set DB_PASS={pw}", [pw]),
        (f'$env:SA_PASSWORD = "{pw}"', [pw]),
        (f"export SESSION_SECRET='{tok}'", [tok]),
    ]
    return t[i % len(t)]


def fam_netrc_pgpass_mycnf(r: random.Random, i: int) -> tuple[str, list[str]]:
    pw = password(r, syms="!#%^*-_=+")
    t = [
        (f"machine api.heroku.com\n  login ops@acme.io\n  password {pw}", [pw]),
        (f"db.internal:5432:app:app:{pw}", [pw]),
        (f"[client]\nuser=root\npassword={pw}\nhost=127.0.0.1", [pw]),
        (f"~/.pgpass:\n*:*:*:postgres:{pw}", [pw]),
        (f"machine github.com login ci-bot password ghp_{rs(r, B62, 36)}", []),
        (f'[mysqldump]\nuser=backup\npassword="{pw}"', [pw]),
    ]
    text, vals = t[i % len(t)]
    if not vals:
        vals = [text.rsplit(" ", 1)[1]]
    return text, vals


def fam_connection_strings(r: random.Random, i: int) -> tuple[str, list[str]]:
    pw = safe_password(r)
    odd = rs(r, B62, 6) + r.choice(["@", "/", "@/"]) + rs(r, B62, 6) + r.choice(["!", "#", ""])
    host = r.choice(["db.internal", "10.1.4.20", "pg-prod.acme.io", "cluster0.ab1cd.mongodb.net"])
    t = [
        (f"jdbc:postgresql://{host}:5432/app?user=app&password={pw}&ssl=true", [pw]),
        (
            f"jdbc:sqlserver://sql01.acme.local:1433;databaseName=crm;user=sa;password={pw};encrypt=true",
            [pw],
        ),
        (f"jdbc:oracle:thin:scott/{pw}@//ora.acme.local:1521/ORCLPDB1", [pw]),
        (
            f"Driver={{ODBC Driver 18 for SQL Server}};Server=tcp:sql01,1433;Database=crm;Uid=report;Pwd={pw};",
            [pw],
        ),
        (
            f"mongodb+srv://admin:{pw}@cluster0.ab1cd.mongodb.net/prod?retryWrites=true&w=majority",
            [pw],
        ),
        (f"redis://:{pw}@cache.internal:6379/0", [pw]),
        (f"rediss://default:{pw}@redis-12345.c1.eu-west-1.ec2.cloud.redislabs.com:12345", [pw]),
        (f"amqp://guest:{pw}@rabbit.internal:5672/%2F", [pw]),
        (
            f"Server=sql01.acme.local;Database=Orders;User Id=orders_app;Password={pw};TrustServerCertificate=True",
            [pw],
        ),
        (
            f"Data Source=(DESCRIPTION=(ADDRESS=(PROTOCOL=TCP)(HOST=ora)(PORT=1521))(CONNECT_DATA=(SERVICE_NAME=XE)));User Id=hr;Password={pw};",
            [pw],
        ),
        (f'SQLALCHEMY_DATABASE_URI = "postgresql+psycopg://app:{odd}@{host}:5432/app"', [odd]),
        (f"DATABASE_URL=mysql+pymysql://root:{odd}@db:3306/shop", [odd]),
        (f"engine = create_engine('postgresql://report:{pw}@{host}/warehouse')", [pw]),
        (f'psql "host={host} dbname=app user=app password={pw} sslmode=require"', [pw]),
        (f"sqlplus system/{pw}@//ora.acme.local:1521/XEPDB1", [pw]),
        (f"ftp://deploy:{pw}@files.acme.io/releases/", [pw]),
    ]
    return t[i % len(t)]


def fam_cli_passwords(r: random.Random, i: int) -> tuple[str, list[str]]:
    pw = safe_password(r)
    t = [
        f"mysql -u root -p{pw} -h 127.0.0.1 shop",
        f"PGPASSWORD={pw} psql -h db.internal -U app app",
        f"sshpass -p '{pw}' ssh ops@10.0.3.7",
        f"curl -u admin:{pw} http://localhost:15672/api/overview",
        f"openssl pkcs12 -export -in cert.pem -inkey key.pem -out bundle.p12 -passout pass:{pw}",
        f"openssl rsa -in enc.key -out plain.key -passin pass:{pw}",
        f"keytool -importcert -alias ca -file ca.crt -keystore truststore.jks -storepass {pw} -noprompt",
        f"az login --service-principal -u {uid(r)} -p {pw} --tenant {uid(r)}",
        f"ldapsearch -x -H ldaps://ldap.acme.local -D 'cn=admin,dc=acme,dc=local' -w {pw} '(uid=jdoe)'",
        f"smbclient //fs01/share -U 'ACME\\svc_backup%{pw}'",
        f"rabbitmqctl add_user monitoring {pw}",
        f"htpasswd -b -c /etc/nginx/.htpasswd admin {pw}",
        f"net user svc_sql {pw} /add",
        f"redis-cli -h cache.internal -a {pw} INFO",
        f'mongosh "mongodb://db:27017" -u admin -p {pw} --authenticationDatabase admin',
        f"docker run -e POSTGRES_PASSWORD={pw} -p 5432:5432 postgres:16",
        f"mysqldump --user=backup --password={pw} --all-databases > all.sql",
        f"echo '{pw}' | sudo -S systemctl restart nginx",
        f"ansible-playbook site.yml -e 'ansible_become_pass={pw}'",
        f"ssh-keygen -t ed25519 -N '{pw}' -f ~/.ssh/deploy",
        f"7z a -p{pw} backup.7z ./data",
        f"zip -P {pw} secrets.zip notes.txt",
        f"psql postgresql://postgres:{pw}@localhost:5432/postgres -c 'select 1'",
        f"wp user create bob bob@example.org --user_pass={pw}",
    ]
    text = t[i % len(t)]
    prefix = f"{r.choice(['$ ', '', '  1042  ', 'root@web01:~# '])}"
    return prefix + text, [pw]


def fam_shell_history(r: random.Random, i: int) -> tuple[str, list[str]]:
    pw = safe_password(r)
    tok = rs(r, B62, 40)
    lines = [
        " 501  cd /srv/app",
        " 502  git pull",
        f" 503  export API_TOKEN={tok}",
        " 504  make deploy",
        f" 505  mysql -uadmin -p{pw} -e 'show databases'",
        " 506  ls -la",
    ]
    k = i % 3
    if k == 0:
        return "\n".join(lines), [tok, pw]
    if k == 1:
        return (
            f": 1764151000:0;export API_TOKEN={tok}\n: 1764151010:0;ls\n: 1764151020:0;PGPASSWORD={pw} pg_dump app > app.sql",
            [tok, pw],
        )
    return (
        f"history | tail -3\n  88  curl -H 'X-Api-Key: {tok}' https://api.acme.io/v1/usage\n  89  vim .env\n  90  history",
        [tok],
    )


def fam_code_constants(r: random.Random, i: int) -> tuple[str, list[str]]:
    pw = safe_password(r)
    tok = rs(r, B62, 32)
    t = [
        (f"resp = requests.post(url, auth=HTTPBasicAuth('svc', '{pw}'), timeout=10)", [pw]),
        (f'private static final String DB_PASSWORD = "{pw}";', [pw]),
        (f"const apiSecret = '{tok}';", [tok]),
        (f'const (\n\tapiKey = "{tok}"\n\tbaseURL = "https://api.acme.io"\n)', [tok]),
        (f"conn = psycopg.connect(host='db', user='app', password='{pw}')", [pw]),
        (f'let token = "{tok}"; // TODO move to env', [tok]),
        (f"$password = '{pw}';", [pw]),
        (f'config.secret_key_base = "{hexs(r, 128)}"', []),
        (
            f'var client = new SmtpClient("smtp.acme.io") {{ Credentials = new NetworkCredential("notify", "{pw}") }};',
            [pw],
        ),
        (f"headers: {{ 'X-API-Key': '{tok}' }}", [tok]),
    ]
    text, vals = t[i % len(t)]
    if not vals:
        vals = [text.split('"')[1]]
    return text, vals


def fam_tables(r: random.Random, i: int) -> tuple[str, list[str]]:
    rows = [
        (r.choice(["alice", "bob", "carol", "dave", "erin"]), password(r, syms="!#%-_"))
        for _ in range(3)
    ]
    pws = [p for _, p in rows]
    k = i % 4
    if k == 0:
        body = "\n".join(f"{u},{u}@acme.io,{p}" for u, p in rows)
        return f"username,email,password\n{body}", pws + [f"{u}@acme.io" for u, _ in rows]
    if k == 1:
        body = "\n".join(f"| {u} | {p} | active |" for u, p in rows)
        return f"| user | password | status |\n|---|---|---|\n{body}", pws
    if k == 2:
        body = "\n".join(f"{u}\t{p}" for u, p in rows)
        return f"Benutzer\tPasswort\n{body}", pws
    toks = [rs(r, B62, 32) for _ in range(2)]
    return (
        f"| service | api token |\n|---|---|\n| billing | {toks[0]} |\n| search | {toks[1]} |",
        toks,
    )


def fam_prose_multilingual(r: random.Random, i: int) -> tuple[str, list[str]]:
    pw = human_password(r) if i % 2 else random_password(r, 12, "!#%-")
    t = [
        f"the wifi password is {pw}",
        f"Mein Passwort lautet {pw}, bitte nicht weitersagen.",
        f"le mot de passe est {pw}",
        f"la contraseña del router es {pw}",
        f"a senha do banco é {pw}",
        f"la password di amministratore è {pw}",
        f"het wachtwoord is {pw}",
        f"Remember: my GitLab password is {pw} until I rotate it on Monday.",
        f"Das WLAN-Kennwort für Gäste: {pw}",
        f"Mot de passe du compte admin : {pw}",
        f"Usuario: admin / Contraseña: {pw}",
        f"login: jdoe, pass: {pw}",
        f"user asked me to remember their password: {pw}",
        f"Senha provisória enviada ao cliente: {pw}",
        f"Wachtwoord voor de NAS: {pw}",
        f"Il nuovo PIN e la password sono arrivati; password: {pw}",
        f"pw for the test tenant = {pw}",
        f"She changed the root password to {pw} yesterday.",
    ]
    return t[i % len(t)], [pw]


def fam_pins_recovery(r: random.Random, i: int) -> tuple[str, list[str]]:
    pin = "".join(r.choice(string.digits) for _ in range(r.choice([4, 6])))
    codes = [
        f"{rs(r, string.ascii_lowercase + string.digits, 5)}-{rs(r, string.ascii_lowercase + string.digits, 5)}"
        for _ in range(4)
    ]
    gh_codes = [hexs(r, 5) + "-" + hexs(r, 5) for _ in range(3)]
    t = [
        (f"The door PIN is {pin}", [pin]),
        (f"SIM PIN: {pin}, PUK: {''.join(r.choice(string.digits) for _ in range(8))}", []),
        ("Recovery codes for the ops Google account:\n" + "\n".join(codes), codes),
        (f"GitHub 2FA backup codes: {' '.join(gh_codes)}", gh_codes),
        (f"meine Bankkarten-PIN ist {pin}", [pin]),
        (f"passcode for the conference bridge: {pin}", [pin]),
        (f"le code PIN du téléphone de permanence est {pin}", [pin]),
        (f"alarm code {pin}#", [pin]),
    ]
    text, vals = t[i % len(t)]
    if not vals:
        vals = [text.split("PIN: ")[1].split(",")[0], text.rsplit(" ", 1)[1]]
    return text, vals


def fam_otp_seeds(r: random.Random, i: int) -> tuple[str, list[str]]:
    seed = rs(r, B32, 32)
    issuer = r.choice(["GitHub", "AWS", "Acme%20VPN", "Okta"])
    uri = f"otpauth://totp/{issuer}:ops%40acme.io?secret={seed}&issuer={issuer}&algorithm=SHA1&digits=6&period=30"
    spaced = " ".join(seed[k : k + 4] for k in range(0, 32, 4)).lower()
    t = [
        (uri, [seed]),
        (f"QR code decoded: {uri}", [seed]),
        (f"TOTP setup key (if you can't scan): {spaced}", [spaced]),
        (f"mfa_secret: {seed}", [seed]),
        (f"oathtool --totp -b {seed}", [seed]),
        (f"2FA-Geheimnis für den VPN-Zugang: {seed}", [seed]),
    ]
    return t[i % len(t)]


def fam_pii_ssn(r: random.Random, i: int) -> tuple[str, list[str]]:
    s = ssn(r)
    t = [
        f"Employee SSN: {s}",
        f"ssn={s}&dob=1984-03-02",
        f"customer called, verified with social security number {s}",
        f"| Name | SSN |\n|---|---|\n| J. Doe | {s} |",
        f"W-2 for Jane Roe, SSN {s}, wages $84,210.00",
        f'{{"name": "John Q", "ssn": "{s}"}}',
    ]
    return t[i % len(t)], [s]


def fam_pii_card(r: random.Random, i: int) -> tuple[str, list[str]]:
    n = card(r)
    shown = [n, group_card(n, " "), group_card(n, "-")][i % 3]
    exp = f"{r.randrange(1, 13):02d}/{r.randrange(27, 32)}"
    cvv = "".join(r.choice(string.digits) for _ in range(3))
    t = [
        (f"card: {shown} exp {exp} cvv {cvv}", [shown, cvv]),
        (f"Customer paid with {shown}", [shown]),
        (f'{{"pan": "{shown}", "expiry": "{exp}"}}', [shown]),
        (f"Kreditkarte {shown}, gültig bis {exp}", [shown]),
        (f"test failed: charge declined for card {shown}", [shown]),
        (f"numéro de carte : {shown}", [shown]),
    ]
    return t[i % len(t)]


def fam_pii_iban(r: random.Random, i: int) -> tuple[str, list[str]]:
    countries = ["DE", "FR", "ES", "NL", "IT", "GB", "PT", "BE"]
    v = iban(r, countries[i % len(countries)])
    shown = spaced_iban(v) if i % 2 else v
    t = [
        f"IBAN: {shown}",
        f"Bitte überweisen an {shown} (Kontoinhaber: M. Müller)",
        f"virement sur le compte {shown}",
        f"payout account changed to {shown}",
        f"IBAN del proveedor: {shown}",
        f'{{"iban": "{shown}", "bic": "DEUTDEFF"}}',
    ]
    return t[i % len(t)], [shown]


def fam_pii_contact(r: random.Random, i: int) -> tuple[str, list[str]]:
    first = r.choice(["anna", "jean", "maria", "li", "oskar", "joão", "sofia"])
    last = r.choice(["schmidt", "dupont", "garcia", "wang", "berg", "silva", "rossi"])
    email = f"{first}.{last}{r.randrange(10, 99)}@{r.choice(['gmail.com', 'web.de', 'orange.fr', 'outlook.com', 'acme-corp.io'])}"
    phones = [
        f"+1 415 {r.randrange(200, 999)} {r.randrange(1000, 9999)}",
        f"+49 30 {r.randrange(1000000, 9999999)}",
        f"+33 6 {r.randrange(10, 99)} {r.randrange(10, 99)} {r.randrange(10, 99)} {r.randrange(10, 99)}",
        f"(415) {r.randrange(200, 999)}-{r.randrange(1000, 9999)}",
        f"+44 7700 {r.randrange(100000, 999999)}",
        f"+34 6{r.randrange(10, 99)} {r.randrange(100, 999)} {r.randrange(100, 999)}",
    ]
    phone = phones[i % len(phones)]
    t = [
        (f"Contact: {email}, {phone}", [email, phone]),
        (f"customer email {email} asked for a refund", [email]),
        (f"Rückruf bitte an {phone}", [phone]),
        (f'From: "{first.title()} {last.title()}" <{email}>', [email]),
        (f"llamar al {phone} antes de las 18h", [phone]),
        (f'{{"email": "{email}", "phone": "{phone}"}}', [email, phone]),
    ]
    return t[i % len(t)]


def fam_tool_output(r: random.Random, i: int) -> tuple[str, list[str]]:
    pw = safe_password(r)
    tok = rs(r, B62, 40)
    t = [
        (f"$ kubectl get secret db -o jsonpath='{{.data.password}}' | base64 -d\n{pw}", [pw]),
        (f"$ vault kv get -field=password secret/app/db\n{pw}", [pw]),
        (
            f'$ aws secretsmanager get-secret-value --secret-id prod/api\n{{\n  "SecretString": "{{\\"api_key\\":\\"{tok}\\"}}",\n  "VersionId": "{uid(r)}"\n}}',
            [tok],
        ),
        (
            f"$ heroku config:get DATABASE_URL\npostgres://u{hexs(r, 12)}:{hexs(r, 64)}@ec2-3-250-1-1.eu-west-1.compute.amazonaws.com:5432/d{hexs(r, 12)}",
            [],
        ),
        (
            f"Tool result (read_file .env):\nAPP_ENV=prod\nSTRIPE_KEY=sk_live_{rs(r, B62, 24)}\nLOG_LEVEL=info",
            [],
        ),
        (
            f"[2026-11-24 09:12:44] INFO  auth: login ok user=svc-sync password={pw} ip=10.2.0.7",
            [pw],
        ),
        (f"gcloud auth print-access-token\nya29.{rs(r, B64URL, 150)}", []),
        (f"Error: connect ECONNREFUSED; tried mongodb://root:{pw}@mongo:27017/admin", [pw]),
    ]
    text, vals = t[i % len(t)]
    if not vals:
        if "heroku" in text:
            vals = [text.split("\n")[1].split(":")[2].split("@")[0]]
        elif "STRIPE_KEY" in text:
            vals = [text.split("STRIPE_KEY=")[1].split("\n")[0]]
        else:
            vals = [text.split("\n")[1]]
    return text, vals


def fam_chat(r: random.Random, i: int) -> tuple[str, list[str]]:
    pw = human_password(r)
    tok = rs(r, B62, 36)
    t = [
        (f"[10:02] bob: what's the staging admin pw?\n[10:03] alice: {pw}", [pw]),
        (f"user: here's my api key {tok} can you check why it fails?", [tok]),
        (f"Slack #ops: temp creds are admin / {pw}, rotating tonight", [pw]),
        (f"ich schick dir den Token per DM: {tok}", [tok]),
        (f"> password?\n{pw}", [pw]),
        (f"je t'envoie la clé API : {tok}", [tok]),
        (f"PM from Carla: 'new vpn secret is {pw}'", [pw]),
    ]
    return t[i % len(t)]


SECRET_FAMILIES: dict[str, tuple[Gen, int]] = {
    "key_openssh": (fam_openssh_key, 6),
    "key_pem_rsa_ec": (fam_pem_rsa_ec_key, 8),
    "key_pkcs8_encrypted": (fam_pkcs8_encrypted_key, 6),
    "key_ssh2_sshcom": (fam_ssh2_key, 6),
    "key_putty_ppk": (fam_putty_ppk, 6),
    "key_pgp": (fam_pgp_private, 6),
    "aws": (fam_aws, 6),
    "stripe": (fam_stripe, 6),
    "twilio": (fam_twilio, 6),
    "sendgrid_mailgun": (fam_sendgrid_mailgun, 6),
    "slack": (fam_slack, 6),
    "webhook_url": (fam_webhook_urls, 6),
    "discord_telegram": (fam_discord_telegram, 6),
    "git_hosts": (fam_git_hosts, 8),
    "azure": (fam_azure, 6),
    "gcp": (fam_gcp_service_account, 6),
    "paas_observability": (fam_paas_tokens, 8),
    "sentry_vault_tfc": (fam_sentry_vault_tfc, 7),
    "package_registries": (fam_package_registries, 8),
    "ai_keys": (fam_ai_keys, 7),
    "commerce": (fam_commerce, 6),
    "identity_cdn": (fam_identity, 8),
    "firebase": (fam_firebase, 6),
    "jwt_bearer": (fam_jwt_bearer, 7),
    "basic_auth": (fam_basic_auth, 7),
    "cookies": (fam_cookies, 7),
    "kube_docker_config": (fam_kube_docker_config, 7),
    "config_files": (fam_config_files, 12),
    "env_dotfile": (fam_env_dotfile, 8),
    "netrc_pgpass_mycnf": (fam_netrc_pgpass_mycnf, 6),
    "connection_string": (fam_connection_strings, 16),
    "cli_password": (fam_cli_passwords, 24),
    "shell_history": (fam_shell_history, 6),
    "code_constant": (fam_code_constants, 10),
    "table_column": (fam_tables, 8),
    "prose_multilingual": (fam_prose_multilingual, 18),
    "pin_recovery": (fam_pins_recovery, 8),
    "otp_seed": (fam_otp_seeds, 6),
    "pii_ssn": (fam_pii_ssn, 6),
    "pii_card": (fam_pii_card, 9),
    "pii_iban": (fam_pii_iban, 8),
    "pii_contact": (fam_pii_contact, 6),
    "tool_output": (fam_tool_output, 8),
    "chat": (fam_chat, 7),
}


# --------------------------------------------------------------------------- ordinary families


def ord_git(r: random.Random, i: int) -> tuple[str, list[str]]:
    sha = hexs(r, 40)
    short = sha[:7]
    sha2 = hexs(r, 40)
    t = [
        (
            f"commit {sha}\nAuthor: Dana Lee <dana@acme.io>\nDate:   Tue Nov 24 10:12:01 2026 +0100\n\n    fix token refresh race in auth middleware",
            [sha, "fix token refresh race in auth middleware"],
        ),
        (
            f"reverted {short}, the password reset flow broke on Safari",
            [short, "password reset flow"],
        ),
        (f"git rebase --onto {sha2} {sha}", [sha2, sha]),
        (
            f"Merge pull request #4821 from acme/secret-rotation-docs ({short})",
            [short, "#4821", "acme/secret-rotation-docs"],
        ),
        (f"bisect: first bad commit is {sha}", [sha]),
        (f"HEAD is now at {short} bump tokenizer to 0.20.3", [short, "0.20.3"]),
        (f"{sha} refs/heads/main\n{sha2} refs/tags/v2.4.1", [sha, sha2, "v2.4.1"]),
        (f"cherry-picked {sha} onto release/2026.11", [sha, "release/2026.11"]),
        (f"submodule vendor/libsodium at {sha}", [sha]),
        (
            f"PR #912 squashed as {short}; closes the api-key rotation ticket OPS-221",
            [short, "OPS-221"],
        ),
    ]
    return t[i % len(t)]


def ord_uuid_ids(r: random.Random, i: int) -> tuple[str, list[str]]:
    u1, u2 = uid(r), uid(r)
    req = "req_" + rs(r, B62, 24)
    t = [
        (f"memory {u1} supersedes {u2}", [u1, u2]),
        (f"X-Request-Id: {u1}", [u1]),
        (f"request_id={req} status=502 upstream=billing", [req]),
        (f"tenant_id: {u1}\nnamespace_id: {u2}", [u1, u2]),
        (f"Stripe request id {req} returned card_declined", [req]),
        (f"run {u1} finished in 41.2s", [u1, "41.2s"]),
        (f"ERROR [job={u1}] retry 3/5", [u1]),
        (f"correlation id {u2.upper()}", [u2.upper()]),
        (f"/api/v1/memories/{u1}?include=links", [f"/api/v1/memories/{u1}"]),
        (f"session_id in the audit log is {u1} (not a secret, it is the audit key)", [u1]),
    ]
    return t[i % len(t)]


def ord_hashes(r: random.Random, i: int) -> tuple[str, list[str]]:
    data = r.randbytes(64)
    s512 = "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()
    s256 = hashlib.sha256(data).hexdigest()
    s1 = "sha1-" + base64.b64encode(hashlib.sha1(data).digest()).decode()
    md5 = hashlib.md5(data).hexdigest()
    t = [
        (f'"integrity": "{s512}"', [s512]),
        (f"requests==2.32.3 \\\n    --hash=sha256:{s256}", [s256, "requests==2.32.3"]),
        (f"{s256}  ctxpack-1.4.0.tar.gz", [s256, "ctxpack-1.4.0.tar.gz"]),
        (
            f'"resolved": "https://registry.npmjs.org/lodash/-/lodash-4.17.21.tgz",\n"integrity": "{s1}"',
            [s1, "https://registry.npmjs.org/lodash/-/lodash-4.17.21.tgz"],
        ),
        (f"MD5 ({r.choice(['dump.sql', 'model.bin'])}) = {md5}", [md5]),
        (
            f"checksum mismatch: expected sha256:{s256}, got sha256:{hashlib.sha256(data[::-1]).hexdigest()}",
            [s256],
        ),
        (f"lockfile entry: {s512}", [s512]),
        (
            f"go.sum: golang.org/x/crypto v0.31.0 h1:{base64.b64encode(hashlib.sha256(data).digest()).decode()}",
            [base64.b64encode(hashlib.sha256(data).digest()).decode(), "v0.31.0"],
        ),
        (
            f'SRI: <script src="/app.js" integrity="sha384-{base64.b64encode(hashlib.sha384(data).digest()).decode()}"></script>',
            ["sha384-" + base64.b64encode(hashlib.sha384(data).digest()).decode()],
        ),
        (
            f"blake2b digest {hashlib.blake2b(data).hexdigest()}",
            [hashlib.blake2b(data).hexdigest()],
        ),
    ]
    return t[i % len(t)]


def ord_docker(r: random.Random, i: int) -> tuple[str, list[str]]:
    dig = "sha256:" + hexs(r, 64)
    img_id = hexs(r, 12)
    t = [
        (f"ghcr.io/acme/ctxpack@{dig}", [dig]),
        (
            f"Digest: {dig}\nStatus: Downloaded newer image for postgres:16.4-bookworm",
            [dig, "postgres:16.4-bookworm"],
        ),
        (
            f"REPOSITORY   TAG       IMAGE ID       CREATED\nctxpack      latest    {img_id}   2 hours ago",
            [img_id],
        ),
        (
            "docker run -p 8080:8080 -p 5433:5432 -v /srv/data:/data ctxpack:1.4.0",
            ["8080:8080", "5433:5432", "/srv/data:/data", "ctxpack:1.4.0"],
        ),
        (f"FROM python:3.12-slim@{dig}", [dig]),
        (f" => => writing image {dig}", [dig]),
        ('image: redis:7.2.5-alpine\nports:\n  - "6379:6379"', ["redis:7.2.5-alpine", "6379:6379"]),
        (f"container {hexs(r, 64)} exited with code 137 (OOMKilled)", []),
        (f"manifest list {dig} has 2 platforms: linux/amd64, linux/arm64", [dig]),
        (f"cosign verify ghcr.io/acme/api@{dig}", [dig]),
    ]
    text, keep = t[i % len(t)]
    if not keep:
        keep = [text.split(" ")[1]]
    return text, keep


def ord_http_ids(r: random.Random, i: int) -> tuple[str, list[str]]:
    etag = '"' + hexs(r, 32) + '"'
    weak = 'W/"' + hexs(r, 8) + "-" + b64url(r, 20) + '"'
    trace = f"00-{hexs(r, 32)}-{hexs(r, 16)}-01"
    amz = rs(r, UPPER_ALNUM, 16)
    cf_ray = hexs(r, 16) + "-FRA"
    t = [
        (f"ETag: {etag}", [etag]),
        (f"If-None-Match: {weak}", [weak]),
        (f"traceparent: {trace}", [trace]),
        (f"x-amz-request-id: {amz}\nx-amz-id-2: {b64body(r, 48)}", [amz]),
        (f"cf-ray: {cf_ray}", [cf_ray]),
        (
            f"trace_id={trace.split('-')[1]} span_id={trace.split('-')[2]} service=api",
            [trace.split("-")[1], trace.split("-")[2]],
        ),
        (f"HTTP/2 304\netag: {etag}\ncache-control: max-age=300", [etag, "max-age=300"]),
        (
            f"x-github-request-id: {rs(r, UPPER_ALNUM, 4)}:{rs(r, UPPER_ALNUM, 5)}:{rs(r, UPPER_ALNUM, 6)}:{rs(r, UPPER_ALNUM, 7)}:{rs(r, UPPER_ALNUM, 8)}",
            [],
        ),
        (
            f"Jaeger trace {trace.split('-')[1]} shows 380 ms in the token counting step",
            [trace.split("-")[1], "380 ms"],
        ),
        (f"x-datadog-trace-id: {r.randrange(10**18, 10**19)}", []),
    ]
    text, keep = t[i % len(t)]
    if not keep:
        keep = [text.split(": ", 1)[1]]
    return text, keep


def ord_k8s(r: random.Random, i: int) -> tuple[str, list[str]]:
    rs_hash = rs(r, "bcdfghjklmnpqrstvwxz2456789", 10)
    pod = f"api-{rs_hash}-{rs(r, 'bcdfghjklmnpqrstvwxz2456789', 5)}"
    t = [
        (
            f"NAME                    READY   STATUS    RESTARTS   AGE\n{pod}   1/1     Running   0          3h12m",
            [pod, "3h12m"],
        ),
        (f"kubectl logs {pod} -c app --since=1h", [pod, "--since=1h"]),
        (f"replicaset.apps/api-{rs_hash} scaled to 3", [f"api-{rs_hash}"]),
        (
            "env:\n- name: DB_PASSWORD\n  valueFrom:\n    secretKeyRef:\n      name: db-credentials\n      key: password",
            ["db-credentials", "secretKeyRef", "DB_PASSWORD"],
        ),
        (f"Warning  BackOff  pod/{pod}  Back-off restarting failed container", [f"pod/{pod}"]),
        (f"configmap/app-config-{rs(r, 'bcdfghkmt2456789', 10)} created", []),
        (f'uid: {uid(r)}\nresourceVersion: "{r.randrange(10**6, 10**8)}"', []),
        (
            "kubectl create secret generic api-keys --from-env-file=.env.prod --dry-run=client -o yaml",
            ["api-keys", "--from-env-file=.env.prod"],
        ),
        (
            "helm upgrade --install ctxpack ./chart -f values-prod.yaml --set image.tag=1.4.0",
            ["values-prod.yaml", "image.tag=1.4.0"],
        ),
        (
            "serviceAccountName: ci-deployer\nautomountServiceAccountToken: false",
            ["automountServiceAccountToken: false"],
        ),
    ]
    text, keep = t[i % len(t)]
    if not keep:
        keep = (
            [text.split(" ")[0]]
            if "configmap" in text
            else [text.split("\n")[0].split(": ")[1], text.split('"')[1]]
        )
    return text, keep


def ord_base64(r: random.Random, i: int) -> tuple[str, list[str]]:
    cursor = base64.b64encode(
        json.dumps({"offset": r.randrange(1000), "sort": "created_at"}).encode()
    ).decode()
    page = base64.urlsafe_b64encode(f"page:{r.randrange(100)}".encode()).decode()
    svg = base64.b64encode(
        b'<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16"><circle cx="8" cy="8" r="7" fill="#0a7"/></svg>'
    ).decode()
    gif = "R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7"
    t = [
        (f"next_cursor: {cursor}", [cursor]),
        (f"?page_token={page}", [page]),
        (f'<img src="data:image/svg+xml;base64,{svg}">', [svg]),
        (f"background: url(data:image/gif;base64,{gif});", [gif]),
        (f'{{"nextPageToken": "{cursor}", "items": []}}', [cursor]),
        (
            f"echo {base64.b64encode(b'hello world from the build bot').decode()} | base64 -d",
            [base64.b64encode(b"hello world from the build bot").decode()],
        ),
        (
            f"Content-Transfer-Encoding: base64\n\n{base64.b64encode(b'Meeting notes: ship v2 on Friday. Agenda attached.').decode()}",
            [base64.b64encode(b"Meeting notes: ship v2 on Friday. Agenda attached.").decode()],
        ),
        (
            f"the protobuf field is bytes, e.g. {base64.b64encode(bytes(range(20))).decode()}",
            [base64.b64encode(bytes(range(20))).decode()],
        ),
        (f"continuation={cursor}", [cursor]),
        ("magic header for PNG is iVBORw0KGgo (base64 of 89 50 4E 47)", ["iVBORw0KGgo"]),
    ]
    return t[i % len(t)]


def ord_json_api(r: random.Random, i: int) -> tuple[str, list[str]]:
    node = "PR_kwDO" + rs(r, B64URL, 13)
    sha = hexs(r, 40)
    u = uid(r)
    s512 = "sha512-" + base64.b64encode(r.randbytes(64)).decode()
    t = [
        (
            json.dumps(
                {
                    "id": r.randrange(10**9, 10**10),
                    "node_id": node,
                    "number": 4821,
                    "state": "open",
                    "title": "Rotate api tokens on schedule",
                    "head": {"ref": "token-rotation", "sha": sha},
                    "user": {"login": "dana-lee", "id": 1234567},
                },
                indent=2,
            ),
            [node, sha, "token-rotation"],
        ),
        (
            json.dumps(
                {
                    "name": "left-pad",
                    "version": "1.3.0",
                    "dist": {
                        "shasum": hexs(r, 40),
                        "integrity": s512,
                        "tarball": "https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz",
                    },
                }
            ),
            [s512, "https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz"],
        ),
        (
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"web-{rs(r, 'bcdfghjk2456789', 10)}-{rs(r, 'bcdfghjk2456789', 5)}",
                        "namespace": "prod",
                        "uid": u,
                        "resourceVersion": "88412345",
                    },
                    "status": {"phase": "Running", "podIP": "10.42.1.17"},
                },
                indent=2,
            ),
            [u, "10.42.1.17"],
        ),
        (
            json.dumps(
                {
                    "object": "list",
                    "data": [
                        {
                            "id": "ch_" + rs(r, B62, 24),
                            "amount": 1999,
                            "currency": "eur",
                            "status": "succeeded",
                        }
                    ],
                    "has_more": False,
                }
            ),
            [],
        ),
        (
            json.dumps(
                {
                    "workflow_run": {
                        "id": r.randrange(10**9, 10**10),
                        "head_sha": sha,
                        "conclusion": "success",
                        "html_url": f"https://github.com/acme/ctxpack/actions/runs/{r.randrange(10**9, 10**10)}",
                    }
                }
            ),
            [sha],
        ),
        (
            json.dumps(
                {
                    "token_usage": {
                        "input_tokens": 18234,
                        "output_tokens": 912,
                        "cache_read_input_tokens": 12000,
                    },
                    "stop_reason": "end_turn",
                    "id": "msg_" + rs(r, B62, 24),
                }
            ),
            ["18234", '"input_tokens"'],
        ),
        (
            json.dumps(
                {
                    "secret_scanning": {"status": "enabled"},
                    "push_protection": {"status": "enabled"},
                    "private": True,
                }
            ),
            ["secret_scanning", "push_protection"],
        ),
        (
            json.dumps(
                {
                    "items": [
                        {"key": "password_min_length", "value": 12},
                        {"key": "session_timeout_minutes", "value": 30},
                    ]
                }
            ),
            ["password_min_length", "session_timeout_minutes"],
        ),
        (
            json.dumps(
                {
                    "ReservationId": "r-0" + hexs(r, 16),
                    "Instances": [
                        {
                            "InstanceId": "i-0" + hexs(r, 16),
                            "ImageId": "ami-0" + hexs(r, 16),
                            "KeyName": "ops-eu-west-1",
                        }
                    ],
                }
            ),
            ["ops-eu-west-1"],
        ),
        (
            json.dumps(
                {
                    "id": u,
                    "type": "note",
                    "tags": ["auth", "tokens"],
                    "created_at": "2026-11-24T10:12:01Z",
                }
            ),
            [u, "2026-11-24T10:12:01Z"],
        ),
    ]
    text, keep = t[i % len(t)]
    if not keep:
        keep = ["ch_" + text.split('"ch_')[1].split('"')[0]]
    if "ReservationId" in text:
        keep += [
            text.split('"InstanceId": "')[1].split('"')[0],
            text.split('"ImageId": "')[1].split('"')[0],
        ]
    return text, keep


def ord_build_logs(r: random.Random, i: int) -> tuple[str, list[str]]:
    sha = hexs(r, 40)
    t = [
        (
            "#12 [build 4/7] RUN pip install --no-cache-dir -r requirements.txt\n#12 8.412 Successfully installed fastapi-0.115.4 pydantic-2.9.2 psycopg-3.2.3",
            ["fastapi-0.115.4", "pydantic-2.9.2", "psycopg-3.2.3"],
        ),
        (f"Run actions/checkout@{sha}\n  with:\n    fetch-depth: 0", [f"actions/checkout@{sha}"]),
        (
            "tests/domain/test_tokens.py::test_budget_is_respected PASSED [ 42%]",
            ["tests/domain/test_tokens.py::test_budget_is_respected"],
        ),
        (
            "npm WARN deprecated inflight@1.0.6: This module is not supported, and leaks memory.",
            ["inflight@1.0.6"],
        ),
        (
            "error[E0308]: mismatched types\n  --> src/auth/token.rs:42:17",
            ["src/auth/token.rs:42:17", "E0308"],
        ),
        (
            "==> 1542 passed, 12 skipped, 3 xfailed in 301.44s (0:05:01)",
            ["1542 passed", "301.44s", "0:05:01"],
        ),
        (
            "Compiling ring v0.17.8\nCompiling rustls v0.23.16\nFinished `release` profile [optimized] target(s) in 2m 03s",
            ["ring v0.17.8", "rustls v0.23.16"],
        ),
        (
            "[WARNING] Using platform encoding (UTF-8 actually) to copy filtered resources, i.e. build is platform dependent!",
            ["platform dependent"],
        ),
        ("mypy: Success: no issues found in 214 source files", ["214 source files"]),
        (
            "gradle: Task :app:compileKotlin UP-TO-DATE\nBUILD SUCCESSFUL in 14s\n27 actionable tasks: 3 executed, 24 up-to-date",
            [":app:compileKotlin", "BUILD SUCCESSFUL in 14s"],
        ),
    ]
    return t[i % len(t)]


def ord_numbers_dates(r: random.Random, i: int) -> tuple[str, list[str]]:
    order = f"ORD-{r.randrange(2024, 2027)}-{r.randrange(100000, 999999)}"
    inv = f"INV-{r.randrange(10**7, 10**8)}"
    t = [
        (
            f"Order {order} shipped on 2026-11-23 at 14:05 CET, total €1,249.90",
            [order, "2026-11-23", "14:05", "€1,249.90"],
        ),
        (f"invoice {inv} due 30/12/2026, amount USD 12,400.00", [inv, "30/12/2026", "12,400.00"]),
        ("standup moved to 09:30 UTC on Mon 30 Nov 2026", ["09:30", "30 Nov 2026"]),
        (f"tracking number 1Z{rs(r, UPPER_ALNUM, 16)}", []),
        ("p95 latency 182 ms, p99 431 ms, error rate 0.12%", ["182 ms", "431 ms", "0.12%"]),
        ("Der Preis liegt bei 1.299,00 € inkl. MwSt.", ["1.299,00 €"]),
        ("epoch 1764151200 = 2026-11-26T10:00:00Z", ["1764151200", "2026-11-26T10:00:00Z"]),
        (
            "budget: 4,000 tokens per pack, 128k context, max_tokens=4096",
            ["4,000 tokens", "max_tokens=4096"],
        ),
        (f"ticket JIRA-{r.randrange(1000, 9999)} estimated 3 story points", []),
        ("Q3 revenue 4.2M EUR (+12.5% YoY); headcount 84", ["4.2M EUR", "+12.5%"]),
        ("phone extension x4412, room 3.14, floor 2", ["x4412", "3.14"]),
        ("build 20261126.4 took 00:07:41", ["20261126.4", "00:07:41"]),
    ]
    text, keep = t[i % len(t)]
    if not keep:
        keep = [w for w in text.split() if w.startswith(("1Z", "JIRA-"))]
    return text, keep


def ord_versions(r: random.Random, i: int) -> tuple[str, list[str]]:
    t = [
        (
            "fastapi>=0.115,<0.116\nsqlalchemy==2.0.36\npsycopg[binary]==3.2.3",
            ["sqlalchemy==2.0.36", "psycopg[binary]==3.2.3"],
        ),
        (
            '"dependencies": {"react": "^18.3.1", "jsonwebtoken": "9.0.2", "bcrypt": "~5.1.1"}',
            ["^18.3.1", "9.0.2", "~5.1.1"],
        ),
        ("upgrade node 20.18.0 -> 22.11.0 (LTS)", ["20.18.0", "22.11.0"]),
        (
            "go 1.23.3\nrequire github.com/golang-jwt/jwt/v5 v5.2.1",
            ["github.com/golang-jwt/jwt/v5 v5.2.1"],
        ),
        ("version: 2.4.1-rc.2+build.5417", ["2.4.1-rc.2+build.5417"]),
        ('[tool.poetry.dependencies]\npython = "^3.12"\ncryptography = "43.0.3"', ["43.0.3"]),
        ("kernel 6.8.0-49-generic, glibc 2.39, openssl 3.0.13", ["6.8.0-49-generic", "3.0.13"]),
        ("pin keyring<25 until the secretstorage bug is fixed", ["keyring<25"]),
        ("Chrome/131.0.6778.86 Safari/537.36", ["131.0.6778.86"]),
        (
            'terraform {\n  required_providers {\n    aws = { source = "hashicorp/aws", version = "~> 5.76" }\n  }\n}',
            ["hashicorp/aws", "~> 5.76"],
        ),
    ]
    return t[i % len(t)]


def ord_urls_paths(r: random.Random, i: int) -> tuple[str, list[str]]:
    t = [
        (
            "docs at https://docs.acme.io/guides/auth/rotating-api-keys#schedule",
            ["https://docs.acme.io/guides/auth/rotating-api-keys#schedule"],
        ),
        (
            "postgresql://db.internal:5432/app (password comes from PGPASSFILE)",
            ["postgresql://db.internal:5432/app"],
        ),
        (
            "see /etc/ssl/private/ and ~/.ssh/known_hosts on bastion-2",
            ["/etc/ssl/private/", "~/.ssh/known_hosts"],
        ),
        (
            "C:\\Program Files\\Acme\\agent\\config\\secrets.template.json",
            ["C:\\Program Files\\Acme\\agent\\config\\secrets.template.json"],
        ),
        (
            "https://github.com/acme/ctxpack/blob/3f9c2a1/service/domain/gate.py#L88-L120",
            ["https://github.com/acme/ctxpack/blob/3f9c2a1/service/domain/gate.py#L88-L120"],
        ),
        ("redis://cache.internal:6379/2", ["redis://cache.internal:6379/2"]),
        (
            "ssh -i ~/.ssh/id_ed25519 -p 2222 deploy@bastion.acme.io",
            ["~/.ssh/id_ed25519", "deploy@bastion.acme.io"],
        ),
        (
            "https://console.cloud.google.com/iam-admin/serviceaccounts?project=acme-prod-4821",
            ["https://console.cloud.google.com/iam-admin/serviceaccounts?project=acme-prod-4821"],
        ),
        (
            "listen 0.0.0.0:8443; upstream api { server 10.0.1.12:8000; }",
            ["0.0.0.0:8443", "10.0.1.12:8000"],
        ),
        (
            "secrets live in vault at secret/data/prod/api (path, not value)",
            ["secret/data/prod/api"],
        ),
        (
            "s3://acme-backups/pg/2026/11/26/base.tar.zst",
            ["s3://acme-backups/pg/2026/11/26/base.tar.zst"],
        ),
        (
            "https://example.com/reset-password?step=2&lang=de",
            ["https://example.com/reset-password?step=2&lang=de"],
        ),
    ]
    return t[i % len(t)]


def ord_code(r: random.Random, i: int) -> tuple[str, list[str]]:
    t = [
        ('password = os.environ["DB_PASSWORD"]', ['os.environ["DB_PASSWORD"]']),
        (
            "api_key: ${API_KEY}\ndb_password: ${DB_PASSWORD:?missing}",
            ["${API_KEY}", "${DB_PASSWORD:?missing}"],
        ),
        (
            "def verify_password(plain: str, hashed: str) -> bool:\n    return bcrypt.checkpw(plain.encode(), hashed.encode())",
            ["def verify_password(plain: str, hashed: str) -> bool:"],
        ),
        (
            'token = request.headers.get("Authorization", "").removeprefix("Bearer ")',
            ['request.headers.get("Authorization", "")'],
        ),
        (
            "const secret = process.env.JWT_SECRET ?? throwMissing('JWT_SECRET');",
            ["process.env.JWT_SECRET"],
        ),
        ("SECRET_KEY = get_secret('django/secret-key')", ["get_secret('django/secret-key')"]),
        (
            "password: str = Field(min_length=12, max_length=128)",
            ["Field(min_length=12, max_length=128)"],
        ),
        ("if len(tokens) > token_budget:\n    tokens = tokens[:token_budget]", ["token_budget"]),
        (
            "color: #1e90ff; border: 1px solid #ff6347; background: #0a0a0a;",
            ["#1e90ff", "#ff6347", "#0a0a0a"],
        ),
        (
            "for i in range(0, 2**20, 4096):\n    h = xxhash.xxh64(buf[i:i+4096]).hexdigest()",
            ["2**20", "4096"],
        ),
        ("ALTER TABLE users ADD COLUMN password_hash text NOT NULL;", ["password_hash"]),
        ('echo "password: $(pass show prod/db)"', ["$(pass show prod/db)"]),
    ]
    return t[i % len(t)]


def ord_prose(r: random.Random, i: int) -> tuple[str, list[str]]:
    t = [
        (
            "We should redesign the password reset flow so the link expires after 15 minutes.",
            ["password reset flow", "15 minutes"],
        ),
        (
            "The token budget for a pack is 4000; anything over is trimmed by rank.",
            ["token budget", "4000"],
        ),
        (
            "Decision: API keys are rotated every 90 days by the secrets job, owners get an email first.",
            ["90 days", "API keys are rotated"],
        ),
        (
            "Das Passwort-Zurücksetzen funktioniert jetzt auch auf Mobilgeräten.",
            ["Passwort-Zurücksetzen"],
        ),
        ("Le mot de passe doit contenir au moins 12 caractères.", ["au moins 12 caractères"]),
        ("La contraseña se guarda con argon2id, nunca en texto plano.", ["argon2id"]),
        (
            "The user forgot their password and the recovery email bounced.",
            ["forgot their password"],
        ),
        ("Secret management moved from .env files to Vault in sprint 42.", ["sprint 42", "Vault"]),
        ("Remember that the tokenizer counts emoji as 2-3 tokens each.", ["2-3 tokens"]),
        ("Het wachtwoordbeleid vereist nu tweestapsverificatie.", ["tweestapsverificatie"]),
        ("A senha padrão foi removida na versão 3.1; cada instalação gera a sua.", ["versão 3.1"]),
        ("La password temporanea scade dopo 24 ore.", ["24 ore"]),
        (
            "The key insight: cache invalidation keyed by content hash, not by id.",
            ["key insight", "content hash"],
        ),
        ("Use a passphrase of 5+ words; our policy doc is PWD-POLICY-v3.", ["PWD-POLICY-v3"]),
    ]
    return t[i % len(t)]


def ord_math_misc(r: random.Random, i: int) -> tuple[str, list[str]]:
    t = [
        ("e^(iπ) + 1 = 0; ∑_{k=1}^{n} k = n(n+1)/2", ["n(n+1)/2"]),
        ("cos_sim = 0.8731, threshold 0.85, top_k = 8", ["0.8731", "top_k = 8"]),
        ("matrix shape (384, 1536) float32 -> 2.25 MiB", ["(384, 1536)", "2.25 MiB"]),
        ("ISBN 978-3-16-148410-0", ["978-3-16-148410-0"]),
        (
            "IPv6 2001:db8:85a3::8a2e:370:7334, MAC 3c:22:fb:9a:10:4e",
            ["2001:db8:85a3::8a2e:370:7334", "3c:22:fb:9a:10:4e"],
        ),
        ("chmod 0600 ~/.pgpass && chown app:app ~/.pgpass", ["0600", "~/.pgpass"]),
        ("lat 52.5200, lon 13.4050 (Berlin)", ["52.5200", "13.4050"]),
        (
            "ssh-ed25519 fingerprint SHA256:"
            + base64.b64encode(r.randbytes(32)).decode().rstrip("="),
            [],
        ),
        (
            "regex: ^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}$",
            ["^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}$"],
        ),
        ("cron: */15 3-5 * * 1-5", ["*/15 3-5 * * 1-5"]),
    ]
    text, keep = t[i % len(t)]
    if not keep:
        keep = ["SHA256:" + text.split("SHA256:")[1]]
    return text, keep


def ord_public_keys(r: random.Random, i: int) -> tuple[str, list[str]]:
    pub = "AAAAC3NzaC1lZDI1NTE5AAAAI" + b64body(r, 32).rstrip("=")
    cert = "\n".join(key_lines(r, 700, "MIIDdzCCAl+gAwIBAgI"))
    t = [
        (f"ssh-ed25519 {pub} ops@laptop", [pub]),
        (f"authorized_keys:\nssh-ed25519 {pub} ci@runner", [pub]),
        (f"-----BEGIN CERTIFICATE-----\n{cert}\n-----END CERTIFICATE-----", [cert.split("\n")[0]]),
        (f"bastion.acme.io ssh-ed25519 {pub}", [pub]),
        (
            f"-----BEGIN PUBLIC KEY-----\n{chr(10).join(key_lines(r, 294, 'MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA'))}\n-----END PUBLIC KEY-----",
            [],
        ),
        (f"pk_live_{rs(r, B62, 24)} is the publishable key used in checkout.js", []),
        (f"GPG key fingerprint: {' '.join(hexs(r, 4).upper() for _ in range(10))}", []),
        (f"SSHFP record: bastion IN SSHFP 4 2 {hexs(r, 64)}", []),
    ]
    text, keep = t[i % len(t)]
    if not keep:
        if "PUBLIC KEY" in text:
            keep = [text.split("\n")[1]]
        elif text.startswith("pk_live_"):
            keep = [text.split(" ")[0]]
        elif "fingerprint" in text:
            keep = [text.split(": ")[1]]
        else:
            keep = [text.rsplit(" ", 1)[1]]
    return text, keep


def ord_logs(r: random.Random, i: int) -> tuple[str, list[str]]:
    u = uid(r)
    ip = f"10.{r.randrange(256)}.{r.randrange(256)}.{r.randrange(1, 255)}"
    t = [
        (
            f"2026-11-24T09:12:44.118Z INFO request_id={u} method=POST path=/v1/auth/token status=200 duration_ms=38",
            [u, "/v1/auth/token", "duration_ms=38"],
        ),
        (
            f'{ip} - - [24/Nov/2026:09:12:44 +0000] "GET /reset-password HTTP/1.1" 200 5123 "-" "Mozilla/5.0"',
            [ip, "/reset-password", "24/Nov/2026:09:12:44 +0000"],
        ),
        (
            "WARN auth: invalid password for user=jdoe (attempt 3/5), account not locked",
            ["invalid password for user=jdoe", "attempt 3/5"],
        ),
        (
            "Nov 24 09:12:44 web01 sshd[2211]: Accepted publickey for deploy from 10.0.3.7 port 51234 ssh2: ED25519 SHA256:Xo3f9",
            ["sshd[2211]", "10.0.3.7", "port 51234"],
        ),
        (
            "audit: secret rotated name=stripe-live version=17 actor=rotation-bot",
            ["name=stripe-live", "version=17"],
        ),
        (
            "pg: LOG:  connection authorized: user=app database=app application_name=ctxpack SSL enabled (protocol=TLSv1.3)",
            ["user=app", "application_name=ctxpack", "TLSv1.3"],
        ),
        (
            "ERROR: token expired at 2026-11-24T08:00:00Z (exp claim), refreshing",
            ["token expired at 2026-11-24T08:00:00Z"],
        ),
        (f"span=retrieve tokens_in=812 tokens_out=0 cache=hit key={hexs(r, 16)}", []),
        (
            "vault: lease renewed lease_id=database/creds/readonly/" + rs(r, B62, 24) + " ttl=768h",
            [],
        ),
        (
            "kernel: [ 1234.567890] Out of memory: Killed process 4242 (python3)",
            ["Killed process 4242"],
        ),
    ]
    text, keep = t[i % len(t)]
    if not keep:
        if "span=" in text:
            keep = [text.rsplit("key=", 1)[1], "tokens_in=812"]
        else:
            keep = ["ttl=768h", "database/creds/readonly/"]
    return text, keep


def ord_config_safe(r: random.Random, i: int) -> tuple[str, list[str]]:
    t = [
        (
            "password_min_length: 12\npassword_require_symbol: true\nsession_timeout: 30m",
            ["password_min_length: 12", "session_timeout: 30m"],
        ),
        (
            "[auth]\ntoken_ttl_seconds = 3600\nrefresh_token_ttl_days = 30",
            ["token_ttl_seconds = 3600", "refresh_token_ttl_days = 30"],
        ),
        (
            "max_tokens: 4096\ntemperature: 0.2\nmodel: claude-sonnet-4-5",
            ["max_tokens: 4096", "claude-sonnet-4-5"],
        ),
        ('secret_backend = "vault"\nsecret_mount = "kv-v2"', ['secret_mount = "kv-v2"']),
        (
            "PASSWORD_HASHERS = ['django.contrib.auth.hashers.Argon2PasswordHasher']",
            ["django.contrib.auth.hashers.Argon2PasswordHasher"],
        ),
        ("api_key_header: X-API-Key\napi_key_prefix: ctx_", ["api_key_header: X-API-Key"]),
        ("KeyVaultName=acme-prod-kv\nKeyVaultSecretName=sql-admin", ["acme-prod-kv", "sql-admin"]),
        (
            "ssl_cert_file = /etc/ssl/certs/ca-certificates.crt\nssl_key_file = /etc/ssl/private/server.key",
            ["/etc/ssl/private/server.key"],
        ),
        ('password: ""  # set via PGPASSWORD in CI', ["# set via PGPASSWORD in CI"]),
        (
            "client_id: 0oa1b2c3d4e5f6g7h8i9\nscopes: openid profile offline_access",
            ["scopes: openid profile offline_access"],
        ),
    ]
    return t[i % len(t)]


def ord_cloud_ids(r: random.Random, i: int) -> tuple[str, list[str]]:
    acct = str(r.randrange(10**11, 10**12))
    region = r.choice(["eu-west-1", "us-east-1", "eu-central-1", "ap-southeast-2"])
    t = [
        f"arn:aws:iam::{acct}:role/ci-deployer",
        f"arn:aws:s3:::acme-artifacts-{hexs(r, 6)}/builds/{r.randrange(1000, 9999)}.zip",
        f"i-0{hexs(r, 16)}",
        f"sg-0{hexs(r, 16)}",
        f"/subscriptions/{uid(r)}/resourceGroups/rg-prod/providers/Microsoft.Web/sites/acme-api",
        f"projects/acme-prod-4821/locations/{region}/clusters/gke-{hexs(r, 6)}",
        f"vpc-{hexs(r, 17)}",
        f"arn:aws:secretsmanager:{region}:{acct}:secret:prod/api-{rs(r, B62, 6)}",
        f"lt-0{hexs(r, 16)} version {r.randrange(1, 90)}",
        f"ocid1.instance.oc1.eu-frankfurt-1.{rs(r, string.ascii_lowercase + string.digits, 60)}",
    ]
    ident = t[i % len(t)]
    frames = [
        "resource: {}",
        "created {} in {region}",
        "terraform import aws_instance.web {}",
        "tagged {} with owner=platform",
    ]
    frame = frames[(i // len(t)) % len(frames)]
    return frame.replace("{region}", region).replace("{}", ident), [ident]


def ord_values_misc(r: random.Random, i: int) -> tuple[str, list[str]]:
    color = "#" + hexs(r, 6)
    ver = f"{r.randrange(0, 12)}.{r.randrange(0, 40)}.{r.randrange(0, 30)}"
    price = f"{r.randrange(1, 999)}.{r.randrange(0, 100):02d}"
    order = (
        f"{r.randrange(100, 999)}-{r.randrange(1000000, 9999999)}-{r.randrange(1000000, 9999999)}"
    )
    port = r.randrange(1024, 65535)
    t = [
        (f"brand colour changed to {color}", [color]),
        (f"released v{ver} with the new token counter", [f"v{ver}"]),
        (f"monthly cost ${price} per seat", [f"${price}"]),
        (f"Amazon order {order} arrives Thursday", [order]),
        (f"port-forward svc/api {port}:8000", [f"{port}:8000"]),
        (
            f"ulimit -n {r.randrange(1024, 65536)}; sysctl vm.max_map_count={r.randrange(200000, 300000)}",
            [],
        ),
        (
            f"sprint velocity {r.randrange(20, 60)} points, {r.randrange(2, 9)} bugs carried over",
            [],
        ),
        (f"object key uploads/{r.randrange(2020, 2027)}/{uid(r)}.png", []),
        (
            f"retry after {r.randrange(1, 120)}s (HTTP 429, rate limit {r.randrange(100, 5000)} req/min)",
            [],
        ),
        (f"ULID {rs(r, '0123456789ABCDEFGHJKMNPQRSTVWXYZ', 26)} assigned to the import batch", []),
    ]
    text, keep = t[i % len(t)]
    if not keep:
        if text.startswith("ulimit"):
            keep = [text.split("; ")[1]]
        elif text.startswith("object key"):
            keep = [text.split(" ")[2]]
        elif text.startswith("ULID"):
            keep = [text.split(" ")[1]]
        else:
            keep = (
                [" ".join(text.split(" ")[1:3]).rstrip(",")]
                if text.startswith("sprint")
                else [text.split(" ")[2]]
            )
    return text, keep


ORDINARY_FAMILIES: dict[str, tuple[Gen, int]] = {
    "git": (ord_git, 20),
    "uuid_request_ids": (ord_uuid_ids, 20),
    "hash_integrity": (ord_hashes, 20),
    "docker": (ord_docker, 20),
    "http_trace_ids": (ord_http_ids, 20),
    "k8s": (ord_k8s, 20),
    "base64_data": (ord_base64, 20),
    "json_api": (ord_json_api, 20),
    "build_logs": (ord_build_logs, 10),
    "numbers_dates": (ord_numbers_dates, 24),
    "version_pins": (ord_versions, 10),
    "urls_paths": (ord_urls_paths, 12),
    "code_no_secret": (ord_code, 12),
    "prose_keywords": (ord_prose, 14),
    "math_misc": (ord_math_misc, 20),
    "public_keys": (ord_public_keys, 16),
    "logs": (ord_logs, 20),
    "config_no_secret": (ord_config_safe, 10),
    "cloud_resource_ids": (ord_cloud_ids, 30),
    "values_misc": (ord_values_misc, 30),
}


# --------------------------------------------------------------------------- assembly


def build(seed: int = SEED) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for kind, families, field in (
        ("secret", SECRET_FAMILIES, "secrets"),
        ("ordinary", ORDINARY_FAMILIES, "keep"),
    ):
        for family, (gen, count) in families.items():
            rng = random.Random(f"{seed}:{family}")
            seen: set[str] = set()
            for i in range(count):
                text, values = gen(rng, i)
                if text in seen:  # a template without random values, drawn twice
                    continue
                seen.add(text)
                values = list(dict.fromkeys(v for v in values if v))
                missing = [v for v in values if v not in text]
                if missing or not values:
                    raise ValueError(f"{family}#{i}: values not in text: {missing or 'none'}")
                rows.append(
                    {
                        "id": f"{kind[0]}-{family}-{i:03d}",
                        "kind": kind,
                        "family": family,
                        "text": text,
                        field: values,
                    }
                )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    rows = build(args.seed)
    with args.out.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    kinds = {k: sum(1 for row in rows if row["kind"] == k) for k in ("secret", "ordinary")}
    print(f"wrote {len(rows)} texts to {args.out}: {kinds}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
