"""A weighted split of one stream of requests between a stack's pools, as every target takes it.

The Inference Gateway's HTTPRoute (``backendRefs[].weight``, Gateway API: a proportion of the sum of weights),
Cloud Run's revision traffic (run.v2 ``TrafficTarget.percent``: "the sum of all percent values must equal 100")
and a Vertex AI endpoint's ``trafficSplit`` ("The traffic percentage values must add up to 100") are all stated
here as integer percentages of one total. This module is the one definition of a valid split: the config rule and
every component's Args check call it. Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping

#: What a split's percentages add up to.
TOTAL_PERCENT = 100


def split_problem(weights: Mapping[str, object]) -> str | None:
    """Why ``weights`` (pool role -> percent) is not a valid split, or None: every weight an integer from 0 to
    ``TOTAL_PERCENT``, together ``TOTAL_PERCENT``."""
    for role, w in weights.items():
        if isinstance(w, bool) or not isinstance(w, int) or not 0 <= w <= TOTAL_PERCENT:
            return f"weight of {role!r} must be an integer 0-{TOTAL_PERCENT}, got {w!r}"
    total = sum(w for w in weights.values() if isinstance(w, int))
    if total != TOTAL_PERCENT:
        shown = ", ".join(f"{role} {w}" for role, w in weights.items())
        return f"weights must sum to {TOTAL_PERCENT}, got {total} ({shown})"
    return None
