"""The ``vertex`` target as the registry sees it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from components.project import ProjectServices
from infra.config.measurement import Measurement
from infra.config.stack import StackConfig
from infra.planning.cohosting import Recipe
from infra.planning.plan import StackPlan, TargetPlan
from infra.rules import Rule, collect
from infra.targets.base import ReportRow, ResolvedStack, Target

from . import compose, report, rules
from .config import SECTIONS, TARGET, CoHostedGroup, VertexPool
from .planning import plan_vertex_target


class VertexTarget(Target):
    """vLLM custom containers as deployed models of a Vertex AI endpoint (dedicated or co-hosted)."""

    name = TARGET
    services = compose.SERVICES
    pool_type = VertexPool
    group_type = CoHostedGroup
    sections = SECTIONS

    def rules(self) -> Sequence[Rule]:
        return collect(rules.MODULES)

    def plan(self, cfg: StackConfig, measurements: Mapping[str, Measurement]) -> TargetPlan:
        return plan_vertex_target(cfg, measurements)

    def compose(self, resolved: ResolvedStack, services: ProjectServices) -> dict[str, object]:
        return compose.compose(resolved, services)

    def report_rows(self, plan: StackPlan) -> Sequence[ReportRow]:
        return report.report_rows(plan)

    def report_lines(self, plan: StackPlan) -> Sequence[str]:
        return report.report_lines(plan)

    def recipe_forms(self, recipe: Recipe) -> tuple[str, ...]:
        """A pool's container is one ``vllm serve`` on the whole machine; a group's container is the co-host server,
        which runs any layout on its machine (``acceleratorCount`` = the machine's GPUs, several instances per GPU
        set: data parallel)."""
        if recipe.instances == 1:
            return ("vertex pool", "vertex group")
        return (f"vertex group (instances: {recipe.instances})",)
