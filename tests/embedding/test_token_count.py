"""The token count (service/embedding/minilm.py:count_tokens) is the tokenizer's own.

It counts chunk by chunk with a fast path for printable ASCII, so these tests compare it
with MiniLM's whole tokenizer on every kind of text that could make the two part: accents
and combining marks, CJK, symbols, control characters, Unicode spaces, words past
WordPiece's 100-character limit, punctuation runs, and packs as the markdown renders them.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from service.embedding import minilm

LOCOMO = Path(__file__).resolve().parents[3] / "shared" / "bench" / "locomo" / "memories.jsonl"


def reference(text: str) -> int:
    return len(minilm.load_tokenizer().encode(text, add_special_tokens=False).ids)


# Characters the tokenizer's normalizer and pre-tokenizer treat specially, beside ASCII.
SPECIAL = [
    *"éÉñüßøİﬁ",  # accents and case folds
    "e\u0301",  # a letter and its combining accent
    "\u0301",  # a combining accent alone
    *"東京한글ひカ",  # CJK and other scripts
    *"·→←…—“”’€©😀",  # symbols and emoji
    "👍🏽",  # an emoji with a modifier
    *"\u00a0\u2009\u3000\u200b\ufeff\u2028",  # Unicode spaces, zero-width
    *"\x00\x01\x0b\x0c\x1c\x1f\x7f\x85\ufffd",  # controls
    *"\t\n\r ",
    "  ",
]
ASCII = [chr(c) for c in range(0x20, 0x7F)]


def random_text(rng: random.Random) -> str:
    parts: list[str] = []
    for _ in range(rng.randint(0, 40)):
        roll = rng.random()
        if roll < 0.5:
            parts.append(
                "".join(
                    rng.choice("abcdefghijklmnopqrstuvwxyzABCXYZ0123456789")
                    for _ in range(rng.randint(1, 14))
                )
            )
        elif roll < 0.7:
            parts.append(rng.choice(ASCII))
        elif roll < 0.9:
            parts.append(rng.choice(SPECIAL))
        else:
            parts.append(rng.choice([" ", "\n", "\t", "\r\n"]))
    return "".join(parts)


def test_random_text_of_every_kind_counts_as_the_tokenizer_does() -> None:
    rng = random.Random(26)
    texts = [random_text(rng) for _ in range(3000)]
    wrong = [t for t in texts if minilm.count_tokens(t) != reference(t)]
    assert not wrong, wrong[:5]


@pytest.mark.parametrize(
    "text",
    [
        "",
        " \n\t ",
        "a" * 100,  # WordPiece's longest word
        "a" * 101,  # one past it: [UNK]
        "x" * 150 + ",y",
        "Supercalifragilisticexpialidocious antidisestablishmentarianism",
        "GET /v1/artifacts/123?fields=a,b&c=[1,2]{x}|~`^_\\",
        "café naïve résumé",
        "e\u0301cole",  # a combining accent after its letter
        " \u0301leading combining mark",
        "東京タワーへ行った",
        "word\u00a0joined by a no-break space",
        "a\x1cb c\x0bd e\x0cf",  # controls the normalizer drops, not spaces
        "tab\tseparated\r\nlines\n",
        "# Context for: deploy · layer: recall · 3 items\n- **x** (fact): y\n  related: a → b; c ← d …",
    ],
)
def test_edge_cases_count_as_the_tokenizer_does(text: str) -> None:
    assert minilm.count_tokens(text) == reference(text)


def test_real_memories_and_packs_of_them_count_as_the_tokenizer_does() -> None:
    if not LOCOMO.exists():
        pytest.skip("LoCoMo is not beside the checkout")
    lines = LOCOMO.read_text(encoding="utf-8").splitlines()
    texts = [json.loads(line)["text"] for line in lines if line.strip()][:2000]
    assert [minilm.count_tokens(t) for t in texts] == [reference(t) for t in texts]
    pack = "# Context for: what did they plan?\n" + "\n".join(
        f"- **{t[:30]}** (fact): {t}" for t in texts[:24]
    )
    assert minilm.count_tokens(pack) == reference(pack)


def test_a_repeated_count_is_the_same() -> None:
    text = "The deploy failed twice; retry with --force, then check café logs → ok."
    assert minilm.count_tokens(text) == minilm.count_tokens(text) == reference(text)


def test_only_short_chunks_are_kept() -> None:
    """What callers send cannot grow the cache past its bound: a chunk longer than
    ``CACHED_CHUNK_MAX_CHARS`` is counted, not kept."""
    long_chunk = "x" * 10 + "é" * (minilm.CACHED_CHUNK_MAX_CHARS * 4)
    before = minilm._cached_chunk_tokens.cache_info().currsize
    assert minilm.count_tokens(long_chunk) == reference(long_chunk)
    assert minilm._cached_chunk_tokens.cache_info().currsize == before
    minilm.count_tokens("a-short-chunk-never-counted-before-in-this-process")
    assert minilm._cached_chunk_tokens.cache_info().currsize == before + 1


def test_only_short_lines_are_kept() -> None:
    """A line longer than ``CACHED_LINE_MAX_CHARS`` is counted chunk by chunk, not kept as a
    line; a short one is kept once, and a text's count is the sum of its lines' (a line
    break ends a chunk)."""
    minilm._cached_line_tokens.cache_clear()  # room for the line below, whatever ran before
    long_line = "word " * minilm.CACHED_LINE_MAX_CHARS
    before = minilm._cached_line_tokens.cache_info().currsize
    assert minilm.count_tokens(long_line) == reference(long_line)
    assert minilm._cached_line_tokens.cache_info().currsize == before
    short = "- **a line never counted before** (fact): café → ok, then\r"
    text = f"{short}\n{short}\n{long_line}"
    assert minilm.count_tokens(text) == reference(text)
    assert minilm._cached_line_tokens.cache_info().currsize == before + 1
    assert minilm.count_tokens(text) == reference(text)
    assert minilm._cached_line_tokens.cache_info().currsize == before + 1
