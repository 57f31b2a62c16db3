"""Redaction, the rule table: each rule's pattern or finder, its label, its prefilters
(triggers, needs, anchoring at keywords) and its accept test, in table order (specific
providers first, then key-named generics, then PII). The finders are rules written as a
scan, so that their cost stays linear. The table does not know its engine: the base64 rule
is marked ``decodes_base64`` and the engine runs it."""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from service.domain.redaction.heuristics import (
    HAS_DIGIT_RE,
    HEXISH_RE,
    LINE_TAIL_OK_RE,
    NOT_A_SECRET_RE,
    VERSION_RE,
    generic_secret,
    is_card,
    is_iban,
    is_intl_phone,
    looks_random,
    password_like,
    pin_like,
    strong_token,
    value_is_secret,
)
from service.domain.redaction.keys import (
    PASSWORD_DIRECTIVES,
    PLACEHOLDER_RE,
    is_id_key,
    key_words,
    label_for_key,
)

# ``accept(match)`` returns the label to use, or None to leave the match alone.
_Accept = Callable[["re.Match[str]"], str | None]


# A finder scans the text itself and yields ``(start, end, label)`` spans, for rules a
# single regex cannot state in linear time. It is handed the spans taken so far (it may
# skip work on a candidate that overlaps one: such a span would be dropped anyway).
_Finder = Callable[[str, "Taken"], Iterable[tuple[int, int, str]]]


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
    # The base64 rule: its finder decodes a run and scans it with the whole table, so the
    # engine runs it (engine.py:_find_base64_secrets); the table does not import its engine.
    decodes_base64: bool = False
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
    label = label_for_key(m.group("key"))
    if label is None:
        return None
    groups = m.groupdict()
    unquoted = groups.get("vu")
    value = unquoted or groups.get("vq") or groups.get("vs") or groups.get("vb") or ""
    tail = m.string[m.end() : m.end() + 80]
    sep = groups.get("sep") or ""
    key = m.group("key")
    if not value_is_secret(label, key, value, quoted=unquoted is None, sep=sep, tail=tail):
        return None
    return label


_CURL_BEFORE_RE = re.compile(r"\bcurl\b[^\n]*\Z")


def _accept_xml(m: re.Match[str]) -> str | None:
    label = label_for_key(m.group("key"))
    if label is None:
        return None
    value = m.group("v").strip()
    ok = value_is_secret(label, m.group("key"), value, quoted=True, sep="", tail="")
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
    if not LINE_TAIL_OK_RE.match(m.string[m.end() : m.end() + 80]):
        return False
    words = key_words(key)
    return key.isupper() or "_" in key or bool(words and words[-1] in PASSWORD_DIRECTIVES)


def _accept_spaced(m: re.Match[str]) -> str | None:
    label = label_for_key(m.group("key"))
    if label is None:
        return None
    value = m.group("vu")
    if label == "PIN":
        # "pin 4 cores", "pin it to 1024": a lower-case ``pin`` is a verb unless a
        # separator or a copula follows it.
        sep = (m.group("sep") or "").strip(" \t")
        if m.group("key").islower() and (not sep or sep.endswith("to")):
            return None
        return label if pin_like(value) and not PLACEHOLDER_RE.search(value) else None
    directive = (m.group("sep") or "").strip() in ("", "is", "was", "are") and _is_directive(m)
    # A lowercase word is a secret only as a directive's value (``requirepass foobared``):
    # neither test below takes one (the cheap check first; prose is full of them).
    if not directive and value.isalpha() and value.islower():
        return None
    if PLACEHOLDER_RE.search(value) or NOT_A_SECRET_RE.match(value):
        return None
    if directive:
        if label == "PASSWORD":
            return label if len(value) >= 4 else None
        return label if len(value) >= 8 and HAS_DIGIT_RE.search(value) else None
    if label == "PASSWORD":
        return label if password_like(value) else None
    return label if strong_token(value) else None


def _accept_next_line(m: re.Match[str]) -> str | None:
    label = label_for_key(m.group("key"))
    if label is None:
        return None
    value = m.group("vu")
    if value.endswith(":") or value[:1] in "-#/":
        return None
    ok = value_is_secret(label, m.group("key"), value, quoted=False, sep=":", tail="\n")
    return label if ok else None


def _accept_cli_password(
    m: re.Match[str], groups: tuple[str, ...] = ("vq", "vd", "vu")
) -> str | None:
    found = m.groupdict()
    value = next((v for g in groups if (v := found.get(g))), "")
    if PLACEHOLDER_RE.search(value) or NOT_A_SECRET_RE.match(value) or len(value) < 3:
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
        if looks_random(segment) or (HEXISH_RE.fullmatch(segment) and len(segment) >= 32):
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
        if PLACEHOLDER_RE.search(value) or NOT_A_SECRET_RE.match(value):
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
            if name.lower() not in _COOKIE_ATTRIBUTES and not PLACEHOLDER_RE.search(value):
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
# (accented or not), passcodes and PINs. ``label_for_key`` gives each its label.
_INTL_KEYWORDS = (
    r"pass(?:code|wort)|kennwort|wachtwoord|contrase(?:ñ|n)y?a|senha|mot[ _-]de[ _-]passe"
    r"|motdepasse|parola(?:[ _-]d['’ _-]?ordine)?|clave|pin(?:[ _-]?code)?|pincode|geheimzahl"
    r"|puk|salt"
)


# The keywords a secret-naming key can end with (see label_for_key).
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


# The table's row type, for the engine's annotations.
Rule = _Rule

RULES: tuple[_Rule, ...] = (
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
        accept=lambda m: None if HEXISH_RE.fullmatch(m.group(0).strip()) else "PASSWORD",
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
            if PLACEHOLDER_RE.search(m.group("v")) or NOT_A_SECRET_RE.match(m.group("v"))
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
    #    The key must end right before the separator, and label_for_key decides
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
        accept=_fixed("CREDIT_CARD", is_card),
    ),
    # IBAN: a country code, two check digits and the account, bare or in groups of four;
    # kept only with the country's length and a valid mod-97 check.
    _Rule(
        "IBAN",
        re.compile(
            r"(?<![\w\-])[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]{4}){2,7}(?:[ ]?[A-Z0-9]{1,3})?(?![\w\-])"
        ),
        accept=_fixed("IBAN", is_iban),
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
        accept=_fixed("PHONE", is_intl_phone),
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
        decodes_base64=True,
        token_shaped=True,
    ),
)


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


LONG_TOKEN_RE = re.compile(r"(?<![A-Za-z0-9+/_\-=])[A-Za-z0-9+/_\-=]{16,}")


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


def _find_random_near_keyword(text: str, taken: Taken) -> Iterable[tuple[int, int, str]]:
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
        if key is not None and is_id_key(key):
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
    for m in LONG_TOKEN_RE.finditer(text):
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


def _find_secret_after_key(text: str, taken: Taken) -> Iterable[tuple[int, int, str]]:
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
        label = label_for_key(key)
        if label is not None:
            # A key that names a secret and that the key-value rules did not read as one
            # (``private_key_id``, a key ending a longer name).
            if value_is_secret(label, key, token, quoted=True, sep="", tail=""):
                yield start, end, label
        elif not is_id_key(key) and generic_secret(token):
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
            if code is None or not HAS_DIGIT_RE.search(code.group("c")):
                break
            value = code.group("c")
            if VERSION_RE.fullmatch(value) or PLACEHOLDER_RE.search(value):
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


# Columns aligned with blanks (``kubectl``, ``docker ps``, psql without borders, a pasted
# report): cells are runs of text separated by two or more blanks or a tab.
_SPACED_CELL_RE = re.compile(r"[^ \t\r\n](?:[^ \t\r\n]| (?=[^ \t\r\n]))*")


_SPACED_HEADER_CELL_RE = re.compile(r"[\w\-./#()%]{1,40}")


def _spaced_cells(text: str, start: int, end: int) -> list[tuple[int, int]]:
    return [m.span() for m in _SPACED_CELL_RE.finditer(text, start, end)]


def _find_table_columns(text: str) -> Iterable[tuple[int, int, str]]:
    """A header row (a line with a tab, ``|``, ``;`` or ``,`` between cells) with a cell
    that names a secret (``password``, ``PIN``, ``api_token``...: see label_for_key); the
    rows below it with as many cells, up to a blank line or a line without the delimiter;
    in each, the cell of that column, judged as a value under that key. Each line is read
    once: a header's rows are skipped by the keyword scan."""
    done = 0
    for km in KEYWORD_END_RE.finditer(text):
        if km.start() < done:
            continue
        line_start = text.rfind("\n", 0, km.start()) + 1
        line_end = text.find("\n", km.end())
        line_end = len(text) if line_end < 0 else line_end
        done = line_end
        line = text[line_start:line_end]
        delim = next((d for d in _TABLE_DELIMITERS if d in line), None)
        if delim is None:
            if "  " not in line:
                continue
            # Blank-aligned: every header cell one short word, the named one a single word.
            header = _spaced_cells(text, line_start, line_end)
            if not all(_SPACED_HEADER_CELL_RE.fullmatch(text, a, b) for a, b in header):
                continue
        else:
            header = _cells(text, line_start, line_end, delim)
        columns = [
            (i, label, text[a:b])
            for i, (a, b) in enumerate(header)
            # (Not a cell that holds a replaced secret: masked, it could name a column on the
            # next pass that it did not name on this one.)
            if b - a <= 64
            and "\x00" not in text[a:b]
            and (label := label_for_key(text[a:b])) is not None
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
            if delim is None:
                cells = _spaced_cells(text, pos, row_end)
            elif delim not in row:
                break
            else:
                cells = _cells(text, pos, row_end, delim)
            if len(cells) != len(header):
                break
            for i, label, key in columns:
                a, b = cells[i]
                value = text[a:b]
                if value and value_is_secret(label, key, value, quoted=True, sep="", tail=""):
                    yield a, b, label
            pos = row_end + 1
        done = max(done, pos)


# The end of a secret keyword, as the last word of a key (``DB_PASSWORD``, ``apiKey``).
KEYWORD_END_RE = re.compile(
    r"(?i)(?:pass(?:word|wd|phrase)?|pwd|pw|secret|token|api[ _-]?key|key|privkey|credentials?"
    rf"|masterauth|authpass|{_INTL_KEYWORDS})(?![A-Za-z0-9_.\-])"
)


class Taken:
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

