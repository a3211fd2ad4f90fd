"""The in-cluster benchmark (``gke.bench``, the issue's "In-cluster benchmark"): a Kubernetes Job that runs
``llm-serving bench`` against one pool from inside the cluster and writes its measurement record to the weights
bucket's ``measurements/`` folder (components/bench_job.py). Absent = no Job: the default of every stack.

This module also owns the sweep's bounds, which two sides must agree on: the bench itself
(infra/offline/bench/cli.py, runner.py) and the Job's deadline (infra/targets/gke/planning/bench.py). The deployable program
never imports the offline toolchain, so both read them here.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import Field, model_validator

from .base import Strict, check
from .release import IMAGE_DIGEST_RE

# ---- the sweep (what ``llm-serving bench`` runs; infra/offline/bench/cli.py explains each choice) -------------
#: Full run: at least 120 s per rate, long against the seconds-scale queueing transients of one replica (a rate also
#: runs long enough for MIN_WINDOW_ARRIVALS, see ``run_seconds``).
DEFAULT_DURATION_S = 120.0
#: --quick (CI smoke test): at least 10 s per rate; the arrival minimum below sets the real length at low rates.
QUICK_DURATION_S = 10.0
#: Warm-up excluded from each run's window, as a fraction of the run: an open loop starts from an empty server,
#: whose first seconds are faster than steady state; 10 % drops that start without losing much data.
WARMUP_FRACTION = 0.10
#: Arrivals a rate's measurement window is sized to hold (in expectation): a Poisson count N has a relative spread
#: 1/sqrt(N), so 400 arrivals put the achieved rate within +-10 % (ARRIVAL_TOLERANCE, 2 standard deviations) of the
#: offered one 95 % of the time; the rest is measured again (MAX_REMEASUREMENTS). Measured before this rule: 10 s
#: runs of 10-47 arrivals delivered 1.46, 2.96 and 5.80 req/s at 1, 2 and 4 req/s offered.
MIN_WINDOW_ARRIVALS = 400
#: How far a rate's achieved arrival rate may be from its label (offered): a record holding a point further off is
#: refused (infra/config/measurement.py), so every label is the load the point was measured at, within 10 %.
ARRIVAL_TOLERANCE = 0.10
#: Re-measurements (fresh seeds) one sweep may spend on rates whose achieved rate missed ARRIVAL_TOLERANCE: with
#: 400 arrivals one run in ~22 misses it, so 3 re-runs cover a 12-rate sweep except about once in 500.
MAX_REMEASUREMENTS = 3
#: Automatic sweep: start at 1 req/s (one replica of any model the planner sizes serves that), double each step,
#: at most 10 doubling steps (1 .. 512 req/s), then 2 bisection steps (resolution 2^(1/4), about +-19 %) at the knee.
AUTO_START_RPS = 1.0
AUTO_GROWTH = 2.0
AUTO_MAX_RATES = 10
AUTO_REFINE_STEPS = 2
#: --quick: at most 3 rates and no refinement.
QUICK_MAX_RATES = 3
QUICK_REFINE_STEPS = 0
#: guidellm's start-up before its first request: measured 9 s (imports, backend check) + 10 s (worker spawn)
#: alone on 2 cores, up to ~35 s with two runs and a server sharing them; 240 s only catches a hung process.
RUN_STARTUP_ALLOWANCE_S = 240.0
#: After the duration guidellm cancels what is in flight and writes its report: measured 2-6 s; 120 s bounds it.
RUN_DRAIN_ALLOWANCE_S = 120.0

# ---- bounds of the config keys -----------------------------------------------------------------------------------
#: Shortest floor per rate: the --quick floor (a rate's run is longer anyway until it expects MIN_WINDOW_ARRIVALS).
MIN_DURATION_S = QUICK_DURATION_S
#: Longest floor per rate: 15x the default; 12 such rates keep the Job within ~7 h.
MAX_DURATION_S = 1800.0
#: Explicit rates at most: twice the automatic sweep's 12 runs.
MAX_RATES = 24
#: Highest explicit rate: far above what one replica of any model serves (the automatic sweep stops at 512), so a
#: larger number is a slip.
MAX_RATE_RPS = 10_000.0


def parse_rates(text: str) -> tuple[float, ...] | None:
    """``auto`` -> None (the automatic sweep); ``R1,R2,...`` -> the offered rates in req/s, as given.

    The syntax of ``llm-serving bench --rates``; raises ValueError with a one-line message."""
    if text.strip() == "auto":
        return None
    try:
        rates = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise ValueError(f"expected 'auto' or comma-separated req/s, got {text!r}") from None
    if not rates or any(not (math.isfinite(r) and r > 0) for r in rates) or len(set(rates)) != len(rates):
        raise ValueError(f"rates must be distinct positive numbers, got {text!r}")
    return rates


def run_duration(duration_seconds: float | None, quick: bool) -> float:
    """The floor of every rate's run, s: as given, else the --quick or the full default."""
    if duration_seconds is not None:
        return duration_seconds
    return QUICK_DURATION_S if quick else DEFAULT_DURATION_S


def run_seconds(rate_rps: float, floor_s: float) -> float:
    """Seconds of load at ``rate_rps``: the floor, or longer so that the window after the warm-up expects
    MIN_WINDOW_ARRIVALS arrivals: ``max(floor, N / (rate * (1 - WARMUP_FRACTION)))``.

    Example: 1 req/s with a 120 s floor runs 400 / 0.9 = 444.4 s; 8 req/s runs the 120 s floor (55.6 s would do)."""
    return max(floor_s, MIN_WINDOW_ARRIVALS / (rate_rps * (1 - WARMUP_FRACTION)))


def sweep_rates(rates: tuple[float, ...] | None, quick: bool) -> tuple[float, ...]:
    """The rates one bench run may measure, for bounding its time: the explicit ones, or the automatic sweep's
    doubling steps followed by its bisection steps, each bisection rate bounded by the slowest (the start rate: a
    bisection rate lies between two measured rates, so it is never below it)."""
    if rates is not None:
        return rates
    growing = QUICK_MAX_RATES if quick else AUTO_MAX_RATES
    refine = QUICK_REFINE_STEPS if quick else AUTO_REFINE_STEPS
    return tuple(AUTO_START_RPS * AUTO_GROWTH**k for k in range(growing)) + (AUTO_START_RPS,) * refine


def sweep_runs(rates: tuple[float, ...] | None, quick: bool) -> int:
    """How many rates one bench run measures at most (re-measurements aside)."""
    return len(sweep_rates(rates, quick))


class BenchConfig(Strict):
    """A benchmark Job for one pool, run in the cluster on the real hardware (docs/capacity.md, "Measured capacity in the
    cluster"). θ is per replica and the Job's Service spreads load over every Ready pod of the pool, so the pool
    must run exactly one replica, and carry no other traffic, while the Job runs."""

    image: str = Field(
        description=(
            "The bench image (``scripts/bench-image/Dockerfile``: the project at the deployed commit plus guidellm), "
            "pinned by digest: ``<repository>@sha256:<64 hex>``, in the stack's Artifact Registry repository."
        )
    )
    pool: Literal["stable", "canary"] = Field(
        description=(
            "Pool to benchmark; it must exist and target ``gke``. Its release, rendered vLLM arguments and contract "
            "come from the stack file inside the image, so the image must be built from the commit that is deployed."
        )
    )
    quick: bool = Field(
        False,
        description=(
            "``--quick``: at most 3 rates, a 10 s floor per rate, no refinement (a smoke test, not a measurement to "
            "size a fleet from)."
        ),
    )
    rates: Annotated[str, Field(min_length=1, max_length=400)] | None = Field(
        None,
        description=(
            "Offered rates as ``llm-serving bench --rates`` takes them: ``auto`` or ``R1,R2,...`` in req/s (at most "
            f"{MAX_RATES}, each at most {MAX_RATE_RPS:g}); absent = the automatic sweep."
        ),
    )
    duration_seconds: Annotated[float, Field(ge=MIN_DURATION_S, le=MAX_DURATION_S)] | None = Field(
        None,
        description=(
            "Seconds of load per rate at least (``--duration-seconds``); absent = 120, or 10 with ``quick``; a rate "
            f"runs longer when its window would expect fewer than {MIN_WINDOW_ARRIVALS} arrivals. Bounded by the "
            "--quick duration and 30 minutes (15x the default)."
        ),
    )

    @model_validator(mode="after")
    def _values(self) -> BenchConfig:
        problems = []
        if not IMAGE_DIGEST_RE.match(self.image):
            problems.append(("image", f"must be pinned by digest as <repository>@sha256:<64 hex>, got {self.image!r}"))
        if self.rates is not None:
            try:
                rates = parse_rates(self.rates)
            except ValueError as err:
                problems.append(("rates", str(err)))
            else:
                if rates is not None and len(rates) > MAX_RATES:
                    problems.append(("rates", f"at most {MAX_RATES} rates, got {len(rates)}"))
                if rates is not None and max(rates) > MAX_RATE_RPS:
                    problems.append(("rates", f"each rate must be at most {MAX_RATE_RPS:g} req/s, got {max(rates):g}"))
        check(problems)
        return self

    @property
    def offered_rates(self) -> tuple[float, ...] | None:
        """The explicit rates, or None for the automatic sweep."""
        return parse_rates(self.rates) if self.rates is not None else None
