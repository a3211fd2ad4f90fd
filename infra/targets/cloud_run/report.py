"""The ``cloud_run`` target's rows of the capacity report: instance shape, cold-load phases, startup probe,
concurrency and timeout, price and the cost of a cold start; below the table, the Cloud Run quota the pools need
and any advice."""

from __future__ import annotations

from collections.abc import Callable

from infra.planning.plan import StackPlan
from infra.targets.base import ReportRow

from .planning import CloudRunPlan, CloudRunPoolPlan, quota_demand


def report_rows(plan: StackPlan) -> list[ReportRow]:
    runs = {r: p.cloud_run for r, p in plan.pools_of(CloudRunPoolPlan).items()}
    if not runs:
        return []

    def row(label: str, fn: Callable[[CloudRunPlan], str]) -> ReportRow:
        return ReportRow(label, {r: fn(c) for r, c in runs.items()})

    return [
        row(
            "Cloud Run instance (vllm + collector)",
            lambda c: (
                f"{c.gpu} x{c.gpu_count}, {c.instance_cpu} vCPU / {c.instance_memory_gib:g} GiB "
                f"(vllm {c.cpu} / {c.memory_gib:g})"
                f"{', no zonal redundancy' if c.zonal_redundancy_disabled else ''}"
            ),
        ),
        row(
            "cold load (verify / copy / read / init)",
            lambda c: (
                f"{c.verify_seconds:.0f} / {c.copy_seconds:.0f} / "
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
        row(
            "concurrency / request timeout",
            lambda c: (
                f"{c.concurrency} / {c.request_timeout_seconds} s"
                f"{' (window + stream: can be cold)' if c.cold_path else ' (stream: always warm)'}"
            ),
        ),
        row("instance price", lambda c: f"${c.instance_second_usd:.6f}/s (${c.instance_hourly_usd:.2f}/h)"),
        row(
            "cold start cost",
            lambda c: (
                f"${c.cold_start_usd:.4f} per cold start (min instances {c.min_instances}"
                f"{': scale to zero, the first request after idle waits it' if c.min_instances == 0 else ''})"
            ),
        ),
    ]


def report_lines(plan: StackPlan) -> list[str]:
    """The Cloud Run quota every pool at its max_instances needs (run.googleapis.com, per project and region), and
    any advice a pool departs from."""
    runs = {r: p.cloud_run for r, p in sorted(plan.pools_of(CloudRunPoolPlan).items())}
    if not runs:
        return []
    q = quota_demand(runs)
    gpus = ", ".join(f"{n} {gpu} {'without' if no_zr else 'with'} zonal redundancy" for gpu, no_zr, n in q.gpus)
    lines = [
        "Cloud Run quota at every pool's max_instances (Cloud Run Admin API, run.googleapis.com, per project and "
        f"region; stable and canary both count): GPUs {gpus}; {q.vcpu} vCPU; {q.memory_gib:g} GiB memory"
    ]
    lines += [f"advice ({role}): {a}" for role, c in runs.items() for a in c.advice]
    return lines
