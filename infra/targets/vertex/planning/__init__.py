"""The ``vertex`` target's share of the stack plan: its pools (one deployed model each: capacity, machine spec,
reservation bounds, autoscaling, probes) and its co-hosted groups (one deployed model each, running the co-host server)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from infra.config.measurement import Measurement
from infra.config.stack import StackConfig
from infra.planning.plan import PlanIssue, StackPlan, TargetPlan

from ..config import TARGET
from .cohosting import CoHostedGroupPlan, CoHostedModelPlan, plan_groups
from .pools import VertexPlan, VertexPoolPlan, plan_pools, vertex_pools

__all__ = [
    "CoHostedGroupPlan",
    "CoHostedModelPlan",
    "VertexPlan",
    "VertexPoolPlan",
    "VertexTargetPlan",
    "plan_vertex_target",
    "vertex_part",
    "vertex_pools",
]


@dataclass(frozen=True)
class VertexTargetPlan(TargetPlan):
    """What the ``vertex`` target planned."""

    def vertex_pools(self) -> dict[str, VertexPoolPlan]:
        return {r: p for r, p in self.pools.items() if isinstance(p, VertexPoolPlan)}

    def vertex_groups(self) -> dict[str, CoHostedGroupPlan]:
        return {k: g for k, g in sorted(self.groups.items()) if isinstance(g, CoHostedGroupPlan)}


def plan_vertex_target(cfg: StackConfig, measurements: Mapping[str, Measurement]) -> VertexTargetPlan:
    issues: list[PlanIssue] = []
    pools = plan_pools(cfg, measurements, issues)
    groups = plan_groups(cfg, issues)
    return VertexTargetPlan(target=TARGET, pools=pools, groups=groups, issues=tuple(issues))


def vertex_part(plan: StackPlan) -> VertexTargetPlan:
    """The ``vertex`` target's share of a stack plan."""
    return plan.part(TARGET, VertexTargetPlan)
