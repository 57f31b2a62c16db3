"""The committed tool-result corpus is what its generator makes (same seed, same bytes), and
every case carries its labelled answer and its planted secrets."""

from __future__ import annotations

import json

from bench.tool_results.generate import CORPUS, build


def test_the_committed_corpus_is_the_generators() -> None:
    made = [json.dumps(case, ensure_ascii=False) for case in build()]
    assert CORPUS.read_text().splitlines() == made


def test_every_case_has_an_answer_and_secrets_of_many_shapes() -> None:
    cases = [json.loads(line) for line in CORPUS.read_text().splitlines()]
    families = {c["family"] for c in cases}
    assert families == {"pytest", "pip", "kubectl", "docker", "github", "npm", "database", "seed"}
    assert all(c["answer"] and c["secrets"] for c in cases)
    shapes = {s[:4] for c in cases for s in c["secrets"]}
    assert len(shapes) > 20
