"""The redactor against the generated corpus (bench/redaction_corpus.py), LoCoMo, the four
miss classes of issue 15, prose secrets and structure (keys as well as values)."""

from __future__ import annotations

import base64
import json
import urllib.parse

import pytest

from bench.gate_report import find_locomo_dir
from bench.redaction_corpus import ordinary_samples, secret_samples
from service.domain.redaction import Redactor
from service.domain.redaction.fields import check_identifiers, redact_fields
from service.errors import InvalidInput

REDACTOR = Redactor()
SECRETS = secret_samples()
ORDINARY = ordinary_samples()


def test_corpus_is_large_and_varied() -> None:
    assert len(SECRETS) >= 300
    assert len({s.format for s in SECRETS}) >= 40
    assert len(ORDINARY) >= 300
    assert secret_samples() == SECRETS  # seeded: the same corpus every run


def test_no_secret_survives_in_the_corpus() -> None:
    misses = [
        (s.format, s.text)
        for s in SECRETS
        if any(secret in REDACTOR.redact(s.text).text for secret in s.secrets)
    ]
    assert misses == []


def test_no_ordinary_note_is_touched() -> None:
    touched = [
        (s.text, REDACTOR.redact(s.text).text) for s in ORDINARY if REDACTOR.redact(s.text).counts
    ]
    assert touched == []


def test_locomo_evidence_turns_are_untouched() -> None:
    locomo = find_locomo_dir()
    if locomo is None:
        pytest.skip("LoCoMo data set not found (set CTXPACK_LOCOMO_DIR)")
    evidence: set[str] = set()
    with (locomo / "queries.jsonl").open(encoding="utf-8") as queries:
        for line in queries:
            evidence.update(json.loads(line)["gold_ids"])
    turns = []
    with (locomo / "memories.jsonl").open(encoding="utf-8") as memories:
        for line in memories:
            turn = json.loads(line)
            if turn["id"] in evidence:
                turns.append(turn["text"])
    assert len(turns) == 1430
    redacted = [(t, REDACTOR.redact(t).text) for t in turns if REDACTOR.redact(t).counts]
    assert redacted == []


# -- The four miss classes of issue 15.


@pytest.mark.parametrize(
    ("text", "secret", "label"),
    [
        ("key id AKIAIOSFODNN7EXAMPL0 leaked", "AKIAIOSFODNN7EXAMPL0", "AWS_ACCESS_KEY"),
        ("AKIA0189ABCDEF012345", "AKIA0189ABCDEF012345", "AWS_ACCESS_KEY"),
        (
            "aws_secret_access_key = /wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY1",
            "/wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY1",
            "AWS_SECRET_KEY",
        ),
        ("card 1234 5678 9012 3452 on file", "1234 5678 9012 3452", "CREDIT_CARD"),
        ("card 8000-0000-0000-0003 on file", "8000-0000-0000-0003", "CREDIT_CARD"),
        ("requirepass foobared", "foobared", "PASSWORD"),
        ("the password is Hunter22x", "Hunter22x", "PASSWORD"),
        ("psql --password s3cr3t-pw -h db", "s3cr3t-pw", "PASSWORD"),
        ("PGPASSWORD Zq8-w3ll", "Zq8-w3ll", "PASSWORD"),
    ],
)
def test_issue_miss_classes(text: str, secret: str, label: str) -> None:
    result = REDACTOR.redact(text)
    assert secret not in result.text
    assert label in result.counts


def test_ungrouped_16_digits_without_issuer_stay() -> None:
    # A bare 16-digit run is an order or tracking number unless its issuer prefix says card.
    assert REDACTOR.redact("tracking 1234567890123452").counts == {}


# -- Prose secrets and the normalised view.


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("the staging database password is Tr0ub4dor-xyz-77", "Tr0ub4dor-xyz-77"),
        ("the staging database password is: Tr0ub4dor77", "Tr0ub4dor77"),
        ("the wifi password was : Blue-Falcon-19", "Blue-Falcon-19"),
        ("password:\n  Tr0ub4dor-77\n", "Tr0ub4dor-77"),
        ("token ghp_" + "a1B2" * 4 + "\u200b" + "c3D4" * 5, "c3D4" * 5),
        ("ｐａｓｓｗｏｒｄ＝ｈｕｎｔｅｒ２２", "ｈｕｎｔｅｒ２２"),
        ("https://x.io/cb?next=%2Fhome%3Fpassword%3DHunter22x", "Hunter22x"),
        ("postgres://app:p%40ss%21w0rd@db/app", "ss%21w0rd"),
        (
            "blob " + base64.b64encode(b"password=Hunter22x").decode(),
            "UGFzc3dvcmQ9"[:0] or base64.b64encode(b"password=Hunter22x").decode(),
        ),
        ("api token " + urllib.parse.quote("Zk3+9aQ/xL2mP7vB4nR8tY1u"), "Zk3"),
    ],
)
def test_prose_and_encoded_secrets(text: str, secret: str) -> None:
    result = REDACTOR.redact(text)
    assert result.counts
    assert secret not in result.text


def test_text_around_a_normalised_secret_is_kept_as_written() -> None:
    out = REDACTOR.redact("Ｎｏｔｅ: ｐａｓｓｗｏｒｄ＝ｈｕｎｔｅｒ２２ ok").text
    assert out == "Ｎｏｔｅ: ｐａｓｓｗｏｒｄ＝[PASSWORD:REDACTED] ok"


# -- Structure: keys and values at any depth.


def test_json_keys_and_nested_values_under_secret_keys() -> None:
    ghp = "ghp_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2"
    doc = {
        ghp: 1,
        "password": {"v": "hunter22", "history": ["old-pw-1", "old-pw-2"], "n": 1234},
        "nested": {"deeper": {"api_key": ["k1-abcdefgh", {"x": "k2-abcdefgh"}]}},
        "count": 3,
    }
    out, counts = REDACTOR.redact_json(doc)
    dumped = json.dumps(out)
    for leaked in (ghp, "hunter22", "old-pw-1", "old-pw-2", "1234", "k1-abcdefgh", "k2-abcdefgh"):
        assert leaked not in dumped
    assert out["count"] == 3
    assert "[GITHUB_TOKEN:REDACTED]" in out
    assert counts["PASSWORD"] == 4


def test_colliding_redacted_keys_keep_both_values() -> None:
    a, b = "AKIA" + "A" * 16, "AKIA" + "B" * 16
    out, _ = REDACTOR.redact_json({a: 1, b: 2})
    assert isinstance(out, dict)
    assert sorted(out.values()) == [1, 2]


def test_redact_fields_covers_text_lists_and_objects() -> None:
    pw = "Tr0ub4dor-xyz-77"
    values, counts = redact_fields(
        {
            "content": f"password={pw}",
            "tags": [f"pw:{pw}", "ops"],
            "domain": f"the password is {pw}",
            "metadata": {f"password={pw}": {"password": pw}},
            "origin": None,
        }
    )
    assert pw not in json.dumps(values)
    assert values["tags"][1] == "ops"
    assert values["origin"] is None
    assert counts["PASSWORD"] >= 4


def test_identifiers_holding_a_secret_are_refused_without_the_value() -> None:
    key_id = "AKIA" + "Q" * 16
    with pytest.raises(InvalidInput) as info:
        check_identifiers({"project": "billing", "items.2.agent_id": key_id})
    assert info.value.details["field"] == "items.2.agent_id"
    assert key_id not in info.value.message
    assert "AWS_ACCESS_KEY" in info.value.message
    check_identifiers({"project": "billing-2026", "agent_id": "claude-3-5-sonnet", "x": None})
