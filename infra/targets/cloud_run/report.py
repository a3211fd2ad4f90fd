"""The ``cloud_run`` target's rows of the capacity report: instance shape, cold-load phases, startup probe,
concurrency and timeout, price and the cost of a cold start."""

from __future__ import annotations

from collections.abc import Callable

from infra.planning.plan import StackPlan
from infra.targets.base import ReportRow

from .planning import CloudRunPlan, CloudRunPoolPlan


def report_rows(plan: StackPlan) -> list[ReportRow]:
    runs = {r: p.cloud_run for r, p in plan.pools_of(CloudRunPoolPlan).items()}
    if not runs:
        return []

    def row(label: str, fn: Callable[[CloudRunPlan], str]) -> ReportRow:
        return ReportRow(label, {r: fn(c) for r, c in runs.items()})

    return [
        row(
            "Cloud Run instance",
            lambda c: (
                f"{c.gpu} x{c.gpu_count}, {c.cpu} vCPU, {c.memory_gib} GiB"
                f"{', no zonal redundancy' if c.zonal_redundancy_disabled else ''}"
            ),
        ),
        row(
            "cold load (copy / verify / read / init)",
            lambda c: (
                f"{c.copy_seconds:.0f} / {c.verify_seconds:.0f} / "
                f"{c.weights_read_seconds:.0f} / {c.engine_init_seconds:.0f} s"
            ),
        ),
        row(
            "startup probe",
            lambda c: (
                f"{c.probes.startup_initial_delay_seconds} s + {c.probes.startup_failure_threshold} x "
                f"{c.probes.startup_period_seconds} s = {c.probes.startup_window_seconds} s"
            ),
        ),
        row("concurrency / request timeout", lambda c: f"{c.concurrency} / {c.request_timeout_seconds} s"),
        row("instance price", lambda c: f"${c.instance_second_usd:.6f}/s (${c.instance_hourly_usd:.2f}/h)"),
        row(
            "cold start cost",
            lambda c: (
                f"${c.cold_start_usd:.4f} per cold start (min instances {c.min_instances}"
                f"{': scale to zero, the first request after idle waits it' if c.min_instances == 0 else ''})"
            ),
        ),
    ]
