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

The package, one job per module:

- ``keys``: the labels, the placeholder, and the key vocabulary (the key names and keywords
  that announce a secret or an identifier);
- ``heuristics``: what a secret value looks like, and the PII validators;
- ``rules``: the rule table and its finders;
- ``engine``: ``Redactor`` (text and JSON), the scan, the replacement, and ``REDACTOR``;
- ``fields``: one pass over every field a write stores (``redact_fields``), and the refusal
  of identifiers that hold a secret (``check_identifiers``);
- ``normalize``: the view the rules read (NFKC, no zero-width characters, ``%XX`` decoded),
  mapped back to the text as written.

The names below are re-exported for callers that need only the redactor.
"""

from __future__ import annotations

from service.domain.redaction.engine import (
    REDACTOR,
    JSONValue,
    RedactionResult,
    Redactor,
    merge_counts,
)
from service.domain.redaction.fields import check_identifiers, redact_fields
from service.domain.redaction.heuristics import (
    RANDOM_MIN_CHARS,
    generic_secret,
    looks_random,
    shannon_entropy,
)
from service.domain.redaction.keys import LABELS, PLACEHOLDER_RE, placeholder

__all__ = [
    "LABELS",
    "PLACEHOLDER_RE",
    "RANDOM_MIN_CHARS",
    "REDACTOR",
    "JSONValue",
    "RedactionResult",
    "Redactor",
    "check_identifiers",
    "generic_secret",
    "looks_random",
    "merge_counts",
    "placeholder",
    "redact_fields",
    "shannon_entropy",
]
