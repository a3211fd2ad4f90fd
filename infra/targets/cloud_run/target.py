"""The ``cloud_run`` target as the registry sees it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from components.project import ProjectServices
from infra.config.measurement import Measurement
from infra.config.stack import StackConfig
from infra.planning.plan import StackPlan, TargetPlan
from infra.rules import Rule, collect
from infra.targets.base import ReportRow, ResolvedStack, Target

from . import compose, report, rules
from .config import SECTIONS, TARGET, CloudRunPool
from .planning import plan_pools


class CloudRunTarget(Target):
    """vLLM on Cloud Run GPU instances: stable and canary as tagged revisions of one service."""

    name = TARGET
    services = compose.SERVICES
    pool_type = CloudRunPool
    sections = SECTIONS

    def rules(self) -> Sequence[Rule]:
        return collect([rules])

    def plan(self, cfg: StackConfig, measurements: Mapping[str, Measurement]) -> TargetPlan:
        return plan_pools(cfg, measurements)

    def compose(self, resolved: ResolvedStack, services: ProjectServices) -> dict[str, object]:
        return compose.compose(resolved, services)

    def report_rows(self, plan: StackPlan) -> Sequence[ReportRow]:
        return report.report_rows(plan)

    def report_lines(self, plan: StackPlan) -> Sequence[str]:
        return report.report_lines(plan)
