"""bench/measured_writes.py: a write figure stands only when every item was stored, and the
embedder's pace is taken on exactly the texts the service embedded."""

from __future__ import annotations

import httpx

from bench.measured_writes import (
    InterleavedPace,
    against_embedder,
    invalid_reason,
    stored_embed_texts,
    tally,
    write_figure,
)
from service.domain.writes.prepare import derive_name, document_text
from tests.bench.conftest import Recording
from tests.conftest import KeyFactory


def test_the_interleaved_pace_times_each_batchs_texts_after_it() -> None:
    embedder = Recording()
    pace = InterleavedPace(embedder, batch=5)
    pace.add([], 1.0)  # a batch that stored nothing: no call, no turn
    pace.add([f"a {i}" for i in range(7)], 1e-6)
    pace.add([f"b {i}" for i in range(3)], 1e-6)
    # one untimed warm-up call before the first timed one, then each turn in its batches
    assert [len(c) for c in embedder.calls] == [7, 5, 2, 3]
    assert embedder.calls[1][0] == "a 0" and embedder.calls[3] == ["b 0", "b 1", "b 2"]
    out = pace.result()
    assert out["texts"] == 10 and out["interleaved"] is True
    assert out["per_s"] == round(10 / pace.seconds, 1)
    low, mid, high = out["of_embedder_per_batch"]
    assert 0 < low <= mid <= high
    assert InterleavedPace(embedder, batch=5).result()["per_s"] is None


def test_a_figure_needs_every_item_stored() -> None:
    counts = tally(["created"] * 4)
    assert write_figure(counts, 4, 2.0, near=1) == {
        "sent": 4,
        "stored": 4,
        "created": 4,
        "with_near_duplicates": 1,
        "seconds": 2.0,
        "per_s": 2.0,
    }
    dup = write_figure(tally(["created", "duplicate", "duplicate"]), 3, 0.1)
    assert "per_s" not in dup
    assert dup["invalid"] == "invalid: 2 of 3 were duplicates"
    assert (dup["stored"], dup["duplicate"]) == (1, 2)
    mixed = invalid_reason(tally(["created", "duplicate", "rejected", "rejected"]), 4)
    assert mixed == "invalid: 3 of 4 were not stored (1 duplicate, 2 rejected)"
    assert invalid_reason({}, 2) == "invalid: 2 of 2 were not stored (no answer)"


def test_the_ratio_is_the_batch_rate_over_the_embedders() -> None:
    figure = write_figure({"created": 12}, 12, 1.0)
    against_embedder(figure, {"texts": 12, "seconds": 0.5, "per_s": 24.0})
    assert figure["of_embedder"] == 0.5
    unpaced = write_figure({"created": 12}, 12, 1.0)
    against_embedder(unpaced, {"texts": 0, "seconds": 0.0, "per_s": None})
    assert "of_embedder" not in unpaced


async def test_the_texts_are_what_the_service_embedded_for_the_items_it_stored(
    live_server: str, make_key: KeyFactory
) -> None:
    key = await make_key()
    plain = "We decided to keep the billing export on Postgres because it replays cleanly."
    secret = "Deploys of the gateway use the token ghp_abcdefghijklmnopqrstuvwxyz0123456789 now."
    sent = [plain, plain, secret]
    with httpx.Client(base_url=live_server, headers=key.headers) as client:
        r = client.post(
            "/v1/remember/batch",
            json={
                "items": [{"content": t, "namespace": "bench", "type": "decision"} for t in sent]
            },
        )
        r.raise_for_status()
        answers = r.json()["items"]
        assert [a["status"] for a in answers] == ["created", "duplicate", "created"]
        texts = stored_embed_texts(client, sent, answers)
        stored = client.get(f"/v1/memories/{answers[2]['id']}").json()
    assert answers[2]["redactions"] and "ghp_" not in stored["content"]
    assert texts == [
        document_text(derive_name(plain), plain),
        document_text(stored["name"], stored["content"]),
    ]
