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
#: Full run: 120 s per rate gives >= 100 arrivals from 1 req/s up, so p95 rests on real tail samples, and is long
#: against the seconds-scale queueing transients of one replica.
DEFAULT_DURATION_S = 120.0
#: --quick (CI smoke test): 10 s per rate leaves a window of >= 4.5 s after a 1 s warm-up while the concurrent
#: class runs start at most 4.5 s apart (measured 0-5.4 s on 2 busy cores); a larger skew marks the rate "not
#: measured" (bench/analysis.py MIN_WINDOW_SHARE): size nothing from a --quick run.
QUICK_DURATION_S = 10.0
#: Automatic sweep: at most 10 doubling steps (1 .. 512 req/s), then 2 bisection steps at the knee.
AUTO_MAX_RATES = 10
AUTO_REFINE_STEPS = 2
#: --quick: at most 3 rates and no refinement keep a run near 2 minutes.
QUICK_MAX_RATES = 3
QUICK_REFINE_STEPS = 0
#: guidellm's start-up before its first request: measured 9 s (imports, backend check) + 10 s (worker spawn)
#: alone on 2 cores, up to ~35 s with two runs and a server sharing them; 240 s only catches a hung process.
RUN_STARTUP_ALLOWANCE_S = 240.0
#: After the duration guidellm cancels what is in flight and writes its report: measured 2-6 s; 120 s bounds it.
RUN_DRAIN_ALLOWANCE_S = 120.0

# ---- bounds of the config keys -----------------------------------------------------------------------------------
#: Shortest run per rate: the --quick duration, the shortest window the analysis is documented to work with.
MIN_DURATION_S = QUICK_DURATION_S
#: Longest run per rate: 15x the default (a 2-minute window already holds >= 100 arrivals); 12 such rates keep the
#: Job within ~7 h.
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


def sweep_runs(rates: tuple[float, ...] | None, quick: bool) -> int:
    """How many rates one bench run measures at most: the explicit ones, or the automatic sweep's growth steps
    plus its bisection steps."""
    if rates is not None:
        return len(rates)
    return (QUICK_MAX_RATES + QUICK_REFINE_STEPS) if quick else (AUTO_MAX_RATES + AUTO_REFINE_STEPS)


def run_duration(duration_seconds: float | None, quick: bool) -> float:
    """Seconds of load per rate: as given, else the --quick or the full default."""
    if duration_seconds is not None:
        return duration_seconds
    return QUICK_DURATION_S if quick else DEFAULT_DURATION_S


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
            "``--quick``: 10 s per rate, at most 3 rates, no refinement (a smoke test, not a measurement to size a "
            "fleet from)."
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
            "Seconds of load per rate (``--duration-seconds``); absent = 120, or 10 with ``quick``. Bounded by the "
            "--quick duration (the shortest window the analysis works with) and 30 minutes (15x the default)."
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
