"""20,000-character adversarial inputs through redaction and the write gate.

Shapes that make a backtracking regex or a per-line loop super-linear: long digit runs,
``a=a=a=…``, base64-ish runs, repeated ``-----BEGIN``, emails without domains, nested
brackets, blank lines... (bench/redaction_corpus.py ``adversarial_inputs``). No timing is
asserted here (a shared CI machine would make it flaky); ``python -m bench.redaction_eval``
prints the cost of each, and the worst case per 20 KB. What is asserted is that each input
is handled whole: redaction is idempotent on it and the gate returns a verdict.
"""

from __future__ import annotations

import pytest

from bench.redaction_corpus import ADVERSARIAL_CHARS, adversarial_inputs
from service.domain.redaction import Redactor
from service.domain.write_gate import WriteGate

REDACTOR = Redactor()
GATE = WriteGate()
INPUTS = adversarial_inputs()


def test_inputs_are_20k_and_cover_the_reviewed_shapes() -> None:
    assert all(len(t) == ADVERSARIAL_CHARS for t in INPUTS.values())
    for name in (
        "digit_run",
        "a_eq_a",
        "base64_run",
        "begin_repeated",
        "begin_spaces",
        "email_no_domain",
        "nested_brackets",
        "blank_lines",
    ):
        assert name in INPUTS


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_redaction_and_gate_handle_adversarial_input(name: str) -> None:
    text = INPUTS[name]
    once = REDACTOR.redact(text)
    assert REDACTOR.redact(once.text).text == once.text
    verdict = GATE.check(text)
    assert verdict.reasons


def test_unterminated_private_key_header_with_spaces_keeps_its_text() -> None:
    # The review's cubic case: a BEGIN line, then spaces and no END line.
    text = INPUTS["begin_spaces"]
    assert REDACTOR.redact(text).text == text


def test_blank_lines_are_not_a_stack_trace() -> None:
    # The gate's frame regexes once let ``^\\s*`` run across every blank line that followed.
    assert "stack_trace" not in GATE.check("\n" * 19_900 + "File x").codes


def test_version_shaped_tokens_do_not_backtrack() -> None:
    # ``1.2a1ba1b...!`` made the version pattern's fullmatch exponential (a hypothesis
    # test hung on it); with possessive runs it is one pass, and still not a version.
    from service.domain.redaction.heuristics import VERSION_RE, looks_random

    token = "1.2" + "a1b" * 300 + "!"
    assert VERSION_RE.fullmatch(token) is None
    assert looks_random(token) is False
    assert VERSION_RE.fullmatch("1.2.3-beta.4") is not None
