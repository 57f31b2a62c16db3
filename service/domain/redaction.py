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
STRIPE_KEY, JWT, BEARER_TOKEN, BASIC_AUTH, CONNECTION_PASSWORD, PASSWORD,
API_KEY, SECRET, TOKEN, SSN, CREDIT_CARD, EMAIL, PHONE.

Phone numbers: only shapes that cannot be a date, version, port or id are
matched: an explicit international ``+CC ...`` number (8 to 15 digits), or a
North American ``(212) 555-0143`` / ``212-555-0143`` / ``212.555.0143`` with a
valid area code and exchange. A bare run of 10 digits is never a phone number
here: it is far more often an id or a timestamp.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeAlias

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
    "JWT",
    "BEARER_TOKEN",
    "BASIC_AUTH",
    "CONNECTION_PASSWORD",
    "PASSWORD",
    "API_KEY",
    "SECRET",
    "TOKEN",
    "SSN",
    "CREDIT_CARD",
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
# run-together names like ``pgpassword`` or ``clientsecret`` still count.
_KEY_ENDINGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("PASSWORD", ("password", "passwd", "passphrase")),
    ("SECRET", ("secret",)),
    ("TOKEN", ("token",)),
)


def _key_words(key: str) -> list[str]:
    spaced = _CAMEL_BOUNDARY_RE.sub("_", key.strip("\"'`:$-"))
    return [w for w in _KEY_SPLIT_RE.split(spaced.lower()) if w]


def _label_for_key(key: str) -> str | None:
    """Label for the secret a key names, or None when the key names no secret."""
    words = _key_words(key)
    if not words:
        return None
    for label, suffixes in _KEY_SUFFIXES:
        for suffix in suffixes:
            if tuple(words[-len(suffix) :]) == suffix:
                return label
    last = words[-1]
    if last in _SHORT_PASSWORD_KEYS:
        if len(words) == 1 or key.isupper() or words[-2] in _CREDENTIAL_OWNERS:
            return "PASSWORD"
        return None
    for label, endings in _KEY_ENDINGS:
        if last.endswith(endings):
            return label
    return None


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
    if _NOT_A_SECRET_RE.match(value) or _PLACEHOLDER_RE.search(value):
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
    if len(value) < 8 or any(ch.isspace() for ch in value):
        return False
    if _HAS_DIGIT_RE.search(value):
        return True
    return quoted and bool(_MIXED_CASE_RE.search(value))


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


def _is_card(text: str) -> bool:
    digits = re.sub(r"[ -]", "", text)
    return bool(_CARD_ISSUER_RE.fullmatch(digits)) and _luhn_ok(digits)


def _is_intl_phone(text: str) -> bool:
    n = sum(ch.isdigit() for ch in text)
    return 8 <= n <= 15


# --------------------------------------------------------------------------
# The rule table.
# --------------------------------------------------------------------------

# ``accept(match)`` returns the label to use, or None to leave the match alone.
_Accept = Callable[["re.Match[str]"], str | None]


@dataclass(frozen=True)
class _Rule:
    label: str  # label used when ``accept`` is None; documentation otherwise
    pattern: re.Pattern[str]
    # Named groups holding the value to replace; the first that took part in the
    # match is used. Empty: the whole match is the value.
    groups: tuple[str, ...] = ()
    # Lower-case substrings, one of which must occur for the rule to run at all:
    # a cheap prefilter that keeps ordinary prose away from most regexes.
    triggers: tuple[str, ...] = ()
    accept: _Accept | None = None


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


def _accept_xml(m: re.Match[str]) -> str | None:
    label = _label_for_key(m.group("key"))
    if label is None:
        return None
    value = m.group("v").strip()
    ok = _value_is_secret(label, m.group("key"), value, quoted=True, sep="", tail="")
    return label if ok else None


# A token body: the characters API tokens are made of.
_TOK = r"[A-Za-z0-9_\-]"
# The keywords a secret-naming key can end with (see _label_for_key).
_KEYWORDS = r"(?:pass(?:word|wd|phrase)?|pwd|pw|secret|token|api[_-]?key|key|privkey)"

_RULES: tuple[_Rule, ...] = (
    # -- Private keys: keep the BEGIN/END armour (it says what kind of key it
    #    was), replace the body. The body may be JSON-escaped (``\n``) or cut off
    #    with no END line, as in a trimmed tool output.
    _Rule(
        "PRIVATE_KEY",
        re.compile(
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
            # Either everything up to the END line (headers such as
            # ``Proc-Type: 4,ENCRYPTED`` included), or, when the END line was
            # cut off, the run of base64 lines that follows.
            r"(?:\s|\\n)*"
            r"(?:(?P<v>[A-Za-z0-9+/=\s\\:,.\-]+?)(?:\s|\\n)*(?=-----END)"
            r"|(?P<cut>[A-Za-z0-9+/=]{16,}(?:(?:\s|\\n)+[A-Za-z0-9+/=]{16,})*))"
        ),
        ("v", "cut"),
        ("private key",),
    ),
    # -- Provider tokens, matched by their documented prefixes.
    _Rule(
        "GITHUB_TOKEN",
        re.compile(
            r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})"
        ),
        triggers=("gh", "github_pat_"),
    ),
    _Rule(
        "GITLAB_TOKEN",
        re.compile(r"(?<![A-Za-z0-9_])glpat-[A-Za-z0-9_\-]{20,}"),
        triggers=("glpat-",),
    ),
    # Anthropic before OpenAI: both start with ``sk-``. Real keys always carry a
    # digit; the lookahead keeps kebab-case slugs such as ``sk-learn-tutorial``.
    _Rule(
        "ANTHROPIC_KEY",
        re.compile(rf"(?<![A-Za-z0-9_\-])sk-ant-(?=[A-Za-z0-9_\-]*\d){_TOK}{{20,}}"),
        triggers=("sk-ant-",),
    ),
    _Rule(
        "OPENAI_KEY",
        re.compile(
            rf"(?<![A-Za-z0-9_\-])sk-(?:proj-|svcacct-|admin-)?(?=[A-Za-z0-9_\-]*\d){_TOK}{{20,}}"
        ),
        triggers=("sk-",),
    ),
    _Rule(
        "GOOGLE_API_KEY", re.compile(r"(?<![A-Za-z0-9_])AIza[0-9A-Za-z_\-]{35}"), triggers=("aiza",)
    ),
    # AWS key ids: a four-letter resource prefix and 16 upper-case base32 chars.
    _Rule(
        "AWS_ACCESS_KEY",
        re.compile(
            r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA)[A-Z2-7]{16}(?![A-Za-z0-9])"
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
    ),
    _Rule(
        "SLACK_TOKEN",
        re.compile(r"(?<![A-Za-z0-9])(?:xox[abprsoe]|xapp)-[A-Za-z0-9\-]{10,}"),
        triggers=("xox", "xapp-"),
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
    _Rule(
        "STRIPE_KEY",
        re.compile(r"(?<![A-Za-z0-9])(?:sk|rk|whsec)_(?:live|test)_[A-Za-z0-9]{16,}"),
        triggers=("_live_", "_test_"),
    ),
    # JWT: three base64url parts, the first two JSON objects (so ``eyJ``).
    _Rule(
        "JWT",
        re.compile(
            r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{10,}"
        ),
        triggers=("eyj",),
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
        re.compile(r"\bcurl\b[^\n]*?\s(?:-u|--user)[ =][\"']?[^\s:\"']+:(?P<v>[^\s\"']+)"),
        ("v",),
        ("curl",),
    ),
    # scheme://user:password@host — postgres, mysql, mongodb+srv, redis (empty
    # user allowed), amqp, https basic-auth URLs... No ``/`` in the password, so
    # ``host:8080/path@x`` is never read as one.
    _Rule(
        "CONNECTION_PASSWORD",
        re.compile(
            r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@\"'<>]*:(?P<v>[^\s@/\"'<>]+)@(?=[A-Za-z0-9\[])"
        ),
        ("v",),
        ("://",),
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
        ("pass", "pwd", "pw", "secret", "token", "key"),
        _accept_keyed,
    ),
    # ``--password hunter2`` / ``--token abc123...`` (space instead of ``=``).
    _Rule(
        "PASSWORD/API_KEY/SECRET/TOKEN",
        re.compile(
            rf"(?i)(?<![\w-])--(?P<key>[a-z\-]*{_KEYWORDS})[ \t]+(?P<vu>[^\s\"'`$\-][^\s\"'`]*)"
        ),
        ("vu",),
        ("--",),
        _accept_keyed,
    ),
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
        for _ in range(_MAX_PASSES):
            text, found = _redact_once(text)
            if not found:
                break
            _add(counts, found)
        return RedactionResult(text, counts)

    def redact_json(self, obj: JSONValue) -> tuple[JSONValue, dict[str, int]]:
        """Redact a JSON-like value (dicts, lists, scalars) without mutating it.

        String values are redacted as text. A value whose key names a secret
        (``password``, ``api_key``, ``accessToken``, ``client_secret``...) is
        replaced whole, whatever its shape: ``{"password": "hunter2"}`` becomes
        ``{"password": "[PASSWORD:REDACTED]"}``. Keys are kept as they are.

        Args:
            obj: A value as produced by ``json.loads``; tuples are treated as lists.

        Returns:
            The redacted copy and the number of replacements per label.
        """
        counts: dict[str, int] = {}
        return self._walk(obj, counts), counts

    def _walk(self, obj: JSONValue, counts: dict[str, int]) -> JSONValue:
        if isinstance(obj, str):
            result = self.redact(obj)
            _add(counts, result.counts)
            return result.text
        if isinstance(obj, dict):
            out: dict[str, JSONValue] = {}
            for key, value in obj.items():
                label = _label_for_key(key) if isinstance(key, str) else None
                if label is not None and _is_whole_secret(value):
                    out[key] = placeholder(label)
                    counts[label] = counts.get(label, 0) + 1
                else:
                    out[key] = self._walk(value, counts)
            return out
        if isinstance(obj, list | tuple):
            return [self._walk(item, counts) for item in obj]
        return obj


def _is_whole_secret(value: JSONValue) -> bool:
    """A scalar under a secret-naming key that is worth replacing."""
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, int | float):
        return True  # a numeric PIN or password is still one
    if isinstance(value, str):
        stripped = value.strip()
        return bool(stripped) and not (
            _NOT_A_SECRET_RE.match(stripped) or _PLACEHOLDER_RE.fullmatch(stripped)
        )
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


def _redact_once(text: str) -> tuple[str, dict[str, int]]:
    """One scan of the rule table over ``text``; see the module docstring."""
    if not text:
        return text, {}
    lowered = text.lower()
    # Placeholders already in the text are taken first, so nothing wraps them.
    taken: list[tuple[int, int]] = [m.span() for m in _PLACEHOLDER_RE.finditer(text)]
    found: list[tuple[int, int, str]] = []
    for rule in _RULES:
        if rule.triggers and not any(t in lowered for t in rule.triggers):
            continue
        for m in rule.pattern.finditer(text):
            span = _value_span(m, rule.groups)
            if span is None or span[0] == span[1]:
                continue
            if any(span[0] < end and start < span[1] for start, end in taken):
                continue
            label = rule.accept(m) if rule.accept else rule.label
            if label is None:
                continue
            taken.append(span)
            found.append((span[0], span[1], label))
    if not found:
        return text, {}
    found.sort()
    parts: list[str] = []
    counts: dict[str, int] = {}
    pos = 0
    for start, end, label in found:
        parts.append(text[pos:start])
        parts.append(placeholder(label))
        counts[label] = counts.get(label, 0) + 1
        pos = end
    parts.append(text[pos:])
    return "".join(parts), counts
