"""Autoscaling and observability of the serving pools (issue 6): the Custom Metrics Stackdriver Adapter, one HPA
per pool on ``vllm:num_requests_waiting``, Managed Prometheus scraping of vLLM and the endpoint pickers, the
Cloud Monitoring dashboard and the alert policies.

Cluster-side prerequisites owned by the platform component: Managed Service for Prometheus managed collection
and ``monitoring_config.enable_components`` with ``DCGM`` (GPU panels), ``POD`` (restart alert) and ``HPA``
(replica panels) — see ``components/platform.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from infra.planning.capacity import PoolPlan
from infra.config import StackConfig
from infra.planning.sizing import CapacityPlan

from . import alerts as alerting
from . import metrics as m
from .adapter import CustomMetricsAdapter, CustomMetricsAdapterArgs
from .autoscaling import HpaPlan, hpa_spec, plan_hpa, reservation_replica_cap
from .dashboard import dashboard_json, panels
from .views import PoolView, Thresholds

__all__ = ["Observability", "ObservabilityArgs", "observability_args", "pool_views", "pod_monitoring_specs"]


# ---- pure derivations -----------------------------------------------------------------------------------------

def reservation_cap_for(cfg: StackConfig, plan: CapacityPlan, role: str) -> int | None:
    """Replicas the pool's accelerator reservation holds for it (None when the accelerator has no reservation)."""
    pool = dict(cfg.pools())[role]
    acc = cfg.accelerators[pool.accelerator]
    if acc.reservation is None:
        return None
    others = [r for r, p in cfg.pools() if p.accelerator == pool.accelerator and r != role]
    return reservation_replica_cap(
        reserved_nodes=acc.reservation.count, replicas_per_node=plan.pools[role].replicas_per_node,
        other_pools_max=sum(plan.pools[r].max_replicas for r in others), pools_on_accelerator=len(others) + 1)


def pool_views(cfg: StackConfig, plan: CapacityPlan) -> list[PoolView]:
    views = []
    auto = cfg.observability.autoscaling
    for role, pool in cfg.pools():
        pp: PoolPlan = plan.pools[role]
        hpa: HpaPlan = plan_hpa(
            role=role, release=pool.release, min_replicas=pool.min_replicas, pool_max_replicas=pool.max_replicas,
            cold_load_seconds=pp.cold_load_seconds, stream_bound_seconds=cfg.contract.stream_bound_seconds,
            queue_target_per_pod=auto.queue_target_per_pod, kv_cache_target=auto.kv_cache_target,
            reservation_cap=reservation_cap_for(cfg, plan, role))
        views.append(PoolView(
            role=role, release=pool.release, weight=pool.weight, hpa=hpa, replica_hourly_usd=pp.replica_hourly_usd,
            planned_cost_per_million_usd=pp.cost_per_million_output_tokens_usd,
            measurement_source=pool.measured.source if pool.measured else None))
    return views


def thresholds(cfg: StackConfig) -> Thresholds:
    a = cfg.observability.alerts
    return Thresholds(
        ttft_p95_seconds=cfg.contract.ttft_p95_ms / 1000.0, itl_p95_seconds=cfg.contract.itl_p95_ms / 1000.0,
        kv_cache_usage=a.kv_cache_usage, kv_cache_for_minutes=a.kv_cache_for_minutes,
        canary_ttft_ratio=a.canary_ttft_ratio, no_traffic_minutes=a.no_traffic_minutes)


def pod_monitoring_specs(scrape_interval_seconds: int) -> dict[str, dict]:
    """PodMonitoring specs by object name: one for every vLLM pod of the stack.

    The endpoint pickers are not scraped here: the ``inferencepool`` chart (gateway component) renders their
    PodMonitoring with the bearer token the picker's /metrics requires (``m.epp_scrape_job``); a second,
    unauthenticated PodMonitoring would only scrape 401s and double-count the picker's series.
    """
    return {
        "vllm-model-servers": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/part-of": "llm-serving",
                                         "app.kubernetes.io/component": "model-server"}},
            # port 8000 by number: the serving port of the naming contract (FACTS §6 sample uses the number too).
            "endpoints": [{"port": 8000, "path": "/metrics", "scheme": "http", "interval": f"{scrape_interval_seconds}s"}],
            # pool / release become series labels: every panel and alert is split by them.
            "targetLabels": {"fromPod": [{"from": k, "to": v} for k, v in sorted(m.POD_LABEL_TO_TARGET_LABEL.items())]},
        },
    }


@dataclass(frozen=True)
class ObservabilityArgs:
    project: str
    environment: str
    pools: tuple[PoolView, ...]
    thresholds: Thresholds
    scrape_interval_seconds: int
    notification_channels: tuple[str, ...]
    adapter_image_digest: str | None
    project_number: pulumi.Input[str]


def observability_args(cfg: StackConfig, plan: CapacityPlan, project_number: pulumi.Input[str]) -> ObservabilityArgs:
    obs = cfg.observability
    return ObservabilityArgs(
        project=cfg.project, environment=cfg.environment, pools=tuple(pool_views(cfg, plan)),
        thresholds=thresholds(cfg), scrape_interval_seconds=obs.scrape_interval_seconds,
        notification_channels=tuple(obs.alerts.notification_channels),
        adapter_image_digest=obs.adapter_image_digest, project_number=project_number)


# ---- the component --------------------------------------------------------------------------------------------

class Observability(pulumi.ComponentResource):
    """Adapter + HPAs + PodMonitorings + dashboard + alert policies. Kubernetes children use the provider given
    in ``opts.providers``; HPAs should ``depends_on`` the model-server Deployments they scale."""

    TYPE = "llm-serving:observability:Observability"

    def __init__(self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None,
                 scale_targets: dict[str, pulumi.Resource] | None = None):
        super().__init__(self.TYPE, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.pools = args.pools
        self.adapter = CustomMetricsAdapter(
            f"{name}-adapter", CustomMetricsAdapterArgs(project=args.project, project_number=args.project_number,
                                                        image_digest=args.adapter_image_digest), opts=child)
        labels = {"app.kubernetes.io/part-of": "llm-serving", "app.kubernetes.io/component": "autoscaling"}
        self.hpas: dict[str, k8s.autoscaling.v2.HorizontalPodAutoscaler] = {}
        for p in args.pools:
            target = (scale_targets or {}).get(p.role)
            self.hpas[p.role] = k8s.autoscaling.v2.HorizontalPodAutoscaler(
                f"{name}-hpa-{p.role}",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=m.deployment_name(p.role), namespace=m.SERVING_NAMESPACE,
                                                    labels={**labels, "llm-serving.io/pool": p.role}),
                spec=hpa_spec(p.hpa),
                # The adapter's APIServices must exist before the HPA can read its metric.
                opts=pulumi.ResourceOptions(parent=self, depends_on=[*self.adapter.api_services,
                                                                     *([target] if target else [])]))
        self.pod_monitorings = {
            obj_name: k8s.apiextensions.CustomResource(
                f"{name}-podmonitoring-{obj_name}", api_version="monitoring.googleapis.com/v1", kind="PodMonitoring",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=obj_name, namespace=m.SERVING_NAMESPACE,
                                                    labels={"app.kubernetes.io/part-of": "llm-serving"}),
                spec=spec, opts=child)
            for obj_name, spec in pod_monitoring_specs(args.scrape_interval_seconds).items()
        }
        queue_target = args.pools[0].hpa.queue_target_per_pod if args.pools else 0
        self.dashboard_json = dashboard_json(
            f"LLM serving — {args.environment}",
            panels(list(args.pools), args.thresholds, queue_target, args.scrape_interval_seconds))
        self.dashboard = gcp.monitoring.Dashboard(f"{name}-dashboard", project=args.project,
                                                  dashboard_json=self.dashboard_json, opts=child)
        self.alert_specs = alerting.alert_specs(list(args.pools), args.thresholds)
        self.alert_policies = [self._policy(name, args, s) for s in self.alert_specs]
        self.register_outputs({
            "adapter_principal": self.adapter.principal,
            "hpas": {r: h.metadata.name for r, h in self.hpas.items()},
            "dashboard": self.dashboard.id,
            "alert_policies": [a.display_name for a in self.alert_policies],
        })

    def _policy(self, name: str, args: ObservabilityArgs, s: alerting.AlertSpec) -> gcp.monitoring.AlertPolicy:
        slug = f"{s.role}-{''.join('-' + c.lower() if c.isupper() else c for c in s.name).lstrip('-')}"
        return gcp.monitoring.AlertPolicy(
            f"{name}-alert-{slug}",
            project=args.project,
            display_name=f"[{args.environment}] {s.name} ({s.role})",
            combiner="OR",
            severity=s.severity,
            notification_channels=list(args.notification_channels),
            user_labels={"environment": args.environment, "pool": s.role},
            documentation=gcp.monitoring.AlertPolicyDocumentationArgs(
                content=f"{s.summary}.\n\nCondition: `{s.expr}` for {s.for_seconds}s.", mime_type="text/markdown",
                subject=f"[{args.environment}] {s.name} ({s.role})"),
            conditions=[gcp.monitoring.AlertPolicyConditionArgs(
                display_name=s.summary[:100],
                condition_prometheus_query_language=gcp.monitoring.AlertPolicyConditionConditionPrometheusQueryLanguageArgs(
                    query=s.expr,
                    duration=f"{s.for_seconds}s",
                    evaluation_interval=f"{alerting.EVALUATION_INTERVAL_SECONDS}s",
                    alert_rule=s.name,
                    rule_group=f"llm-serving-{s.role}",
                    labels={"severity": s.severity.lower()},
                ),
            )],
            opts=pulumi.ResourceOptions(parent=self))
