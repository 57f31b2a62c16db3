"""Measured writes that count. A write the service catches as an exact duplicate of a memory it
holds skips the model and the insert (a batch checks content hashes before it embeds), so a
rate over such writes measures nothing. The rules every measured write of the speed bench
(``bench.speed``) and ``bench.write_ratio`` follows:

1. **Texts new to the store.** A run's texts are drawn for the store as it stands: their
   seed (and in ``bench.speed`` their item tag) carries the count of memories it held before
   them (the mark: the database's for ``bench.speed``, the namespace's for
   ``bench.write_ratio``), which every stored write raises, so a run against a store kept
   from an earlier run (``--store``) never sends that run's texts again, and a run on a fresh
   store is the same every time.
   Within a run each text carries its own item number. Near duplicates (cosine at or above
   ``near_duplicate_threshold`` in the namespace and type) are only listed in the answer,
   never refused, so they cost the write what any write costs; they are counted
   (``with_near_duplicates``), not held against the figure.
2. **A figure only when every item was stored** (``write_figure``): the answer's statuses are
   counted; when any item was not ``created`` (a duplicate, a gate rejection, a keyed
   update) the rate is left out and ``invalid`` says how many, so no table prints it.
3. **The embedder's pace on exactly the texts stored** (``stored_embed_texts``,
   ``InterleavedPace``): what the service embedded for each created item (its name over its
   content, ``document_text``), embedded again in the bench's process by the embedder the
   server builds from the same settings, its batch lane loaded (``servers_embedder``), in
   the same batches; ``of_embedder`` is the batch
   rate over that pace (issue 26's target: at least 0.8).
4. **The two paces taken turn about** (``InterleavedPace``): each of the service's batches
   is followed by the embedder alone on that batch's stored texts, and each side's rate
   counts only its own seconds. Timed one after the other, the embedder's pace moved between
   195 and 320 texts/s from run to run on this machine while the service's batch rate held,
   and the ratio moved with it; turn about, both see the same machine.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

STORED = "created"


def tally(statuses: Iterable[str]) -> dict[str, int]:
    """How many answers had each status (``created``, ``duplicate``, ``rejected``, ...)."""
    return dict(Counter(statuses))


def invalid_reason(counts: Mapping[str, int], sent: int) -> str | None:
    """``None`` when all ``sent`` items were stored; else what went wrong, in words."""
    stored = counts.get(STORED, 0)
    if stored == sent:
        return None
    missing = {k: v for k, v in sorted(counts.items()) if k != STORED and v}
    if set(missing) == {"duplicate"}:
        return f"invalid: {missing['duplicate']:,} of {sent:,} were duplicates"
    how = ", ".join(f"{v:,} {k}" for k, v in missing.items()) or "no answer"
    return f"invalid: {sent - stored:,} of {sent:,} were not stored ({how})"


def write_figure(
    counts: Mapping[str, int], sent: int, seconds: float, near: int | None = None
) -> dict[str, Any]:
    """A batch write's figure: what was sent and stored, each status's count, how many
    answers listed near duplicates (``near``, where the system says), and ``per_s`` only
    when every item was stored (else ``invalid``)."""
    out: dict[str, Any] = {"sent": sent, "stored": counts.get(STORED, 0), **counts}
    if near is not None:
        out["with_near_duplicates"] = near
    out["seconds"] = round(seconds, 1)
    reason = invalid_reason(counts, sent)
    if reason is not None:
        out["invalid"] = reason
    elif seconds > 0:
        out["per_s"] = round(sent / seconds, 1)
    return out


def stored_embed_texts(
    client: Any, sent: Sequence[str], answers: Sequence[dict[str, Any]]
) -> list[str]:
    """What the service embedded for each created item of a batch: its name over its content
    (``document_text``; the name derived from the content, as no bench write names one).
    ``sent[i]`` is what item ``i`` sent, ``answers`` the batch's per-item answers. An item
    whose content the service redacted is read back (GET /v1/memories/{id}), so the texts
    are the stored ones, not the sent ones."""
    from service.domain.writes.prepare import derive_name, document_text

    out = []
    for answer in sorted(answers, key=lambda a: int(a["index"])):
        if answer["status"] != STORED:
            continue
        if answer.get("redactions"):
            r = client.get(f"/v1/memories/{answer['id']}")
            r.raise_for_status()
            memory = r.json()
            out.append(document_text(memory["name"], memory["content"]))
        else:
            text = sent[int(answer["index"])]
            out.append(document_text(derive_name(text), text))
    return out


def servers_embedder(settings: Any) -> Any:
    """The embedder the server builds from ``settings``, its batch lane loaded: the server
    loads it from start-up (app.py), so a pace measured while it still loads would be fp32's,
    less than half its own, and flatter the service."""
    from service.embedding import build_embedder

    embedder = build_embedder(settings)
    lane = getattr(embedder, "document_lane", None)
    if lane is not None:
        lane(wait=True)
    return embedder


class InterleavedPace:
    """The embedder's pace on a batch write's texts, measured batch by batch between the
    service's batches (rule 4): ``add`` right after each batch's answer, ``result`` at the
    end. One untimed warm-up call precedes the first timed one. ``result`` also gives each
    turn's own rate over the service's rate in that turn (``of_embedder_per_batch``: the
    lowest, the median and the highest), so a reader sees how steady the ratio was."""

    def __init__(self, embedder: Any, batch: int) -> None:
        self.embedder = embedder
        self.batch = batch
        self.warm = False
        self.texts = 0
        self.seconds = 0.0
        self.turns: list[float] = []

    def add(self, texts: Sequence[str], write_seconds: float) -> None:
        """Time the embedder on ``texts`` (one batch's stored texts, which the service wrote
        in ``write_seconds``)."""
        if not texts:
            return
        # The model's own pace: its matrix, as a batch write takes it (embed_matrix), where
        # the embedder has one; else its lists.
        embed = getattr(self.embedder, "embed_matrix", self.embedder.embed_documents)
        if not self.warm:
            embed(list(texts[: min(8, len(texts))]))
            self.warm = True
        t0 = time.perf_counter()
        for lo in range(0, len(texts), self.batch):
            embed(list(texts[lo : lo + self.batch]))
        wall = time.perf_counter() - t0
        self.texts += len(texts)
        self.seconds += wall
        if wall > 0 and write_seconds > 0:
            self.turns.append(wall / write_seconds)

    def result(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "texts": self.texts,
            "seconds": round(self.seconds, 1),
            "per_s": round(self.texts / self.seconds, 1) if self.seconds > 0 else None,
            "interleaved": True,
        }
        if self.turns:
            turns = sorted(self.turns)
            out["of_embedder_per_batch"] = [
                round(turns[0], 2),
                round(turns[len(turns) // 2], 2),
                round(turns[-1], 2),
            ]
        return out


def against_embedder(figure: dict[str, Any], pace: dict[str, Any]) -> None:
    """Set ``figure``'s embedder pace and ``of_embedder`` (its rate over the pace)."""
    figure["embedder"] = pace
    if figure.get("per_s") and pace.get("per_s"):
        figure["of_embedder"] = round(figure["per_s"] / pace["per_s"], 2)
