"""Issue 29, finding 7: secrets in shapes the rules never saw, one family at a time, and the
identifiers around them that must stay.

The dev corpus (bench/redaction_dev.py) holds the examples per family; the tests below add
the decisions a reader needs spelled out (pagination tokens, id-like keys, typed object
ids, a lower-case ``pin``). The blind corpus (bench/redaction_blind/) is not used here.
"""

from __future__ import annotations

import base64
import json

import pytest

from bench.redaction_dev import DevSample, ordinary_samples, secret_samples
from service.domain.redaction import JSONValue, Redactor, generic_secret, placeholder

REDACTOR = Redactor()
SECRETS = secret_samples()
ORDINARY = ordinary_samples()


def _ids(samples: list[DevSample]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for s in samples:
        seen[s.family] = seen.get(s.family, 0) + 1
        out.append(f"{s.family}-{seen[s.family]}")
    return out


def test_dev_corpus_covers_the_reviewed_families() -> None:
    families = {s.family for s in SECRETS}
    assert {
        "key_armour", "provider_prefix", "connection", "json_structure", "cli_password",
        "sql", "cookie", "jwt", "prose", "pin", "table", "env_names", "generic_entropy",
        "recovery_codes", "iban",
    } <= families  # fmt: skip
    assert len(SECRETS) >= 120 and len(ORDINARY) >= 50
    assert all(s.secrets for s in SECRETS) and all(s.keep for s in ORDINARY)


@pytest.mark.parametrize("sample", SECRETS, ids=_ids(SECRETS))
def test_secret_of_each_family_is_removed(sample: DevSample) -> None:
    out = REDACTOR.redact(sample.text)
    assert [s for s in sample.secrets if s in out.text] == [], out.text
    assert REDACTOR.redact(out.text).text == out.text  # idempotent


@pytest.mark.parametrize("sample", ORDINARY, ids=_ids(ORDINARY))
def test_ids_hashes_and_numbers_are_kept(sample: DevSample) -> None:
    out = REDACTOR.redact(sample.text).text
    assert [k for k in sample.keep if k not in out] == [], out


def _json(samples: list[DevSample]) -> list[tuple[DevSample, JSONValue]]:
    out = []
    for s in samples:
        try:
            out.append((s, json.loads(s.text)))
        except ValueError:
            continue
    return out


@pytest.mark.parametrize(("sample", "obj"), _json(ORDINARY))
def test_api_json_is_untouched_as_json(sample: DevSample, obj: JSONValue) -> None:
    # Tool results reach the store as JSON too (metadata, artifact bodies).
    assert REDACTOR.redact_json(obj) == (obj, {})


@pytest.mark.parametrize(("sample", "obj"), _json(SECRETS))
def test_secrets_named_by_structure_are_removed_as_json(sample: DevSample, obj: JSONValue) -> None:
    out, counts = REDACTOR.redact_json(obj)
    dumped = json.dumps(out)
    assert counts
    assert [s for s in sample.secrets if s in dumped] == []


# -- The decisions, one by one.

RANDOM = "Xq7Lm2Vb9Tz4Kc8Wp3Rn6Hs"


@pytest.mark.parametrize(
    "key",
    ["node_id", "nodeId", "request-id", "etag", "sha", "sha256", "digest", "integrity",
     "keyid", "X-Amz-Id-2", "endCursor", "nextPageToken", "NextToken", "page_token",
     "continuation_token", "continue", "public_key", "signature", "fingerprint", "uid"],
)  # fmt: skip
def test_random_values_under_id_like_keys_are_identifiers(key: str) -> None:
    for text in (f'{{"{key}": "{RANDOM}"}}', f"{key}={RANDOM}", f"{key}: {RANDOM}"):
        assert REDACTOR.redact(text).text == text
    assert REDACTOR.redact_json({key: RANDOM}) == ({key: RANDOM}, {})


@pytest.mark.parametrize(
    "text",
    [f'{{"vendor_blob": "{RANDOM}"}}', f"X-Acme-Blob: {RANDOM}", f"--upstream {RANDOM}",
     f"<Assertion>{RANDOM}</Assertion>", f"license_value => '{RANDOM}'"],
)  # fmt: skip
def test_random_values_under_other_keys_are_secrets(text: str) -> None:
    out = REDACTOR.redact(text)
    assert RANDOM not in out.text
    assert out.counts == {"SECRET": 1}


def test_generic_rule_in_json_values() -> None:
    out, counts = REDACTOR.redact_json({"vendor_blob": RANDOM, "node_id": RANDOM, "n": 3})
    assert out == {"vendor_blob": placeholder("SECRET"), "node_id": RANDOM, "n": 3}
    assert counts == {"SECRET": 1}


@pytest.mark.parametrize(
    "value",
    [
        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",  # hex digest
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # traceparent
        "01HXK3M8Z5Q2W7R9T4V6B8N0CD",  # ULID
        "sha512-" + "Ab12Cd34Ef56Gh78" * 5,  # SRI
        "txn_3MmlLrLkdIwHu7ix0uke3Ezy",  # typed object id
        "chatcmpl-9aB3cD4eF5gH6iJ7kL8mN9oP0",
        "web-7d4b9c8f6-x2x9z",  # a pod name
        base64.b64encode(b'{"offset": 100, "limit": 50}').decode(),  # a cursor
        "1.2.3-beta.4+build.5678",
    ],
)
def test_identifier_shapes_are_not_generic_secrets(value: str) -> None:
    assert not generic_secret(value)
    assert REDACTOR.redact(f'{{"vendor": "{value}"}}').counts == {}


def test_base64_user_password_is_a_generic_secret() -> None:
    auth = base64.b64encode(b"ci-bot:Tr0ub4dor&3x").decode()
    assert generic_secret(auth)
    doc: JSONValue = {"auths": {"registry.acme.io": {"auth": auth}}}
    assert REDACTOR.redact_json(doc)[1] == {"SECRET": 1}


@pytest.mark.parametrize(
    ("text", "value", "label"),
    [
        ("PIN: 4821", "4821", "PIN"),
        ("SIM PIN 4821", "4821", "PIN"),
        ("ATM_PIN=4821", "4821", "PIN"),
        ("the door passcode is 482913", "482913", "PIN"),
        ("Geheimzahl 4711", "4711", "PIN"),
        ("code PIN : 1234", "1234", "PIN"),
    ],
)
def test_pins_and_passcodes(text: str, value: str, label: str) -> None:
    out = REDACTOR.redact(text)
    assert value not in out.text
    assert out.counts == {label: 1}


@pytest.mark.parametrize(
    "text",
    ["pin 4 cores to the worker", "pin 1024 MB of memory", "pin numpy to 1.26.4",
     "pin it to 8080", "PIN entry UI: done", "Pinned to python:3.11-slim"],
)  # fmt: skip
def test_pin_as_a_verb_is_not_a_pin(text: str) -> None:
    assert REDACTOR.redact(text).counts == {}


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("postgres://app:p@ss/w0rd!@db.internal:5432/app", "p@ss/w0rd!"),
        ("https://u:pw1234@host.example.com/a?email=x@y.io", "pw1234"),
    ],
)
def test_url_password_runs_to_the_host(text: str, secret: str) -> None:
    out = REDACTOR.redact(text).text
    assert secret not in out
    assert "[CONNECTION_PASSWORD:REDACTED]@" in out
    assert out.split("[CONNECTION_PASSWORD:REDACTED]@")[1][:4] in ("db.i", "host")


@pytest.mark.parametrize(
    "text",
    ["https://host:8080/path@x", "https://www.npmjs.com:443/package/@types/node",
     "mysql -u app -P 3306 -h db -p billing", "ssh -l deploy -p 2222 host",
     "docker exec -u root -w /app web sh", "curl -u me -w '%{http_code}' https://x.io",
     "lodash/fp@4.17.21 and @types/node@20.11.5", "sqlplus / as sysdba; cp a/b@c d"],
)  # fmt: skip
def test_shapes_close_to_credentials_stay(text: str) -> None:
    assert REDACTOR.redact(text).counts == {}


def test_columns_are_read_as_columns() -> None:
    text = "user,password,role\nalice,Falcon!42,admin\nbob,,dev\n\nnote,password,x"
    out = REDACTOR.redact(text)
    assert out.text == (
        "user,password,role\nalice,[PASSWORD:REDACTED],admin\nbob,,dev\n\nnote,password,x"
    )
    keep = "| metric | p50 |\n|---|---|\n| password_checks | 3 |"
    assert REDACTOR.redact(keep).counts == {}


def test_blank_aligned_columns_are_read_as_columns() -> None:
    text = "NAME     USER   PASSWORD     HOST\nprod-db  admin  Falcon!42xy  10.0.0.4\n"
    assert REDACTOR.redact(text).text == (
        "NAME     USER   PASSWORD     HOST\nprod-db  admin  [PASSWORD:REDACTED]  10.0.0.4\n"
    )
    # A sentence with two blanks in it is no header: its words are not one-word cells.
    prose = "Keep the password  out of notes.\nAlways  rotate it after  the demo."
    assert REDACTOR.redact(prose).counts == {}


@pytest.mark.parametrize(
    "text",
    ["backup codes: 10 left", "the backup key 2048 bits", "recovery codes are in 1Password",
     "backup code 2024-05-01 review", "SKU DE12ABCD3456", "DE89 3704 0044 0532 0130 01"],
)  # fmt: skip
def test_near_recovery_codes_and_ibans_that_are_not(text: str) -> None:
    assert REDACTOR.redact(text).counts == {}


def test_webhook_and_pin_labels() -> None:
    hook = "https://discord.com/api/webhooks/123456789012345678/" + "Ab1_" * 17
    assert REDACTOR.redact(hook).counts == {"WEBHOOK": 1}
    assert REDACTOR.redact("PIN=4821").text == f"PIN={placeholder('PIN')}"
