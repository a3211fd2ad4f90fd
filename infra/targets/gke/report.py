"""The ``gke`` target's lines of the capacity report: node arithmetic per accelerator topology, and each co-hosted
group's node pool and time-shared slots."""

from __future__ import annotations

from infra.planning.plan import StackPlan
from infra.targets.common import placement_lines

from .planning import gke_part


def report_lines(plan: StackPlan) -> list[str]:
    part = gke_part(plan)
    out: list[str] = []
    for name, ap in sorted(part.accelerators.items()):
        a = ap.capacity
        reserved = "no reservation" if a.reserved_nodes is None else f"{a.reserved_nodes} reserved"
        out.append(
            f"nodes on {name}: {a.nodes_for_max_replicas} at max replicas ({a.max_replicas}), "
            f"{a.nodes_for_max_plus_surge} with rollout surge; {reserved}"
        )
    for key, gg in part.gke_groups().items():
        out.append(
            f"co-hosted group {key} ({gg.target}) on accelerator {gg.accelerator} ({gg.layout.gpus_per_machine} "
            f"GPU(s) per node, {gg.clients_per_gpu} time-shared clients per GPU), "
            f"{gg.min_nodes}..{gg.max_nodes} node(s) incl. one rollout surge node: worst-case partitions on one "
            f"GPU {gg.worst_case_partition_sum:g} (at most 1 - transient reserve "
            f"{gg.layout.transient_reserve:g} = {1 - gg.layout.transient_reserve:g})"
        )
        out += placement_lines(gg.layout, {m.model_name: m.role for m in gg.models})
    return out
