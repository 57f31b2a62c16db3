"""Redaction, the values: what a secret value looks like (randomness, entropy, password and
token shapes, what is no secret: versions, ids, hashes, paths) and the PII validators
(Luhn for cards, IBAN lengths, international phones)."""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from functools import lru_cache
from itertools import repeat

from service.domain.redaction.keys import PLACEHOLDER_RE, key_words

# Values that sit where a secret would but are not one: templating and env
# references, booleans, type names, paths, obvious placeholders. Redacting them
# would only add noise to the counts.
NOT_A_SECRET_RE = re.compile(
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


HAS_DIGIT_RE = re.compile(r"\d")


_MIXED_CASE_RE = re.compile(r"[a-z].*[A-Z]|[A-Z].*[a-z]")


_WORDISH_RE = re.compile(r"[A-Za-z_]+")


_CAMEL_CASE_RE = re.compile(r"[A-Z][a-z0-9]+[A-Z]")


_IDENTIFIER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


LINE_TAIL_OK_RE = re.compile(r"[ \t]*(?:$|[,}\]\r\n#])")


def value_is_secret(
    label: str, key: str, value: str, *, quoted: bool, sep: str, tail: str
) -> bool:
    """Judge a value found after a key that names a secret.

    Quoted values are taken at their word: a string literal under a secret key
    is a secret. Unquoted ones need care, because source code is full of
    ``self.password = password`` and ``api_key: str``.
    """
    if PLACEHOLDER_RE.search(value):
        return False
    if NOT_A_SECRET_RE.match(value) and not (
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
        words = key_words(key)
        if words and _IDENTIFIER_RE.fullmatch(value) and words[-1] in value.lower():
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
        return pin_like(value)
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
            return bool(LINE_TAIL_OK_RE.match(tail)) and not _CAMEL_CASE_RE.search(value)
        return True
    # Keys, tokens and secrets are random strings: at least 8 chars, and a digit
    # (unquoted: identifiers such as ``CertificateIssuerPrivateKeyTypes`` have
    # mixed case too) or, in quotes, mixed case. ``token: expired`` stays.
    if len(value) < 8 or any(map(str.isspace, value)):
        return False
    if HAS_DIGIT_RE.search(value):
        return True
    return quoted and bool(_MIXED_CASE_RE.search(value))


_PIN_RE = re.compile(r"\d{4,12}|(?=[A-Za-z]*\d)(?=\d*[A-Za-z])[A-Za-z0-9]{4,12}")


def pin_like(value: str) -> bool:
    """A PIN or passcode: 4 to 12 digits, or 4 to 12 letters and digits with both."""
    return _PIN_RE.fullmatch(value) is not None


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


def is_card(text: str) -> bool:
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


def is_iban(text: str) -> bool:
    compact = text.replace(" ", "").upper()
    if _IBAN_LENGTHS.get(compact[:2]) != len(compact):
        return False
    digits = "".join(str(int(c, 36)) for c in compact[4:] + compact[:4])
    return int(digits) % 97 == 1


def is_intl_phone(text: str) -> bool:
    n = sum(ch.isdigit() for ch in text)
    return 8 <= n <= 15


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
VERSION_RE = re.compile(r"v?\d+(?:[._\-]\d+)+(?:[._\-+]?[A-Za-z]++[._\-]?\d*+)*")


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
    if _UUID_RE.fullmatch(t) or VERSION_RE.fullmatch(t):
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


def password_like(value: str) -> bool:
    if len(value) < 6 or len(value) > 128:
        return False
    if NOT_A_SECRET_RE.match(value) or _TECH_WORD_RE.match(value):
        return False
    if VERSION_RE.fullmatch(value) or _UUID_RE.fullmatch(value) or "://" in value or "@" in value:
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


def strong_token(value: str) -> bool:
    """A token in prose: random-looking, or mixed case with digits and 10+ characters."""
    # The cheap test first: most generated tokens pass it, and looks_random costs more.
    return (
        len(value) >= 10
        and any(map(str.isdigit, value))
        and any(map(str.isupper, value))
        and any(map(str.islower, value))
        and not _TECH_WORD_RE.match(value)
        and not VERSION_RE.fullmatch(value)
        and not _WORDY_ID_RE.fullmatch(value)
        and "://" not in value
    ) or looks_random(value)


# Known identifier shapes that pass looks_random: hex with ``-``/``:`` groups (digests,
# trace ids, request ids), ULIDs, hash-prefixed values (``sha512-…``, ``h1:…``), typed
# object ids (``cus_…``, ``chatcmpl-…``, ``toolu_01…``).
HEXISH_RE = re.compile(r"[0-9a-fA-F]+(?:[\-:][0-9a-fA-F]+)*")


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
    if not raw or len(raw) - len(raw.translate(None, PRINTABLE_BYTES)) < 0.95 * len(raw):
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
    if HEXISH_RE.fullmatch(t) or _ULID_RE.fullmatch(t) or _HASH_PREFIX_RE.match(t):
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


PRINTABLE_BYTES = bytes([9, 10, 13, *range(32, 127)])

