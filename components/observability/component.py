"""Autoscaling and observability of the GKE target's serving pools: the Custom Metrics Stackdriver Adapter, one HPA
per pool on ``vllm:num_requests_waiting``, Managed Prometheus scraping of vLLM, and the Cloud Monitoring dashboard
and alert policies (the shared :class:`~components.monitoring.component.Monitoring` component, with GKE's panels
and alerts).

Cluster-side prerequisites owned by the platform: Managed Service for Prometheus managed collection and
``monitoring_config.enable_components`` with ``DCGM`` (GPU panels), ``POD`` (restart alert) and ``HPA`` (replica
panels) — see ``components/cluster.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from .. import naming
from ..monitoring.alerts import Thresholds
from ..monitoring.component import ChannelSpec, Monitoring, MonitoringSpec
from ..monitoring.dashboard import dashboard_window
from . import alerts as alerting
from . import metrics as gke
from . import tenants as tenant_obs
from .adapter import CustomMetricsAdapter, CustomMetricsAdapterArgs
from .autoscaling import hpa_spec
from .dashboard import panels
from .views import PoolView


def pod_monitoring_specs(scrape_interval_seconds: int) -> dict[str, dict[str, Any]]:
    """PodMonitoring specs by object name, created in every pool namespace: one scraping every vLLM pod there.

    The endpoint pickers are not scraped here: the ``inferencepool`` chart (gateway component) renders their
    PodMonitoring with the bearer token the picker's /metrics requires (``gke.epp_scrape_job``); a second,
    unauthenticated PodMonitoring would only scrape 401s and double-count the picker's series.
    """
    return {
        "vllm-model-servers": {
            "selector": {
                "matchLabels": {
                    naming.NAME_LABEL: naming.VLLM_APP,
                    naming.PART_OF_LABEL: naming.PART_OF,
                    naming.COMPONENT_LABEL: naming.MODEL_SERVER_COMPONENT,
                }
            },
            "endpoints": [
                {
                    "port": naming.VLLM_PORT,
                    "path": naming.METRICS_PATH,
                    "scheme": "http",
                    "interval": f"{scrape_interval_seconds}s",
                }
            ],
            # pool / release become series labels: every panel and alert is split by them.
            "targetLabels": {
                "fromPod": [{"from": k, "to": v} for k, v in sorted(gke.POD_LABEL_TO_TARGET_LABEL.items())]
            },
        },
    }


@dataclass(frozen=True)
class ObservabilityArgs:
    project: str
    environment: str
    #: Role -> the pool's namespace (the platform's Output): its HPA and PodMonitoring live there.
    namespaces: Mapping[str, pulumi.Input[str]]
    pools: tuple[PoolView, ...]
    #: Role -> the Deployment the pool's HPA scales (the model server's Output).
    scale_targets: Mapping[str, pulumi.Input[str]]
    thresholds: Thresholds
    scrape_interval_seconds: int
    notification_channels: tuple[ChannelSpec, ...]
    adapter_image_digest: str | None
    project_number: pulumi.Input[str]
    #: The cluster's Workload Identity pool output (the adapter's grant waits for the cluster).
    workload_pool: pulumi.Input[str]
    #: The contract's tenants: per-tenant router panels, and an alert per output-token budget.
    tenants: tuple[tenant_obs.TenantView, ...] = ()

    def __post_init__(self) -> None:
        missing = sorted({p.role for p in self.pools} - set(self.scale_targets))
        if missing:
            raise ValueError(f"ObservabilityArgs.scale_targets: no Deployment for pool(s) {missing}")
        missing = sorted({p.role for p in self.pools} - set(self.namespaces))
        if missing:
            raise ValueError(f"ObservabilityArgs.namespaces: no namespace for pool(s) {missing}")


# ---- the component --------------------------------------------------------------------------------------------


class Observability(Monitoring):
    """Adapter + HPAs + PodMonitorings, then the dashboard + alert policies. Kubernetes children use the provider
    given in ``opts.providers``."""

    TYPE = "llm-serving:observability:Observability"

    def target_children(self, name: str, args: ObservabilityArgs) -> dict[str, Any]:
        child = self.child_opts()
        self.pools = args.pools
        self.adapter = CustomMetricsAdapter(
            f"{name}-adapter",
            CustomMetricsAdapterArgs(
                project=args.project,
                project_number=args.project_number,
                workload_pool=args.workload_pool,
                image_digest=args.adapter_image_digest,
            ),
            opts=child,
        )
        labels = {naming.PART_OF_LABEL: naming.PART_OF, naming.COMPONENT_LABEL: "autoscaling"}
        self.hpas: dict[str, k8s.autoscaling.v2.HorizontalPodAutoscaler] = {}
        for p in args.pools:
            self.hpas[p.role] = k8s.autoscaling.v2.HorizontalPodAutoscaler(
                f"{name}-hpa-{p.role}",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=naming.deployment_name(p.role),
                    namespace=args.namespaces[p.role],
                    labels={**labels, naming.POOL_LABEL: p.role},
                ),
                spec=hpa_spec(p.hpa, args.scale_targets[p.role]),
                # The adapter's APIServices must exist before the HPA can read its metric.
                opts=self.child_opts(depends_on=self.adapter.api_services),
            )
        # A PodMonitoring selects pods of its own namespace only: one per pool namespace.
        self.pod_monitorings = {
            (p.role, obj_name): k8s.apiextensions.CustomResource(
                f"{name}-podmonitoring-{p.role}-{obj_name}",
                api_version="monitoring.googleapis.com/v1",
                kind="PodMonitoring",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=obj_name,
                    namespace=args.namespaces[p.role],
                    labels={naming.PART_OF_LABEL: naming.PART_OF, naming.POOL_LABEL: p.role},
                ),
                spec=spec,
                opts=child,
            )
            for p in args.pools
            for obj_name, spec in pod_monitoring_specs(args.scrape_interval_seconds).items()
        }
        return {
            "adapter_principal": self.adapter.principal,
            "hpas": {r: h.metadata.name for r, h in self.hpas.items()},
        }

    def monitoring_spec(self, args: ObservabilityArgs) -> MonitoringSpec:
        queue_target = args.pools[0].hpa.queue_target_per_pod if args.pools else 0
        return MonitoringSpec(
            project=args.project,
            environment=args.environment,
            dashboard_title=f"LLM serving — {args.environment}",
            panels=tuple(
                panels(list(args.pools), args.thresholds, queue_target, args.scrape_interval_seconds)
                + (
                    tenant_obs.panels(list(args.pools), dashboard_window(args.scrape_interval_seconds))
                    if args.tenants
                    else []
                )
            ),
            alerts=tuple(
                alerting.alert_specs(list(args.pools), args.thresholds)
                + tenant_obs.alert_specs(list(args.pools), list(args.tenants))
            ),
            notification_channels=args.notification_channels,
        )
