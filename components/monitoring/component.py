"""The one component every target's observability is: a Cloud Monitoring dashboard, the notification channels and
one alert policy per spec, all built from the target's pure builders (:class:`MonitoringSpec`).

Each target subclasses :class:`Monitoring` with its own type token and Args (``llm-serving:cloudrun:Observability``,
``llm-serving:vertex:Observability``, GKE's ``llm-serving:observability:Observability``): a child's URN carries its
parent's type, so the token, not this class, names the deployed resources.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp

from .. import naming
from ..base import Component
from . import alerts as alerting
from .dashboard import Panel, dashboard_json


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
class MonitoringSpec:
    """One target's monitoring, built: where it lives, the dashboard, the alerts and who they notify."""

    project: str
    environment: str
    dashboard_title: str
    panels: tuple[Panel, ...]
    alerts: tuple[alerting.AlertSpec, ...]
    notification_channels: tuple[ChannelSpec, ...]


class Monitoring(Component):
    """Dashboard + notification channels + alert policies. A target's subclass sets ``TYPE``, turns its Args into a
    :class:`MonitoringSpec` (:meth:`monitoring_spec`) and may create its own children first (:meth:`target_children`,
    GKE's HPAs and PodMonitorings); the component's outputs are the dashboard's id and the policies' names, after
    the target's own."""

    def __init__(self, name: str, args: Any, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, args, opts)
        outputs = self.target_children(name, args)
        spec = self.monitoring_spec(args)
        self.dashboard_json = dashboard_json(spec.dashboard_title, list(spec.panels))
        self.dashboard = gcp.monitoring.Dashboard(
            f"{name}-dashboard", project=spec.project, dashboard_json=self.dashboard_json, opts=self.child_opts()
        )
        self.channels, self.channel_names = notification_channels(
            name, spec.project, spec.environment, spec.notification_channels, self.child_opts
        )
        self.alert_specs = list(spec.alerts)
        self.alert_policies = [
            alert_policy(name, spec.project, spec.environment, self.channel_names, s, self.child_opts())
            for s in self.alert_specs
        ]
        self.register_outputs(
            {
                **outputs,
                "dashboard": self.dashboard.id,
                "alert_policies": [a.display_name for a in self.alert_policies],
            }
        )

    def monitoring_spec(self, args: Any) -> MonitoringSpec:
        """The target's dashboard and alerts, from its Args (pure builders only). Every subclass defines it."""
        raise NotImplementedError(f"{type(self).__name__}.monitoring_spec")

    def target_children(self, name: str, args: Any) -> dict[str, Any]:
        """The target's own children, created before the dashboard, and their outputs (none by default)."""
        return {}


# ---- notification channels and alert policies ---------------------------------------------------------------------


def notification_channels(
    name: str,
    project: str,
    environment: str,
    specs: tuple[ChannelSpec, ...],
    child_opts: Callable[[], pulumi.ResourceOptions],
) -> tuple[list[gcp.monitoring.NotificationChannel], list[pulumi.Input[str]]]:
    """The channels to create (``<name>-channel-<key>``, keyed by type and display name: removing one channel never
    shifts another onto its resource) and the resource names every alert policy notifies: the existing channels'
    names, then the created channels' ``name`` outputs."""
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
    # Keyed by type and display name (never by a label: a PagerDuty key or webhook URL is a secret); aliased to the
    # name by position (``<name>-channel-<index in the configured list>``) earlier versions gave it.
    key = naming.member_key(f"{c.type}:{c.display_name}")
    opts = pulumi.ResourceOptions.merge(
        opts, pulumi.ResourceOptions(aliases=[pulumi.Alias(name=f"{name}-channel-{index}")])
    )
    return gcp.monitoring.NotificationChannel(
        f"{name}-channel-{key}",
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
        enabled=s.enabled,
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
