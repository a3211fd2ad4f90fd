"""Small, dependency-free statistics the bench needs: nearest-rank percentiles (plain and weighted) and the
normal distribution functions behind the length fit.

Percentiles use the nearest-rank definition (the smallest observed value with at least a fraction q of the
observations at or below it). guidellm 0.8.1 computes its percentiles the same way (``Percentiles.from_pdf``:
the first value whose cumulative probability reaches q), so numbers merged here across several guidellm runs
keep guidellm's meaning. Nearest rank never interpolates between observations: with fewer than 20 samples the
p95 is the maximum, which errs on the conservative side for an SLO check.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

_STD_NORMAL = NormalDist()


@dataclass(frozen=True)
class Quantiles:
    """p50 / p95 / p99 of one latency, ms."""

    p50: float
    p95: float
    p99: float


def nearest_rank(values: Sequence[float], q: float) -> float:
    """The q-quantile (0 < q <= 1) by nearest rank; raises ValueError on no values."""
    if not values:
        raise ValueError("no values")
    if not 0 < q <= 1:
        raise ValueError(f"q must be in (0, 1], got {q}")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def weighted_nearest_rank(pairs: Sequence[tuple[float, float]], q: float) -> float:
    """The q-quantile of ``(value, weight)`` pairs by nearest rank on cumulative weight.

    Used for inter-token latency, where guidellm weights each request's mean ITL by its number of inter-token
    gaps (output tokens - 1): the quantile is then over token gaps, not over requests.
    """
    kept = sorted((v, w) for v, w in pairs if w > 0)
    if not kept:
        raise ValueError("no values with positive weight")
    total = sum(w for _, w in kept)
    threshold = q * total
    running = 0.0
    for value, weight in kept:
        running += weight
        # A relative epsilon keeps a quantile that lands exactly on a boundary (running == threshold) from being
        # pushed to the next value by floating-point summation error.
        if running >= threshold * (1 - 1e-12):
            return value
    return kept[-1][0]


def phi(x: float) -> float:
    """Standard normal density."""
    return _STD_NORMAL.pdf(x)


def Phi(x: float) -> float:
    """Standard normal cumulative distribution function."""
    return _STD_NORMAL.cdf(x)


def normal_quantile(q: float) -> float:
    """Standard normal quantile function (Phi^-1)."""
    return _STD_NORMAL.inv_cdf(q)
