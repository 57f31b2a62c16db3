"""bench/write_ratio.py: every run's texts are new to the namespace, and a rate is given only
when every write was stored."""

from __future__ import annotations

import httpx

from bench.measured_writes import InterleavedPace
from bench.write_ratio import singles, store_batches, stored_in, texts_for
from tests.bench.conftest import Recording
from tests.conftest import KeyFactory

TURNS = [
    {
        "speaker": "Caroline",
        "text": "I went to a LGBTQ support group yesterday and it was so powerful.",
    },
    {"speaker": "Melanie", "text": "We went camping in the mountains last weekend with the kids."},
    {"speaker": "Caroline", "text": "I'm looking into counseling and mental health careers now."},
]


def test_texts_are_distinct_and_follow_the_seed_and_the_mark() -> None:
    texts = texts_for(10, 1, 0, TURNS)  # more texts than turns: the turns come round again
    assert len(set(texts)) == 10
    assert texts == texts_for(10, 1, 0, TURNS)
    assert not set(texts) & set(texts_for(10, 1, 10, TURNS))
    assert [sum(t["text"] in x for x in texts[:3]) for t in TURNS] == [1, 1, 1]


async def test_a_second_run_with_the_same_seed_stores_every_write(
    live_server: str, make_key: KeyFactory
) -> None:
    key = await make_key()
    runs = []
    with httpx.Client(base_url=live_server, headers=key.headers, timeout=60) as client:
        for _ in range(2):
            mark = stored_in(client, "ratio")
            texts = texts_for(11, 5, mark, TURNS)
            recording = Recording()
            pace = InterleavedPace(recording, 4)
            batch, stored = store_batches(client, "ratio", texts[:6], 4, pace)
            # each batch's stored texts embedded right after its answer, after one warm-up
            assert sorted(t for call in recording.calls[1:] for t in call) == sorted(stored)
            assert [len(call) for call in recording.calls[1:]] == [4, 2]
            assert pace.result()["texts"] == 6
            runs.append((mark, batch, stored, singles(client, "ratio", texts[6:])))
        again, _ = store_batches(client, "ratio", texts_for(11, 5, 0, TURNS)[:6], 4)
        single_again = singles(client, "ratio", texts_for(11, 5, 0, TURNS)[6:])
    assert [mark for mark, *_ in runs] == [0, 11]
    for _, batch, stored, single in runs:
        assert (batch["sent"], batch["stored"], batch["created"]) == (6, 6, 6)
        assert batch["per_s"] > 0 and "invalid" not in batch
        assert len(stored) == 6
        assert single["stored"] == 5 and single["p50_ms"] > 0
    assert again["invalid"] == "invalid: 6 of 6 were duplicates" and "per_s" not in again
    assert single_again["invalid"] == "invalid: 5 of 5 were duplicates"
    assert "p50_ms" not in single_again
