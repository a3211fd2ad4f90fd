"""The dashboard and alert specs of the Vertex AI target, on the shared ``components/monitoring`` builders (pure).

The vLLM series are the same as on GKE and Cloud Run, exported by Vertex AI's AI AutoMetrics under ``vertex_*``
names and labelled by the endpoint and the deployed model (:class:`VertexSeries`): a pool is its deployed model
(``model_display_name``, the displayName the program gives it), its release vLLM's ``model_name``, a replica
AutoMetrics' ``replica_id``. Beside them, the endpoint's own Cloud Monitoring metrics (replicas, target replicas,
predictions, responses, latency, accelerator duty cycle). What GKE shows and Vertex cannot: the HPA and DCGM panels,
the endpoint picker, container restarts.

Standard library and the monitoring builders only: nothing here imports Pulumi.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from ..monitoring import cohosted
from ..monitoring import metrics as m
from ..monitoring.alerts import AlertedPool, AlertSpec, Thresholds, pool_alert_specs
from ..monitoring.dashboard import Panel, dashboard_window, vllm_panels

_M = TypeVar("_M", m.Gauge, m.Counter, m.Histogram)

# ---- AI AutoMetrics' label model ----------------------------------------------------------------------------------
# Vertex AI scrapes the container's /metrics, keeps the ``vllm:`` series and writes them to Managed Service for
# Prometheus "under the vertex_* naming convention", each with the labels deployed_model_id, model_display_name
# ("the display name of a deployed model"), replica_id (the replica's pod name), endpoint_id, endpoint_display_name
# and product (Vertex AI "View Vertex AI Inference AI AutoMetrics").
#
# The name rule is derived from the aiplatform.v1 discovery document (AutoscalingMetricSpec.metricName), which lists
# ``prometheus.googleapis.com/vertex_vllm_num_requests_waiting`` (vLLM's ``vllm:num_requests_waiting``),
# ``.../vertex_vllm_gpu_cache_usage_perc`` (``vllm:gpu_cache_usage_perc``) and ``.../vertex_dcgm_fi_dev_gpu_util``
# (DCGM's ``DCGM_FI_DEV_GPU_UTIL``): ``vertex_`` + the name lower-cased with ``:`` -> ``_``. Not verifiable here,
# and preconditions of the Vertex dashboard and alerts: that the rule holds for every ``vllm:`` series, the
# histograms' ``_bucket`` / ``_sum`` / ``_count`` and the counters' ``_total`` keeping their suffixes (only gauges
# appear in the document); that ``model_display_name`` is the DeployedModel's displayName (the program sets it:
# ``components.vertex.requests.deployed_model_display_name``), not the uploaded Model's; that ``endpoint_id`` is
# the id the program gives the endpoint; the scrape interval (the page says only "a predefined interval").

#: Prefix AutoMetrics gives every series it exports.
VERTEX_METRIC_PREFIX = "vertex_"
#: The endpoint of a series: the program sets the endpoint's id (``AiEndpoint.name``).
VERTEX_ENDPOINT_LABEL = "endpoint_id"
#: The deployed model of a series: on Vertex a pool is one deployed model, named by the displayName the program
#: gives it (its id is assigned by Vertex at deployment, unknown to the plan).
VERTEX_POOL_LABEL = "model_display_name"
#: One replica of a deployed model (its pod name).
VERTEX_REPLICA_LABEL = "replica_id"
#: What Vertex panels and alerts group by: deployed model (= pool) and release (vLLM's ``model_name``).
VERTEX_SPLIT = (VERTEX_POOL_LABEL, m.VLLM_MODEL_NAME_LABEL)
#: Assumed AutoMetrics scrape interval: not documented ("a predefined interval"); 60 s is the sampling period of
#: Vertex's own endpoint metrics (Cloud Monitoring metrics list, aiplatform). Sets the dashboard's rate window only.
VERTEX_SCRAPE_INTERVAL_SECONDS = 60


def vertex_name(name: str) -> str:
    """The name AutoMetrics stores a Prometheus metric under (``vllm:num_requests_waiting`` ->
    ``vertex_vllm_num_requests_waiting``)."""
    return VERTEX_METRIC_PREFIX + name.replace(":", "_").lower()


def on_vertex(metric: _M) -> _M:
    """The same metric family as AutoMetrics names it: its exported series keep their suffixes (``_bucket``, ...)."""
    return type(metric)(vertex_name(metric.name))


@dataclass(frozen=True)
class VertexSeries(m.VllmSeries):
    """One endpoint's vLLM series: queries filter on ``endpoint_id`` + ``model_display_name`` (the pool) and group by
    ``model_display_name, model_name``, under AutoMetrics' names."""

    endpoint_id: str
    split = VERTEX_SPLIT
    replica_label = VERTEX_REPLICA_LABEL

    def labels(self, pool: str | None = None) -> dict[str, str]:
        """Matchers of the endpoint's vLLM series, optionally of one deployed model (one pool, by its displayName)."""
        labels = {VERTEX_ENDPOINT_LABEL: self.endpoint_id}
        if pool is not None:
            labels[VERTEX_POOL_LABEL] = pool
        return labels

    def family(self, metric: _M) -> _M:
        return on_vertex(metric)


# ---- the endpoint's own Cloud Monitoring metrics ----------------------------------------------------------------------
# Google Cloud metrics list, section aiplatform (cloud.google.com/monitoring/api/metrics_gcp_a_b): on monitored
# resource aiplatform.googleapis.com/Endpoint (resource label endpoint_id), prediction/online/replicas and
# target_replicas (GAUGE, labels deployed_model_id, model_display_name, spot, endpoint_display_name),
# prediction_count (DELTA), response_count (DELTA, label response_code), prediction_latencies (DELTA DISTRIBUTION,
# ms, label latency_type: "total" always populated) and accelerator/duty_cycle (GAUGE, percent; labels
# deployed_model_id and replica_id only, so it is split by deployed model id, which Vertex assigns at deployment).
# PromQL names follow Cloud Monitoring's mapping (``m.cloud_monitoring_promql_name``) and the resource type is
# selected by the ``monitored_resource`` label ("Mapping Cloud Monitoring metrics to PromQL"). Which model display
# name the endpoint metrics carry (the DeployedModel's or the Model's) is not stated there: their panels split by
# deployed_model_id and that label.

VERTEX_ENDPOINT_RESOURCE = "aiplatform.googleapis.com/Endpoint"
VERTEX_DEPLOYED_MODEL_ID_LABEL = "deployed_model_id"
VERTEX_ENDPOINT_SPLIT = (VERTEX_DEPLOYED_MODEL_ID_LABEL, VERTEX_POOL_LABEL)

VERTEX_REPLICAS = m.Gauge(m.cloud_monitoring_promql_name("aiplatform.googleapis.com/prediction/online/replicas"))
VERTEX_TARGET_REPLICAS = m.Gauge(
    m.cloud_monitoring_promql_name("aiplatform.googleapis.com/prediction/online/target_replicas")
)
VERTEX_DUTY_CYCLE = m.Gauge(
    m.cloud_monitoring_promql_name("aiplatform.googleapis.com/prediction/online/accelerator/duty_cycle")
)
#: DELTA metrics: PromQL on Cloud Monitoring reads them with rate(), like counters (no ``_total`` suffix).
VERTEX_PREDICTION_COUNT = m.Gauge(
    m.cloud_monitoring_promql_name("aiplatform.googleapis.com/prediction/online/prediction_count")
)
VERTEX_RESPONSE_COUNT = m.Gauge(
    m.cloud_monitoring_promql_name("aiplatform.googleapis.com/prediction/online/response_count")
)
VERTEX_PREDICTION_LATENCIES = m.Histogram(
    m.cloud_monitoring_promql_name("aiplatform.googleapis.com/prediction/online/prediction_latencies")
)


def vertex_endpoint_metric(endpoint_id: str, **extra: str) -> str:
    """Selector of the endpoint's own metrics (Cloud Monitoring, monitored resource aiplatform.googleapis.com/Endpoint)."""
    return m.matchers(monitored_resource=VERTEX_ENDPOINT_RESOURCE, **{VERTEX_ENDPOINT_LABEL: endpoint_id}, **extra)


# ---- the dashboard and alerts ---------------------------------------------------------------------------------------

#: The autoscaling signal the per-pool panel's queue line is compared with (``requests.AUTOSCALING_METRICS``).
QUEUE_SIGNAL = "vllm_queue"


@dataclass(frozen=True)
class DeployedModelView:
    """What observability needs about one pool's deployed model."""

    role: str
    release: str
    #: DeployedModel.displayName (``requests.deployed_model_display_name``): the pool's ``model_display_name``.
    display_name: str
    #: Percent of the endpoint's traffic: 0 = dark (deployed, no entry in the traffic split).
    weight: int
    min_replicas: int
    max_replicas: int
    #: Vertex's autoscaling signal (a key of ``requests.AUTOSCALING_METRICS``) and its per-replica target.
    autoscaling_signal: str | None
    autoscaling_target: int | None


@dataclass(frozen=True)
class CoHostedOnVertex:
    """A co-hosted model as its Vertex AI series see it: the endpoint it is reached through and the model (its
    ``series_pool`` the deployed model's displayName). AutoMetrics keeps the ``vllm:`` series only, so no co-host
    server series (``server_metrics=False`` for the shared builders)."""

    endpoint_id: str
    model: cohosted.CoHostedModel


def cohosted_panels(models: list[CoHostedOnVertex], t: Thresholds) -> list[Panel]:
    w = dashboard_window(VERTEX_SCRAPE_INTERVAL_SECONDS)
    return [
        p for c in models for p in cohosted.panels(VertexSeries(c.endpoint_id), c.model, w, t, server_metrics=False)
    ]


def cohosted_alert_specs(models: list[CoHostedOnVertex], t: Thresholds) -> list[AlertSpec]:
    return [
        a for c in models for a in cohosted.alert_specs(VertexSeries(c.endpoint_id), c.model, t, server_metrics=False)
    ]


def _endpoint_panels(endpoint_id: str, w: str) -> list[Panel]:
    """The endpoint's own metrics, one line per deployed model (``deployed_model_id``, assigned by Vertex)."""
    g = VERTEX_ENDPOINT_SPLIT
    sel = vertex_endpoint_metric(endpoint_id)
    total = vertex_endpoint_metric(endpoint_id, latency_type="total")
    return [
        Panel(
            "Replicas and target replicas by deployed model (Vertex)",
            (
                ("replicas", m.gauge_agg(VERTEX_REPLICAS, "max", sel, g)),
                ("target replicas", m.gauge_agg(VERTEX_TARGET_REPLICAS, "max", sel, g)),
            ),
            split=g,
        ),
        Panel(
            "Predictions/s by deployed model (Vertex)",
            (("predictions/s", f"{m.agg('sum', g)} (rate({VERTEX_PREDICTION_COUNT.series}{sel}[{w}]))"),),
            "1/s",
            split=g,
        ),
        Panel(
            "Responses/s by response code (Vertex)",
            (
                (
                    "responses/s",
                    f"sum by ({VERTEX_DEPLOYED_MODEL_ID_LABEL}, response_code) "
                    f"(rate({VERTEX_RESPONSE_COUNT.series}{sel}[{w}]))",
                ),
            ),
            "1/s",
            split=(VERTEX_DEPLOYED_MODEL_ID_LABEL, "response_code"),
        ),
        Panel(
            "Prediction latency p95 by deployed model (Vertex, total, ms)",
            (("p95", m.quantile(VERTEX_PREDICTION_LATENCIES, 0.95, w, total, g)),),
            "ms",
            split=g,
        ),
        # Unit 10^2.% in the metrics list: shown as stored.
        Panel(
            "Accelerator duty cycle by deployed model (Vertex)",
            (("mean over replicas", f"avg by ({VERTEX_DEPLOYED_MODEL_ID_LABEL}) ({VERTEX_DUTY_CYCLE.series}{sel})"),),
            split=(VERTEX_DEPLOYED_MODEL_ID_LABEL,),
        ),
    ]


def panels(endpoint_id: str, models: list[DeployedModelView], t: Thresholds) -> list[Panel]:
    w = dashboard_window(VERTEX_SCRAPE_INTERVAL_SECONDS)
    series = VertexSeries(endpoint_id)
    out = vllm_panels(series, w, t, "deployed model / release", "replica")
    out += _endpoint_panels(endpoint_id, w)
    for d in models:
        tag = f"{d.role} ({d.release}, {d.display_name})"
        out.append(
            Panel(
                f"Replicas and queue — {tag}",
                (
                    ("replicas reporting vLLM metrics", series.replica_count(d.display_name)),
                    # Vertex's queue autoscaling signal as the dashboard sees it.
                    ("waiting requests per replica", series.per_replica(m.NUM_REQUESTS_WAITING, d.display_name)),
                ),
                "",
                (
                    ("max replicas", float(d.max_replicas)),
                    ("min replicas", float(d.min_replicas)),
                    *(
                        (("autoscaling target per replica", float(d.autoscaling_target)),)
                        if d.autoscaling_signal == QUEUE_SIGNAL and d.autoscaling_target is not None
                        else ()
                    ),
                ),
            )
        )
    return out


def alert_specs(endpoint_id: str, models: list[DeployedModelView], t: Thresholds) -> list[AlertSpec]:
    # A pool is its deployed model's displayName; Vertex keeps min_replicas (>= 1) warm.
    alerted = [AlertedPool(d.role, d.display_name, d.weight, warm=d.min_replicas > 0) for d in models]
    return pool_alert_specs(VertexSeries(endpoint_id), alerted, t)
