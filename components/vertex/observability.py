"""The Vertex AI target's :class:`VertexObservability`: dashboard, notification channels and alert policies of one
endpoint's deployed models (vLLM's AutoMetrics series beside the endpoint's own Cloud Monitoring metrics).

Thin, as the Cloud Run target's: every argument of every child comes from the pure builders in :mod:`.monitoring`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from ..base import Component
from ..observability.component import ChannelSpec, alert_policy, notification_channels
from ..observability.dashboard import dashboard_json
from ..observability.views import Thresholds
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

    def __post_init__(self) -> None:
        roles = [d.role for d in self.models]
        if not roles or len(set(roles)) != len(roles):
            raise ValueError(f"VertexObservabilityArgs.models: one per pool, at least one, got {roles}")
        names = [d.display_name for d in self.models]
        if len(set(names)) != len(names):
            raise ValueError(
                f"VertexObservabilityArgs.models: display names {names} must differ (they split the pools)"
            )


class VertexObservability(Component):
    """Dashboard and alert policies of a Vertex AI endpoint's vLLM metrics (AI AutoMetrics, Managed Service for
    Prometheus) and of the endpoint's own metrics."""

    TYPE = "llm-serving:vertex:Observability"

    def __init__(self, name: str, args: VertexObservabilityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, args, opts)
        models = list(args.models)
        self.dashboard_json = dashboard_json(
            f"LLM serving — {args.environment} (Vertex AI {args.endpoint_id})",
            monitoring.panels(args.endpoint_id, models, args.thresholds),
        )
        self.dashboard = gcp.monitoring.Dashboard(
            f"{name}-dashboard", project=args.project, dashboard_json=self.dashboard_json, opts=self.child_opts()
        )
        self.channels, self.channel_names = notification_channels(
            name, args.project, args.environment, args.notification_channels, self.child_opts
        )
        self.alert_specs = monitoring.alert_specs(args.endpoint_id, models, args.thresholds)
        self.alert_policies = [
            alert_policy(name, args.project, args.environment, self.channel_names, s, self.child_opts())
            for s in self.alert_specs
        ]
        self.register_outputs(
            {
                "dashboard": self.dashboard.id,
                "alert_policies": [a.display_name for a in self.alert_policies],
            }
        )


def deployed_model_views(deployments: tuple[VertexDeployment, ...]) -> tuple[monitoring.DeployedModelView, ...]:
    """What observability needs about each pool of an endpoint, from its deployment on dedicated resources (the
    model's display name is the release id: ``infra/targets/vertex.py`` ``model_spec``)."""
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
