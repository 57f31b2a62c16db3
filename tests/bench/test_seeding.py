"""bench/seeding.py: the vectors of memories past the embedding budget are reused from
embedded ones, with their own ticket (so every text stays distinct) and noise."""

from __future__ import annotations

import numpy as np
import pytest

from bench.corpus import corpus_for
from bench.seeding import VectorPool, seed_method, ticket_number

LOCOMO = ["Melanie: We went camping in the mountains last weekend with the kids."]


def _unit(rng: np.random.Generator) -> np.ndarray:
    v = rng.normal(size=384).astype(np.float32)
    return v / np.linalg.norm(v)


def test_ticket_number_is_the_last_ticket_of_the_text() -> None:
    assert ticket_number("breaks when the file has a UTF-8 BOM (seen in BILLING-104237).") == (
        "104237"
    )
    with pytest.raises(ValueError, match="no ticket"):
        ticket_number("no ticket here")


def test_the_pool_embeds_up_to_its_limit_and_reuses_past_it() -> None:
    rng = np.random.default_rng(0)
    items = corpus_for(range(3), 7, LOCOMO)
    pool = VectorPool(limit=100, noise=0.02)
    first = items[:100]
    pool.add(first, [_unit(rng) for _ in first])
    assert pool.room == 0
    assert np.array_equal(pool.known(first[5][3]), pool.vectors[5])
    assert pool.known(items[150][3]) is None

    again, vecs = pool.reuse(items[100:])
    texts = [text for *_, text in again]
    assert len(set(texts)) == len(texts) == 200
    assert not set(texts) & set(pool.texts)
    for (ns, iid, _, text), (ns2, iid2, typ2, text2), vec in zip(
        items[100:], again, vecs, strict=True
    ):
        assert (ns2, iid2) == (ns, iid)
        assert ticket_number(text2) == ticket_number(text)
        assert typ2 in set(pool.types)
        assert abs(float(np.linalg.norm(vec)) - 1.0) < 1e-5
    # Each reused vector stays near the embedded one it came from (noise 0.02 per dimension).
    best = max(float(np.max(np.stack(pool.vectors) @ v)) for v in vecs[:20])
    assert best > 0.85


def test_reuse_needs_embedded_vectors() -> None:
    with pytest.raises(ValueError, match="no embedded vectors"):
        VectorPool(limit=0).reuse(corpus_for(range(1), 7, LOCOMO)[:2])


def test_seed_method_says_what_was_reused() -> None:
    pool = VectorPool(limit=10)
    assert seed_method(10, 0, pool).startswith("embedded")
    assert seed_method(10, 90, pool).startswith("reused vectors: 10 memories embedded")
