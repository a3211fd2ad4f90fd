"""The one module that owns every metric name the program emits, and the PromQL built from them.

vLLM names are the ones vLLM 0.32 exports (vLLM vllm/v1/metrics/loggers.py; the set is identical in 0.33, see
``../shared/reference/vllm/vllm-0.33.0-prometheus-metrics.tsv``): prometheus_client exports a Counter ``x`` as
``x_total`` and a Histogram ``x`` as ``x_bucket`` / ``x_sum`` / ``x_count``, so the classes below only hand out
those exported series names — a bare histogram or counter family name can never reach a query.

Endpoint-picker names are the Gateway API Inference Extension's (``pkg/epp/metrics``, v1.x); DCGM names are the
GKE-managed DCGM exporter's (``DCGM_FI_*``, pod attribution as ``exported_namespace`` / ``exported_pod`` because
the collector's own target labels own ``namespace`` / ``pod``); kube-state names are GKE's kube-state package's.

Label model on GKE (what Managed Service for Prometheus attaches): ``namespace`` (the PodMonitoring's: each pool has
its own, ``llm-serving-<role>``), ``pod``, and ``pool`` / ``release`` copied from the pod labels ``llm-serving.io/pool``
/ ``llm-serving.io/release``. Every vLLM query therefore filters on ``namespace`` and ``pool`` and groups by
``pool, release``: the stable and canary pools are separate metric dimensions (the design, "Rollouts Without
Corrupting the Cache Boundary").

Label model on Cloud Run (the Managed Prometheus sidecar, see "Cloud Run" below): there are no pod labels. The
sidecar's series carry ``namespace`` = the Cloud Run service, ``cluster`` = ``__run__``, ``instance`` = the instance
id and port, and ``service_name`` / ``revision_name`` / ``configuration_name`` / ``instanceId``. A pool is its
revision (``revision_name``; the plan knows each pool's revision name) and the release is vLLM's own ``model_name``
label (the first served name, the release id): queries filter on ``namespace`` + ``revision_name`` and group by
``revision_name, model_name``. The same metric classes and builders produce both.

Label model on Vertex AI (AI AutoMetrics, see "Vertex AI" below): Vertex scrapes vLLM itself and stores every series
under ``vertex_`` + its name with ``:`` -> ``_`` (:func:`on_vertex`), labelled ``endpoint_id``,
``model_display_name`` (the deployed model's displayName), ``deployed_model_id``, ``replica_id``. A pool is its
deployed model, known to the plan by the displayName the program gives it (its id is assigned at deployment), and
the release is vLLM's ``model_name``: queries filter on ``endpoint_id`` + ``model_display_name`` and group by
``model_display_name, model_name``. The endpoint's own Cloud Monitoring metrics (``aiplatform.googleapis.com/
prediction/online/...``) are named by Cloud Monitoring's PromQL mapping and split by ``deployed_model_id``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

from .. import naming

#: Every model-server series carries its pool's namespace as ``namespace``; this matches any pool's.
ANY_POOL_NAMESPACE_RE = f"{naming.POOL_NAMESPACE_PREFIX}.+"
#: Target labels copied from pod labels by the vLLM PodMonitoring (pod label -> Prometheus label).
POOL_LABEL = "pool"
RELEASE_LABEL = "release"
POD_LABEL_TO_TARGET_LABEL = {naming.POOL_LABEL: POOL_LABEL, naming.RELEASE_LABEL: RELEASE_LABEL}
SPLIT = (POOL_LABEL, RELEASE_LABEL)


@dataclass(frozen=True)
class Gauge:
    name: str

    @property
    def series(self) -> str:
        return self.name


@dataclass(frozen=True)
class Counter:
    """A counter family; only the exported ``_total`` series is exposed."""

    name: str

    @property
    def total(self) -> str:
        return f"{self.name}_total"


@dataclass(frozen=True)
class Histogram:
    """A histogram family; only the exported ``_bucket`` / ``_sum`` / ``_count`` series are exposed."""

    name: str

    @property
    def bucket(self) -> str:
        return f"{self.name}_bucket"

    @property
    def sum(self) -> str:
        return f"{self.name}_sum"

    @property
    def count(self) -> str:
        return f"{self.name}_count"


_M = TypeVar("_M", Gauge, Counter, Histogram)


# ---- vLLM 0.32 (vllm/v1/metrics/loggers.py) ----------------------------------------------------------------
NUM_REQUESTS_WAITING = Gauge(naming.VLLM_NUM_REQUESTS_WAITING)
NUM_REQUESTS_RUNNING = Gauge(naming.VLLM_NUM_REQUESTS_RUNNING)
#: 0-1 fraction. Not the removed ``vllm:gpu_cache_usage_perc`` (gone since 0.12, vLLM vllm/v1/metrics/loggers.py).
KV_CACHE_USAGE = Gauge(naming.VLLM_KV_CACHE_USAGE)
TTFT = Histogram("vllm:time_to_first_token_seconds")
#: Not the removed ``vllm:time_per_output_token_seconds`` (hidden in 0.12, absent in 0.33).
ITL = Histogram("vllm:inter_token_latency_seconds")
E2E_LATENCY = Histogram("vllm:e2e_request_latency_seconds")
QUEUE_TIME = Histogram("vllm:request_queue_time_seconds")
PROMPT_TOKENS = Counter("vllm:prompt_tokens")
GENERATION_TOKENS = Counter("vllm:generation_tokens")
PREFIX_CACHE_QUERIES = Counter("vllm:prefix_cache_queries")
PREFIX_CACHE_HITS = Counter("vllm:prefix_cache_hits")
PREEMPTIONS = Counter("vllm:num_preemptions")
#: Finished requests, label ``finished_reason`` (stop, length, abort, error).
REQUEST_SUCCESS = Counter("vllm:request_success")
#: Finish reasons that delivered an answer; ``abort`` / ``error`` did not.
GOOD_FINISH_REASONS = ("stop", "length")

# ---- endpoint picker (GAIE pkg/epp/metrics) ---------------------------------------------------------------
EPP_POOL_AVG_QUEUE = Gauge("inference_pool_average_queue_size")
EPP_POOL_READY_PODS = Gauge("inference_pool_ready_pods")
EPP_SCHEDULER_LATENCY = Histogram("inference_extension_scheduler_e2e_duration_seconds")
EPP_PLUGIN_LATENCY = Histogram("inference_extension_plugin_duration_seconds")
EPP_REQUESTS = Counter("inference_objective_request")
EPP_REQUEST_ERRORS = Counter("inference_objective_request_error")
#: Written by the collector for every scrape target (1 = last scrape succeeded).
UP = Gauge("up")

# ---- GPU (GKE managed DCGM) and kube-state (GKE kube-state package: POD, HPA) -----------------------------
DCGM_GPU_UTIL = Gauge("DCGM_FI_DEV_GPU_UTIL")  # duty cycle, percent
DCGM_FB_USED = Gauge("DCGM_FI_DEV_FB_USED")  # MiB
DCGM_FB_FREE = Gauge("DCGM_FI_DEV_FB_FREE")  # MiB
KSM_RESTARTS = Counter("kube_pod_container_status_restarts")
KSM_HPA_CURRENT = Gauge("kube_horizontalpodautoscaler_status_current_replicas")
KSM_HPA_DESIRED = Gauge("kube_horizontalpodautoscaler_status_desired_replicas")


def gmp_custom_metric(metric: Gauge) -> str:
    """Name under which the Custom Metrics Stackdriver Adapter serves a GMP gauge to the HPA (GKE inference autoscaling guide and samples)."""
    return f"prometheus.googleapis.com|{metric.series}|gauge"


# ---- naming contract helpers --------------------------------------------------------------------------------


def pod_name_regex(role: str) -> str:
    """Pods of Deployment ``vllm-<role>`` are ``vllm-<role>-<replicaset hash>-<pod hash>``; the two trailing
    dash-free segments keep ``vllm-<role>-epp-…`` pods out."""
    return f"{naming.deployment_name(role)}-[a-z0-9]+-[a-z0-9]+"


# ---- PromQL builders ------------------------------------------------------------------------------------------


def _fmt(value: float) -> str:
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def matchers(**labels: str) -> str:
    """``{namespace="llm-serving-stable",pool="stable"}``; keys ending in ``_re`` become regex matchers."""
    parts = []
    for key, value in labels.items():
        if key.endswith("_re"):
            parts.append(f'{key[:-3]}=~"{value}"')
        else:
            parts.append(f'{key}="{value}"')
    return "{" + ",".join(parts) + "}"


def namespace_of(role: str | None, key: str = "namespace") -> dict[str, str]:
    """The namespace matcher of one pool's series, or of every pool's (``role`` None)."""
    return {key: naming.pool_namespace(role)} if role is not None else {f"{key}_re": ANY_POOL_NAMESPACE_RE}


def serving(role: str | None = None) -> str:
    """Selector of the model-server series, optionally of one pool."""
    labels = namespace_of(role)
    if role is not None:
        labels[POOL_LABEL] = role
    return matchers(**labels)


def agg(op: str, labels: Iterable[str]) -> str:
    """``sum by (a, b)``, or plain ``sum`` when there is nothing to group by."""
    labels = tuple(labels)
    return f"{op} by ({', '.join(labels)})" if labels else op


def quantile(h: Histogram, q: float, window: str, sel: str, group: Iterable[str] = SPLIT) -> str:
    """``histogram_quantile(q, sum by (le, ...) (rate(h_bucket{sel}[window])))``."""
    return f"histogram_quantile({_fmt(q)}, {agg('sum', ('le', *group))} (rate({h.bucket}{sel}[{window}])))"


def mean_of(h: Histogram, window: str, sel: str, group: Iterable[str] = SPLIT) -> str:
    return f"{agg('sum', group)} (rate({h.sum}{sel}[{window}])) / {agg('sum', group)} (rate({h.count}{sel}[{window}]))"


def rate_sum(c: Counter, window: str, sel: str, group: Iterable[str] = SPLIT) -> str:
    return f"{agg('sum', group)} (rate({c.total}{sel}[{window}]))"


def gauge_agg(g: Gauge, op: str, sel: str, group: Iterable[str] = SPLIT) -> str:
    return f"{agg(op, group)} ({g.series}{sel})"


def pod_count(role: str) -> str:
    """Serving pods of a pool that Prometheus currently scrapes (one vLLM may run several engines: count pods)."""
    return f"count(count by (pod) ({NUM_REQUESTS_RUNNING.series}{serving(role)}))"


def waiting_per_pod(role: str) -> str:
    """The HPA's own signal: the pool's waiting requests averaged over its pods (``AverageValue``)."""
    return f"sum({NUM_REQUESTS_WAITING.series}{serving(role)}) / {pod_count(role)}"


def prefix_hit_rate(
    window: str, sel: str, group: Iterable[str] = SPLIT, hits: Counter | None = None, queries: Counter | None = None
) -> str:
    group = tuple(group)
    hits, queries = hits or PREFIX_CACHE_HITS, queries or PREFIX_CACHE_QUERIES
    return f"{rate_sum(hits, window, sel, group)} / {rate_sum(queries, window, sel, group)}"


def finish_success_ratio(window: str, sel_role: str | None = None) -> str:
    good = matchers(
        **namespace_of(sel_role),
        **({POOL_LABEL: sel_role} if sel_role else {}),
        finished_reason_re="|".join(GOOD_FINISH_REASONS),
    )
    return f"{rate_sum(REQUEST_SUCCESS, window, good)} / {rate_sum(REQUEST_SUCCESS, window, serving(sel_role))}"


def success_ratio(window: str, labels: dict[str, str], group: Iterable[str], finished: Counter | None = None) -> str:
    """Finished requests that delivered an answer over all finished, for the series matching ``labels``."""
    group = tuple(group)
    c = finished or REQUEST_SUCCESS
    good = matchers(**labels, finished_reason_re="|".join(GOOD_FINISH_REASONS))
    return f"{rate_sum(c, window, good, group)} / {rate_sum(c, window, matchers(**labels), group)}"


def cost_per_million_at(count: str, sel: str, replica_hourly_usd: float, window: str) -> str:
    """Observed cost per 1M output tokens of the replicas ``count`` counts, over the tokens ``sel`` generates."""
    return (
        f"{_fmt(replica_hourly_usd)} * {count} * 1000000 / (3600 * sum(rate({GENERATION_TOKENS.total}{sel}[{window}])))"
    )


def cost_per_million_output_tokens(role: str, replica_hourly_usd: float, window: str) -> str:
    """Observed accelerator cost per 1M output tokens: replicas x $/h over generated tokens/h (the design, C_h·10⁶ /
    (3600·θ_o), with θ_o the pool's measured generation rate instead of the benchmark's)."""
    return cost_per_million_at(pod_count(role), serving(role), replica_hourly_usd, window)


def dcgm(g: Gauge, role: str, op: str = "avg") -> str:
    """A DCGM gauge over the GPUs attached to one pool's pods."""
    sel = matchers(**namespace_of(role, "exported_namespace"), exported_pod_re=pod_name_regex(role))
    return f"{op}({g.series}{sel})"


def epp_scrape_job(role: str) -> str:
    """``job`` label of one pool's endpoint-picker series. The picker is scraped by the PodMonitoring the
    ``inferencepool`` chart renders with ``provider.name: gke`` and monitoring on (bearer-token auth against the
    picker's protected /metrics, port name ``metrics``); the chart names it after the Helm release,
    ``vllm-<role>``, and GMP sets ``job`` to the PodMonitoring's name."""
    return naming.deployment_name(role)


def epp_job(role: str) -> str:
    """Selector of one pool's endpoint-picker series."""
    return matchers(**namespace_of(role), job=epp_scrape_job(role))


def epp_up(role: str) -> str:
    """Scrape-able endpoint-picker replicas of a pool; 0 (not empty) when none is left."""
    return f"sum({UP.series}{epp_job(role)}) or on() vector(0)"


def restarts(role: str, window: str) -> str:
    sel = matchers(**namespace_of(role), pod_re=pod_name_regex(role))
    return f"sum(increase({KSM_RESTARTS.total}{sel}[{window}]))"


def hpa_state(g: Gauge, role: str) -> str:
    return f"max({g.series}{matchers(**namespace_of(role), horizontalpodautoscaler=naming.deployment_name(role))})"


# ---- Cloud Run: the Managed Prometheus sidecar's label model --------------------------------------------------
# GoogleCloudPlatform/run-gmp-sidecar confgenerator/config.go: its default RunMonitoring config scrapes
# 0.0.0.0:8080/metrics every 30 s and relabels every series with job = the config's name (``run-gmp-sidecar``),
# cluster = ``__run__``, namespace = the Cloud Run service, instance = ``<instance id>:<port>``, plus the metric labels
# service_name, revision_name, configuration_name and instanceId (targetLabels.metadata, all by default).

#: ``cluster`` of every series the Cloud Run sidecar writes.
CLOUD_RUN_CLUSTER = "__run__"
#: The sidecar's default scrape interval (``DefaultRunMonitoringConfig``: ``interval: 30s``).
CLOUD_RUN_SCRAPE_INTERVAL_SECONDS = 30
#: The revision of a series: on Cloud Run a pool is one revision of the service.
CLOUD_RUN_REVISION_LABEL = "revision_name"
#: vLLM's own label: the first served name, which the renderer makes the release id.
VLLM_MODEL_NAME_LABEL = "model_name"
#: One scrape target per instance: ``<instance id>:8080``.
CLOUD_RUN_INSTANCE_LABEL = "instance"
#: What Cloud Run panels and alerts group by: revision (= pool) and release.
CLOUD_RUN_SPLIT = (CLOUD_RUN_REVISION_LABEL, VLLM_MODEL_NAME_LABEL)


def cloud_run_labels(service: str, revision: str | None = None) -> dict[str, str]:
    """Matchers of a Cloud Run service's vLLM series, optionally of one revision (one pool)."""
    labels = {"cluster": CLOUD_RUN_CLUSTER, "namespace": service}
    if revision is not None:
        labels[CLOUD_RUN_REVISION_LABEL] = revision
    return labels


def cloud_run_serving(service: str, revision: str | None = None) -> str:
    return matchers(**cloud_run_labels(service, revision))


def cloud_run_instance_count(service: str, revision: str) -> str:
    """Instances of a revision the sidecars currently report (each instance runs its own collector)."""
    return (
        f"count(count by ({CLOUD_RUN_INSTANCE_LABEL}) "
        f"({NUM_REQUESTS_RUNNING.series}{cloud_run_serving(service, revision)}))"
    )


def cloud_run_running_per_instance(service: str, revision: str) -> str:
    """Requests vLLM runs per instance: Cloud Run sends at most the revision's concurrency to one instance."""
    return f"sum({NUM_REQUESTS_RUNNING.series}{cloud_run_serving(service, revision)}) / {cloud_run_instance_count(service, revision)}"


# ---- Vertex AI: AI AutoMetrics' label model -------------------------------------------------------------------
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
VERTEX_SPLIT = (VERTEX_POOL_LABEL, VLLM_MODEL_NAME_LABEL)
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


def vertex_labels(endpoint_id: str, deployed_model: str | None = None) -> dict[str, str]:
    """Matchers of an endpoint's vLLM series, optionally of one deployed model (one pool, by its displayName)."""
    labels = {VERTEX_ENDPOINT_LABEL: endpoint_id}
    if deployed_model is not None:
        labels[VERTEX_POOL_LABEL] = deployed_model
    return labels


def vertex_serving(endpoint_id: str, deployed_model: str | None = None) -> str:
    return matchers(**vertex_labels(endpoint_id, deployed_model))


def vertex_replica_count(endpoint_id: str, deployed_model: str) -> str:
    """Replicas of a deployed model whose vLLM AutoMetrics currently reports."""
    return (
        f"count(count by ({VERTEX_REPLICA_LABEL}) "
        f"({on_vertex(NUM_REQUESTS_RUNNING).series}{vertex_serving(endpoint_id, deployed_model)}))"
    )


def vertex_waiting_per_replica(endpoint_id: str, deployed_model: str) -> str:
    """Vertex's queue autoscaling signal as the dashboard sees it: waiting requests per replica."""
    return (
        f"sum({on_vertex(NUM_REQUESTS_WAITING).series}{vertex_serving(endpoint_id, deployed_model)}) / "
        f"{vertex_replica_count(endpoint_id, deployed_model)}"
    )


# ---- Vertex AI: the endpoint's own Cloud Monitoring metrics ---------------------------------------------------------
# Google Cloud metrics list, section aiplatform (cloud.google.com/monitoring/api/metrics_gcp_a_b): on monitored
# resource aiplatform.googleapis.com/Endpoint (resource label endpoint_id), prediction/online/replicas and
# target_replicas (GAUGE, labels deployed_model_id, model_display_name, spot, endpoint_display_name),
# prediction_count (DELTA), response_count (DELTA, label response_code), prediction_latencies (DELTA DISTRIBUTION,
# ms, label latency_type: "total" always populated) and accelerator/duty_cycle (GAUGE, percent; labels
# deployed_model_id and replica_id only, so it is split by deployed model id, which Vertex assigns at deployment).
# PromQL names follow Cloud Monitoring's mapping (the first '/' -> ':', every other '.' and '/' -> '_';
# distributions gain _bucket / _sum / _count) and the resource type is selected by the ``monitored_resource``
# label ("Mapping Cloud Monitoring metrics to PromQL"). Which model display name the endpoint metrics carry (the
# DeployedModel's or the Model's) is not stated there: their panels split by deployed_model_id and that label.

VERTEX_ENDPOINT_RESOURCE = "aiplatform.googleapis.com/Endpoint"
VERTEX_DEPLOYED_MODEL_ID_LABEL = "deployed_model_id"
VERTEX_ENDPOINT_SPLIT = (VERTEX_DEPLOYED_MODEL_ID_LABEL, VERTEX_POOL_LABEL)


def cloud_monitoring_promql_name(metric_type: str) -> str:
    """``aiplatform.googleapis.com/prediction/online/replicas`` -> ``aiplatform_googleapis_com:prediction_online_replicas``."""
    domain, _, path = metric_type.partition("/")
    return domain.replace(".", "_") + ":" + path.replace(".", "_").replace("/", "_")


VERTEX_REPLICAS = Gauge(cloud_monitoring_promql_name("aiplatform.googleapis.com/prediction/online/replicas"))
VERTEX_TARGET_REPLICAS = Gauge(
    cloud_monitoring_promql_name("aiplatform.googleapis.com/prediction/online/target_replicas")
)
VERTEX_DUTY_CYCLE = Gauge(
    cloud_monitoring_promql_name("aiplatform.googleapis.com/prediction/online/accelerator/duty_cycle")
)
#: DELTA metrics: PromQL on Cloud Monitoring reads them with rate(), like counters (no ``_total`` suffix).
VERTEX_PREDICTION_COUNT = Gauge(
    cloud_monitoring_promql_name("aiplatform.googleapis.com/prediction/online/prediction_count")
)
VERTEX_RESPONSE_COUNT = Gauge(
    cloud_monitoring_promql_name("aiplatform.googleapis.com/prediction/online/response_count")
)
VERTEX_PREDICTION_LATENCIES = Histogram(
    cloud_monitoring_promql_name("aiplatform.googleapis.com/prediction/online/prediction_latencies")
)


def vertex_endpoint_metric(endpoint_id: str, **extra: str) -> str:
    """Selector of the endpoint's own metrics (Cloud Monitoring, monitored resource aiplatform.googleapis.com/Endpoint)."""
    return matchers(monitored_resource=VERTEX_ENDPOINT_RESOURCE, **{VERTEX_ENDPOINT_LABEL: endpoint_id}, **extra)
