"""The one definition of a traffic split (components/traffic.py): the config rule and every target's component Args
refuse exactly what it refuses, each naming the pools."""

from __future__ import annotations

import pytest

from components.traffic import TOTAL_PERCENT, split_problem


@pytest.mark.parametrize(
    "weights,problem",
    [
        ({"stable": 100}, None),
        ({"stable": 90, "canary": 10}, None),
        ({"stable": 100, "canary": 0}, None),  # a dark canary is a valid split
        ({"stable": 90, "canary": 5}, "weights must sum to 100, got 95 (stable 90, canary 5)"),
        ({"stable": 60, "canary": 60}, "weights must sum to 100, got 120 (stable 60, canary 60)"),
        ({"stable": 101, "canary": -1}, "weight of 'stable' must be an integer 0-100, got 101"),
        ({"stable": True}, "weight of 'stable' must be an integer 0-100, got True"),  # bool is an int in Python
        ({"stable": 100.0}, "weight of 'stable' must be an integer 0-100, got 100.0"),
    ],
)
def test_split_problem(weights: dict[str, object], problem: str | None) -> None:
    assert TOTAL_PERCENT == 100
    assert split_problem(weights) == problem
