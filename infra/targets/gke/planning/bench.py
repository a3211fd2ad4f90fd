"""How long the in-cluster benchmark Job may run (``activeDeadlineSeconds``), from the sweep it was configured with.

The bound is the bench's own worst case: every rate it may measure (``sweep_runs``) ends by its guidellm runs'
timeout, start-up allowance + duration + drain allowance (infra/offline/bench/runner.py ``run_rate``), plus what
the bench does outside the rates and what happens before its container starts. A Job past this deadline is
hung, not slow: Kubernetes stops it and frees the benchmarked pool.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infra.config.bench import RUN_DRAIN_ALLOWANCE_S, RUN_STARTUP_ALLOWANCE_S, BenchConfig, run_duration, sweep_runs

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

    runs: int
    seconds_per_run: float
    overhead_seconds: int
    pod_start_seconds: int

    @property
    def active_deadline_seconds(self) -> int:
        return math.ceil(self.runs * self.seconds_per_run) + self.overhead_seconds + self.pod_start_seconds


def bench_deadline(bench: BenchConfig) -> BenchDeadline:
    """runs x (start-up allowance + duration + drain allowance) + overhead + pod start."""
    duration = run_duration(bench.duration_seconds, bench.quick)
    return BenchDeadline(
        runs=sweep_runs(bench.offered_rates, bench.quick),
        seconds_per_run=RUN_STARTUP_ALLOWANCE_S + duration + RUN_DRAIN_ALLOWANCE_S,
        overhead_seconds=BENCH_OVERHEAD_SECONDS,
        pod_start_seconds=POD_START_SECONDS,
    )
