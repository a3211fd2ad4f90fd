"""The ``vertex`` target's rows and lines of the capacity report: machine, reservation, replica bounds, autoscaling
and probes per pool; each co-hosted group's machine, its server's staggered start and placements."""

from __future__ import annotations

from collections.abc import Callable

from components.vertex.requests import serving_quota_metric
from infra.planning.plan import StackPlan
from infra.targets.base import ReportRow
from infra.targets.common import placement_lines

from .planning import VertexPlan, vertex_part


def report_rows(plan: StackPlan) -> list[ReportRow]:
    vertex = {r: p.vertex for r, p in vertex_part(plan).vertex_pools().items()}
    if not vertex:
        return []

    def row(label: str, fn: Callable[[VertexPlan], str]) -> ReportRow:
        return ReportRow(label, {r: fn(v) for r, v in vertex.items()})

    return [
        row(
            "Vertex machine",
            lambda v: f"{v.machine_type} ({v.accelerator_count} x {v.gpu_type}){', Spot' if v.spot else ''}",
        ),
        row("reservation", lambda v: v.reservation_resource or "none"),
        row("Vertex replicas", lambda v: f"{v.min_replicas}..{v.max_replicas} ({v.max_reason})"),
        row("autoscaling", lambda v: f"{v.autoscaling_signal} target {v.autoscaling_target}"),
        row("replacement", lambda v: v.replacement.replace("_", "-")),
        row(
            "startup probe / deployment timeout",
            lambda v: (
                f"{v.startup_failure_threshold} x "
                f"{v.startup_period_seconds} s = {v.startup_window_seconds} s / {v.deployment_timeout_seconds} s"
            ),
        ),
    ]


def serving_quota(plan: StackPlan) -> dict[str, tuple[int, int]]:
    """Per Vertex serving quota metric: (GPUs at every pool's and group's max replicas, GPUs a create-first
    replacement adds beside them). maxReplicaCount x acceleratorCount is what a deployment may scale to, so it is
    what the region's ``custom_model_serving_*`` quota must hold (components/vertex/requests.py
    SERVING_QUOTA_METRIC)."""
    part = vertex_part(plan)
    machines = [
        (v.gpu_type, v.accelerator_count, v.max_replicas, v.min_replicas if v.replacement == "create_first" else 0)
        for v in (p.vertex for p in part.vertex_pools().values())
    ]
    machines += [
        (g.machine.gpu_type, g.machine.accelerator_count, g.machine.max_replicas, g.machine.min_replicas)
        for g in part.vertex_groups().values()
    ]
    out: dict[str, tuple[int, int]] = {}
    for gpu, count, mx, room in machines:
        metric = serving_quota_metric(gpu) or f"(no known serving quota for {gpu})"
        at_max, transient = out.get(metric, (0, 0))
        out[metric] = (at_max + mx * count, transient + room * count)
    return dict(sorted(out.items()))


def report_lines(plan: StackPlan) -> list[str]:
    out: list[str] = []
    for metric, (at_max, transient) in serving_quota(plan).items():
        out.append(
            f"Vertex serving quota {metric} (per project and region): {at_max} GPUs at max replicas"
            + (f" + {transient} during a create-first replacement = {at_max + transient}" if transient else "")
        )
    for key, vg in vertex_part(plan).vertex_groups().items():
        m = vg.machine
        out.append(
            f"co-hosted group {key} ({vg.target}) on {m.machine_type} ({m.accelerator_count} x {m.gpu_type}), "
            f"{m.min_replicas}..{m.max_replicas} machine(s): partitions per GPU "
            f"{', '.join(f'{x:g}' for x in vg.layout.partition_sum_per_gpu)} (at most 1 - transient reserve "
            f"{vg.layout.transient_reserve:g} = {1 - vg.layout.transient_reserve:g})"
        )
        out.append(
            f"  one deployed model on endpoint {vg.endpoint_id} runs the co-host server: "
            f"{len(vg.server.instances)} instance(s) started in turn, cold load {m.cold_load_seconds:.0f} s, "
            f"startup probe {m.startup_failure_threshold} x {m.startup_period_seconds} s = {m.startup_window_seconds} s "
            f"/ deployment timeout {m.deployment_timeout_seconds} s"
        )
        out += placement_lines(vg.layout)
    return out
