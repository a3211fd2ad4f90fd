"""The dashboard and alert specs of the Cloud Run target, on the shared ``components/monitoring`` builders (pure).

The vLLM series are the same as on GKE; what differs is how they are labelled (:class:`CloudRunSeries`): a pool is
its revision (``revision_name``), its release vLLM's ``model_name``, an instance the sidecar's ``instance``. What GKE
shows and Cloud Run cannot: the HPA and DCGM panels, the endpoint picker, container restarts (no kube-state
metrics); Cloud Run's own request and instance metrics (``run.googleapis.com/...``) are on its service page. What
Cloud Run adds: the instance count against the pool's bounds and the per-instance concurrency cap.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..monitoring import metrics as m
from ..monitoring.alerts import AlertedPool, AlertSpec, Thresholds, pool_alert_specs
from ..monitoring.dashboard import Panel, cost_panels, dashboard_window, vllm_panels

# ---- the Managed Prometheus sidecar's label model -------------------------------------------------------------------
# GoogleCloudPlatform/run-gmp-sidecar confgenerator/config.go: its default RunMonitoring config scrapes
# 0.0.0.0:8080/metrics every 30 s and relabels every series with job = the config's name (``run-gmp-sidecar``),
# cluster = ``__run__``, namespace = the Cloud Run service, instance = ``<instance id>:<port>``, plus the metric labels
# service_name, revision_name, configuration_name and instanceId (targetLabels.metadata, all by default). There are
# no pod labels: the plan knows each pool's revision name, and the release is vLLM's own ``model_name`` label.

#: ``cluster`` of every series the Cloud Run sidecar writes.
CLOUD_RUN_CLUSTER = "__run__"
#: The sidecar's default scrape interval (``DefaultRunMonitoringConfig``: ``interval: 30s``).
CLOUD_RUN_SCRAPE_INTERVAL_SECONDS = 30
#: The revision of a series: on Cloud Run a pool is one revision of the service.
CLOUD_RUN_REVISION_LABEL = "revision_name"
#: One scrape target per instance: ``<instance id>:8080``.
CLOUD_RUN_INSTANCE_LABEL = "instance"
#: What Cloud Run panels and alerts group by: revision (= pool) and release.
CLOUD_RUN_SPLIT = (CLOUD_RUN_REVISION_LABEL, m.VLLM_MODEL_NAME_LABEL)


@dataclass(frozen=True)
class CloudRunSeries(m.VllmSeries):
    """One Cloud Run service's vLLM series: queries filter on ``namespace`` (the service) and ``revision_name`` (the
    pool) and group by ``revision_name, model_name``."""

    service: str
    split = CLOUD_RUN_SPLIT
    replica_label = CLOUD_RUN_INSTANCE_LABEL

    def labels(self, pool: str | None = None) -> dict[str, str]:
        """Matchers of the service's vLLM series, optionally of one revision (one pool)."""
        labels = {"cluster": CLOUD_RUN_CLUSTER, "namespace": self.service}
        if pool is not None:
            labels[CLOUD_RUN_REVISION_LABEL] = pool
        return labels


@dataclass(frozen=True)
class RevisionView:
    """What observability needs about one pool's revision."""

    role: str
    release: str
    revision: str
    #: Percent of the service's traffic: 0 = dark (reachable by tag only).
    weight: int
    min_instances: int
    max_instances: int
    #: ``maxInstanceRequestConcurrency``: Cloud Run never sends one instance more.
    concurrency: int
    instance_hourly_usd: float
    #: The capacity plan's cost per 1M output tokens at the measured throughput; None = unmeasured.
    planned_cost_per_million_usd: float | None


def panels(service: str, revisions: list[RevisionView], t: Thresholds) -> list[Panel]:
    w = dashboard_window(CLOUD_RUN_SCRAPE_INTERVAL_SECONDS)
    series = CloudRunSeries(service)
    out = vllm_panels(series, w, t, "revision / release", "instance")
    for r in revisions:
        tag = f"{r.role} ({r.release}, {r.revision})"
        out.append(
            Panel(
                f"Instances and concurrency — {tag}",
                (
                    ("instances reporting", series.replica_count(r.revision)),
                    # Cloud Run sends at most the revision's concurrency to one instance.
                    ("running requests per instance", series.per_replica(m.NUM_REQUESTS_RUNNING, r.revision)),
                ),
                "",
                (("max instances", float(r.max_instances)), ("concurrency per instance", float(r.concurrency))),
            )
        )
        if r.planned_cost_per_million_usd is None:
            text = (
                f"**{tag}: capacity plan cost per 1M output tokens: unmeasured.** No throughput measured at the "
                f"SLO for this release on this GPU (serving.{r.role}.measured); an instance costs "
                f"${r.instance_hourly_usd:.2f}/h while it runs. The chart beside shows the observed cost."
            )
        else:
            text = (
                f"**{tag}: capacity plan cost per 1M output tokens: ${r.planned_cost_per_million_usd:.2f}** at the "
                f"measured throughput; an instance ${r.instance_hourly_usd:.2f}/h."
            )
        out += cost_panels(tag, text, series, r.revision, r.instance_hourly_usd, r.planned_cost_per_million_usd, w)
    return out


def alert_specs(service: str, revisions: list[RevisionView], t: Thresholds) -> list[AlertSpec]:
    series = CloudRunSeries(service)
    by_role = {r.role: r for r in revisions}

    def concurrency_spec(role: str, severity: str) -> list[AlertSpec]:
        # Every instance runs at its concurrency cap and no instance can be added: Cloud Run holds further
        # requests in its pending queue and answers 429 when that overflows.
        r = by_role[role]
        return [
            AlertSpec(
                "ConcurrencyCapAtMaxInstances",
                r.role,
                f"Pool {r.role} runs {r.concurrency} request(s) per instance (its concurrency cap) on all "
                f"{r.max_instances} max instance(s): Cloud Run cannot add capacity",
                series.per_replica(m.NUM_REQUESTS_RUNNING, r.revision),
                ">=",
                r.concurrency,
                300,
                severity,
                guard_signal=series.replica_count(r.revision),
                guard_min=r.max_instances,
            )
        ]

    # A revision that scales to zero (min_instances 0) legitimately has no series while idle.
    alerted = [AlertedPool(r.role, r.revision, r.weight, warm=r.min_instances > 0) for r in revisions]
    return pool_alert_specs(series, alerted, t, concurrency_spec)
