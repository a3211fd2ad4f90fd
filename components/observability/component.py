"""Autoscaling and observability of the serving pools: the Custom Metrics Stackdriver Adapter, one HPA per pool on
``vllm:num_requests_waiting``, Managed Prometheus scraping of vLLM, the Cloud Monitoring dashboard and the alert
policies.

Cluster-side prerequisites owned by the platform: Managed Service for Prometheus managed collection and
``monitoring_config.enable_components`` with ``DCGM`` (GPU panels), ``POD`` (restart alert) and ``HPA`` (replica
panels) — see ``components/cluster.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from .. import naming
from ..base import Component
from . import alerts as alerting
from . import metrics as m
from .adapter import CustomMetricsAdapter, CustomMetricsAdapterArgs
from .autoscaling import hpa_spec
from .dashboard import dashboard_json, panels
from .views import PoolView, Thresholds


def pod_monitoring_specs(scrape_interval_seconds: int) -> dict[str, dict]:
    """PodMonitoring specs by object name, created in every pool namespace: one scraping every vLLM pod there.

    The endpoint pickers are not scraped here: the ``inferencepool`` chart (gateway component) renders their
    PodMonitoring with the bearer token the picker's /metrics requires (``m.epp_scrape_job``); a second,
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
            "targetLabels": {"fromPod": [{"from": k, "to": v} for k, v in sorted(m.POD_LABEL_TO_TARGET_LABEL.items())]},
        },
    }


@dataclass(frozen=True)
class ChannelSpec:
    """A notification channel: an existing one (``existing_name``), or one to create (``type`` + ``labels``).
    ``secret_labels`` are plain API labels holding a secret (a webhook URL with its token) and
    ``sensitive_labels`` the API's write-only labels (a PagerDuty key); both reach resources only as Pulumi
    secrets."""

    existing_name: str | None = None
    type: str | None = None
    display_name: str | None = None
    labels: tuple[tuple[str, str], ...] = ()
    secret_labels: tuple[tuple[str, str], ...] = ()
    sensitive_labels: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if (self.existing_name is None) == (self.type is None):
            raise ValueError("ChannelSpec: give existing_name or type (with labels), not both")


#: Cloud Monitoring channel types of the channel kinds the stack creates, and where each one's address goes
#: (``labels`` are plain; ``sensitive_labels`` are write-only in the API and secrets in the Pulumi state).
CHANNEL_TYPES = {"email": "email", "pagerduty": "pagerduty", "webhook": "webhook_tokenauth"}


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

    def __post_init__(self) -> None:
        missing = sorted({p.role for p in self.pools} - set(self.scale_targets))
        if missing:
            raise ValueError(f"ObservabilityArgs.scale_targets: no Deployment for pool(s) {missing}")
        missing = sorted({p.role for p in self.pools} - set(self.namespaces))
        if missing:
            raise ValueError(f"ObservabilityArgs.namespaces: no namespace for pool(s) {missing}")


# ---- the component --------------------------------------------------------------------------------------------


class Observability(Component):
    """Adapter + HPAs + PodMonitorings + dashboard + alert policies. Kubernetes children use the provider given
    in ``opts.providers``."""

    TYPE = "llm-serving:observability:Observability"

    def __init__(self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, args, opts)
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
        queue_target = args.pools[0].hpa.queue_target_per_pod if args.pools else 0
        self.dashboard_json = dashboard_json(
            f"LLM serving — {args.environment}",
            panels(list(args.pools), args.thresholds, queue_target, args.scrape_interval_seconds),
        )
        self.dashboard = gcp.monitoring.Dashboard(
            f"{name}-dashboard", project=args.project, dashboard_json=self.dashboard_json, opts=child
        )
        self.channels, self.channel_names = notification_channels(
            name, args.project, args.environment, args.notification_channels, self.child_opts
        )
        self.alert_specs = alerting.alert_specs(list(args.pools), args.thresholds)
        self.alert_policies = [
            alert_policy(name, args.project, args.environment, self.channel_names, s, self.child_opts())
            for s in self.alert_specs
        ]
        self.register_outputs(
            {
                "adapter_principal": self.adapter.principal,
                "hpas": {r: h.metadata.name for r, h in self.hpas.items()},
                "dashboard": self.dashboard.id,
                "alert_policies": [a.display_name for a in self.alert_policies],
            }
        )


# ---- notification channels and alert policies (also built by the Cloud Run target's observability) ----------------


def notification_channels(
    name: str,
    project: str,
    environment: str,
    specs: tuple[ChannelSpec, ...],
    child_opts: Callable[[], pulumi.ResourceOptions],
) -> tuple[list[gcp.monitoring.NotificationChannel], list[pulumi.Input[str]]]:
    """The channels to create (``<name>-channel-<i>``) and the resource names every alert policy notifies:
    the existing channels' names, then the created channels' ``name`` outputs."""
    created = [
        notification_channel(name, project, environment, i, c, child_opts())
        for i, c in enumerate(specs)
        if c.existing_name is None
    ]
    names: list[pulumi.Input[str]] = [c.existing_name for c in specs if c.existing_name is not None]
    names += [c.name for c in created]
    return created, names


def notification_channel(
    name: str, project: str, environment: str, index: int, c: ChannelSpec, opts: pulumi.ResourceOptions
) -> gcp.monitoring.NotificationChannel:
    sensitive = dict(c.sensitive_labels)
    return gcp.monitoring.NotificationChannel(
        f"{name}-channel-{index}",
        project=project,
        type=str(c.type),
        display_name=c.display_name,
        labels={**dict(c.labels), **{k: pulumi.Output.secret(v) for k, v in c.secret_labels}} or None,
        sensitive_labels=(
            gcp.monitoring.NotificationChannelSensitiveLabelsArgs(
                service_key=pulumi.Output.secret(sensitive["service_key"]) if "service_key" in sensitive else None,
                auth_token=pulumi.Output.secret(sensitive["auth_token"]) if "auth_token" in sensitive else None,
            )
            if sensitive
            else None
        ),
        user_labels={"environment": environment},
        opts=opts,
    )


def alert_policy(
    name: str,
    project: str,
    environment: str,
    channel_names: list[pulumi.Input[str]],
    s: alerting.AlertSpec,
    opts: pulumi.ResourceOptions,
) -> gcp.monitoring.AlertPolicy:
    """One Cloud Monitoring alert policy with a PromQL condition, named ``<name>-alert-<role>-<kebab alert name>``."""
    slug = f"{s.role}-{''.join('-' + c.lower() if c.isupper() else c for c in s.name).lstrip('-')}"
    return gcp.monitoring.AlertPolicy(
        f"{name}-alert-{slug}",
        project=project,
        display_name=f"[{environment}] {s.name} ({s.role})",
        combiner="OR",
        severity=s.severity,
        notification_channels=list(channel_names),
        user_labels={"environment": environment, "pool": s.role},
        documentation=gcp.monitoring.AlertPolicyDocumentationArgs(
            content=f"{s.summary}.\n\nCondition: `{s.expr}` for {s.for_seconds}s.",
            mime_type="text/markdown",
            subject=f"[{environment}] {s.name} ({s.role})",
        ),
        conditions=[
            gcp.monitoring.AlertPolicyConditionArgs(
                display_name=s.summary[:100],
                condition_prometheus_query_language=gcp.monitoring.AlertPolicyConditionConditionPrometheusQueryLanguageArgs(
                    query=s.expr,
                    # The policies are created before any vLLM has exported a sample; with validation on, the API
                    # rejects a condition on a metric it has never seen, and the first apply fails.
                    disable_metric_validation=True,
                    duration=f"{s.for_seconds}s",
                    evaluation_interval=f"{alerting.EVALUATION_INTERVAL_SECONDS}s",
                    alert_rule=s.name,
                    rule_group=f"llm-serving-{s.role}",
                    labels={"severity": s.severity.lower()},
                ),
            )
        ],
        opts=opts,
    )
