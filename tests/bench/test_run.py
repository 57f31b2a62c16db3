"""bench/run.py: the command line."""

from __future__ import annotations

import pytest

from bench.run import parse_args


def test_big_adds_the_big_size() -> None:
    assert parse_args(["--big"]).size_list == [10_000, 100_000, 1_000_000]
    args = parse_args(["--sizes", "2000", "--big", "--big-size", "20000", "--embed-max", "5000"])
    assert (args.size_list, args.embed_max) == ([2_000, 20_000], 5_000)


def test_quick_is_a_small_run() -> None:
    args = parse_args(["--quick"])
    assert (args.size_list, args.groups, args.requests) == ([2_000], 2, 40)


def test_seed_only_needs_a_store_and_skips_quality() -> None:
    with pytest.raises(SystemExit):
        parse_args(["--seed-only"])
    args = parse_args(["--seed-only", "--store", "/tmp/x"])
    assert args.skip_quality
