"""Cross-validated ranking constants over three corpora of different character.

    python -m bench.crossval                 # load, fetch candidates, grid + folds, API check
    python -m bench.crossval --reuse         # keep the last run's database (no loading)
    python -m bench.crossval --no-api        # skip the API check of the shipped defaults
    python -m bench.crossval --reuse --no-grid          # shipped vs former constants only
    python -m bench.crossval --reuse --study-smoothing  # also score neighbour smoothing

Corpora (each in LoCoMo's shape, see bench/corpora/__init__.py):

- ``locomo``: LoCoMo's long multi-session chats, questions as goals (/work/shared/bench/locomo);
- ``agent``: a coding agent's memories (decisions, gotchas, procedures, plans), agent goals
  (``bench/corpora/agent.py``);
- ``personal``: short personal-event chats, goals that are the last turns of a later chat
  (``bench/corpora/personal.py``).

Each corpus is loaded twice through the public API (``POST /v1/remember/batch``, the
service's write path with the real model), one namespace per conversation, project or
user: ``flat`` (one remember per record, no dates, no links: how most agents write) and
``ingest`` (``valid_at`` plus ``follows`` / ``precedes`` links between consecutive records
of a session, as ``ctxpack ingest --links`` stores them).

Candidates are fetched once per goal and load through the domain path of a context pack
(``ranking.derive_query``, the embedder, ``ranking.build_plan`` for deep_search, limit 10,
``RetrievalRepository.rank``) with the gate opened and the limit raised, so each
candidate's cosine, lexical share and type prior come back; the grid is then scored in
Python by the same formulas as the SQL (relevance, gate, prior, graph step), which makes
a grid point cost microseconds instead of a call. Off-topic goals (software goals for the
chats, everyday-life goals for the agent) are fetched the same way: a grid point may not
let more of them through than the shipped defaults do, or the gate would be tuned away.

Folds: the groups of every corpus are split in 3 by their sorted index; constants are
chosen on two folds (mean of R@5 and R@10 over corpora and loads, corpora weighted
alike), among points that lose no corpus and load more than ``MAX_LOSS`` points against the
constants before issue 30, and reported on the third. After the grid, on the chosen point:
the relative gate (the strictest share within ``MAX_LOSS``: recall alone would always pick
0) and the boost for dates in goals. Last, unless ``--no-api``, every goal is asked through
``POST /v1/context`` with the shipped defaults, and that table is the measured one.

Embeddings are cached under ``bench/.cache/`` (gitignored), so a rerun embeds nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import itertools
import json
import sys
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench import corpora, locomo_eval
from bench.report import write_json

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(__file__).resolve().parent / ".cache"
CORPORA = ("locomo", "agent", "personal")
LOADS = ("flat", "ingest")
FOLDS = 3
K = 10
OFF_TOPIC_LIFE = [
    "We adopted a puppy from the shelter last weekend",
    "How was your trip to Lisbon?",
    "My sister is getting married in June",
    "I sprained my ankle playing soccer",
    "Any tips for baking a lemon tart?",
    "I started guitar lessons with a new teacher",
    "We're repainting the kitchen this month",
    "I ran my first half marathon on Sunday",
    "What should I cook for my mom's birthday dinner?",
    "Did you watch the football game last night?",
]  # fmt: skip


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- corpora -----------------------------------------------------------------------------------


def load_corpus(name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(memories, queries) of a corpus, memories as ``{id, group, session, content, type,
    valid_at}``."""
    if name == "locomo":
        turns = locomo_eval.read_jsonl(locomo_eval.DATA / "memories.jsonl")
        queries = locomo_eval.read_jsonl(locomo_eval.DATA / "queries.jsonl")
        memories = [
            {
                "id": t["id"], "group": t["group"], "session": t["session"],
                "content": locomo_eval.turn_content(t), "type": "episode",
                "valid_at": locomo_eval.turn_time(t["timestamp"]),
            }
            for t in turns
        ]  # fmt: skip
        return memories, queries
    data = corpora.read(name)
    memories = [{**m, "valid_at": m["timestamp"]} for m in data["memories"]]
    return memories, data["queries"]


def folds_of(groups: Iterable[str]) -> dict[str, int]:
    return {g: i % FOLDS for i, g in enumerate(sorted(set(groups)))}


# --- the embedder, cached on disk --------------------------------------------------------------


class CachedEmbedder:
    """The service's embedder behind a disk cache keyed by text (documents and queries apart)."""

    def __init__(self, inner: Any, path: Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.path = path
        self.thread_safe = getattr(inner, "thread_safe", False)
        self.vectors: dict[str, list[float]] = {}
        if path.exists():
            with np.load(path) as data:
                keys = [str(k) for k in data["keys"]]
                self.vectors = dict(zip(keys, data["vectors"].tolist(), strict=True))
        self.added = 0

    @property
    def dims(self) -> int:
        return int(self.inner.dims)

    @staticmethod
    def _key(kind: str, text: str) -> str:
        return kind + hashlib.sha1(text.encode()).hexdigest()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        keys = [self._key("d", t) for t in texts]
        missing = sorted(
            {(k, t) for k, t in zip(keys, texts, strict=True) if k not in self.vectors}
        )
        if missing:
            for (k, _), v in zip(
                missing, self.inner.embed_documents([t for _, t in missing]), strict=True
            ):
                self.vectors[k] = list(v)
            self.added += len(missing)
        return [self.vectors[k] for k in keys]

    def embed_query(self, text: str) -> list[float]:
        key = self._key("q", text)
        if key not in self.vectors:
            self.vectors[key] = list(self.inner.embed_query(text))
            self.added += 1
        return self.vectors[key]

    def count_tokens(self, text: str) -> int:
        return int(self.inner.count_tokens(text))

    def save(self) -> None:
        if not self.added:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = list(self.vectors)
        tmp = self.path.with_suffix(".tmp.npz")
        np.savez(
            tmp,
            keys=np.array(keys),
            vectors=np.array([self.vectors[k] for k in keys], dtype=np.float32),
        )
        tmp.replace(self.path)
        self.added = 0


# --- loading -----------------------------------------------------------------------------------


def corpus_tag(memories: list[dict[str, Any]]) -> str:
    """A short digest of a corpus' memories: a regenerated corpus loads into namespaces of
    its own, so ``--reuse`` never mixes two versions."""
    blob = json.dumps(memories, sort_keys=True).encode()
    return hashlib.sha1(blob).hexdigest()[:6]


def namespace(load: str, tag: str, group: str) -> str:
    return f"{load}-{tag}-{group}"


async def load_memories(
    client: httpx.AsyncClient, memories: list[dict[str, Any]], load: str
) -> dict[str, int]:
    """Store ``memories`` as ``load`` asks; returns the write statuses counted."""
    tag = corpus_tag(memories)
    counts: dict[str, int] = defaultdict(int)
    ids: dict[str, str] = {}

    def item(m: dict[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "content": m["content"], "namespace": namespace(load, tag, m["group"]),
            "type": m["type"], "source": m["id"],
        }  # fmt: skip
        if load == "ingest" and m.get("valid_at"):
            body["valid_at"] = m["valid_at"]
        return body

    async def store(batch: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
        await locomo_eval.store_batches(client, batch, counts, ids)

    if load == "flat":
        await store([(m, item(m)) for m in memories])
        return dict(counts)
    # As bench.locomo_eval stores with links: even records of a session first, then odd
    # ones linked to both neighbours.
    sessions: dict[tuple[str, Any], list[dict[str, Any]]] = defaultdict(list)
    for m in memories:
        sessions[(m["group"], m["session"])].append(m)
    await store([(m, item(m)) for s in sessions.values() for i, m in enumerate(s) if i % 2 == 0])
    second = []
    for s in sessions.values():
        for i, m in enumerate(s):
            if i % 2 == 0:
                continue
            body = item(m)
            related = (
                [{"id": ids[s[i - 1]["id"]], "relationship": "follows"}]
                if s[i - 1]["id"] in ids
                else []
            )
            if i + 1 < len(s) and s[i + 1]["id"] in ids:
                related.append({"id": ids[s[i + 1]["id"]], "relationship": "precedes"})
            body["related"] = related
            second.append((m, body))
    await store(second)
    return dict(counts)


# --- candidates --------------------------------------------------------------------------------


@dataclasses.dataclass
class Candidates:
    """One goal's candidates at one load: source ids and the features the score reads."""

    ids: list[str]
    cosine: np.ndarray
    lexical: np.ndarray
    prior: np.ndarray
    # valid_at as epoch seconds (NaN: none), and the periods the goal names.
    valid_at: np.ndarray | None = None
    periods: list[tuple[float, float]] = dataclasses.field(default_factory=list)


# Goal handling variants: None asks with the whole goal (no focus); else (vector turns,
# lexical terms) of goal_focus.focus_goal.
FOCUS_VARIANTS: tuple[tuple[int, int] | None, ...] = (
    None,
    (1, 16),
    (2, 16),
    (3, 16),
    (2, 8),
    (2, 32),
)


def goal_texts(goal: str, variant: tuple[int, int] | None) -> tuple[str, str]:
    """(lexical, vector) texts of ``goal`` for a focus variant, as ``ranking.goal_query``
    builds them."""
    from service.domain import ranking
    from service.domain.goal_focus import focus_goal

    if variant is None:
        whole = ranking.derive_query(goal, None)
        return whole, whole
    focused = focus_goal(goal, vector_turns=variant[0], max_terms=variant[1])
    return ranking.derive_query(focused.lexical, None), ranking.derive_query(focused.vector, None)


async def fetch_candidates(
    app: Any, org_id: Any, ns: str, goal: str, lexical: str, vector_text: str
) -> Candidates:
    """The candidates a deep_search pack of limit 10 would rank, with the gate opened and
    the limit raised (the domain path of ``compile_context``, minus the pack)."""
    from service.domain import ranking
    from service.domain.temporal import goal_periods
    from service.store.retrieval import SCOPE_COUNT_CAP, RetrievalRepository, Scope

    resources = app.state.ctx
    query = lexical
    vector = await resources.embedder.embed_query(vector_text)
    scope = Scope(org_id=org_id, namespaces=[ns])
    async with resources.sessionmaker() as session:
        repo = RetrievalRepository(session)
        scope_rows = await repo.scope_size(scope, SCOPE_COUNT_CAP)
        plan = ranking.build_plan(
            ranking.PlanInputs(
                mode="hybrid", layer="deep_search", intent="build", query=query,
                query_vector=vector, limit=K, domain=None, include_related=True, related_limit=0,
            ),
            resources.settings,
        )  # fmt: skip
        opened = dataclasses.replace(
            plan, relevance_floor=-2.0, lexical_floor=-2.0, min_lexical_share=0.0,
            limit=plan.candidates * 2, recency_weight=0.0, graph_decay=None, related_limit=0,
        )  # fmt: skip
        ranked = await repo.rank(scope, opened, scope_rows)
    rows = ranked.rows
    return Candidates(
        ids=[str(r.source) for r in rows],
        cosine=np.array([r.cosine or 0.0 for r in rows]),
        lexical=np.array([r.lexical for r in rows]),
        prior=np.array([r.prior for r in rows]),
        valid_at=np.array([r.valid_at.timestamp() if r.valid_at else np.nan for r in rows]),
        periods=[(p.start.timestamp(), p.end.timestamp()) for p in goal_periods(goal)],
    )


async def fetch_variants(
    app: Any, org_id: Any, ns: str, goal: str
) -> dict[tuple[int, int] | None, Candidates]:
    """Candidates per focus variant; variants that search with the same texts share them."""
    by_texts: dict[tuple[str, str], Candidates] = {}
    out: dict[tuple[int, int] | None, Candidates] = {}
    for variant in FOCUS_VARIANTS:
        texts = goal_texts(goal, variant)
        if texts not in by_texts:
            by_texts[texts] = await fetch_candidates(app, org_id, ns, goal, *texts)
        out[variant] = by_texts[texts]
    return out


async def stored(app: Any, org_id: Any, prefix: str) -> int:
    """Memories in namespaces starting with ``prefix``."""
    from sqlalchemy import text

    sql = text("SELECT count(*) FROM memories WHERE org_id = :org AND namespace LIKE :prefix")
    async with app.state.ctx.sessionmaker() as session:
        return int((await session.execute(sql, {"org": org_id, "prefix": f"{prefix}%"})).one()[0])


async def neighbours(app: Any, org_id: Any, prefix: str) -> dict[str, set[str]]:
    """Source id -> source ids linked to it (either direction), for the graph step."""
    from sqlalchemy import text

    sql = text(
        """SELECT a.source, b.source FROM relations r
           JOIN memories a ON a.org_id = r.org_id AND a.id = r.source_id
           JOIN memories b ON b.org_id = r.org_id AND b.id = r.target_id
           WHERE r.org_id = :org AND a.namespace LIKE :prefix"""
    )
    out: dict[str, set[str]] = defaultdict(set)
    async with app.state.ctx.sessionmaker() as session:
        for a, b in (await session.execute(sql, {"org": org_id, "prefix": f"{prefix}%"})).all():
            out[a].add(b)
            out[b].add(a)
    return out


# --- the score, in Python ----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Params:
    vector_weight: float
    floor: float
    lexical_floor: float
    min_share: float
    relative_gate: float = 0.0
    graph_decay: float = 0.8
    focus: tuple[int, int] | None = None
    # Neighbour smoothing (a study, not shipped): a linked candidate's score gains this
    # share of its best linked candidate's relevance.
    smooth: float = 0.0
    # The goal's dates: a candidate whose valid_at falls in a named period scores x (1 + this).
    date_boost: float = 0.0


def rank(c: Candidates, p: Params, adj: dict[str, set[str]] | None) -> list[str]:
    """The top ``K`` source ids as the SQL ranks them for ``p`` (recency left out: every
    memory of a run is written within minutes, so it scales all alike)."""
    if not c.ids:
        return []
    relevance = p.vector_weight * c.cosine + (1 - p.vector_weight) * c.lexical
    keep = (c.cosine >= p.floor) | ((c.lexical >= p.min_share) & (c.cosine >= p.lexical_floor))
    if p.relative_gate > 0 and keep.any():
        keep &= relevance >= p.relative_gate * relevance[keep].max()
    score = relevance * c.prior
    if p.smooth > 0 and adj is not None:
        pos = {m: k for k, m in enumerate(c.ids)}
        near = np.zeros(len(c.ids))
        for k, m in enumerate(c.ids):
            linked = [relevance[pos[n]] for n in adj.get(m, ()) if n in pos]
            near[k] = max(linked, default=0.0)
        score = (relevance + p.smooth * near) * c.prior
    if p.date_boost > 0 and c.periods and c.valid_at is not None:
        inside = np.zeros(len(c.ids), dtype=bool)
        for a, b in c.periods:
            inside |= (c.valid_at >= a) & (c.valid_at < b)
        score = score * np.where(inside, 1 + p.date_boost, 1.0)
    idx = np.flatnonzero(keep)
    order = idx[np.lexsort((idx, -score[idx]))][:K]
    top = [(c.ids[i], float(score[i])) for i in order]
    if adj is None:
        return [i for i, _ in top]
    chosen = {i for i, _ in top}
    hop: dict[str, float] = {}
    for i, s in top:
        for n in adj.get(i, ()):
            if n not in chosen:
                hop[n] = max(hop.get(n, 0.0), s * p.graph_decay)
    pool = top + list(hop.items())
    pool.sort(key=lambda x: -x[1])
    return [i for i, _ in pool[:K]]


def recall(gold: list[str], ranked: list[str], k: int) -> float:
    return len(set(gold) & set(ranked[:k])) / len(gold)


# --- the run -----------------------------------------------------------------------------------


@dataclasses.dataclass
class Goal:
    corpus: str
    fold: int
    load: str
    gold: list[str]
    cands: dict[tuple[int, int] | None, Candidates]
    adj: dict[str, set[str]] | None

    def cand(self, p: Params) -> Candidates:
        return self.cands[p.focus]


class Ranker:
    """``rank`` with a memo for the grid's innermost loop (the focus variant): goals of one
    line have the same candidates under every variant, so they are ranked once per point of
    the other constants."""

    def __init__(self) -> None:
        self.base: Params | None = None
        self.memo: dict[int, list[str]] = {}

    def __call__(self, c: Candidates, p: Params, adj: dict[str, set[str]] | None) -> list[str]:
        base = dataclasses.replace(p, focus=None)
        if base != self.base:
            self.base, self.memo = base, {}
        key = id(c)
        if key not in self.memo:
            self.memo[key] = rank(c, p, adj)
        return self.memo[key]


def evaluate(
    goals: list[Goal], p: Params, ranker: Ranker | None = None
) -> dict[tuple[str, str, int], list[float]]:
    """(corpus, load, fold) -> [sum R@5, sum R@10, n, sum of pack sizes]."""
    ranker = ranker or Ranker()
    out: dict[tuple[str, str, int], list[float]] = defaultdict(new_cell)
    for g in goals:
        add(out[(g.corpus, g.load, g.fold)], g.gold, ranker(g.cand(p), p, g.adj))
    return out


def new_cell() -> list[float]:
    return [0.0, 0.0, 0.0, 0.0]


def add(cell: list[float], gold: list[str], ranked: list[str]) -> None:
    cell[0] += recall(gold, ranked, 5)
    cell[1] += recall(gold, ranked, 10)
    cell[2] += 1
    cell[3] += len(ranked[:K])


def objective(cells: dict[tuple[str, str, int], list[float]], folds: set[int]) -> float:
    """Mean over corpora and loads of (R@5 + R@10) / 2 on ``folds``, corpora alike."""
    per: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for (corpus, load, fold), (r5, r10, n, _) in cells.items():
        if fold in folds:
            acc = per[(corpus, load)]
            acc[0], acc[1], acc[2] = acc[0] + r5, acc[1] + r10, acc[2] + n
    return float(np.mean([(a[0] + a[1]) / 2 / a[2] for a in per.values() if a[2]]))


# A point may not lose more than this (recall points) on any corpus and load.
MAX_LOSS = 0.5


def per_cell(cells: dict[tuple[str, str, int], list[float]], folds: set[int]) -> dict[Any, Any]:
    """(corpus, load) -> (R@5, R@10) in percent over ``folds``."""
    acc: dict[tuple[str, str], list[float]] = defaultdict(new_cell)
    for (corpus, load, fold), cell in cells.items():
        if fold in folds:
            acc[(corpus, load)] = [a + b for a, b in zip(acc[(corpus, load)], cell, strict=True)]
    return {k: (100 * a[0] / a[2], 100 * a[1] / a[2]) for k, a in acc.items() if a[2]}


def no_loss(
    cells: dict[tuple[str, str, int], list[float]],
    before: dict[tuple[str, str, int], list[float]],
    folds: set[int],
) -> bool:
    """No corpus and load loses more than ``MAX_LOSS`` points of R@5 or R@10 on ``folds``
    against the constants before issue 30."""
    now, then = per_cell(cells, folds), per_cell(before, folds)
    return all(now[k][i] >= then[k][i] - MAX_LOSS for k in then for i in (0, 1))


RELATIVE_GATES = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7)


def relative_gate_study(goals: list[Goal], best: Params) -> dict[str, Any]:
    """The relative gate costs recall and buys shorter packs, so recall alone always sets it
    to 0: it is chosen instead as the strictest share that loses no corpus and load more
    than ``MAX_LOSS`` against ``best`` without it, per fold on the other two folds."""
    base = evaluate(goals, dataclasses.replace(best, relative_gate=0.0))
    shares = {
        rg: evaluate(goals, dataclasses.replace(best, relative_gate=rg)) for rg in RELATIVE_GATES
    }
    out: dict[str, Any] = {"folds": {}}
    for held in range(FOLDS):
        train = set(range(FOLDS)) - {held}
        ok = [rg for rg, cells in shares.items() if no_loss(cells, base, train)]
        out["folds"][held] = max(ok, default=0.0)
    ok_all = [rg for rg, cells in shares.items() if no_loss(cells, base, set(range(FOLDS)))]
    out["all"] = max(ok_all, default=0.0)
    for rg, cells in shares.items():
        now, then = per_cell(cells, set(range(FOLDS))), per_cell(base, set(range(FOLDS)))
        loss = max(then[k][i] - now[k][i] for k in then for i in (0, 1))
        items = sum(c[3] for c in cells.values()) / sum(c[2] for c in cells.values())
        print(f"relative gate {rg}: worst loss {loss:.2f} points, mean pack {items:.2f} items")
    before_items = sum(c[3] for c in base.values()) / sum(c[2] for c in base.values())
    print(
        f"relative gate 0: mean pack {before_items:.2f}; chosen per fold {out['folds']}, on all {out['all']}"
    )
    return out


DATE_BOOSTS = (0.05, 0.1, 0.15, 0.2, 0.3, 0.5)


def date_boost_study(goals: list[Goal], best: Params) -> dict[str, Any]:
    """The boost for memories dated in a period the goal names: per fold, the value with the
    best objective on the other two folds among those losing no corpus and load more than
    ``MAX_LOSS`` against no boost (0 when none gains); the held-out folds are printed."""
    base = evaluate(goals, dataclasses.replace(best, date_boost=0.0))
    boosts = {d: evaluate(goals, dataclasses.replace(best, date_boost=d)) for d in DATE_BOOSTS}
    boosts[0.0] = base

    def choose(folds: set[int]) -> float:
        ok = [(objective(c, folds), d) for d, c in boosts.items() if no_loss(c, base, folds)]
        return max(ok, default=(0.0, 0.0))[1]

    out: dict[str, Any] = {
        "folds": {h: choose(set(range(FOLDS)) - {h}) for h in range(FOLDS)},
        "all": choose(set(range(FOLDS))),
    }
    every = set(range(FOLDS))
    for d, cells in sorted(boosts.items()):
        now = per_cell(cells, every)
        rows = "  ".join(
            f"{c}/{lo} {r5:.1f}/{r10:.1f}" for (c, lo), (r5, r10) in sorted(now.items())
        )
        print(f"date boost {d}: objective {objective(cells, every):.4f}  {rows}")
    held = {k: c for h, d in out["folds"].items() for k, c in boosts[d].items() if k[2] == h}
    print(table(held, f"\ndate boost, cross-validated (chosen per fold: {out['folds']})"))
    return out


def off_topic_items(off: list[Goal], p: Params, ranker: Ranker | None = None) -> float:
    """Mean pack size for off-topic goals."""
    ranker = ranker or Ranker()
    return float(np.mean([len(ranker(g.cand(p), p, g.adj)) for g in off])) if off else 0.0


# The constants main shipped before issue 30 (the baseline every figure is compared with).
BEFORE = Params(0.3, 0.30, 0.20, 0.10, 0.0, 0.8, None)


def grid() -> list[Params]:
    """Every point of a small grid."""
    return [
        Params(vw, floor, lf, ms, rg, decay, focus)
        for vw, floor, lf, ms, rg, decay, focus in itertools.product(
            (0.2, 0.3, 0.4), (0.25, 0.30, 0.35), (0.15, 0.20), (0.05, 0.10),
            (0.0, 0.3, 0.5), (0.6, 0.8), FOCUS_VARIANTS,
        )
    ]  # fmt: skip


def table(cells: dict[tuple[str, str, int], list[float]], title: str) -> str:
    """Per corpus, load and fold: goals, R@5, R@10 and the mean pack size."""
    head = f"{'corpus':<9} {'load':<7} {'fold':>4} {'n':>5} {'R@5':>6} {'R@10':>6} {'items':>6}"
    lines = [title, head]

    def row(corpus: str, load: str, fold: str, c: list[float]) -> str:
        r5, r10, n, items = (c[0] / c[2], c[1] / c[2], c[2], c[3] / c[2])
        return (
            f"{corpus:<9} {load:<7} {fold:>4} {int(n):>5} {100 * r5:>6.1f} {100 * r10:>6.1f}"
            f" {items:>6.2f}"
        )

    for corpus in CORPORA:
        for load in LOADS:
            tot = new_cell()
            for fold in range(FOLDS):
                c = cells.get((corpus, load, fold))
                if not c or not c[2]:
                    continue
                tot = [a + b for a, b in zip(tot, c, strict=True)]
                lines.append(row(corpus, load, str(fold), c))
            if tot[2]:
                lines.append(row(corpus, load, "all", tot))
    return "\n".join(lines)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from bench.wake import fresh_database
    from service.app import create_app
    from service.config import Settings
    from service.domain import goal_focus, ranking
    from service.domain import keys as key_service
    from service.embedding import build_embedder
    from service.store.database import upgrade

    work = CACHE / "run"
    url = fresh_database(work, args.database_url, "ctxpack_crossval", keep=args.reuse)
    upgrade(url)
    settings = Settings(
        database_url=url, data_dir=work, model_cache_dir=CACHE / "models",
        migrate_on_start=False, print_bootstrap_key=False, rate_limit_per_minute=0,
        query_cache_size=0, audit_prune_interval_seconds=0,
    )  # type: ignore[call-arg]  # fmt: skip
    embedder = CachedEmbedder(build_embedder(settings), CACHE / "embeddings.npz")
    app = create_app(settings, embedder=embedder, database_url=url)
    report: dict[str, Any] = {}
    corpus_data = {name: load_corpus(name) for name in CORPORA}
    async with app.router.lifespan_context(app):
        async with app.state.ctx.sessionmaker() as session:
            created = await key_service.create_key(
                session, org="crossval", scopes=["read", "write", "admin"]
            )
            await session.commit()
        org_id = created.org_id
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {created.key}"}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://crossval", headers=headers
        ) as client:
            tags = {name: corpus_tag(memories) for name, (memories, _) in corpus_data.items()}
            for name, (memories, _) in corpus_data.items():
                for load in LOADS:
                    if await stored(app, org_id, f"{load}-{tags[name]}-"):
                        continue
                    started = time.perf_counter()
                    counts = await load_memories(client, memories, load)
                    log(f"loaded {name}/{load}: {counts} in {time.perf_counter() - started:.0f} s")
                    report.setdefault("load", {})[f"{name}/{load}"] = counts
                    embedder.save()
            goals: list[Goal] = []
            off: list[Goal] = []
            for name, (memories, queries) in corpus_data.items():
                fold = folds_of(m["group"] for m in memories)
                for load in LOADS:
                    prefix = f"{load}-{tags[name]}-"
                    adj = await neighbours(app, org_id, prefix) if load == "ingest" else None
                    started = time.perf_counter()
                    for q in queries:
                        cands = await fetch_variants(app, org_id, prefix + q["group"], q["query"])
                        goals.append(Goal(name, fold[q["group"]], load, q["gold_ids"], cands, adj))
                    off_goals = (
                        OFF_TOPIC_LIFE if name == "agent" else locomo_eval.OFF_TOPIC_GOALS[:10]
                    )
                    for group in sorted(fold):
                        for goal in off_goals:
                            cands = await fetch_variants(app, org_id, prefix + group, goal)
                            off.append(Goal(name, fold[group], load, [], cands, adj))
                    log(
                        f"candidates {name}/{load}: {len(queries)} goals in {time.perf_counter() - started:.0f} s"
                    )
                    embedder.save()

            defaults = Params(
                ranking.VECTOR_WEIGHT, settings.relevance_floor, settings.lexical_relevance_floor,
                ranking.MIN_LEXICAL_SHARE, ranking.RELATIVE_GATE, ranking.GRAPH_DECAY,
                (goal_focus.VECTOR_TURNS, goal_focus.MAX_LEXICAL_TERMS),
                date_boost=ranking.DATE_BOOST,
            )  # fmt: skip
            started = time.perf_counter()
            points = [defaults, BEFORE, *([] if args.no_grid else grid())]
            ranker, off_ranker = Ranker(), Ranker()
            scored = [
                (p, evaluate(goals, p, ranker), off_topic_items(off, p, off_ranker)) for p in points
            ]
            log(f"grid: {len(points)} points in {time.perf_counter() - started:.0f} s")
            off_budget = scored[1][2] + args.off_topic_slack
            print(table(scored[1][1], f"\nreplica, before issue 30 {BEFORE}"))
            allowed = [s for s in scored if s[2] <= off_budget]
            report["defaults"] = dataclasses.asdict(defaults)
            report["off_topic_mean_items_defaults"] = round(scored[0][2], 3)
            print(table(scored[0][1], f"\nreplica, shipped defaults {defaults}"))
            cv: dict[tuple[str, str, int], list[float]] = {}
            chosen = []
            for held in range(FOLDS):
                train = set(range(FOLDS)) - {held}
                fair = [s for s in allowed if no_loss(s[1], scored[1][1], train)]
                best = max(fair, key=lambda s: objective(s[1], train))
                chosen.append(dataclasses.asdict(best[0]))
                for key, cell in best[1].items():
                    if key[2] == held:
                        cv[key] = cell
                print(
                    f"fold {held}: chosen on folds {sorted(train)}: {best[0]} (off-topic items {best[2]:.2f})"
                )
            print(
                table(
                    cv,
                    "\ncross-validated (each fold scored with constants chosen on the other two)",
                )
            )
            every = set(range(FOLDS))
            fair = [s for s in allowed if no_loss(s[1], scored[1][1], every)]
            best_all = max(fair, key=lambda s: objective(s[1], every))
            print(
                f"\nbest on all folds: {best_all[0]} objective {objective(best_all[1], set(range(FOLDS))):.4f} "
                f"(defaults {objective(scored[0][1], set(range(FOLDS))):.4f}); off-topic items {best_all[2]:.2f}"
            )
            report["folds_chosen"] = chosen
            report["relative_gate"] = relative_gate_study(goals, best_all[0])
            report["date_boost"] = date_boost_study(goals, best_all[0])
            if args.study_smoothing:
                for sm in (0.1, 0.2, 0.3, 0.5):
                    p = dataclasses.replace(defaults, smooth=sm)
                    print(table(evaluate(goals, p), f"\nneighbour smoothing {sm} (study)"))
            report["best_all"] = dataclasses.asdict(best_all[0])
            report["replica_defaults"] = {"/".join(map(str, k)): v for k, v in scored[0][1].items()}
            report["replica_before"] = {"/".join(map(str, k)): v for k, v in scored[1][1].items()}
            report["cross_validated"] = {"/".join(map(str, k)): v for k, v in cv.items()}
            if args.api:
                cells: dict[tuple[str, str, int], list[float]] = defaultdict(new_cell)
                for name, (memories, queries) in corpus_data.items():
                    fold = folds_of(m["group"] for m in memories)
                    for load in LOADS:
                        prefix = f"{load}-{tags[name]}-"
                        answers = await locomo_eval.ask(
                            client, queries, prefix, "hybrid", K, 2, "deep_search"
                        )
                        for q, a in zip(queries, answers, strict=True):
                            add(cells[(name, load, fold[q["group"]])], q["gold_ids"], a["ranked"])
                        log(f"API {name}/{load} done")
                        embedder.save()
                print(table(cells, "\nthrough POST /v1/context, shipped defaults"))
                report["api"] = {"/".join(map(str, k)): v for k, v in cells.items()}
    embedder.save()
    return report


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--reuse", action="store_true", help="keep the last run's database (no loading)"
    )
    parser.add_argument(
        "--database-url", default=None, help="a server to use instead of the embedded one"
    )
    parser.add_argument("--no-api", dest="api", action="store_false", help="skip the API check")
    parser.add_argument(
        "--study-smoothing", action="store_true", help="also score neighbour smoothing (ingest)"
    )
    parser.add_argument(
        "--no-grid", action="store_true", help="score the shipped and former constants only"
    )
    parser.add_argument(
        "--off-topic-slack", type=float, default=0.05,
        help="off-topic items a grid point may add to the defaults' mean pack size",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=CACHE / "crossval.json")
    args = parser.parse_args()
    report = asyncio.run(run(args))
    write_json(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
