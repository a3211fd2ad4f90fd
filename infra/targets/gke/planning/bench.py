"""How long the in-cluster benchmark Job may run (``activeDeadlineSeconds``), from the sweep it was configured with.

The bound is the bench's own worst case: every rate it may measure (``sweep_rates``) ends by its guidellm runs'
timeout, start-up allowance + the rate's run (``run_seconds``: the duration floor, longer at low rates so the window
expects MIN_WINDOW_ARRIVALS arrivals) + drain allowance (infra/offline/bench/runner.py ``run_rate``), plus the
sweep's re-measurements of rates whose achieved arrivals missed the tolerance (MAX_REMEASUREMENTS, each bounded by
the longest run), plus what the bench does outside the rates and what happens before its container starts. A Job past this deadline is
hung, not slow: Kubernetes stops it and frees the benchmarked pool.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infra.config.bench import (
    MAX_REMEASUREMENTS,
    RUN_DRAIN_ALLOWANCE_S,
    RUN_STARTUP_ALLOWANCE_S,
    BenchConfig,
    run_duration,
    run_seconds,
    sweep_rates,
)

#: The bench outside its rate runs, each bounded by its own timeout in infra/offline/bench: ``guidellm --version``
#: (120 s), the health check (10 s), guidellm's HTML export (300 s), plots and the record upload (seconds):
#: 430 s, rounded up to 10 minutes.
BENCH_OVERHEAD_SECONDS = 600
#: Before the bench starts: scheduling on a system node (which the cluster autoscaler may first have to add,
#: minutes), pulling the ~2-3 GB bench image (torch CPU) and starting the GCS FUSE sidecar: 15 minutes.
POD_START_SECONDS = 900


@dataclass(frozen=True)
class BenchDeadline:
    """``activeDeadlineSeconds`` and the numbers it is made of (shown in the plan and asserted by tests)."""

    #: Per rate the bench may measure, and per re-measurement: start-up allowance + run + drain allowance, s.
    run_seconds: tuple[float, ...]
    overhead_seconds: int
    pod_start_seconds: int

    @property
    def runs(self) -> int:
        return len(self.run_seconds)

    @property
    def active_deadline_seconds(self) -> int:
        return math.ceil(sum(self.run_seconds)) + self.overhead_seconds + self.pod_start_seconds


def bench_deadline(bench: BenchConfig) -> BenchDeadline:
    """sum over rates and re-measurements of (start-up allowance + run + drain allowance) + overhead + pod start."""
    floor = run_duration(bench.duration_seconds, bench.quick)
    rates = [run_seconds(r, floor) for r in sweep_rates(bench.offered_rates, bench.quick)]
    remeasure = [max(rates)] * MAX_REMEASUREMENTS
    return BenchDeadline(
        run_seconds=tuple(RUN_STARTUP_ALLOWANCE_S + s + RUN_DRAIN_ALLOWANCE_S for s in rates + remeasure),
        overhead_seconds=BENCH_OVERHEAD_SECONDS,
        pod_start_seconds=POD_START_SECONDS,
    )
