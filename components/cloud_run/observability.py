"""The Cloud Run target's :class:`CloudRunObservability`: dashboard, notification channels and alert policies of the
service's vLLM metrics (Managed Service for Prometheus, written by the revisions' collector sidecars).

Thin: the shared :class:`~components.monitoring.component.Monitoring` component, built from the pure builders in
:mod:`.monitoring`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..monitoring.alerts import Thresholds
from ..monitoring.component import ChannelSpec, Monitoring, MonitoringSpec
from . import monitoring
from .component import CloudRunServingArgs


@dataclass(frozen=True)
class CloudRunObservabilityArgs:
    project: str
    environment: str
    service_name: str
    revisions: tuple[monitoring.RevisionView, ...]
    thresholds: Thresholds
    notification_channels: tuple[ChannelSpec, ...]

    def __post_init__(self) -> None:
        roles = [r.role for r in self.revisions]
        if not roles or len(set(roles)) != len(roles):
            raise ValueError(f"CloudRunObservabilityArgs.revisions: one per pool, at least one, got {roles}")


class CloudRunObservability(Monitoring):
    """Dashboard and alert policies of the Cloud Run service's vLLM metrics (Managed Service for Prometheus, written by
    the revisions' collector sidecars)."""

    TYPE = "llm-serving:cloudrun:Observability"

    def monitoring_spec(self, args: CloudRunObservabilityArgs) -> MonitoringSpec:
        revisions = list(args.revisions)
        return MonitoringSpec(
            project=args.project,
            environment=args.environment,
            dashboard_title=f"LLM serving — {args.environment} (Cloud Run {args.service_name})",
            panels=tuple(monitoring.panels(args.service_name, revisions, args.thresholds)),
            alerts=tuple(monitoring.alert_specs(args.service_name, revisions, args.thresholds)),
            notification_channels=args.notification_channels,
        )


def revision_views(
    args: CloudRunServingArgs, instance_hourly_usd: Mapping[str, float], planned_cost: Mapping[str, float | None]
) -> tuple[monitoring.RevisionView, ...]:
    """What observability needs about each pool of a service, by its revision name."""
    names = args.revision_names()
    return tuple(
        monitoring.RevisionView(
            role=p.role,
            release=p.revision.release.release,
            revision=names[p.role],
            weight=p.weight,
            min_instances=p.revision.min_instances,
            max_instances=p.revision.max_instances,
            concurrency=p.revision.concurrency,
            instance_hourly_usd=instance_hourly_usd[p.role],
            planned_cost_per_million_usd=planned_cost[p.role],
        )
        for p in args.pools
    )
