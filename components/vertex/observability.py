"""The Vertex AI target's :class:`VertexObservability`: dashboard, notification channels and alert policies of one
endpoint's deployed models (vLLM's AutoMetrics series beside the endpoint's own Cloud Monitoring metrics).

Thin, as the Cloud Run target's: the shared :class:`~components.monitoring.component.Monitoring` component, built
from the pure builders in :mod:`.monitoring`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..monitoring.alerts import Thresholds
from ..monitoring.component import ChannelSpec, Monitoring, MonitoringSpec
from . import monitoring
from . import requests as rq
from .endpoint import VertexDeployment


@dataclass(frozen=True)
class VertexObservabilityArgs:
    project: str
    environment: str
    #: The endpoint's id (``AiEndpoint.name``): AutoMetrics' and Cloud Monitoring's ``endpoint_id``.
    endpoint_id: str
    models: tuple[monitoring.DeployedModelView, ...]
    thresholds: Thresholds
    notification_channels: tuple[ChannelSpec, ...]
    #: Co-hosted models (their own panels and alerts, each through its endpoint); none for pools only.
    cohosted: tuple[monitoring.CoHostedOnVertex, ...] = ()

    def __post_init__(self) -> None:
        roles = [d.role for d in self.models]
        if (not roles and not self.cohosted) or len(set(roles)) != len(roles):
            raise ValueError(
                f"VertexObservabilityArgs.models: one per pool, at least one pool or co-hosted model, got {roles}"
            )
        names = [d.display_name for d in self.models]
        if len(set(names)) != len(names):
            raise ValueError(
                f"VertexObservabilityArgs.models: display names {names} must differ (they split the pools)"
            )


class VertexObservability(Monitoring):
    """Dashboard and alert policies of a Vertex AI endpoint's vLLM metrics (AI AutoMetrics, Managed Service for
    Prometheus) and of the endpoint's own metrics."""

    TYPE = "llm-serving:vertex:Observability"

    def monitoring_spec(self, args: VertexObservabilityArgs) -> MonitoringSpec:
        models = list(args.models)
        return MonitoringSpec(
            project=args.project,
            environment=args.environment,
            dashboard_title=f"LLM serving — {args.environment} (Vertex AI {args.endpoint_id})",
            panels=tuple(
                (monitoring.panels(args.endpoint_id, models, args.thresholds) if models else [])
                + monitoring.cohosted_panels(list(args.cohosted), args.thresholds)
            ),
            alerts=tuple(
                (monitoring.alert_specs(args.endpoint_id, models, args.thresholds) if models else [])
                + monitoring.cohosted_alert_specs(list(args.cohosted), args.thresholds)
            ),
            notification_channels=args.notification_channels,
        )


def deployed_model_views(deployments: tuple[VertexDeployment, ...]) -> tuple[monitoring.DeployedModelView, ...]:
    """What observability needs about each pool of an endpoint, from its deployment on dedicated resources (the
    model's display name is the release id: ``infra/targets/vertex/compose.py`` ``model_spec``)."""
    out = []
    for d in deployments:
        assert isinstance(d.placement, rq.DedicatedResources)  # co-hosted endpoints have no pools to compare
        scaling = d.placement.scaling
        signal = scaling.autoscaling[0] if scaling.autoscaling else None
        out.append(
            monitoring.DeployedModelView(
                role=d.role,
                release=d.model.display_name,
                display_name=rq.deployed_model_display_name(d.role, d.model.display_name),
                weight=d.weight,
                min_replicas=scaling.min_replicas,
                max_replicas=scaling.max_replicas,
                autoscaling_signal=signal.metric if signal else None,
                autoscaling_target=signal.target if signal else None,
            )
        )
    return tuple(out)
