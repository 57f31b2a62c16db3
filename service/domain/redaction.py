"""Secret and PII redaction for everything ctxpack stores.

Every write passes through :class:`Redactor` before it reaches the database, so
the rules here are the last line between an agent's tool output and a memory
that other agents will read back. Two goals pull against each other:

* **Recall on secrets.** A leaked token is an incident; a redacted UUID is an
  annoyance. Provider formats (GitHub, AWS, Slack, ...) are matched by shape,
  anywhere. Generic secrets are matched through the key that names them
  (``password=...``, ``"api_key": "..."``, ``<token>...</token>``).
* **Readable text.** Only the secret *value* is replaced, with
  ``[LABEL:REDACTED]``, so ``password=hunter2`` becomes
  ``password=[PASSWORD:REDACTED]`` and the memory still says what was there.

How a text is scanned: rules run in table order (specific providers first, then
key-named generics, then PII). Each rule proposes spans; a span that overlaps
one already taken is dropped, so the first (most specific) rule wins the label
and nothing is ever wrapped twice. Placeholders already present in the input are
taken before any rule runs, which makes ``redact`` idempotent. All spans are
then replaced in one pass.

Labels: PRIVATE_KEY, GITHUB_TOKEN, GITLAB_TOKEN, ANTHROPIC_KEY, OPENAI_KEY,
GOOGLE_API_KEY, AWS_ACCESS_KEY, AWS_SECRET_KEY, SLACK_TOKEN, SLACK_WEBHOOK,
STRIPE_KEY, WEBHOOK, JWT, BEARER_TOKEN, BASIC_AUTH, CONNECTION_PASSWORD, PASSWORD,
PIN, API_KEY, SECRET, TOKEN, SSN, CREDIT_CARD, IBAN, EMAIL, PHONE.

Phone numbers: only shapes that cannot be a date, version, port or id are
matched: an explicit international ``+CC ...`` number (8 to 15 digits), or a
North American ``(212) 555-0143`` / ``212-555-0143`` / ``212.555.0143`` with a
valid area code and exchange. A bare run of 10 digits is never a phone number
here: it is far more often an id or a timestamp.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from itertools import repeat
from typing import TypeAlias

from service.domain.redaction_normalize import PERCENT_RE, TextView, normalised_view

__all__ = ["LABELS", "JSONValue", "RedactionResult", "Redactor", "merge_counts", "placeholder"]

JSONValue: TypeAlias = "dict[str, JSONValue] | list[JSONValue] | str | int | float | bool | None"

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
_PLACEHOLDER_RE = re.compile(r"\[[A-Z][A-Z0-9_]*:REDACTED\]")
PLACEHOLDER_RE = _PLACEHOLDER_RE
"""The one placeholder pattern (the write pipeline strips these before gating)."""


@dataclass(frozen=True)
class RedactionResult:
    """The redacted text and how many values were replaced, per label."""

    text: str
    counts: dict[str, int]

    @property
    def redacted(self) -> bool:
        """True when at least one value was replaced."""
        return bool(self.counts)


def merge_counts(*counts: Mapping[str, int]) -> dict[str, int]:
    """Add up per-label redaction counts.

    Args:
        *counts: Any number of ``label -> count`` mappings.

    Returns:
        A new dict with the summed counts; labels with a zero total are left out.
    """
    merged: dict[str, int] = {}
    for mapping in counts:
        for label, n in mapping.items():
            merged[label] = merged.get(label, 0) + n
    return {label: n for label, n in merged.items() if n}


# --------------------------------------------------------------------------
# Key names that announce a secret.
#
# Used twice: on the key of a ``key=value`` / ``"key": "value"`` match in text,
# and on dict keys in ``redact_json``. The key is split into lower-case words
# (camelCase, snake_case, kebab-case and dotted keys alike) and only its *last*
# word(s) count, so ``db_password`` and ``accessToken`` name secrets while
# ``password_reset_url``, ``max_tokens`` and ``token_type`` do not.
# --------------------------------------------------------------------------

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
_PASSWORD_DIRECTIVES = frozenset(
    {
        "requirepass", "masterauth", "masterpass", "rootpass", "rootpw", "dbpass", "adminpass",
        "userpass", "mysqlpass", "pgpass", "smtppass", "ldappass", "bindpw", "authpass",
        # keytool, jarsigner and openssl flags (``-storepass x``, ``-passout pass:x``).
        "storepass", "keypass", "srcstorepass", "deststorepass", "srckeypass", "destkeypass",
        "passin", "passout",
    }
)  # fmt: skip


@lru_cache(maxsize=4096)
def _key_words(key: str) -> tuple[str, ...]:
    if not key.isascii():
        # Accents off (contraseña -> contrasena), so the vocabulary is written once.
        key = "".join(c for c in unicodedata.normalize("NFKD", key) if not unicodedata.combining(c))
    spaced = _CAMEL_BOUNDARY_RE.sub("_", key.strip("\"'`:$-"))
    return tuple(w for w in _KEY_SPLIT_RE.split(spaced.lower()) if w)


# Cached: a text holds the same few key names many times (``password: x`` in every line of
# a config dump), and a key name is no secret.
@lru_cache(maxsize=4096)
def _label_for_key(key: str) -> str | None:
    """Label for the secret a key names, or None when the key names no secret."""
    words = _key_words(key)
    if not words:
        return None
    for label, suffixes in _KEY_SUFFIXES:
        for suffix in suffixes:
            if words[-len(suffix) :] == suffix:
                return label
    last = words[-1]
    if last in _PASSWORD_DIRECTIVES:
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
def _is_id_key(key: str) -> bool:
    """True when ``key`` names an identifier, a digest, public material or a page cursor."""
    words = [w for w in _key_words(key) if not w.isdigit()]
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


# Values that sit where a secret would but are not one: templating and env
# references, booleans, type names, paths, obvious placeholders. Redacting them
# would only add noise to the counts.
_NOT_A_SECRET_RE = re.compile(
    r"""(?ix)
    ^(?:
        \$\{?[A-Za-z_][A-Za-z0-9_]*\}?     # $VAR / ${VAR}
      | \{\{.*\}\} | %\(.*\)s | %[A-Za-z_]+% | <[^<>]*>   # {{var}}, %(var)s, %VAR%, <your-key>
      | (.)\1*                             # ****, xxxxxx, ......
      | (?:~|\.{1,2})?/[\w.\-/]*           # /home/app (``PWD=`` in an env dump)
      | true | false | null | none | nil | undefined | yes | no | on | off
      | required | optional | redacted | hidden | masked | empty | unset | self | cls
      | str | string | int | float | bool | bytes | dict | list | tuple | object | any
    )$
    """
)
_HAS_DIGIT_RE = re.compile(r"\d")
_MIXED_CASE_RE = re.compile(r"[a-z].*[A-Z]|[A-Z].*[a-z]")
_WORDISH_RE = re.compile(r"[A-Za-z_]+")
_CAMEL_CASE_RE = re.compile(r"[A-Z][a-z0-9]+[A-Z]")
_IDENTIFIER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_LINE_TAIL_OK_RE = re.compile(r"[ \t]*(?:$|[,}\]\r\n#])")


def _value_is_secret(
    label: str, key: str, value: str, *, quoted: bool, sep: str, tail: str
) -> bool:
    """Judge a value found after a key that names a secret.

    Quoted values are taken at their word: a string literal under a secret key
    is a secret. Unquoted ones need care, because source code is full of
    ``self.password = password`` and ``api_key: str``.
    """
    if _PLACEHOLDER_RE.search(value):
        return False
    if _NOT_A_SECRET_RE.match(value) and not (
        # A 40-character AWS secret may start with ``/`` and look like a path.
        value.startswith("/") and looks_random(value)
    ):
        return False
    if not quoted:
        # A call, an index or a literal container: ``token = make_token(...)``.
        if tail[:1] in ("(", "[", "{"):
            return False
        # A variable passed on under its own name: ``password=password``,
        # ``ssl_password=self.ssl_password``, ``mask2_token=mask2_token``.
        key_words = _key_words(key)
        if key_words and _IDENTIFIER_RE.fullmatch(value) and key_words[-1] in value.lower():
            return False
        # Code assignment (``x = ident``, spaces round ``=``) of a variable or an
        # attribute rather than a literal: ``self.password = password``,
        # ``first_pass = use_cache and ...``. An INI ``password = hunter2`` has
        # no ``_`` or ``.`` in the value and is not the key's own name.
        if (
            "=" in sep
            and sep.strip(" \t\"'") in ("=", ":=")
            and sep.endswith((" ", "\t"))
            and _IDENTIFIER_RE.fullmatch(value)
            and ("_" in value or "." in value)
        ):
            return False
    if label == "PIN":
        return _pin_like(value)
    if label == "PASSWORD":
        if len(value) < 4:
            return False
        if not quoted and ":" in sep and _WORDISH_RE.fullmatch(value):
            # ``password: changeme`` is YAML; ``Password: reset it weekly`` is
            # prose and ``password: SecretStr`` a type annotation. A bare word
            # after a colon counts only when it ends the line and is not CamelCase
            # or a private name.
            if value.startswith("_"):
                return False
            return bool(_LINE_TAIL_OK_RE.match(tail)) and not _CAMEL_CASE_RE.search(value)
        return True
    # Keys, tokens and secrets are random strings: at least 8 chars, and a digit
    # (unquoted: identifiers such as ``CertificateIssuerPrivateKeyTypes`` have
    # mixed case too) or, in quotes, mixed case. ``token: expired`` stays.
    if len(value) < 8 or any(map(str.isspace, value)):
        return False
    if _HAS_DIGIT_RE.search(value):
        return True
    return quoted and bool(_MIXED_CASE_RE.search(value))


_PIN_RE = re.compile(r"\d{4,12}|(?=[A-Za-z]*\d)(?=\d*[A-Za-z])[A-Za-z0-9]{4,12}")


def _pin_like(value: str) -> bool:
    """A PIN or passcode: 4 to 12 digits, or 4 to 12 letters and digits with both."""
    return _PIN_RE.fullmatch(value) is not None


# --------------------------------------------------------------------------
# Validators for number-shaped PII.
# --------------------------------------------------------------------------


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


# Issuer prefixes and lengths: a Luhn check alone passes one random number in
# ten, so order ids and millisecond timestamps need the issuer shape too.
_CARD_ISSUER_RE = re.compile(
    r"""(?x)
      4\d{12}(?:\d{3}|\d{6})?                       # Visa 13/16/19
    | (?:5[1-5]\d{2}|222[1-9]|22[3-9]\d|2[3-6]\d{2}|27[01]\d|2720)\d{12}  # Mastercard
    | 3[47]\d{13}                                   # Amex
    | 3(?:0[0-5]|[689]\d)\d{11}                     # Diners
    | (?:6011|65\d{2}|64[4-9]\d)\d{12,15}           # Discover
    | 35(?:2[89]|[3-8]\d)\d{12,15}                  # JCB
    | 62\d{14,17}                                   # UnionPay
    """
)


_CARD_GROUPED_RE = re.compile(r"\d{4}([ \-])\d{4}\1\d{4}\1\d{4}")


def _is_card(text: str) -> bool:
    digits = re.sub(r"[ -]", "", text)
    if not _luhn_ok(digits):
        return False
    # Written as a card (4-4-4-4) and Luhn-valid: a card, whatever its issuer.
    return bool(_CARD_GROUPED_RE.fullmatch(text) or _CARD_ISSUER_RE.fullmatch(digits))


# IBAN lengths by country (ISO 13616 registry): with the mod-97 check, a product code or a
# token that happens to start with two letters and two digits is not taken for one.
_IBAN_LENGTHS: dict[str, int] = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BR": 29, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20,
    "EG": 29, "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18,
    "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IS": 26, "IT": 27, "JO": 30,
    "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27,
    "MD": 24, "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24,
    "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24, "SE": 24, "SI": 19,
    "SK": 24, "SM": 27, "TN": 24, "TR": 26, "UA": 29, "VG": 24, "XK": 20,
}  # fmt: skip


def _is_iban(text: str) -> bool:
    compact = text.replace(" ", "").upper()
    if _IBAN_LENGTHS.get(compact[:2]) != len(compact):
        return False
    digits = "".join(str(int(c, 36)) for c in compact[4:] + compact[:4])
    return int(digits) % 97 == 1


def _is_intl_phone(text: str) -> bool:
    n = sum(ch.isdigit() for ch in text)
    return 8 <= n <= 15


# --------------------------------------------------------------------------
# Randomness: what a generated credential looks like, as opposed to a word, an
# identifier, a version or a hash named as one.
# --------------------------------------------------------------------------

_HEX_ONLY_RE = re.compile(r"[0-9a-fA-F]+")
_UUID_RE = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)
# snake_case, kebab-case and dotted names made of words (``CTXPACK_GATE_MAX``, ``v1-api``).
# The last word may be a one-letter version (``password-reset-v2``).
_WORDY_ID_RE = re.compile(
    r"[A-Za-z]*\d{0,3}(?:[_\-./][A-Za-z]{2,}\d{0,3})*(?:[_\-./][A-Za-z]{2,}\d{0,3}|[_\-./][A-Za-z]\d{1,3})[_\-./]?"
)
# Possessive runs (``++``, ``*+``): a run of letters or digits is never split between two
# repetitions of the tail group, which made the fullmatch exponential on tokens like
# ``1.2a1ba1ba1b...!`` (found by a hypothesis test); the matched strings are the same.
_VERSION_RE = re.compile(r"v?\d+(?:[._\-]\d+)+(?:[._\-+]?[A-Za-z]++[._\-]?\d*+)*")
RANDOM_MIN_CHARS = 16


def shannon_entropy(text: str) -> float:
    """Bits per character of ``text`` (0 for an empty string)."""
    if not text:
        return 0.0
    n = len(text)
    # Counted and summed in C: the cached terms are the very floats ``c / n * log2(c / n)``
    # that a Python loop would compute, added in the same order.
    return -sum(map(_entropy_term, Counter(text).values(), repeat(n)))


@lru_cache(maxsize=8192)
def _entropy_term(count: int, n: int) -> float:
    return count / n * math.log2(count / n)


def looks_random(token: str) -> bool:
    """True when ``token`` looks generated: a key, a token, a random password.

    At least 16 characters with a digit, not a UUID, a version or a name made of words;
    hex needs 32 characters and 3 bits of entropy per character, anything else mixed
    character classes and an entropy of at least ``0.75 * log2(length)`` (random base64
    of 16 characters averages 3.7 bits, of 40 characters 4.8; words and identifiers sit
    far below).
    """
    t = token.strip("=\"'").rstrip(".,")[:1024]
    n = len(t)
    if n < RANDOM_MIN_CHARS or not any(map(str.isdigit, t)):
        return False
    if _UUID_RE.fullmatch(t) or _VERSION_RE.fullmatch(t):
        return False
    entropy = shannon_entropy(t)
    if _HEX_ONLY_RE.fullmatch(t):
        return n >= 32 and entropy >= 3.0
    if not any(map(str.isalpha, t)) or _WORDY_ID_RE.fullmatch(t):
        return False
    return entropy >= 0.75 * math.log2(min(n, 64))


# Values that read as a password in prose ("the password is Tr0ub4dor-xyz-77"): a letter
# and a digit or symbol, no spaces, not a version, a tech word or a path.
_TECH_WORD_RE = re.compile(
    r"(?i)^(?:sha-?\d+|md5|bcrypt|scrypt|argon2(?:id)?|pbkdf2|base64|base32|utf-?\d+|ipv[46]"
    r"|oauth2?|http[23s]?|s3|ec2|gpt-?\d.*|k8s|i18n|l10n|2fa|mfa|totp|fido2|aes-?\d+|rsa-?\d+"
    r"|ed25519|tls1?\.?\d|ssl\d?|x509|pkcs\d+|1password|[a-z]+-(?:hashed|encoded|encrypted|protected|based))"
    r"(?:[-_.,].*)?$"
)


def _password_like(value: str) -> bool:
    if len(value) < 6 or len(value) > 128:
        return False
    if _NOT_A_SECRET_RE.match(value) or _TECH_WORD_RE.match(value):
        return False
    if _VERSION_RE.fullmatch(value) or _UUID_RE.fullmatch(value) or "://" in value or "@" in value:
        return False
    has_alpha = any(map(str.isalpha, value))
    has_digit = any(map(str.isdigit, value))
    has_symbol = not all(map(str.isalnum, value))
    if not has_alpha:
        return False
    if has_digit:
        return True
    # No digit: mixed case with a symbol inside (``Correct!Horse``), not a hyphenated word.
    return (
        has_symbol
        and _MIXED_CASE_RE.search(value) is not None
        and not _WORDY_ID_RE.fullmatch(value)
    )


def _strong_token(value: str) -> bool:
    """A token in prose: random-looking, or mixed case with digits and 10+ characters."""
    # The cheap test first: most generated tokens pass it, and looks_random costs more.
    return (
        len(value) >= 10
        and any(map(str.isdigit, value))
        and any(map(str.isupper, value))
        and any(map(str.islower, value))
        and not _TECH_WORD_RE.match(value)
        and not _VERSION_RE.fullmatch(value)
        and not _WORDY_ID_RE.fullmatch(value)
        and "://" not in value
    ) or looks_random(value)


# Known identifier shapes that pass looks_random: hex with ``-``/``:`` groups (digests,
# trace ids, request ids), ULIDs, hash-prefixed values (``sha512-…``, ``h1:…``), typed
# object ids (``cus_…``, ``chatcmpl-…``, ``toolu_01…``).
_HEXISH_RE = re.compile(r"[0-9a-fA-F]+(?:[\-:][0-9a-fA-F]+)*")
_ULID_RE = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")
_HASH_PREFIX_RE = re.compile(
    r"(?i)(?:sha-?(?:1|224|256|384|512)?|md5|h1|zh|blake2b?|blake3|crc32c?|xxh\d*)[-:=_]"
)
_TYPED_ID_RE = re.compile(
    r"([a-z]{1,12})[_\-](?:([a-z]{1,12})[_\-])?(?=[A-Za-z]*\d)[A-Za-z0-9]{8,}"
)
# Words that make a typed prefix a credential's, not an object id's.
_SECRET_PREFIX_WORDS = frozenset(
    {
        "sk", "rk", "secret", "key", "token", "pat", "pw", "pwd", "pass", "auth", "whsec",
        "api", "apikey", "private", "priv", "access", "refresh", "session", "sess", "bearer",
        "live", "prod", "cred", "oauth", "client", "signing", "webhook",
    }
)  # fmt: skip
_B64_ALPHABET_RE = re.compile(r"[A-Za-z0-9+/_\-]+={0,2}")
_USER_PASS_RE = re.compile(r"[^\s:]{0,64}[A-Za-z][^\s:]{0,64}:\S{3,}")


def _decoded_printable(token: str) -> str | None:
    """``token`` decoded from base64 (standard or URL-safe) when that is printable text."""
    if len(token) < 12 or len(token) % 4 == 1 or _B64_ALPHABET_RE.fullmatch(token) is None:
        return None
    try:
        raw = base64.b64decode(
            token.replace("-", "+").replace("_", "/") + "=" * (-len(token) % 4), validate=True
        )
    except (binascii.Error, ValueError):
        return None
    if not raw or len(raw) - len(raw.translate(None, _PRINTABLE_BYTES)) < 0.95 * len(raw):
        return None
    return raw.decode("ascii", "replace")


def generic_secret(token: str) -> bool:
    """A value that is a credential whatever its key says: random-looking (see
    :func:`looks_random`), of mixed case (or, without, 24+ characters with no separator),
    and none of the identifier shapes (hex digests and trace ids, UUIDs, ULIDs, versions,
    ``sha512-…``/``h1:…`` hashes, typed object ids such as ``cus_…`` or ``chatcmpl-…``,
    paths, base64 of printable text other than ``user:password``)."""
    t = token.strip("\"'`").rstrip(".,;")
    if len(t) < RANDOM_MIN_CHARS or len(t) > 4096 or any(map(str.isspace, t)):
        return False
    if _HEXISH_RE.fullmatch(t) or _ULID_RE.fullmatch(t) or _HASH_PREFIX_RE.match(t):
        return False
    if not looks_random(t):
        return False
    has_upper = any(map(str.isupper, t))
    has_lower = any(map(str.islower, t))
    if not (has_upper and has_lower) and (len(t) < 24 or any(c in t for c in "-._/")):
        return False
    typed = _TYPED_ID_RE.fullmatch(t)
    if typed is not None and not (
        typed.group(1) in _SECRET_PREFIX_WORDS or typed.group(2) in _SECRET_PREFIX_WORDS
    ):
        return False
    if "/" in t and any(len(seg) >= 3 and seg.isalpha() and seg.islower() for seg in t.split("/")):
        return False  # a path: words between the slashes
    decoded = _decoded_printable(t)
    if decoded is not None:
        # Base64 of text: a cursor, a data blob, a public value; a credential only when it
        # reads as ``user:password`` (docker ``auth``, Basic). Secrets inside the text are
        # the base64 rule's.
        return _USER_PASS_RE.fullmatch(decoded) is not None
    return True


# --------------------------------------------------------------------------
# The rule table.
# --------------------------------------------------------------------------

# ``accept(match)`` returns the label to use, or None to leave the match alone.
_Accept = Callable[["re.Match[str]"], str | None]


# A finder scans the text itself and yields ``(start, end, label)`` spans, for rules a
# single regex cannot state in linear time. It is handed the spans taken so far (it may
# skip work on a candidate that overlaps one: such a span would be dropped anyway).
_Finder = Callable[[str, "_Taken"], Iterable[tuple[int, int, str]]]


@dataclass(frozen=True)
class _Rule:
    label: str  # label used when ``accept`` is None; documentation otherwise
    pattern: re.Pattern[str] | None
    # Named groups holding the value to replace; the first that took part in the
    # match is used. Empty: the whole match is the value.
    groups: tuple[str, ...] = ()
    # Lower-case substrings, one of which must occur for the rule to run at all:
    # a cheap prefilter that keeps ordinary prose away from most regexes.
    triggers: tuple[str, ...] = ()
    accept: _Accept | None = None
    finder: _Finder | None = None
    # Match only where a secret keyword ends (see _keyword_starts), rather than at every
    # word: a key-named rule then costs one keyword scan on ordinary prose.
    anchored: bool = False
    # Lower-case substrings the pattern cannot match without, one of which must occur as
    # well (a separator: ``=`` or ``:``, a newline): a single-line text skips the rules
    # that need a line break.
    needs: tuple[str, ...] = ()
    # A provider token: its match holds a run of 12+ token characters, so a text without
    # one (most prose) skips the rule and its triggers are not even looked up.
    token_shaped: bool = False


def _fixed(label: str, check: Callable[[str], bool]) -> _Accept:
    return lambda m: label if check(m.group(0)) else None


def _accept_keyed(m: re.Match[str]) -> str | None:
    label = _label_for_key(m.group("key"))
    if label is None:
        return None
    groups = m.groupdict()
    unquoted = groups.get("vu")
    value = unquoted or groups.get("vq") or groups.get("vs") or groups.get("vb") or ""
    tail = m.string[m.end() : m.end() + 80]
    sep = groups.get("sep") or ""
    key = m.group("key")
    if not _value_is_secret(label, key, value, quoted=unquoted is None, sep=sep, tail=tail):
        return None
    return label


_CURL_BEFORE_RE = re.compile(r"\bcurl\b[^\n]*\Z")


def _accept_xml(m: re.Match[str]) -> str | None:
    label = _label_for_key(m.group("key"))
    if label is None:
        return None
    value = m.group("v").strip()
    ok = _value_is_secret(label, m.group("key"), value, quoted=True, sep="", tail="")
    return label if ok else None


# What may stand between a line's start (or 40 characters back) and a directive's key.
_LINE_PREFIX_RE = re.compile(
    r"(?i)[ \t]*(?:(?:export|set|setx|env|-e|--env|\$env:)[ \t]+(?:-[a-z]+[ \t]+)?)?"
)


def _is_directive(m: re.Match[str]) -> bool:
    """A configuration line ``KEY value`` (``requirepass s3cr3t``, ``PGPASSWORD x``):
    the key opens the line, the value ends it, and the key is not an English word."""
    key = m.group("key")
    text, start = m.string, m.start()
    lo = max(0, start - 40)
    newline = text.rfind("\n", lo, start)
    if not _LINE_PREFIX_RE.fullmatch(text, newline + 1 if newline >= 0 else lo, start):
        return False
    if not _LINE_TAIL_OK_RE.match(m.string[m.end() : m.end() + 80]):
        return False
    words = _key_words(key)
    return key.isupper() or "_" in key or bool(words and words[-1] in _PASSWORD_DIRECTIVES)


def _accept_spaced(m: re.Match[str]) -> str | None:
    label = _label_for_key(m.group("key"))
    if label is None:
        return None
    value = m.group("vu")
    if label == "PIN":
        # "pin 4 cores", "pin it to 1024": a lower-case ``pin`` is a verb unless a
        # separator or a copula follows it.
        sep = (m.group("sep") or "").strip(" \t")
        if m.group("key").islower() and (not sep or sep.endswith("to")):
            return None
        return label if _pin_like(value) and not _PLACEHOLDER_RE.search(value) else None
    directive = (m.group("sep") or "").strip() in ("", "is", "was", "are") and _is_directive(m)
    # A lowercase word is a secret only as a directive's value (``requirepass foobared``):
    # neither test below takes one (the cheap check first; prose is full of them).
    if not directive and value.isalpha() and value.islower():
        return None
    if _PLACEHOLDER_RE.search(value) or _NOT_A_SECRET_RE.match(value):
        return None
    if directive:
        if label == "PASSWORD":
            return label if len(value) >= 4 else None
        return label if len(value) >= 8 and _HAS_DIGIT_RE.search(value) else None
    if label == "PASSWORD":
        return label if _password_like(value) else None
    return label if _strong_token(value) else None


def _accept_next_line(m: re.Match[str]) -> str | None:
    label = _label_for_key(m.group("key"))
    if label is None:
        return None
    value = m.group("vu")
    if value.endswith(":") or value[:1] in "-#/":
        return None
    ok = _value_is_secret(label, m.group("key"), value, quoted=False, sep=":", tail="\n")
    return label if ok else None


def _accept_cli_password(
    m: re.Match[str], groups: tuple[str, ...] = ("vq", "vd", "vu")
) -> str | None:
    found = m.groupdict()
    value = next((v for g in groups if (v := found.get(g))), "")
    if _PLACEHOLDER_RE.search(value) or _NOT_A_SECRET_RE.match(value) or len(value) < 3:
        return None
    if value.startswith("$(") or _PORT_MAPPING_RE.fullmatch(value):
        # A command substitution, or a port mapping (``-p 8080:80``): no password.
        return None
    return "PASSWORD"


_PORT_MAPPING_RE = re.compile(
    r"(?:\d{1,3}(?:\.\d{1,3}){3}:)?\d{1,5}(?:-\d{1,5})?:\d{1,5}(?:-\d{1,5})?(?:/(?:tcp|udp|sctp))?"
)
# Values a password flag takes that are no password: a port, a key source of openssl
# (``env:VAR``, ``file:path``, ``fd:3``, ``stdin``), a URL, a curl format (``-w '%{…}'``).
_NOT_A_FLAG_PASSWORD_RE = re.compile(r"(?i)\d{1,5}|(?:env|file|fd):.*|stdin|.*://.*|.*%\{.*")


def _accept_user_password_flag(m: re.Match[str]) -> str | None:
    value = m.group("vq") or m.group("vd") or m.group("vu") or ""
    if value.startswith("-") or _NOT_A_FLAG_PASSWORD_RE.fullmatch(value):
        return None
    line_start = m.string.rfind("\n", 0, m.start()) + 1
    if _OWN_FLAGS_BEFORE_RE.search(m.string, max(line_start, m.start() - 400), m.start()):
        # curl's -u is the curl rule's (its -p and -w are no passwords); mysql's -p with a
        # blank is a prompt before the database name (the mysql rule reads ``-ppw``).
        return None
    return _accept_cli_password(m)


_OWN_FLAGS_BEFORE_RE = re.compile(r"(?i)\b(?:curl|mysql\w*|mariadb\w*)\b")
_ORACLE_CONTEXT_RE = re.compile(
    r"(?i)\b(?:sqlplus|sqlldr|expdp|impdp|exp|imp|rman|dgmgrl|sqlcl|sql|connect|conn|userid"
    r"|oracle|orcl|tns\w*)\b"
)


def _oracle_context(m: re.Match[str]) -> bool:
    """``user/password@db`` is Oracle's when an Oracle tool or word stands earlier on its line,
    or when the host is written ``@//host`` or ``@(DESCRIPTION=…)``."""
    text, end = m.string, m.end()
    if text.startswith(("//", "(description", "(DESCRIPTION"), end):
        return True
    lo = max(text.rfind("\n", 0, m.start()) + 1, m.start() - 200)
    # Within the same command: not past a shell separator.
    for sep in (";", "&&", "|"):
        found = text.rfind(sep, lo, m.start())
        if found >= 0:
            lo = found + len(sep)
    return _ORACLE_CONTEXT_RE.search(text, lo, m.start()) is not None


def _random_path(path: str) -> bool:
    """A webhook path holding a credential: one of its segments looks random, or is 24+
    letters and digits of mixed classes (``…/hooks/catch/123/ab1cd2/``: no)."""
    for segment in re.split(r"[/@]", path):
        if looks_random(segment) or (_HEXISH_RE.fullmatch(segment) and len(segment) >= 32):
            return True
    return False


_URL_SCHEME_USER_RE = re.compile(
    r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{0,30}://[^\s:/@\"'<>]*:"
)
_URL_VALUE_RE = re.compile(r"[^\s\"'<>`?]{0,512}")
_URL_PORT_PATH_RE = re.compile(r"\d{1,5}(?:/|$)")
_URL_HOST_RE = re.compile(r"[A-Za-z0-9\[]")
# An ``@`` before a dotted host and a port or a path: it ends the password.
_URL_AT_DOTTED_HOST_RE = re.compile(r"@(?=[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)+(?::\d{1,5})?/)")


def _find_url_passwords(text: str) -> Iterable[tuple[int, int, str]]:
    """``scheme://user:password@host``: the password runs to the last ``@`` of the URL
    before its query (so it may hold ``@``, ``/`` and ``#``), or to an earlier ``@`` that a
    dotted host and a path follow. ``host:8080/path@x`` is a port, not a password."""
    for m in _URL_SCHEME_USER_RE.finditer(text):
        start = m.end()
        end = _URL_VALUE_RE.match(text, start).end()  # type: ignore[union-attr]
        last = text.rfind("@", start, end)
        if last <= start:
            continue
        dotted = _URL_AT_DOTTED_HOST_RE.search(text, start + 1, last)
        chosen = dotted.start() if dotted is not None else last
        if _URL_PORT_PATH_RE.match(text, start) and "/" in text[start:chosen]:
            continue
        if not _URL_HOST_RE.match(text, chosen + 1):
            continue
        yield start, chosen, "CONNECTION_PASSWORD"


_HTPASSWD_RE = re.compile(
    r"(?i)\bhtpasswd(?P<flags>(?:[ \t]+-[A-Za-z]{1,8})+)(?P<args>(?:[ \t]+[^\s\-][^\s]{0,255}){2,3})"
)


def _find_htpasswd(text: str) -> Iterable[tuple[int, int, str]]:
    """``htpasswd -b[c] file user password`` and ``htpasswd -nb user password``: with ``-b``
    the password is the last argument (the second with ``-n``, which takes no file)."""
    for m in _HTPASSWD_RE.finditer(text):
        flags = m.group("flags").replace("-", "")
        if "b" not in flags:
            continue
        args = list(re.finditer(r"[^\s]+", m.group("args")))
        index = 1 if "n" in flags else 2
        if len(args) <= index:
            continue
        arg = args[index]
        value = arg.group().strip("'\"")
        if _PLACEHOLDER_RE.search(value) or _NOT_A_SECRET_RE.match(value):
            continue
        base = m.start("args")
        yield base + arg.start(), base + arg.end(), "PASSWORD"


_COOKIE_START_RE = re.compile(
    r"(?i)(?:\b(?:set-)?cookie[\"']?[ \t]*[:=][ \t]*[\"']?|(?<![\w\-])(?:-b|--cookie)[ \t]+[\"']?)"
)
_COOKIE_PAIR_RE = re.compile(r"[ \t]*(?P<name>[^=;\s\"'`,]{1,128})=(?P<value>[^;\s\"'`]{1,4096})")
_COOKIE_ATTRIBUTES = frozenset(
    {
        "path",
        "domain",
        "expires",
        "max-age",
        "samesite",
        "secure",
        "httponly",
        "priority",
        "version",
        "comment",
    }
)
_SESSION_COOKIE_RE = re.compile(r"(?i)sess|sid|auth|token|jwt|login|remember|csrf|xsrf|secret|key")


def _find_cookies(text: str) -> Iterable[tuple[int, int, str]]:
    """Cookie values in a ``Cookie``/``Set-Cookie`` header or curl's ``-b``/``--cookie``: a
    session or auth cookie (``sessionid``, ``JSESSIONID``, ``connect.sid``, ``*_session``,
    ``remember_token``...) of 8+ characters, or any random-looking value."""
    for m in _COOKIE_START_RE.finditer(text):
        pos = m.end()
        line_end = text.find("\n", pos)
        line_end = len(text) if line_end < 0 else min(line_end, pos + 8192)
        while pos < line_end:
            pair = _COOKIE_PAIR_RE.match(text, pos, line_end)
            if pair is None:
                break
            name, value = pair.group("name"), pair.group("value")
            if name.lower() not in _COOKIE_ATTRIBUTES and not _PLACEHOLDER_RE.search(value):
                if (_SESSION_COOKIE_RE.search(name) and len(value) >= 8) or generic_secret(value):
                    yield pair.start("value"), pair.end("value"), "TOKEN"
            pos = pair.end()
            if text.startswith(";", pos):
                pos += 1
            else:
                break


def _accept_aws_secret(m: re.Match[str]) -> str | None:
    value = m.group(0)
    before = m.string[max(0, m.start() - 100) : m.start()].lower()
    if "aws" not in before and "secret" not in before:
        return None
    has_upper = any(map(str.isupper, value))
    has_lower = any(map(str.islower, value))
    return "AWS_SECRET_KEY" if has_upper and has_lower and looks_random(value) else None


# A token body: the characters API tokens are made of.
_TOK = r"[A-Za-z0-9_\-]"
# Password, PIN and salt words beyond English ``password``: the major European languages
# (accented or not), passcodes and PINs. ``_label_for_key`` gives each its label.
_INTL_KEYWORDS = (
    r"pass(?:code|wort)|kennwort|wachtwoord|contrase(?:ñ|n)y?a|senha|mot[ _-]de[ _-]passe"
    r"|motdepasse|parola(?:[ _-]d['’ _-]?ordine)?|clave|pin(?:[ _-]?code)?|pincode|geheimzahl"
    r"|puk|salt"
)
# The keywords a secret-naming key can end with (see _label_for_key).
_KEYWORDS = (
    rf"(?:pass(?:word|wd|phrase)?|pwd|pw|secret|token|api[_-]?key|key|privkey|{_INTL_KEYWORDS})"
)
# The same, plus credentials and the one-word directives (requirepass, masterauth, bindpw).
_KEYWORDS_EXT = (
    r"(?:pass(?:word|wd|phrase)?|pwd|pw|secret|token|api[ _-]?key|key|privkey|credentials?"
    rf"|masterauth|authpass|{_INTL_KEYWORDS})"
)
# Rule triggers for the keywords above (lower-case substrings).
_KEYWORD_TRIGGERS = (
    # (``pass`` covers passcode, passwort and mot de passe.)
    "pass", "pwd", "pw", "secret", "token", "key", "kennwort", "wachtwoord", "contrase",
    "senha", "parola", "clave", "pin", "geheimzahl", "puk", "salt",
)  # fmt: skip

_RULES: tuple[_Rule, ...] = (
    # -- Private keys: keep the BEGIN/END armour (it says what kind of key it
    #    was), replace the body. The body may be JSON-escaped (``\n``) or cut off
    #    with no END line, as in a trimmed tool output. See _find_private_keys.
    _Rule(
        "PRIVATE_KEY", None, triggers=("private key",), finder=lambda t, _: _find_private_keys(t)
    ),
    # PuTTY ``.ppk``: the ``Private-Lines: N`` body and its MAC (v2) or hash (v1).
    _Rule(
        "PRIVATE_KEY",
        re.compile(
            r"Private-Lines:[ \t]*\d{1,4}[ \t]*(?:\r?\n|\\n)"
            r"(?P<v>[A-Za-z0-9+/=]{4,}+(?:(?:\r?\n|\\n)[A-Za-z0-9+/=]{4,}+(?![^\r\n\\]))*)"
            r"|Private-(?:MAC|Hash):[ \t]*(?P<m>[0-9a-fA-F]{16,})"
        ),
        ("v", "m"),
        ("private-lines", "private-mac", "private-hash"),
    ),
    # -- Provider tokens, matched by their documented prefixes.
    _Rule(
        "GITHUB_TOKEN",
        re.compile(
            r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})"
        ),
        triggers=("gh", "github_pat_"),
        token_shaped=True,
    ),
    _Rule(
        "GITLAB_TOKEN",
        re.compile(
            r"(?<![A-Za-z0-9_])(?:(?:glpat|glrt|gldt|glptt|glcbt|glimt|gloas|glsoat|glffct|glagent"
            r"|glft|glwt|glrtr)-[A-Za-z0-9_\-]{20,}|GR1348941[A-Za-z0-9_\-]{20,})"
        ),
        triggers=("gl", "gr1348941"),
        token_shaped=True,
    ),
    # Anthropic before OpenAI: both start with ``sk-``. Real keys always carry a
    # digit; the lookahead keeps kebab-case slugs such as ``sk-learn-tutorial``.
    _Rule(
        "ANTHROPIC_KEY",
        re.compile(rf"(?<![A-Za-z0-9_\-])sk-ant-(?=[A-Za-z0-9_\-]*\d){_TOK}{{20,}}"),
        triggers=("sk-ant-",),
        token_shaped=True,
    ),
    _Rule(
        "OPENAI_KEY",
        re.compile(
            rf"(?<![A-Za-z0-9_\-])sk-(?:proj-|svcacct-|admin-)?(?=[A-Za-z0-9_\-]*\d){_TOK}{{20,}}"
        ),
        triggers=("sk-",),
        token_shaped=True,
    ),
    _Rule(
        "GOOGLE_API_KEY",
        re.compile(r"(?<![A-Za-z0-9_])AIza[0-9A-Za-z_\-]{35}"),
        triggers=("aiza",),
        token_shaped=True,
    ),
    # AWS key ids: a four-letter resource prefix and 16 upper-case characters. Real ids
    # are base32 (``[A-Z2-7]``), but gitleaks and trufflehog accept ``[A-Z0-9]``, and a
    # missed key costs more than a redacted look-alike.
    _Rule(
        "AWS_ACCESS_KEY",
        re.compile(
            r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA)[A-Z0-9]{16}(?![A-Za-z0-9])"
        ),
        triggers=(
            "akia",
            "asia",
            "abia",
            "acca",
            "agpa",
            "aida",
            "aipa",
            "anpa",
            "anva",
            "aroa",
            "apka",
        ),
        token_shaped=True,
    ),
    _Rule(
        "SLACK_TOKEN",
        re.compile(r"(?<![A-Za-z0-9])(?:xox[abprsoe]|xapp)-[A-Za-z0-9\-]{10,}"),
        triggers=("xox", "xapp-"),
        token_shaped=True,
    ),
    # A Slack incoming webhook URL is itself the credential: keep the host so the
    # text still says "a Slack webhook", drop the path.
    _Rule(
        "SLACK_WEBHOOK",
        re.compile(
            r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<v>[A-Za-z0-9_/\-]{20,})"
        ),
        ("v",),
        ("hooks.slack.com",),
    ),
    # Other incoming webhooks whose URL is the credential: Discord, Microsoft Teams and
    # Office 365 connectors; then any ``…/hooks/<random>`` or ``…/webhooks/<random>`` path.
    _Rule(
        "WEBHOOK",
        re.compile(
            r"(?i)(?:discord(?:app)?\.com/api/webhooks/\d{5,30}/(?P<d>[A-Za-z0-9_\-]{30,})"
            r"|\.webhook\.office\.com/webhookb2/(?P<t>[^\s\"'<>]{20,})"
            r"|outlook\.office(?:365)?\.com/webhook/(?P<o>[^\s\"'<>]{20,}))"
        ),
        ("d", "t", "o"),
        ("discord", "webhook"),
    ),
    _Rule(
        "WEBHOOK",
        re.compile(
            r"(?i)https?://[^\s/\"'<>]{1,253}/(?:[^\s/\"'<>?#]{1,64}/){0,4}?"
            r"(?:hooks?|webhooks?|incoming[_\-]?webhooks?)/(?P<v>[^\s\"'<>?#]{16,256})"
        ),
        ("v",),
        ("hook",),
        lambda m: "WEBHOOK" if _random_path(m.group("v")) else None,
        needs=("://",),
        token_shaped=True,
    ),
    _Rule(
        "STRIPE_KEY",
        re.compile(r"(?<![A-Za-z0-9])(?:sk|rk|whsec)_(?:live|test)_[A-Za-z0-9]{16,}"),
        triggers=("_live_", "_test_"),
        token_shaped=True,
    ),
    # JWT: three base64url parts, the first two JSON objects: ``eyJ`` (``{"``), or ``eyA`` /
    # ``ewo`` / ``ew0`` when the JSON has a space or a line break after ``{``. An unsigned
    # token (``alg: none``) has an empty third part.
    _Rule(
        "JWT",
        re.compile(
            r"(?<![A-Za-z0-9_\-])(?:eyJ|eyA|ewo|ew0)[A-Za-z0-9_\-]{8,}\.(?:eyJ|eyA|ewo|ew0)[A-Za-z0-9_\-]{8,}"
            r"\.(?:[A-Za-z0-9_\-]{10,}|(?![A-Za-z0-9_\-]))"
        ),
        triggers=("eyj", "eya", "ewo", "ew0"),
        token_shaped=True,
    ),
    # -- HTTP auth. A bearer credential needs a digit, so "bearer of bad news"
    #    and "Bearer authentication" stay.
    _Rule(
        "BEARER_TOKEN",
        re.compile(r"(?i)\bbearer\s+(?P<v>(?=[A-Za-z0-9._~+/\-]*\d)[A-Za-z0-9._~+/\-]{12,}=*)"),
        ("v",),
        ("bearer",),
    ),
    # Basic auth only behind an Authorization header: "basic" alone is a word.
    _Rule(
        "BASIC_AUTH",
        re.compile(
            r"(?i)authorization[\"']?\s*[:=]\s*[\"']?basic\s+(?P<v>[A-Za-z0-9+/]{6,}={0,2})"
        ),
        ("v",),
        ("basic",),
    ),
    # Any other Authorization scheme (``Token``, ``Bot``, ``Digest``...) or a raw
    # credential. It must hold a digit: "Authorization: required for admins".
    _Rule(
        "TOKEN",
        re.compile(
            r"(?i)\bauthorization[\"']?\s*[:=]\s*[\"']?(?!bearer\b|basic\b)(?:[A-Za-z][\w\-]*\s+)?"
            r"(?P<v>(?=[A-Za-z0-9._~+/\-]*\d)[A-Za-z0-9._~+/\-]{12,}=*)"
        ),
        ("v",),
        ("authorization",),
    ),
    # ``curl -u user:password`` (before the generic URL rule: no ``://`` here).
    _Rule(
        "PASSWORD",
        re.compile(r"(?<=\s)(?:-u|--user)[ =][\"']?[^\s:\"']+:(?P<v>[^\s\"']+)"),
        ("v",),
        ("curl",),
        # Only in a curl command: ``curl`` earlier on the same line.
        lambda m: (
            "PASSWORD"
            if _CURL_BEFORE_RE.search(m.string, max(0, m.start() - 400), m.start())
            else None
        ),
    ),
    # scheme://user:password@host — postgres, mysql, mongodb+srv, redis (empty
    # user allowed), amqp, https basic-auth URLs... No ``/`` in the password, so
    # ``host:8080/path@x`` is never read as one.
    # The password may hold ``@`` and ``/`` (``postgres://u:p@ss/w0rd@db/app``): it runs to
    # the last ``@`` before the host (see _find_url_passwords); ``host:8080/path@x`` is a
    # port and a path, not a password.
    _Rule(
        "CONNECTION_PASSWORD",
        None,
        triggers=("://",),
        finder=lambda t, taken: _find_url_passwords(t),
    ),
    # A key as a URL's whole userinfo: Sentry DSNs (``https://<key>@o1.ingest.sentry.io/2``),
    # ``https://<token>@host/...``.
    _Rule(
        "TOKEN",
        re.compile(
            r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{0,30}://(?P<v>[A-Za-z0-9_\-.~+]{16,256})@(?=[A-Za-z0-9\[])"
        ),
        ("v",),
        ("://",),
        lambda m: "TOKEN" if looks_random(m.group("v")) or generic_secret(m.group("v")) else None,
    ),
    # Oracle ``user/password@db`` (sqlplus, expdp, rman, JDBC thin, EZConnect ``@//host``),
    # with an Oracle tool or word earlier on the line, or the ``@//`` / ``@(DESCRIPTION`` form.
    _Rule(
        "CONNECTION_PASSWORD",
        re.compile(
            r"(?<![\w/.\-@$])[A-Za-z][\w$#]{0,29}/(?P<v>[^\s/@\"'<>]{1,128})@(?=[A-Za-z0-9/(\[])"
        ),
        ("v",),
        ("@",),
        lambda m: "CONNECTION_PASSWORD" if _oracle_context(m) else None,
    ),
    # ``.pgpass`` lines: ``host:port:database:user:password``.
    _Rule(
        "PASSWORD",
        re.compile(
            r"(?m)^[ \t]*(?:[^\s:#]+|\*):(?:\d{1,5}|\*):[^\s:]+:[^\s:]+:"
            r"(?P<v>(?:[^\s:\\]|\\.){3,256})[ \t]*\r?$"
        ),
        ("v",),
        accept=lambda m: None if _HEXISH_RE.fullmatch(m.group(0).strip()) else "PASSWORD",
        needs=(":",),
    ),
    # ``.netrc``: ``machine host login user password secret`` (one line or several).
    _Rule(
        "PASSWORD",
        re.compile(
            r"(?i)\b(?:machine[ \t]+\S{1,253}|default)(?:\s+(?:login|account|port)\s+\S{1,256}){0,3}"
            r"\s+password\s+(?P<v>\S{1,256})"
        ),
        ("v",),
        ("machine", "default"),
        lambda m: (
            None
            if _PLACEHOLDER_RE.search(m.group("v")) or _NOT_A_SECRET_RE.match(m.group("v"))
            else "PASSWORD"
        ),
        needs=("password",),
    ),
    # More providers, by their documented prefixes (the list gitleaks and detect-secrets
    # keep): SendGrid, Mailchimp, npm, PyPI, Telegram, Discord, Square, Shopify,
    # DigitalOcean, Vault, Docker Hub, Hugging Face, Databricks, Grafana, Linear,
    # Postman, New Relic, Doppler, age, Twilio, Artifactory, Azure storage.
    *(
        _Rule(label, re.compile(pattern), triggers=triggers, token_shaped=True)
        for label, pattern, triggers in (
            ("API_KEY", r"(?<![\w.\-])SG\.[A-Za-z0-9_\-]{16,32}\.[A-Za-z0-9_\-]{16,64}", ("sg.",)),
            ("API_KEY", r"(?<![\w\-])[0-9a-f]{32}-us\d{1,2}(?![\w\-])", ("-us",)),
            ("TOKEN", r"(?<![\w\-])npm_[A-Za-z0-9]{36}(?![\w\-])", ("npm_",)),
            ("TOKEN", r"(?<![\w\-])pypi-AgE[A-Za-z0-9_\-]{40,}", ("pypi-age",)),
            ("TOKEN", r"(?<![\w:])\d{8,10}:AA[A-Za-z0-9_\-]{33}(?![\w\-])", (":aa",)),
            (
                "TOKEN",
                r"(?<![\w\-.])[MNO][A-Za-z0-9_\-]{23,25}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,38}(?![\w\-])",
                (".",),
            ),
            ("TOKEN", r"(?<![\w\-])sq0(?:atp|csp|idp)-[A-Za-z0-9_\-]{22,43}", ("sq0",)),
            ("TOKEN", r"(?<![\w\-])shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}(?![\w\-])", ("shp",)),
            ("TOKEN", r"(?<![\w\-])do[por]_v1_[a-f0-9]{64}(?![\w\-])", ("_v1_",)),
            ("TOKEN", r"(?<![\w\-.])hv[sb]\.[A-Za-z0-9_\-]{24,}", ("hvs.", "hvb.")),
            ("TOKEN", r"(?<![\w\-])dckr_pat_[A-Za-z0-9_\-]{20,}", ("dckr_pat_",)),
            ("TOKEN", r"(?<![\w\-])hf_[A-Za-z0-9]{30,}(?![\w\-])", ("hf_",)),
            ("TOKEN", r"(?<![\w\-])dapi[a-f0-9]{32}(?:-\d)?(?![\w\-])", ("dapi",)),
            (
                "TOKEN",
                r"(?<![\w\-])(?:glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|glc_[A-Za-z0-9+/]{32,}={0,2})",
                ("glsa_", "glc_"),
            ),
            ("API_KEY", r"(?<![\w\-])lin_api_[A-Za-z0-9]{40}(?![\w\-])", ("lin_api_",)),
            ("API_KEY", r"(?<![\w\-])PMAK-[a-f0-9]{24}-[a-f0-9]{34}(?![\w\-])", ("pmak-",)),
            ("API_KEY", r"(?<![\w\-])NRAK-[A-Z0-9]{27}(?![\w\-])", ("nrak-",)),
            (
                "TOKEN",
                r"(?<![\w\-.])dp\.(?:st|pt|ct|sa|scim|audit)\.[A-Za-z0-9_\-.]{40,}",
                ("dp.",),
            ),
            (
                "PRIVATE_KEY",
                r"(?<![\w\-])AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
                ("age-secret-key-",),
            ),
            ("API_KEY", r"(?<![\w\-])SK[0-9a-f]{32}(?![\w\-])", ("sk",)),
            ("API_KEY", r"(?<![\w\-])AKC[a-zA-Z0-9]{10,}(?![\w\-])", ("akc",)),
            # Error tracking, issue trackers, CI, OAuth client secrets, email APIs, infra.
            ("TOKEN", r"(?<![\w\-])sntry[su]_[A-Za-z0-9_\-+/=]{40,}", ("sntry",)),
            ("TOKEN", r"(?<![\w\-])hbp_[A-Za-z0-9]{30,}(?![\w\-])", ("hbp_",)),
            ("TOKEN", r"(?<![\w\-])AT(?:ATT|CTT)3[A-Za-z0-9_\-=]{40,}", ("atatt3", "atctt3")),
            ("TOKEN", r"(?<![\w\-])ATTA[a-fA-F0-9]{64}(?![\w\-])", ("atta",)),
            ("TOKEN", r"(?<![\w\-])lin_oauth_[a-f0-9]{32,}(?![\w\-])", ("lin_oauth_",)),
            ("TOKEN", r"(?<![\w\-])bkua_[a-f0-9]{40}(?![\w\-])", ("bkua_",)),
            ("TOKEN", r"(?<![\w\-])CCIP(?:AT|RJ)_[A-Za-z0-9_]{20,}", ("ccip",)),
            (
                "TOKEN",
                r"(?<![\w\-])(?:sbp|nfp|rnd|figd)_[A-Za-z0-9_\-]{30,}",
                ("sbp_", "nfp_", "rnd_", "figd_"),
            ),
            ("TOKEN", r"(?<![\w\-])pul-[a-f0-9]{40}(?![\w\-])", ("pul-",)),
            ("TOKEN", r"(?<![\w\-])dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}", ("dt0c01.",)),
            (
                "TOKEN",
                r"(?<![\w\-.])[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_\-=]{40,}",
                (".atlasv1.",),
            ),
            ("SECRET", r"(?<![\w\-])GOCSPX-[A-Za-z0-9_\-]{24,}", ("gocspx-",)),
            (
                "SECRET",
                r"(?<![\w\-.~])[A-Za-z0-9_\-.~]{3}\dQ~[A-Za-z0-9_\-.~]{31,34}(?![\w\-.~])",
                ("q~",),
            ),
            ("API_KEY", r"(?<![\w\-])key-[0-9a-zA-Z]{32}(?![\w\-])", ("key-",)),
            ("API_KEY", r"(?<![\w\-])[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8}(?![\w\-])", ("-",)),
            ("API_KEY", r"(?<![\w\-])x(?:keysib|smtpsib)-[a-f0-9]{64}-[A-Za-z0-9]{16}", ("sib-",)),
            ("API_KEY", r"(?<![\w\-])re_[A-Za-z0-9]{8}_[A-Za-z0-9]{20,}(?![\w\-])", ("re_",)),
            ("TOKEN", r"(?<![\w\-.])hvr\.[A-Za-z0-9_\-]{24,}", ("hvr.",)),
        )
    ),
    _Rule(
        "SECRET",
        re.compile(r"(?i)\b(?:AccountKey|SharedAccessKey|sig)=(?P<v>[A-Za-z0-9+/%]{20,}={0,2})"),
        ("v",),
        ("accountkey", "sharedaccesskey", "sig="),
    ),
    # AWS secret access keys: 40 base64 characters with "aws" or "secret" shortly
    # before. The key may start with ``/``, so the generic rule's path exemption
    # must not see it first.
    _Rule(
        "AWS_SECRET_KEY",
        re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"),
        triggers=("aws", "secret"),
        accept=_accept_aws_secret,
    ),
    # -- Generic secrets, named by their key: ``KEY = value`` in .env, YAML,
    #    JSON, TOML, INI, URL queries, ADO.NET strings, CLI ``--password=x``.
    #    The key must end right before the separator, and _label_for_key decides
    #    from its last word(s) whether it names a secret and which label.
    _Rule(
        "PASSWORD/API_KEY/SECRET/TOKEN/PRIVATE_KEY/AWS_SECRET_KEY",
        re.compile(
            rf"""(?ix)
            (?<![A-Za-z0-9_.\-])
            (?P<key>[A-Za-z0-9_.\-]*?{_KEYWORDS})
            (?P<sep>["']?[ \t]*(?:=>|:=|=|:)[ \t]*|["']?[ \t]+(?:is|was)[ \t]+(?=["'`]))
            (?:
                "(?P<vq>[^"\n]{{1,512}})"
              | '(?P<vs>[^'\n]{{1,512}})'
              | `(?P<vb>[^`\n]{{1,512}})`
              | (?P<vu>[^\s"'`&;,<>()\[\]{{}}]*[^\s"'`&;,<>()\[\]{{}}.!?:])
            )
            """
        ),
        ("vq", "vs", "vb", "vu"),
        _KEYWORD_TRIGGERS,
        _accept_keyed,
        anchored=True,
        needs=("=", ":", "is", "was"),
    ),
    # ``--password hunter2`` / ``--token abc123...`` (space instead of ``=``).
    _Rule(
        "PASSWORD/API_KEY/SECRET/TOKEN",
        re.compile(
            rf"(?i)(?<![\w-])--?(?P<key>[a-z\-]*(?:{_KEYWORDS}|pass(?:in|out)))[ \t]+"
            r"(?P<vu>[^\s\"'`$\-][^\s\"'`]*)"
        ),
        ("vu",),
        ("--",),
        _accept_keyed,
    ),
    # Short password flags of the clients that take one on the command line:
    # ``mysql -u root -phunter2``, ``sshpass -p s3cret ssh host``, ``docker login -p x``,
    # ``redis-cli -a x``. Only after the command's name, so ``docker run -p 8080:80`` and
    # ``mysql -P 3306`` (the port) stay, and ``mysql -p`` alone (a prompt) has no value;
    # and within that command: not past a shell separator (``&&``, ``;``, ``|`` before a
    # blank), nor, after ``docker login``, into the next docker command, so ``docker login
    # ghcr.io && docker run -p 8080:80`` keeps its port.
    _Rule(
        "PASSWORD",
        re.compile(
            r"""(?x)(?<![\w\-])
            (?:
                (?i:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)(?![\w\-])
                    (?:(?!(?:;|&&?|\|\|?)[ \t])[^\n]){0,200}?[ \t]-p(?=[^\s\-])
              | (?i:sshpass)(?![\w\-])(?:(?!(?:;|&&?|\|\|?)[ \t])[^\n]){0,80}?[ \t]-p[ \t]*(?=[^\s\-])
              | (?i:docker|podman|nerdctl)[ \t]+(?i:login)(?![\w\-])
                    (?:(?!(?:;|&&?|\|\|?)[ \t]|(?i:docker|podman|nerdctl)[ \t])[^\n]){0,200}?[ \t]-p[ \t]+
              | (?i:redis-cli)(?![\w\-])(?:(?!(?:;|&&?|\|\|?)[ \t])[^\n]){0,200}?[ \t]-a[ \t]+
            )
            (?:'(?P<vq>[^'\n]{1,256})'|"(?P<vd>[^"\n]{1,256})"|(?P<vu>[^\s"'`]{1,256}))
            """
        ),
        ("vq", "vd", "vu"),
        ("mysql", "mariadb", "sshpass", "docker", "podman", "nerdctl", "redis-cli"),
        lambda m: _accept_cli_password(m),
        needs=(" -p", "\t-p", " -a", "\t-a"),
    ),
    # More clients' password flags: ``ldapsearch … -w pw``, ``7z a -ppw``, ``zip -P pw``,
    # ``xfreerdp /p:pw``, ``cmdkey /pass:pw``.
    _Rule(
        "PASSWORD",
        re.compile(
            r"""(?x)(?<![\w\-])
            (?:
                (?i:ldap\w{0,12})(?![\w\-])(?:(?!(?:;|&&?|\|\|?)[ \t])[^\n]){0,300}?[ \t]-w[ \t]+
              | (?i:7z|7za|7zr|rar|unrar)(?![\w\-])(?:(?!(?:;|&&?|\|\|?)[ \t])[^\n]){0,200}?[ \t]-p(?=[^\s\-])
              | (?i:zip|unzip|zipcloak)(?![\w\-])(?:(?!(?:;|&&?|\|\|?)[ \t])[^\n]){0,200}?[ \t]-P[ \t]+
              | (?i:xfreerdp|wfreerdp|sdl-freerdp|cmdkey|wmic)(?![\w\-])(?:(?!(?:;|&&?|\|\|?)[ \t])[^\n]){0,300}?[ \t]/(?i:p|pass|password):
            )
            (?:'(?P<vq>[^'\n]{1,256})'|"(?P<vd>[^"\n]{1,256})"|(?P<vu>[^\s"'`]{1,256}))
            """
        ),
        ("vq", "vd", "vu"),
        ("ldap", "7z", "unrar", "rar a", "zip -", "zip ", "freerdp", "cmdkey", "wmic"),
        lambda m: _accept_cli_password(m),
        needs=(" -w", "\t-w", " -p", "\t-p", "/p"),
    ),
    # Any client given a user and a password on the command line: ``-u/-U/--user[name]
    # <user>`` and, within the same command, ``-p/-P/-pw/-w <password>`` (az, sqlcmd,
    # mongosh, cqlsh, mosquitto, ipmitool, psexec...), in either order. Ports (``-p 2222``),
    # port mappings, paths, ``$VAR`` and curl's own flags are left.
    _Rule(
        "PASSWORD",
        re.compile(
            r"""(?x)
            (?:
                (?<![\w\-])(?:-u|-U|--user|--username|-username|-user|--login)[ \t=]+(?:"[^"\n]{0,128}"|'[^'\n]{0,128}'|[^\s"'\-][^\s"']{0,127})
                (?:(?!(?:;|&&?|\|\|?)[ \t])[^\n]){0,200}?[ \t](?:-p|-P|-pw|-w)[ \t]+
              | [ \t](?:-p|-P|-pw)[ \t]+(?=(?:'[^'\n]{1,256}'|"[^"\n]{1,256}"|[^\s"'`]{1,256})
                (?:(?!(?:;|&&?|\|\|?)[ \t])[^\n]){0,200}?[ \t](?:-u|-U|--user|--username)[ \t=]+[^\s\-])
            )
            (?:'(?P<vq>[^'\n]{1,256})'|"(?P<vd>[^"\n]{1,256})"|(?P<vu>[^\s"'`]{1,256}))
            """
        ),
        ("vq", "vd", "vu"),
        accept=lambda m: _accept_user_password_flag(m),
        needs=(" -p", "\t-p", " -w", "\t-w"),
    ),
    # ``smbclient -U user%password`` (also rpcclient, smbmap, mount.cifs helpers).
    _Rule(
        "PASSWORD",
        re.compile(
            r"(?<![\w\-])(?:-U|--user(?:name)?)[ \t=]+[\"']?[^\s%\"']{1,128}%(?P<v>[^\s\"']{1,256})"
        ),
        ("v",),
        ("%",),
        needs=("-u",),
    ),
    # ``net user <name> <password>`` (Windows), not ``/add`` or ``*`` (a prompt).
    _Rule(
        "PASSWORD",
        re.compile(
            r"(?i)\bnet[ \t]+user[ \t]+(?:\"[^\"\n]{1,64}\"|[^\s/\"]{1,64})[ \t]+"
            r"(?:\"(?P<vd>[^\"\n]{1,256})\"|(?P<vu>[^\s/*\"][^\s]{0,255}))"
        ),
        ("vd", "vu"),
        ("net user", "net\tuser"),
        lambda m: _accept_cli_password(m),
    ),
    # ``htpasswd -b[c] file user password`` / ``htpasswd -nb user password``.
    _Rule("PASSWORD", None, triggers=("htpasswd",), finder=lambda t, _: _find_htpasswd(t)),
    # ``rabbitmqctl add_user|change_password|authenticate_user <user> <password>``.
    _Rule(
        "PASSWORD",
        re.compile(
            r"(?i)\brabbitmqctl\b[^\n]{0,120}?\b(?:add_user|change_password|authenticate_user)[ \t]+"
            r"(?:'[^'\n]{0,128}'|\"[^\"\n]{0,128}\"|[^\s'\"]{1,128})[ \t]+"
            r"(?:'(?P<vq>[^'\n]{1,256})'|\"(?P<vd>[^\"\n]{1,256})\"|(?P<vu>[^\s'\"]{1,256}))"
        ),
        ("vq", "vd", "vu"),
        ("rabbitmqctl",),
        lambda m: _accept_cli_password(m),
    ),
    # A password piped into ``--password-stdin`` (``echo 'pw' | docker login … --password-stdin``)
    # or fed by a here-string (``--password-stdin <<< 'pw'``).
    _Rule(
        "PASSWORD",
        re.compile(
            r"""(?x)
            (?:\b(?:echo|printf)(?:[ \t]+-[neE]{1,3})?(?:[ \t]+["']%s(?:\\n)?["'])?[ \t]+
                (?:'(?P<vq>[^'\n]{1,256})'|"(?P<vd>[^"\n]{1,256})"|(?P<vu>[^\s"'|;&]{1,256}))
                [ \t]*\|[^|\n]{0,200}?--password-stdin
              | --password-stdin[ \t]*<<<[ \t]*
                (?:'(?P<hq>[^'\n]{1,256})'|"(?P<hd>[^"\n]{1,256})"|(?P<hu>[^\s"']{1,256}))
            )
            """
        ),
        ("vq", "vd", "vu", "hq", "hd", "hu"),
        ("password-stdin",),
        lambda m: _accept_cli_password(m, ("vq", "vd", "vu", "hq", "hd", "hu")),
    ),
    # Credentials passed as a pair of string literals in code: ``auth=("user", "pw")``,
    # ``HTTPBasicAuth("u", "pw")``, ``smtp.login("u", "pw")``, ``NetworkCredential("u", "pw")``.
    _Rule(
        "PASSWORD",
        re.compile(
            r"""(?xi)\b(?:auth|basicauth|httpbasicauth|httpdigestauth|digestauth|proxyauth|login
                |authenticate|set_credentials|credentials|networkcredential
                |usernamepasswordcredentials|passwordauthentication)
            [ \t]*(?:=[ \t]*)?[(\[][ \t]*(?:"[^"\n]{0,128}"|'[^'\n]{0,128}')[ \t]*,[ \t]*
            (?:"(?P<vd>[^"\n]{1,256})"|'(?P<vs>[^'\n]{1,256})')
            """
        ),
        ("vd", "vs"),
        ("auth", "login", "credential"),
        lambda m: _accept_cli_password(m, ("vd", "vs")),
        needs=(",",),
    ),
    # SQL: ``IDENTIFIED BY 'pw'`` (Oracle, MySQL; ``IDENTIFIED WITH plugin BY``),
    # ``CREATE|ALTER USER|ROLE|LOGIN … PASSWORD 'pw'``, ``SET PASSWORD FOR u = 'pw'``.
    _Rule(
        "PASSWORD",
        re.compile(
            r"""(?xi)
            (?:\bidentified[ \t]+(?:with[ \t]+[\w'"`]{1,64}[ \t]+)?by[ \t]+(?:values[ \t]+|password[ \t]+)?
              | \b(?:create|alter)[ \t]+(?:user|role|login)\b[^\n;]{0,200}?\bpassword[ \t]*=?[ \t]*(?=N?['"])N?
              | \bset[ \t]+password\b[^\n;=]{0,120}=[ \t]*(?:password[ \t]*\([ \t]*)?(?=['"])
            )
            (?:'(?P<vs>[^'\n]{1,256})'|"(?P<vd>[^"\n]{1,256})"|(?P<vu>[^\s;'"()]{1,256}))
            """
        ),
        ("vs", "vd", "vu"),
        ("identified", "password"),
        lambda m: _accept_cli_password(m, ("vs", "vd", "vu")),
        needs=("identified", "'", '"'),
    ),
    # Cookies: in a ``Cookie`` / ``Set-Cookie`` header or ``curl -b/--cookie``, the values of
    # session and auth cookies, and any random-looking value.
    _Rule("TOKEN", None, triggers=("cookie", "-b "), finder=lambda t, taken: _find_cookies(t)),
    # ``<password>hunter2</password>`` in XML configs and SOAP bodies.
    _Rule(
        "PASSWORD/API_KEY/SECRET/TOKEN",
        re.compile(
            rf"(?i)<(?P<key>[A-Za-z0-9_.\-:]*{_KEYWORDS})>(?P<v>[^<>\n]{{1,512}})</(?P=key)>"
        ),
        ("v",),
        ("pass", "pwd", "secret", "token", "key"),
        _accept_xml,
    ),
    # .NET appSettings: ``<add key="DbPassword" value="hunter2" />``.
    _Rule(
        "PASSWORD/API_KEY/SECRET/TOKEN",
        re.compile(
            r"(?i)<add[ \t]+key[ \t]*=[ \t]*\"(?P<key>[^\"<>\n]{1,64})\"[ \t]+"
            r"value[ \t]*=[ \t]*\"(?P<v>[^\"<>\n]{1,512})\""
        ),
        ("v",),
        ("<add",),
        _accept_xml,
    ),
    # ``password:`` with the value alone on the next line (YAML block, a pasted note).
    _Rule(
        "PASSWORD/API_KEY/SECRET/TOKEN",
        re.compile(
            rf"""(?ix)
            (?<![A-Za-z0-9_.\-])
            (?P<key>[A-Za-z0-9_.\-]{{0,40}}?{_KEYWORDS_EXT})
            ["']?[ \t]*(?P<sep>[:=])[ \t]*(?:[|>][+\-]?[ \t]*)?\r?\n(?:[ \t]*\r?\n){{0,2}}[ \t]*["'`]?
            (?P<vu>[^\s"'`]{{4,200}}?)["'`]?[ \t]*(?=\r?\n|$)
            """
        ),
        ("vu",),
        (*_KEYWORD_TRIGGERS, "credential", "auth"),
        _accept_next_line,
        anchored=True,
        needs=("\n",),
    ),
    # A keyword, then the value after a space or a few words: ``requirepass s3cr3t``,
    # ``PGPASSWORD hunter22``, "the staging database password is Tr0ub4dor-xyz-77" (or
    # "is: Tr0ub4dor-xyz-77").
    _Rule(
        "PASSWORD/API_KEY/SECRET/TOKEN",
        re.compile(
            rf"""(?ix)
            (?<![A-Za-z0-9_.\-])
            (?P<key>[A-Za-z0-9_.\-]{{0,40}}?{_KEYWORDS_EXT})
            (?P<sep>
                (?:'s|’s)[ \t]+(?:(?:now|still)[ \t]+)?
              | [ \t]*[–—][ \t]*
              | [ \t]+-{{1,2}}[ \t]+
              | ,[ \t]+
              | [ \t]+(?:(?:[^\W\d_][\w\-'’]{{0,23}}+[ \t]++){{0,4}}?
                (?:(?:is|was|are|ist|lautet|war|est|était|etait|es|era|é|è|sono|são|sao|zijn)(?:[ \t]*[:=])?|=|:|to|->|→)[ \t]+
                (?:(?:now|still|just|currently|set[ ]to|changed[ ]to|reset[ ]to)[ \t]+)?)?)
            ["'`]?(?P<vu>[^\s"'`<>()\[\]{{}},;]{{3,199}}[^\s"'`<>()\[\]{{}},;.!?:])
            (?=["'`]?(?:[\s,;.!?:)\]}}]|$))
            """
        ),
        ("vu",),
        (*_KEYWORD_TRIGGERS, "credential", "auth"),
        _accept_spaced,
        anchored=True,
    ),
    # Recovery and backup codes: the list after "recovery codes", "backup codes"...
    _Rule(
        "SECRET",
        None,
        triggers=("recovery", "backup", "scratch", "emergency", "one-time", "one time"),
        finder=lambda t, taken: _find_recovery_codes(t),
    ),
    # The seed of an ``otpauth://`` URI, whatever its shape (base32 may hold no digit).
    _Rule(
        "SECRET",
        re.compile(r"(?i)otpauth://[^\s\"'<>]{0,512}?[?&]secret=(?P<v>[A-Za-z2-7]{8,}=*)"),
        ("v",),
        ("otpauth://",),
    ),
    # Columns read as columns: in a CSV, TSV, markdown or psql table whose header names a
    # password, PIN, token or secret column, that column's cells.
    _Rule(
        "PASSWORD/PIN/API_KEY/SECRET/TOKEN",
        None,
        triggers=_KEYWORD_TRIGGERS,
        finder=lambda t, taken: _find_table_columns(t),
        needs=("\n",),
    ),
    # Long random-looking tokens (base64, hex) shortly after a keyword.
    _Rule(
        "PASSWORD/API_KEY/SECRET/TOKEN",
        None,
        finder=lambda t, taken: _find_random_near_keyword(t, taken),
        token_shaped=True,
    ),
    # Random-looking values right after any key that does not name an identifier.
    _Rule(
        "SECRET",
        None,
        finder=lambda t, taken: _find_secret_after_key(t, taken),
        token_shaped=True,
    ),
    # -- PII.
    # US SSN: ddd-dd-dddd with the ranges the SSA never issues excluded.
    _Rule(
        "SSN",
        re.compile(r"(?<![\w\-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\w\-])"),
    ),
    # Cards: 13-19 digits, bare or in 4-4-4-4(-3) / 4-6-5 / 4-6-4 groups; kept
    # only with a known issuer prefix *and* a valid Luhn check digit.
    _Rule(
        "CREDIT_CARD",
        re.compile(
            r"(?<![\w\-.])(?:\d{13,19}|\d{4}([ \-])\d{4}\1\d{4}\1\d{1,4}(?:\1\d{1,3})?|\d{4}([ \-])\d{6}\2\d{4,5})(?![\w\-]|\.\d)"
        ),
        accept=_fixed("CREDIT_CARD", _is_card),
    ),
    # IBAN: a country code, two check digits and the account, bare or in groups of four;
    # kept only with the country's length and a valid mod-97 check.
    _Rule(
        "IBAN",
        re.compile(
            r"(?<![\w\-])[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]{4}){2,7}(?:[ ]?[A-Z0-9]{1,3})?(?![\w\-])"
        ),
        accept=_fixed("IBAN", _is_iban),
    ),
    # Email. Not after ``//`` (a URL's user@host) and not before ``:path``
    # (``git@github.com:org/repo.git`` is an SSH address, not a person).
    _Rule(
        "EMAIL",
        re.compile(
            r"(?<![A-Za-z0-9._%+\-/])[A-Za-z0-9][A-Za-z0-9._%+\-]*@[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,24}(?![.\-]?\w)(?!:[\w~/])(?!@)"
        ),
        triggers=("@",),
    ),
    # Phones: see the module docstring for why only these shapes.
    _Rule(
        "PHONE",
        re.compile(
            r"""(?x)
            (?<![\w+.])\+[1-9]\d{0,2}
            (?:
                (?:[ .\-]?\(\d{1,4}\)        # +44 (0)20 ..., +1 (415) ...
                | [ .\-]\d{1,8}(?!\d)         # separated groups, each a whole digit run,
                | (?<=\))\d{1,8}(?!\d)        # so a decimal such as +1.41421356 never fits
                ){2,5}
              | \d{7,14}(?!\d)                # compact E.164: +14155550143
            )
            (?![\w\-+]|\.\d)
            """
        ),
        triggers=("+",),
        accept=_fixed("PHONE", _is_intl_phone),
    ),
    _Rule(
        "PHONE",
        re.compile(
            r"(?<![\w\-.+(])(?:\([2-9]\d{2}\)[ ]?[2-9]\d{2}-\d{4}|[2-9]\d{2}([\-.])[2-9]\d{2}\1\d{4})"
            r"(?![\w\-]|\.\d)"
        ),
    ),
    # Secrets hidden in base64: a run that decodes to printable text in which a rule
    # above finds a secret is replaced whole (``cGFzc3dvcmQ9aHVudGVyMg==``).
    _Rule(
        "(label of the decoded secret)",
        None,
        finder=lambda t, taken: _find_base64_secrets(t, taken),
        token_shaped=True,
    ),
)


class Redactor:
    """Replaces secrets and PII in text and JSON-like values.

    Stateless and cheap to share: build one per application (the patterns are
    compiled once, at import).
    """

    def redact(self, text: str) -> RedactionResult:
        """Replace every secret and PII value in ``text``.

        Args:
            text: Any text: prose, a log line, a config file, a curl command.

        Returns:
            The text with each value replaced by ``[LABEL:REDACTED]`` and the
            number of replacements per label. Redacting an already redacted
            text changes nothing.
        """
        counts: dict[str, int] = {}
        # A replacement can expose a neighbour that the first pass skipped
        # because it was glued to the secret (``ghp_...U+44 20 7946 0958``);
        # a second pass catches it, and makes redaction idempotent.
        # Only a replacement glued to a word character can expose something new, so
        # the second pass is skipped when every replacement stands apart.
        for _ in range(_MAX_PASSES):
            text, found, glued = _redact_once(text)
            if not found:
                break
            _add(counts, found)
            if not glued:
                break
        return RedactionResult(text, counts)

    def redact_json(self, obj: JSONValue) -> tuple[JSONValue, dict[str, int]]:
        """Redact a JSON-like value (dicts, lists, scalars), keys and values at any depth,
        without mutating it.

        * String values are redacted as text.
        * Keys are redacted as text too (a key can be a secret: ``{"ghp_...": 1}``); when
          two keys end up the same, the later one gets a `` (2)`` suffix, so nothing is
          lost.
        * A value whose key names a secret (``password``, ``api_key``, ``accessToken``,
          ``client_secret``...) is replaced whole, whatever its shape:
          ``{"password": "hunter2"}`` becomes ``{"password": "[PASSWORD:REDACTED]"}``; an
          object or list under such a key has every scalar leaf replaced
          (``{"password": {"v": "..."}}``).

        Args:
            obj: A value as produced by ``json.loads``; tuples are treated as lists.

        Returns:
            The redacted copy and the number of replacements per label.
        """
        counts: dict[str, int] = {}
        return self._walk(obj, counts, None), counts

    def _walk(self, obj: JSONValue, counts: dict[str, int], secret: str | None) -> JSONValue:
        if isinstance(obj, str):
            if secret is not None and _is_whole_secret(obj):
                counts[secret] = counts.get(secret, 0) + 1
                return placeholder(secret)
            result = self.redact(obj)
            _add(counts, result.counts)
            return result.text
        if isinstance(obj, dict):
            out: dict[str, JSONValue] = {}
            named = _pair_label(obj)
            for key, value in obj.items():
                text_key = key if isinstance(key, str) else str(key)
                label = _label_for_key(_plain_key(text_key)) or secret
                if named is not None and _key_words(_plain_key(text_key))[-1:] == ("value",):
                    label = label or named
                new_key = self.redact(text_key)
                _add(counts, new_key.counts)
                name = new_key.text
                n = 2
                while name in out:
                    name = f"{new_key.text} ({n})"
                    n += 1
                if (
                    label is None
                    and isinstance(value, str)
                    and generic_secret(value.strip())
                    and not _is_id_key(_plain_key(text_key))
                ):
                    # A random-looking value under a key that names no identifier.
                    out[name] = placeholder("SECRET")
                    counts["SECRET"] = counts.get("SECRET", 0) + 1
                elif label is not None and not isinstance(value, dict | list | tuple):
                    if _is_whole_secret(value):
                        out[name] = placeholder(label)
                        counts[label] = counts.get(label, 0) + 1
                    else:
                        out[name] = self._walk(value, counts, None)
                else:
                    out[name] = self._walk(value, counts, label)
            return out
        if isinstance(obj, list | tuple):
            return [self._walk(item, counts, secret) for item in obj]
        if secret is not None and _is_whole_secret(obj):
            counts[secret] = counts.get(secret, 0) + 1
            return placeholder(secret)
        return obj


def _pair_label(obj: Mapping[str, JSONValue]) -> str | None:
    """The secret a name/value pair names in its name: ``{"name": "DB_PASSWORD", "value":
    "…"}`` (Kubernetes env), ``{"Key": "password", "Value": "…"}`` (AWS tags),
    ``{"ParameterKey": "ApiToken", "ParameterValue": "…"}``. None when it names none."""
    for key, value in obj.items():
        if isinstance(key, str) and isinstance(value, str) and len(value) <= 200:
            if _key_words(_plain_key(key))[-1:] in (("name",), ("key",)):
                label = _label_for_key(_plain_key(value))
                if label is not None:
                    return label
    return None


def _plain_key(key: str) -> str:
    """A key as the rules read it: NFKC, no zero-width characters, ``%XX`` decoded."""
    view = normalised_view(key)
    return view.view if view is not None else key


def _is_whole_secret(value: JSONValue) -> bool:
    """A scalar under a secret-naming key that is worth replacing."""
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, int | float):
        return True  # a numeric PIN or password is still one
    if isinstance(value, str):
        stripped = value.strip()
        if not stripped or _PLACEHOLDER_RE.fullmatch(stripped):
            return False
        # A random-looking value is a secret even when it is shaped like a path
        # (AWS secret keys may start with ``/``).
        return not _NOT_A_SECRET_RE.match(stripped) or looks_random(stripped)
    return False


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for label, n in more.items():
        into[label] = into.get(label, 0) + n


def _value_span(m: re.Match[str], groups: Iterable[str]) -> tuple[int, int] | None:
    names = tuple(groups)
    if not names:
        return m.span()
    for name in names:
        if m.group(name) is not None and m.start(name) != m.end(name):
            return m.span(name)
    return None


_MAX_PASSES = 3


# --------------------------------------------------------------------------
# Finders: rules written as a scan, so that their cost stays linear.
# --------------------------------------------------------------------------

# PEM armour (five dashes), and SSH.com's (``---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----``).
_PEM_BEGIN_RE = re.compile(
    r"(?P<dashes>-----|---- )BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?(?:-----| ----)"
)
_PEM_CUT_RE = re.compile(
    r"(?:[ \t\r\n]|\\n){0,16}(?P<cut>[A-Za-z0-9+/=]{16,}(?:(?:[ \t\r\n]|\\n){1,8}[A-Za-z0-9+/=]{16,})*)"
)
_PEM_TRIM = " \t\r\n"


def _trim_span(text: str, start: int, end: int) -> tuple[int, int]:
    """Shrink ``[start, end)`` past whitespace and literal ``\\n`` on both sides."""
    while start < end:
        if text[start] in _PEM_TRIM:
            start += 1
        elif text.startswith("\\n", start):
            start += 2
        else:
            break
    while end > start:
        if text[end - 1] in _PEM_TRIM:
            end -= 1
        elif end - 2 >= start and text[end - 2 : end] == "\\n":
            end -= 2
        else:
            break
    return start, end


def _find_private_keys(text: str) -> Iterable[tuple[int, int, str]]:
    """Bodies of PEM private keys: up to the next ``-----END``, or, with no END line, the
    run of base64 lines that follows. The next END is looked up once and reused by every
    BEGIN before it, so a text of many BEGIN lines costs one pass (the single regex this
    replaces was cubic on ``BEGIN`` followed by spaces)."""
    next_ends = {"-----END": -2, "---- END": -2}
    trimmed_end: dict[int, int] = {}
    for m in _PEM_BEGIN_RE.finditer(text):
        body = m.end()
        marker = "-----END" if m.group("dashes") == "-----" else "---- END"
        next_end = next_ends[marker]
        if next_end != -1 and next_end < body:
            next_end = next_ends[marker] = text.find(marker, body)
        if next_end != -1:
            end = trimmed_end.get(next_end)
            if end is None:
                end = _trim_span(text, body, next_end)[1]
                trimmed_end[next_end] = end
            start = body
            while start < end and (text[start] in _PEM_TRIM or text.startswith("\\n", start)):
                start += 2 if text[start] == "\\" else 1
            if start < end:
                yield start, end, "PRIVATE_KEY"
            continue
        cut = _PEM_CUT_RE.match(text, body)
        if cut is not None:
            yield cut.start("cut"), cut.end("cut"), "PRIVATE_KEY"


_LONG_TOKEN_RE = re.compile(r"(?<![A-Za-z0-9+/_\-=])[A-Za-z0-9+/_\-=]{16,}")
_NEAR_KEYWORD_RE = re.compile(
    r"(?i)(pass(?:word|wd|phrase)?|pwd|secret|token|api[ _-]?key|key|credentials?|auth)(?![a-z])"
)
# Words that say a long hex or base64 string is a hash, an id or a public value.
_PUBLIC_VALUE_RE = re.compile(
    r"(?i)\b(?:commit|commits|sha\d*|hash|digest|checksum|revision|rev|fingerprint|etag|id|ids"
    r"|uuid|build|image|tag|version|merge|cherry-picked|ref|blob|tree|request[ _-]id|trace"
    r"|ssh-(?:rsa|dss|ed25519|ed448)|ecdsa-sha2-[a-z0-9]+|sk-(?:ssh|ecdsa)-[a-z0-9@.\-]+)\b"
)
_KEYWORD_LABELS = (
    ("pass", "PASSWORD"),
    ("pwd", "PASSWORD"),
    ("secret", "SECRET"),
    ("credential", "SECRET"),
    ("token", "TOKEN"),
    ("auth", "TOKEN"),
    ("key", "API_KEY"),
)


def _find_random_near_keyword(text: str, taken: _Taken) -> Iterable[tuple[int, int, str]]:
    """Random-looking tokens (see :func:`looks_random`) at most 80 characters after a
    keyword on the same line, unless a word such as "commit", "sha" or "id" stands
    between them (``key rotation landed in commit 9f86d081...``)."""
    # A run of random tokens after one keyword (``key: part1.part2.part3``) is one chain:
    # each token within 80 characters of the previous one on the line is taken too, so
    # the result does not depend on how far the last keyword is once earlier parts have
    # been replaced (redaction stays idempotent).
    chain_end, chain_label = -1, ""

    def judge(start: int, token: str) -> str | None:
        """The label ``token`` gets (None: not a secret), and the chain it leaves."""
        nonlocal chain_end, chain_label
        if not looks_random(token):
            return None
        # The value of an id-like key (``"node_id": "…"``, ``etag: …``, ``NextToken=…``)
        # is an identifier, whatever keyword stands earlier on the line.
        key = _key_context(text, start)
        if key is not None and _is_id_key(key):
            return None
        lo = max(0, start - 80)
        newline = text.rfind("\n", lo, start)
        if chain_end >= lo and (newline < 0 or newline < chain_end):
            chain_end = start + len(token)
            return chain_label
        before = text[(newline + 1 if newline >= 0 else lo) : start]
        last = None
        for last in _NEAR_KEYWORD_RE.finditer(before):  # noqa: B007 - the last one counts
            pass
        if last is None or _PUBLIC_VALUE_RE.search(before, last.end()):
            return None
        word = last.group(1).lower()
        label = next(lab for prefix, lab in _KEYWORD_LABELS if prefix in word)
        chain_end, chain_label = start + len(token), label
        return label

    # A token an earlier rule has taken cannot be yielded; it matters only through the
    # chain it may extend, so it is judged (looks_random is the cost) only when a later
    # token that can still be yielded needs the chain: a text whose every token another
    # rule took ("token Ab1Cd2...", repeated) costs no judgement at all.
    pending: list[tuple[int, str]] = []
    for m in _LONG_TOKEN_RE.finditer(text):
        token = m.group().rstrip("-_")
        start, end = m.start(), m.start() + len(token)
        if taken.overlaps(start, end):
            pending.append((start, token))
            continue
        for earlier in pending:
            judge(*earlier)
        pending.clear()
        label = judge(start, token)
        if label is not None:
            yield start, end, label


# Where a value starts right after a key, read backwards from the value (the window before
# it, reversed, so the match is one anchored attempt): ``key=``, ``"key": "``, ``key => ``,
# ``Header-Name: ``, ``--flag ``, ``-flag ``, ``<tag>``, ``<tag attr="x">``, with an optional
# auth scheme (``Authorization: Bearer ``) between.
_REV_CONTEXT_RE = re.compile(
    r"""(?x)
    (?:[ \t]+(?:reraeB|cisaB|nekoT|toB|tsegiD|yeKipA|yeK|SWSS))?
    ["'`]?
    (?:
        [ \t]*(?:>=|=:|=|:)[ \t]*["'\]]?(?P<key>[\w.\-$@]{1,64})
      | [ \t]+(?P<flag>[\w\-]{0,40}[A-Za-z])-{1,2}(?=[ \t]|$)
      | >(?:[^<>\n]{0,160}?[ \t])?(?P<tag>[\w.\-]{1,64})(?::[\w.\-]{1,32})?<
    )
    """
)
_CONTEXT_END_CHARS = frozenset("\"'` \t=:>")
_CONTEXT_WINDOW = 240


def _key_context(text: str, start: int) -> str | None:
    """The key, flag or tag name a value starting at ``start`` stands right after, or None."""
    if start == 0 or text[start - 1] not in _CONTEXT_END_CHARS:
        return None
    lo = max(0, start - _CONTEXT_WINDOW)
    newline = text.rfind("\n", lo, start)
    window = text[newline + 1 if newline >= 0 else lo : start][::-1]
    m = _REV_CONTEXT_RE.match(window)
    if m is None:
        return None
    key = m.group("key") or m.group("flag") or m.group("tag") or ""
    return key[::-1] or None


_VALUE_TOKEN_RE = re.compile(r"(?<![A-Za-z0-9+/_\-.~%])[A-Za-z0-9+/_\-.~]{16,}={0,3}")


def _find_secret_after_key(text: str, taken: _Taken) -> Iterable[tuple[int, int, str]]:
    """A random-looking value (see :func:`generic_secret`) right after any key-like context
    (a JSON or YAML key, ``KEY=``, a header name, a CLI flag, an XML tag) whose key does not
    name an identifier (``*_id``, ``sha``, ``etag``, ``integrity``, ``cursor``...)."""
    for m in _VALUE_TOKEN_RE.finditer(text):
        start = m.start()
        if not start or text[start - 1] not in _CONTEXT_END_CHARS:
            continue  # the cheap test first: no separator, no key before it
        token = m.group().rstrip(".")
        end = start + len(token)
        if taken.overlaps(start, end) or text[end : end + 1] in ("@", ":"):
            continue
        key = _key_context(text, start)
        if key is None:
            continue
        label = _label_for_key(key)
        if label is not None:
            # A key that names a secret and that the key-value rules did not read as one
            # (``private_key_id``, a key ending a longer name).
            if _value_is_secret(label, key, token, quoted=True, sep="", tail=""):
                yield start, end, label
        elif not _is_id_key(key) and generic_secret(token):
            yield start, end, "SECRET"


_RECOVERY_RE = re.compile(
    r"(?i)\b(?:(?:recovery|backup|scratch|emergency|one[ -]time)[ _-]?codes?|recovery[ _-]?keys?)\b"
    r"(?:[^\n:=]{0,40}?[:=])?"
)
_RECOVERY_CODE_RE = re.compile(
    r"(?:[ \t]*(?:\r?\n[ \t]*(?:[-*•]|\d{1,2}[.)])?)?[ \t,;]*)"
    r"(?P<c>[A-Za-z0-9]{4,12}(?:[- ][A-Za-z0-9]{4,12})?)(?![\w\-])"
)


def _find_recovery_codes(text: str) -> Iterable[tuple[int, int, str]]:
    """The codes listed after "recovery codes", "backup codes", "scratch codes"...: up to 32
    codes of 4 to 12 letters and digits (``1a2b3-c4d5e``, ``8207 5561``), each with a digit,
    on the same line or as a list below; the list ends at the first word that is no code."""
    for m in _RECOVERY_RE.finditer(text):
        pos = m.end()
        for _ in range(32):
            code = _RECOVERY_CODE_RE.match(text, pos)
            if code is None or not _HAS_DIGIT_RE.search(code.group("c")):
                break
            value = code.group("c")
            if _VERSION_RE.fullmatch(value) or _PLACEHOLDER_RE.search(value):
                break
            yield code.start("c"), code.end("c"), "SECRET"
            pos = code.end()


_TABLE_DELIMITERS = ("\t", "|", ";", ",")
_TABLE_RULE_CHARS = frozenset("-|:+= \t")
_CELL_RES = {
    d: re.compile(rf'[ \t]*(?:"(?:[^"\n]|"")*"|[^{re.escape(d)}\n]*)') for d in _TABLE_DELIMITERS
}
_CELL_STRIP = " \t\"'`*_"


def _cells(text: str, start: int, end: int, delim: str) -> list[tuple[int, int]]:
    """The cell spans of the row ``text[start:end]`` split on ``delim`` (CSV quotes kept
    together), each trimmed of blanks and quotes."""
    spans: list[tuple[int, int]] = []
    pos = start
    cell_re = _CELL_RES[delim]
    while True:
        m = cell_re.match(text, pos, end)
        a, b = (m.start(), m.end()) if m is not None else (pos, pos)
        while a < b and text[a] in _CELL_STRIP:
            a += 1
        while b > a and text[b - 1] in _CELL_STRIP:
            b -= 1
        spans.append((a, b))
        pos = m.end() if m is not None else pos
        if pos >= end or text[pos] != delim:
            return spans
        pos += 1


def _find_table_columns(text: str) -> Iterable[tuple[int, int, str]]:
    """A header row (a line with a tab, ``|``, ``;`` or ``,`` between cells) with a cell
    that names a secret (``password``, ``PIN``, ``api_token``...: see _label_for_key); the
    rows below it with as many cells, up to a blank line or a line without the delimiter;
    in each, the cell of that column, judged as a value under that key. Each line is read
    once: a header's rows are skipped by the keyword scan."""
    done = 0
    for km in _KEYWORD_END_RE.finditer(text):
        if km.start() < done:
            continue
        line_start = text.rfind("\n", 0, km.start()) + 1
        line_end = text.find("\n", km.end())
        line_end = len(text) if line_end < 0 else line_end
        done = line_end
        delim = next((d for d in _TABLE_DELIMITERS if d in text[line_start:line_end]), None)
        if delim is None:
            continue
        header = _cells(text, line_start, line_end, delim)
        columns = [
            (i, label, text[a:b])
            for i, (a, b) in enumerate(header)
            # (Not a cell that holds a replaced secret: masked, it could name a column on the
            # next pass that it did not name on this one.)
            if b - a <= 64
            and "\x00" not in text[a:b]
            and (label := _label_for_key(text[a:b])) is not None
        ]
        if not columns or len(header) < 2:
            continue
        pos = line_end + 1
        while pos < len(text):
            row_end = text.find("\n", pos)
            row_end = len(text) if row_end < 0 else row_end
            row = text[pos:row_end]
            if not row.strip():
                break
            if set(row) <= _TABLE_RULE_CHARS:  # a markdown or psql rule line
                pos = row_end + 1
                continue
            if delim not in row:
                break
            cells = _cells(text, pos, row_end, delim)
            if len(cells) != len(header):
                break
            for i, label, key in columns:
                a, b = cells[i]
                value = text[a:b]
                if value and _value_is_secret(label, key, value, quoted=True, sep="", tail=""):
                    yield a, b, label
            pos = row_end + 1
        done = max(done, pos)


_B64_RUN_RE = re.compile(r"(?<![A-Za-z0-9+/=_\-])[A-Za-z0-9+/]{16,}={0,2}(?![A-Za-z0-9+/=_\-])")
_B64_MAX_CHARS = 8192
_PRINTABLE_BYTES = bytes([9, 10, 13, *range(32, 127)])


def _find_base64_secrets(text: str, taken: _Taken) -> Iterable[tuple[int, int, str]]:
    """Base64 runs that decode to printable text holding a secret; the run is replaced
    whole, with the label of the first secret inside. One level deep: decoded text is
    scanned by the other rules, not decoded again. A run an earlier rule has taken (in
    part) could not be yielded, so it is not decoded."""
    for m in _B64_RUN_RE.finditer(text):
        run = m.group()
        if len(run) > _B64_MAX_CHARS or len(run) % 4 == 1 or taken.overlaps(*m.span()):
            continue
        try:
            raw = base64.b64decode(run + "=" * (-len(run) % 4), validate=True)
        except (binascii.Error, ValueError):
            continue
        if not raw or len(raw) - len(raw.translate(None, _PRINTABLE_BYTES)) < 0.95 * len(raw):
            continue
        found = _scan(raw.decode("ascii", "replace"), decode_base64=False)
        if found:
            yield m.start(), m.end(), found[0][2]


# --------------------------------------------------------------------------
# The scan.
# --------------------------------------------------------------------------


# The end of a secret keyword, as the last word of a key (``DB_PASSWORD``, ``apiKey``).
_KEYWORD_END_RE = re.compile(
    r"(?i)(?:pass(?:word|wd|phrase)?|pwd|pw|secret|token|api[ _-]?key|key|privkey|credentials?"
    rf"|masterauth|authpass|{_INTL_KEYWORDS})(?![A-Za-z0-9_.\-])"
)
_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_MAX_KEY_CHARS = 64


def _keyword_starts(text: str) -> list[int]:
    """Where the keys that end in a secret keyword start: the beginning of the run of key
    characters before each keyword (at most 64 back), in order, once each."""
    out: list[int] = []
    for m in _KEYWORD_END_RE.finditer(text):
        start = m.start()
        floor = max(0, start - _MAX_KEY_CHARS)
        while start > floor and text[start - 1] in _KEY_CHARS:
            start -= 1
        if not out or out[-1] != start:
            out.append(start)
    return out


def _anchored_matches(
    pattern: re.Pattern[str], text: str, starts: list[int]
) -> Iterable[re.Match[str]]:
    """``pattern`` matched at each key start, with ``finditer``'s rule that a match (even
    one the rule then rejects) hides the starts inside it: each character is read once."""
    floor = 0
    for start in starts:
        if start < floor:
            continue
        m = pattern.match(text, start)
        if m is not None:
            floor = max(m.end(), start + 1)
            yield m


def _present_triggers(lowered: str, long_run: bool = True) -> set[str]:
    """The rule triggers that occur in ``lowered``: one substring search per trigger
    (each a fast C scan), cheaper than one regex trying every trigger at every position.
    Without a long run of token characters, the provider tokens' triggers are skipped."""
    present = {t for t in _TRIGGERS if t in lowered}
    if long_run:
        # Grouped by their first two characters: one search per group, then its members.
        for head, group in _TOKEN_TRIGGER_GROUPS:
            if head in lowered:
                present.update(t for t in group if t in lowered)
    return present


# A run of token characters that every provider token's match holds.
_LONG_RUN_RE = re.compile(r"[A-Za-z0-9_\-+/=.~]{12}")


class _Taken:
    """Non-overlapping spans, sorted, with an O(log n) overlap test."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def overlaps(self, start: int, end: int) -> bool:
        i = bisect.bisect_right(self.starts, start)
        if i and self.ends[i - 1] > start:
            return True
        return i < len(self.starts) and self.starts[i] < end

    def add(self, start: int, end: int) -> None:
        i = bisect.bisect_right(self.starts, start)
        self.starts.insert(i, start)
        self.ends.insert(i, end)


def _scan(text: str, *, decode_base64: bool = True) -> list[tuple[int, int, str]]:
    """Run the rule table over ``text``; sorted, non-overlapping ``(start, end, label)``."""
    taken = _Taken()
    # Placeholders already in the text are taken first, so nothing wraps them, and masked
    # (same length), so that the words in them ("[API_KEY:REDACTED]") are no keywords.
    if ":REDACTED]" in text:
        for m in _PLACEHOLDER_RE.finditer(text):
            taken.add(*m.span())
        text = _PLACEHOLDER_RE.sub(lambda m: "\x00" * len(m.group()), text)
    lowered = text.lower()
    long_run = _LONG_RUN_RE.search(text) is not None
    present = _present_triggers(lowered, long_run)
    found: list[tuple[int, int, str]] = []
    starts: list[int] | None = None
    for rule in _RULES:
        if rule.token_shaped and not long_run:
            continue
        if rule.triggers and present.isdisjoint(rule.triggers):
            continue
        if rule.needs and not any(n in lowered for n in rule.needs):
            continue
        if rule.finder is not None:
            if not decode_base64 and rule.finder is _RULES[-1].finder:
                continue
            for start, end, label in rule.finder(text, taken):
                if start < end and not taken.overlaps(start, end):
                    taken.add(start, end)
                    found.append((start, end, label))
            continue
        assert rule.pattern is not None
        if rule.anchored:
            if starts is None:
                starts = _keyword_starts(text)
            matches: Iterable[re.Match[str]] = _anchored_matches(rule.pattern, text, starts)
        else:
            matches = rule.pattern.finditer(text)
        for match in matches:
            span = _value_span(match, rule.groups)
            if span is None or span[0] == span[1]:
                continue
            if taken.overlaps(*span):
                continue
            accepted = rule.accept(match) if rule.accept else rule.label
            if accepted is None:
                continue
            taken.add(*span)
            found.append((span[0], span[1], accepted))
    found.sort()
    return found


_TRIGGERS: frozenset[str] = frozenset(
    t for rule in _RULES if not rule.token_shaped for t in rule.triggers
)
_TOKEN_TRIGGERS: frozenset[str] = (
    frozenset(t for rule in _RULES if rule.token_shaped for t in rule.triggers) - _TRIGGERS
)
_TOKEN_TRIGGER_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    (head, tuple(sorted(t for t in _TOKEN_TRIGGERS if t[:2] == head)))
    for head in sorted({t[:2] for t in _TOKEN_TRIGGERS})
)


def _redact_once(text: str) -> tuple[str, dict[str, int], bool]:
    """One scan of the rule table over ``text``; see the module docstring.

    The rules read the normalised view (NFKC, no zero-width characters, ``%XX`` decoded;
    see redaction_normalize); spans found there are mapped back, and the original text is
    kept as written around them.
    """
    if not text:
        return text, {}, False
    views: list[TextView | None] = [normalised_view(text)]
    if PERCENT_RE.search(text):
        views.append(normalised_view(text, decode_percent=True))
    spans: list[tuple[int, int, str]] = []
    for view in views:
        for start, end, label in _scan(view.view if view is not None else text):
            if view is not None:
                start, end = view.original_span(start, end)
            spans.append((start, end, label))
    if not spans:
        return text, {}, False
    # Spans from two views, or two view spans from one original character, may overlap:
    # merge them, keeping the first label.
    spans.sort()
    found: list[tuple[int, int, str]] = []
    for start, end, label in spans:
        if found and start < found[-1][1]:
            prev = found.pop()
            found.append((prev[0], max(prev[1], end), prev[2]))
        else:
            found.append((start, end, label))
    parts: list[str] = []
    counts: dict[str, int] = {}
    pos = 0
    glued = False
    for start, end, label in found:
        parts.append(text[pos:start])
        parts.append(placeholder(label))
        counts[label] = counts.get(label, 0) + 1
        glued = (
            glued
            or _GLUE_RE.match(text, end) is not None
            or (start > 0 and _GLUE_RE.match(text, start - 1) is not None)
            or _DIGIT_GROUP_AFTER_RE.match(text, end) is not None
            or (start > 1 and _DIGIT_GROUP_BEFORE_RE.match(text, start - 2) is not None)
        )
        pos = end
    parts.append(text[pos:])
    return "".join(parts), counts, glued or _token_moved_closer(text, found)


def _token_moved_closer(text: str, found: list[tuple[int, int, str]]) -> bool:
    """Whether a replacement shorter than its secret stands before a long token that was
    left alone on the same line. The keyword rule measures 80 characters back from a
    token, so such a token is now nearer its keyword and the next pass may take it
    (``token: <secret> ... userghp_...``). One pass over the long tokens."""
    shrunk_line_end = -1  # the end of the line holding the last shrinking replacement
    i = 0
    for m in _LONG_TOKEN_RE.finditer(text):
        start = m.start()
        while i < len(found) and found[i][1] <= start:
            f_start, f_end, label = found[i]
            if f_end - f_start > len(placeholder(label)) and f_end > shrunk_line_end:
                newline = text.find("\n", f_end)
                shrunk_line_end = len(text) if newline < 0 else newline
            i += 1
        if i < len(found) and found[i][0] < m.end():
            continue  # inside or across a replacement
        if start < shrunk_line_end:
            return True
    return False


# A character that can continue a token: next to a replacement, it may start or end a
# secret the first pass could not see.
_GLUE_RE = re.compile(r"[A-Za-z0-9_\-+/=%@:]")
# Digit groups split by a space, dot or dash (phones, cards, SSNs): a replacement that
# took the last group of one (``+44 20 7946 0958=<key>``) leaves the shorter number
# beside it, which the next pass may take.
_DIGIT_GROUP_BEFORE_RE = re.compile(r"\d[ .\-]")
_DIGIT_GROUP_AFTER_RE = re.compile(r"[ .\-]\d")


REDACTOR = Redactor()
"""The process's one redactor (stateless; its patterns are compiled at import)."""
