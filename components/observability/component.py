"""Autoscaling and observability of the GKE target's serving pools: the Custom Metrics Stackdriver Adapter, one HPA
per pool on ``vllm:num_requests_waiting``, Managed Prometheus scraping of vLLM, and the Cloud Monitoring dashboard
and alert policies (the shared :class:`~components.monitoring.component.Monitoring` component, with GKE's panels
and alerts).

Cluster-side prerequisites owned by the platform: Managed Service for Prometheus managed collection and
``monitoring_config.enable_components`` with ``DCGM`` (GPU panels), ``POD`` (restart alert) and ``HPA`` (replica
panels) — see ``components/cluster.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from .. import naming
from ..base import Component
from ..monitoring.alerts import Thresholds
from ..monitoring.component import ChannelSpec, Monitoring, MonitoringSpec
from ..monitoring.dashboard import dashboard_window
from . import alerts as alerting
from . import metrics as gke
from . import tenants as tenant_obs
from .adapter import CustomMetricsAdapter, CustomMetricsAdapterArgs
from .autoscaling import hpa_spec
from .dashboard import panels
from .regions import RegionView, region_alert_specs, region_panels
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
    #: A fleet's serving regions (the config cluster's first): per-region panels and alerts (``regions``); none in a
    #: single-region stack. The pool panels and alerts above then sum over every region's cluster.
    regions: tuple[RegionView, ...] = ()
    #: The pools as the dashboard and the alerts see them, when that differs from ``pools`` (this cluster's HPAs):
    #: in a fleet their series come from every region, so their replica bounds are the fleet's sums
    #: (``fleet_pool_views``). None: ``pools``.
    monitored_pools: tuple[PoolView, ...] | None = None

    def __post_init__(self) -> None:
        missing = sorted({p.role for p in self.pools} - set(self.scale_targets))
        if missing:
            raise ValueError(f"ObservabilityArgs.scale_targets: no Deployment for pool(s) {missing}")
        missing = sorted({p.role for p in self.pools} - set(self.namespaces))
        if missing:
            raise ValueError(f"ObservabilityArgs.namespaces: no namespace for pool(s) {missing}")


def fleet_pool_views(regional: Sequence[Sequence[PoolView]]) -> tuple[PoolView, ...]:
    """A fleet's pools as its dashboard and alerts see them: the first region's views (the config cluster's) with
    replica bounds summed over every region's (``regional``: one view tuple per region, the same roles in each).
    A pool's series carry no region in its pool alerts, so "at maxReplicas" means every region at its own."""
    first = regional[0]
    by_role = [{v.role: v for v in views} for views in regional]
    roles = [v.role for v in first]
    if any(sorted(r) != sorted(roles) for r in by_role):
        raise ValueError(f"regional: every region must serve the same pools, got {[sorted(r) for r in by_role]}")
    out = []
    for v in first:
        hpas = [r[v.role].hpa for r in by_role]
        hpa = dataclasses.replace(
            v.hpa,
            min_replicas=sum(h.min_replicas for h in hpas),
            max_replicas=sum(h.max_replicas for h in hpas),
            max_reason=f"sum over {len(hpas)} regions ({' + '.join(str(h.max_replicas) for h in hpas)})",
        )
        out.append(dataclasses.replace(v, hpa=hpa))
    return tuple(out)


# ---- one cluster's autoscaling -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterAutoscalingArgs:
    """What one cluster scales and scrapes: its pools' HPAs (through the cluster's own custom-metrics adapter) and
    PodMonitorings. The config cluster's are :class:`Observability`'s; a fleet's other clusters have their own."""

    project: str
    project_number: pulumi.Input[str]
    workload_pool: pulumi.Input[str]
    adapter_image_digest: str | None
    namespaces: Mapping[str, pulumi.Input[str]]
    pools: tuple[PoolView, ...]
    scale_targets: Mapping[str, pulumi.Input[str]]
    scrape_interval_seconds: int
    #: See ``CustomMetricsAdapterArgs.grant_viewer``.
    grant_adapter_viewer: bool = True


def autoscaling_children(
    owner: Component, name: str, args: ClusterAutoscalingArgs
) -> tuple[
    CustomMetricsAdapter,
    dict[str, k8s.autoscaling.v2.HorizontalPodAutoscaler],
    dict[tuple[str, str], k8s.apiextensions.CustomResource],
]:
    """The adapter, one HPA per pool and the PodMonitorings, as children of ``owner`` (names from ``name``)."""
    child = owner.child_opts()
    adapter = CustomMetricsAdapter(
        f"{name}-adapter",
        CustomMetricsAdapterArgs(
            project=args.project,
            project_number=args.project_number,
            workload_pool=args.workload_pool,
            image_digest=args.adapter_image_digest,
            grant_viewer=args.grant_adapter_viewer,
        ),
        opts=child,
    )
    labels = {naming.PART_OF_LABEL: naming.PART_OF, naming.COMPONENT_LABEL: "autoscaling"}
    hpas: dict[str, k8s.autoscaling.v2.HorizontalPodAutoscaler] = {}
    for p in args.pools:
        hpas[p.role] = k8s.autoscaling.v2.HorizontalPodAutoscaler(
            f"{name}-hpa-{p.role}",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=naming.deployment_name(p.role),
                namespace=args.namespaces[p.role],
                labels={**labels, naming.POOL_LABEL: p.role},
            ),
            spec=hpa_spec(p.hpa, args.scale_targets[p.role]),
            # The adapter's APIServices must exist before the HPA can read its metric.
            opts=owner.child_opts(depends_on=adapter.api_services),
        )
    # A PodMonitoring selects pods of its own namespace only: one per pool namespace.
    pod_monitorings = {
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
    return adapter, hpas, pod_monitorings


class ClusterAutoscaling(Component):
    """A fleet's other cluster: its custom-metrics adapter (no project grant: ``grant_adapter_viewer``), one HPA per
    pool on the region's own bounds, and the vLLM PodMonitorings. The fleet's dashboard and alerts are the config
    cluster's :class:`Observability` (Cloud Monitoring is per project). Pass the cluster's provider in ``opts``."""

    TYPE = "llm-serving:observability:ClusterAutoscaling"

    def __init__(self, name: str, args: ClusterAutoscalingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, args, opts)
        self.adapter, self.hpas, self.pod_monitorings = autoscaling_children(self, name, args)
        self.register_outputs({"hpas": {r: h.metadata.name for r, h in self.hpas.items()}})


# ---- the component --------------------------------------------------------------------------------------------


class Observability(Monitoring):
    """Adapter + HPAs + PodMonitorings, then the dashboard + alert policies. Kubernetes children use the provider
    given in ``opts.providers``."""

    TYPE = "llm-serving:observability:Observability"

    def target_children(self, name: str, args: ObservabilityArgs) -> dict[str, Any]:
        self.pools = args.pools
        self.adapter, self.hpas, self.pod_monitorings = autoscaling_children(
            self,
            name,
            ClusterAutoscalingArgs(
                project=args.project,
                project_number=args.project_number,
                workload_pool=args.workload_pool,
                adapter_image_digest=args.adapter_image_digest,
                namespaces=args.namespaces,
                pools=args.pools,
                scale_targets=args.scale_targets,
                scrape_interval_seconds=args.scrape_interval_seconds,
            ),
        )
        return {
            "adapter_principal": self.adapter.principal,
            "hpas": {r: h.metadata.name for r, h in self.hpas.items()},
        }

    def monitoring_spec(self, args: ObservabilityArgs) -> MonitoringSpec:
        pools = args.monitored_pools if args.monitored_pools is not None else args.pools
        queue_target = pools[0].hpa.queue_target_per_pod if pools else 0
        return MonitoringSpec(
            project=args.project,
            environment=args.environment,
            dashboard_title=f"LLM serving — {args.environment}",
            panels=tuple(
                panels(list(pools), args.thresholds, queue_target, args.scrape_interval_seconds)
                + (
                    tenant_obs.panels(list(pools), dashboard_window(args.scrape_interval_seconds))
                    if args.tenants
                    else []
                )
                + (
                    region_panels(list(args.regions), dashboard_window(args.scrape_interval_seconds))
                    if args.regions
                    else []
                )
            ),
            alerts=tuple(
                alerting.alert_specs(list(pools), args.thresholds)
                + tenant_obs.alert_specs(list(pools), list(args.tenants))
                + (
                    region_alert_specs(list(args.regions), [p.role for p in pools], args.thresholds)
                    if args.regions
                    else []
                )
            ),
            notification_channels=args.notification_channels,
        )
