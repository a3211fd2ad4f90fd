"""The ``gke`` target as the registry sees it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from components.project import PLATFORM_SERVICES, ProjectServices
from infra.config.measurement import Measurement
from infra.config.stack import StackConfig
from infra.planning.cohosting import Recipe
from infra.planning.plan import StackPlan, TargetPlan
from infra.rules import Rule, collect
from infra.targets.base import ResolvedStack, Target

from . import compose, report, rules
from .config import SECTIONS, TARGET, GkeCoHostedGroup, GkePool
from .planning import plan_gke


class GkeTarget(Target):
    """vLLM Deployments on GKE GPU node pools behind the GKE Inference Gateway."""

    name = TARGET
    services = PLATFORM_SERVICES
    pool_type = GkePool
    group_type = GkeCoHostedGroup
    sections = SECTIONS

    def rules(self) -> Sequence[Rule]:
        return collect(rules.MODULES)

    def plan(self, cfg: StackConfig, measurements: Mapping[str, Measurement]) -> TargetPlan:
        return plan_gke(cfg, measurements)

    def compose(self, resolved: ResolvedStack, services: ProjectServices) -> dict[str, object]:
        return compose.compose(resolved, services)

    def report_lines(self, plan: StackPlan) -> Sequence[str]:
        return report.report_lines(plan)

    def recipe_forms(self, recipe: Recipe) -> tuple[str, ...]:
        """A pool runs one server per GPU set, a pod each (several pods per node); the co-host server of a group runs
        any layout in one pod per node (several instances per GPU set, data parallel)."""
        forms = []
        if recipe.instances_per_gpu_set == 1:
            forms.append(f"gke pool ({recipe.instances} pod(s) per node)")
        if recipe.instances >= 2:
            forms.append(f"gke group (instances: {recipe.instances})")
        return tuple(forms)
