"""embedding/fake.py: the tests' embedder. The same text gives the same unit vector, texts
sharing words point closer together than unrelated ones, and an empty text still has a
direction (a vector of zeros would break cosine ranking)."""

from __future__ import annotations

import math

from service.embedding.fake import FakeEmbedder


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_vectors_are_deterministic_unit_vectors_of_the_width() -> None:
    fake = FakeEmbedder(dims=64)
    one, again = fake.embed_documents(["Deploys freeze on Fridays.", "Deploys freeze on Fridays."])
    assert one == again == fake.embed_query("Deploys freeze on Fridays.")
    assert len(one) == fake.dims == 64
    assert math.isclose(math.sqrt(sum(x * x for x in one)), 1.0)
    assert fake.embed_query("") == [1.0] + [0.0] * 63


def test_shared_words_are_closer_than_unrelated_text() -> None:
    fake = FakeEmbedder()
    deploy = fake.embed_query("blue green deploy pipeline health checks")
    near = fake.embed_query("the deploy pipeline runs health checks")
    far = fake.embed_query("the cafeteria serves lunch at noon")
    assert cosine(deploy, near) > cosine(deploy, far)


def test_tokens_are_counted_like_wordpiece_roughly() -> None:
    assert FakeEmbedder().count_tokens("Hello, world!") == 4 + 2
