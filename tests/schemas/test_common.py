"""schemas/common.py: a JSON value the service stores holds finite numbers only (JSON has no
NaN or Infinity and jsonb refuses them): the first non-finite one is named by its path, at any
depth, without recursion."""

from __future__ import annotations

import pytest

from service.schemas.common import finite_json, non_finite_path


def test_the_first_non_finite_number_is_named_by_its_path() -> None:
    assert non_finite_path({"a": [1, 2.5, {"b": "nan"}]}) is None
    assert non_finite_path(float("inf")) == "."
    assert non_finite_path({"a": [0, {"b": float("-inf")}]}) == "a.1.b"
    assert non_finite_path([float("nan")]) == "0"


def test_a_deep_value_is_walked_without_recursion() -> None:
    deep: object = float("nan")
    for _ in range(5000):
        deep = [deep]
    assert non_finite_path(deep) == ".".join(["0"] * 5000)


def test_a_validator_passes_finite_values_and_names_the_rest() -> None:
    value = {"x": 1.0}
    assert finite_json(value) is value
    with pytest.raises(ValueError, match=r"'x\.0'"):
        finite_json({"x": [float("nan")]})
