"""Redaction, the words: the labels, the placeholder, and the key vocabulary (the key names
and keywords that announce a secret, a password, a PIN or an identifier)."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

LABELS: tuple[str, ...] = (
    "PRIVATE_KEY",
    "GITHUB_TOKEN",
    "GITLAB_TOKEN",
    "ANTHROPIC_KEY",
    "OPENAI_KEY",
    "GOOGLE_API_KEY",
    "AWS_ACCESS_KEY",
    "AWS_SECRET_KEY",
    "SLACK_TOKEN",
    "SLACK_WEBHOOK",
    "STRIPE_KEY",
    "WEBHOOK",
    "JWT",
    "BEARER_TOKEN",
    "BASIC_AUTH",
    "CONNECTION_PASSWORD",
    "PASSWORD",
    "PIN",
    "API_KEY",
    "SECRET",
    "TOKEN",
    "SSN",
    "CREDIT_CARD",
    "IBAN",
    "EMAIL",
    "PHONE",
)


def placeholder(label: str) -> str:
    """Return the text that replaces a secret carrying ``label``.

    Args:
        label: One of :data:`LABELS`.

    Returns:
        ``[LABEL:REDACTED]``.
    """
    return f"[{label}:REDACTED]"


# Matches a placeholder this module (or an earlier pass) produced.
PLACEHOLDER_RE = re.compile(r"\[[A-Z][A-Z0-9_]*:REDACTED\]")


_CAMEL_BOUNDARY_RE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


_KEY_SPLIT_RE = re.compile(r"[^a-z0-9]+")


# (label, last-words) pairs, checked in order; first hit wins.
_KEY_SUFFIXES: tuple[tuple[str, tuple[tuple[str, ...], ...]], ...] = (
    ("AWS_SECRET_KEY", (("secret", "access", "key"), ("secretaccesskey",))),
    # A service account's key id names the key it belongs to: kept with the key.
    ("SECRET", (("private", "key", "id"), ("privatekeyid",))),
    (
        "PASSWORD",
        (
            ("mot", "de", "passe"),
            ("parola", "d", "ordine"),
            ("parola", "chiave"),
            ("palavra", "passe"),
            ("code", "secret"),
        ),
    ),
    ("PIN", (("pin", "code"), ("pin", "number"), ("code", "pin"), ("pin", "nummer"))),
    ("PRIVATE_KEY", (("private", "key"), ("privatekey",), ("privkey",))),
    ("API_KEY", (("api", "key"), ("apikey",), ("api", "token"), ("x", "api", "key"))),
    (
        "SECRET",
        (
            ("secret", "key"),
            ("secret", "key", "base"),
            ("secretkey",),
            ("signing", "key"),
            ("encryption", "key"),
            ("master", "key"),
        ),
    ),
)


# Short password keys are also ordinary words in code (``forward_pass``,
# ``pw = ...``): they count alone, in an UPPER_CASE env name, or after a word
# that says whose password it is.
_SHORT_PASSWORD_KEYS = frozenset({"pass", "pw", "pwd"})


_CREDENTIAL_OWNERS = frozenset(
    {
        "db", "database", "user", "admin", "root", "login", "account", "default", "master",
        "smtp", "mail", "email", "imap", "ftp", "sftp", "ldap", "wifi", "app",
        "pg", "postgres", "mysql", "mariadb", "mongo", "redis", "sql", "rabbitmq", "amqp",
    }
)  # fmt: skip


# Whole-word endings: any key whose last word *ends with* one of these, so that
# run-together names like ``pgpassword`` or ``clientsecret`` still count. The password
# words of the major languages are here too (accents are stripped before: contraseña ->
# contrasena, lösenord -> losenord, hasło -> haslo).
_KEY_ENDINGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "PASSWORD",
        (
            "password", "passwd", "passphrase", "passwort", "kennwort", "wachtwoord",
            "contrasena", "contrasenya", "senha", "motdepasse", "losenord", "passord",
            "salasana", "haslo", "heslo", "jelszo", "adgangskode", "sifre", "parolasi",
        ),
    ),
    ("SECRET", ("secret", "credential", "credentials")),
    ("TOKEN", ("token",)),
)  # fmt: skip


# Whole last words: a PIN or passcode, a salt, an ``Authorization`` header, the session
# cookies of the common frameworks, and the password words that are also other words in
# a longer name (``clave``, ``parola``), so they count only as the whole word.
_KEY_WORDS_EXACT: dict[str, str] = {
    "passcode": "PIN", "pincode": "PIN", "geheimzahl": "PIN", "puk": "PIN", "pinnummer": "PIN",
    "salt": "SECRET", "clave": "PASSWORD", "parola": "PASSWORD", "authorization": "TOKEN",
    "sessionid": "TOKEN", "jsessionid": "TOKEN", "phpsessid": "TOKEN", "sessid": "TOKEN",
}  # fmt: skip


# Session cookies named ``<framework>.sid`` / ``<framework>_session``.
_SESSION_COOKIE_OWNERS = frozenset({"connect", "laravel", "ci", "rack", "express", "koa", "flask"})


# Whose PIN it is: ``pin`` counts alone, in an UPPER_CASE name or after one of these
# (``card_pin``), not as ``version_pin`` or ``pin_memory``.
_PIN_OWNERS = frozenset(
    {
        "card", "sim", "atm", "door", "bank", "phone", "device", "wifi", "user", "account",
        "admin", "debit", "credit", "alarm", "safe", "lock", "gate", "my", "default", "new", "old",
    }
)  # fmt: skip


# Pagination state named as a token (``nextPageToken``, ``NextToken``): not a credential.
_PAGINATION_WORDS = frozenset({"page", "next", "continuation", "pagination", "prev", "previous"})


# Configuration directives that take a password as their argument, written as one word
# (redis ``requirepass`` / ``masterauth``, ``rootpass`` in kickstart files...).
PASSWORD_DIRECTIVES = frozenset(
    {
        "requirepass", "masterauth", "masterpass", "rootpass", "rootpw", "dbpass", "adminpass",
        "userpass", "mysqlpass", "pgpass", "smtppass", "ldappass", "bindpw", "authpass",
        # keytool, jarsigner and openssl flags (``-storepass x``, ``-passout pass:x``).
        "storepass", "keypass", "srcstorepass", "deststorepass", "srckeypass", "destkeypass",
        "passin", "passout",
    }
)  # fmt: skip


@lru_cache(maxsize=4096)
def key_words(key: str) -> tuple[str, ...]:
    if not key.isascii():
        # Accents off (contraseña -> contrasena), so the vocabulary is written once.
        key = "".join(c for c in unicodedata.normalize("NFKD", key) if not unicodedata.combining(c))
    spaced = _CAMEL_BOUNDARY_RE.sub("_", key.strip("\"'`:$-"))
    return tuple(w for w in _KEY_SPLIT_RE.split(spaced.lower()) if w)


# Cached: a text holds the same few key names many times (``password: x`` in every line of
# a config dump), and a key name is no secret.
@lru_cache(maxsize=4096)
def label_for_key(key: str) -> str | None:
    """Label for the secret a key names, or None when the key names no secret."""
    words = key_words(key)
    if not words:
        return None
    for label, suffixes in _KEY_SUFFIXES:
        for suffix in suffixes:
            if words[-len(suffix) :] == suffix:
                return label
    last = words[-1]
    if last in PASSWORD_DIRECTIVES:
        return "PASSWORD"
    if last in _SHORT_PASSWORD_KEYS:
        if len(words) == 1 or key.isupper() or words[-2] in _CREDENTIAL_OWNERS:
            return "PASSWORD"
        return None
    if last == "pin":
        if len(words) == 1 or key.isupper() or words[-2] in _PIN_OWNERS:
            return "PIN"
        return None
    exact = _KEY_WORDS_EXACT.get(last)
    if exact is not None:
        return exact
    if len(words) > 1 and (
        (last == "sid" and words[-2] in _SESSION_COOKIE_OWNERS)
        or (last == "session" and words[-2] in _SESSION_COOKIE_OWNERS)
        or (last == "sessionid" and words[-2] == "net")
    ):
        return "TOKEN"
    if last == "token" and len(words) > 1 and words[-2] in _PAGINATION_WORDS:
        return None
    for label, endings in _KEY_ENDINGS:
        if last.endswith(endings):
            return label
    return None


# Keys whose values are identifiers, digests, public material or pagination state: a
# random-looking value under one of them is what it says it is (``node_id``, ``sha``,
# ``etag``, ``integrity``, ``public_key``, ``endCursor``, ``NextToken``).
_ID_KEY_WORDS = frozenset(
    {
        "id", "ids", "uuid", "guid", "uid", "gid", "oid", "sid", "kid", "jti", "ulid",
        "sha", "sha1", "sha224", "sha256", "sha384", "sha512", "md5", "h1", "zh", "blake2b",
        "blake3", "crc32", "crc32c", "xxhash", "hash", "hashes", "digest", "checksum",
        "checksums", "shasum", "integrity", "etag", "rev", "revision", "commit", "version",
        "fingerprint", "thumbprint", "cursor", "continue", "marker", "after", "before",
        "nonce", "signature", "signatures", "sig", "certificate", "cert", "crt", "pubkey",
        "publickey", "ref", "tag", "node", "generation", "trace", "traceparent", "span",
        "ray", "sequence", "seq", "name", "slug", "title", "path", "url", "uri", "href",
        "link", "file", "filename", "image", "arn", "build", "upload", "location",
    }
)  # fmt: skip


@lru_cache(maxsize=4096)
def is_id_key(key: str) -> bool:
    """True when ``key`` names an identifier, a digest, public material or a page cursor."""
    words = [w for w in key_words(key) if not w.isdigit()]
    if not words:
        return False
    last = words[-1]
    if last in _ID_KEY_WORDS or "".join(words) in _ID_KEY_WORDS:
        return True
    if len(last) > 2 and last.endswith(("id", "ids")) and last not in ("paid", "valid", "void"):
        return True  # keyid, requestid, userid
    if "public" in words or "pub" in words:
        return True
    return last == "token" and len(words) > 1 and words[-2] in _PAGINATION_WORDS

