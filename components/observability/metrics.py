"""The GKE target's metric names and PromQL: how Managed Service for Prometheus labels vLLM's series
(:data:`GKE`), and the series only GKE has: the endpoint picker's, the GPUs' (DCGM) and kube-state's.

vLLM's own names and the shared builders are in ``components/monitoring/metrics.py``. Endpoint-picker names are
the llm-d Router's (llm-d-router v0.10.0 ``pkg/epp/metrics/llm_d_router_metrics.go``, subsystem ``llm_d_epp``; the
``inference_pool_*`` / ``inference_objective_*`` / ``inference_extension_*`` names it still emits are marked
deprecated there, pkg/epp/metrics/metrics.go, and are not used); DCGM names are the GKE-managed DCGM exporter's
(``DCGM_FI_*``, pod attribution as ``exported_namespace`` / ``exported_pod`` because the collector's own target
labels own ``namespace`` / ``pod``); kube-state names are GKE's kube-state package's.

Label model on GKE (what Managed Service for Prometheus attaches): ``namespace`` (the PodMonitoring's: each pool has
its own, ``llm-serving-<role>``), ``pod``, and ``pool`` / ``release`` copied from the pod labels ``llm-serving.io/pool``
/ ``llm-serving.io/release``. Every vLLM query therefore filters on ``namespace`` and ``pool`` and groups by
``pool, release``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import naming
from ..monitoring.metrics import NUM_REQUESTS_WAITING, Counter, Gauge, Histogram, VllmSeries, matchers

#: Every model-server series carries its pool's namespace as ``namespace``; this matches any pool's.
ANY_POOL_NAMESPACE_RE = f"{naming.POOL_NAMESPACE_PREFIX}.+"
#: Target labels copied from pod labels by the vLLM PodMonitoring (pod label -> Prometheus label).
POOL_LABEL = "pool"
RELEASE_LABEL = "release"
POD_LABEL_TO_TARGET_LABEL = {naming.POOL_LABEL: POOL_LABEL, naming.RELEASE_LABEL: RELEASE_LABEL}
SPLIT = (POOL_LABEL, RELEASE_LABEL)


def namespace_of(role: str | None, key: str = "namespace") -> dict[str, str]:
    """The namespace matcher of one pool's series, or of every pool's (``role`` None)."""
    return {key: naming.pool_namespace(role)} if role is not None else {f"{key}_re": ANY_POOL_NAMESPACE_RE}


@dataclass(frozen=True)
class GkeSeries(VllmSeries):
    """vLLM's series as Managed Service for Prometheus labels them: a pool is its namespace and ``pool`` label (by
    role), a server its ``pod``."""

    split = SPLIT
    replica_label = "pod"

    def labels(self, pool: str | None = None) -> dict[str, str]:
        labels = namespace_of(pool)
        if pool is not None:
            labels[POOL_LABEL] = pool
        return labels


#: The GKE target's label model (its pools are named by role).
GKE = GkeSeries()

# ---- endpoint picker (llm-d-router v0.10.0 pkg/epp/metrics/llm_d_router_metrics.go) -----------------------------
#: Pool gauges, labelled by the InferencePool's ``name`` (metrics.go ``poolLabels``).
EPP_POOL_AVG_QUEUE = Gauge("llm_d_epp_average_queue_size")
EPP_POOL_READY_ENDPOINTS = Gauge("llm_d_epp_ready_endpoints")
EPP_SCHEDULER_LATENCY = Histogram("llm_d_epp_scheduler_e2e_duration_seconds")
#: Labelled ``extension_point``, ``plugin_type``, ``plugin_name``.
EPP_PLUGIN_LATENCY = Histogram("llm_d_epp_plugin_duration_seconds")
#: Labelled ``model_name``, ``target_model_name``, ``fairness_id``, ``priority`` (errors add ``error_code``).
EPP_REQUESTS = Counter("llm_d_epp_request")
EPP_REQUEST_ERRORS = Counter("llm_d_epp_request_error")
#: Flow control: requests queued now, by ``priority`` / ``fairness_id`` / ``inference_pool``; time from enqueue to
#: outcome by ``outcome`` (Dispatched, RejectedCapacity, EvictedTTL, ...); the pool's saturation (>= 1: held).
EPP_FLOW_QUEUE_SIZE = Gauge("llm_d_epp_flow_control_queue_size")
EPP_FLOW_QUEUE_DURATION = Histogram("llm_d_epp_flow_control_request_queue_duration_seconds")
EPP_POOL_SATURATION = Gauge("llm_d_epp_flow_control_pool_saturation")
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


def serving(role: str | None = None) -> str:
    """Selector of the model-server series, optionally of one pool."""
    return GKE.selector(role)


def pod_count(role: str) -> str:
    """Serving pods of a pool that Prometheus currently scrapes."""
    return GKE.replica_count(role)


def waiting_per_pod(role: str) -> str:
    """The HPA's own signal: the pool's waiting requests averaged over its pods (``AverageValue``)."""
    return GKE.per_replica(NUM_REQUESTS_WAITING, role)


def dcgm(g: Gauge, role: str, op: str = "avg") -> str:
    """A DCGM gauge over the GPUs attached to one pool's pods."""
    sel = matchers(**namespace_of(role, "exported_namespace"), exported_pod_re=pod_name_regex(role))
    return f"{op}({g.series}{sel})"


def epp_scrape_job(role: str) -> str:
    """``job`` label of one pool's endpoint-picker series. The picker is scraped by the PodMonitoring the
    ``llm-d-router-gateway`` chart renders with monitoring provider ``gmp`` and prometheus monitoring on
    (bearer-token auth against the picker's protected /metrics, port name ``metrics``; routerlib templates/_gke.yaml);
    the chart names it after the Helm release (``naming.epp_release_name``), and GMP sets ``job`` to the
    PodMonitoring's name."""
    return naming.epp_release_name(role)


def epp_job(role: str) -> str:
    """Selector of one pool's endpoint-picker series."""
    return matchers(**namespace_of(role), job=epp_scrape_job(role))


def epp_pool(role: str) -> str:
    """Selector of one pool's InferencePool series of the picker (labelled by the InferencePool's ``name``)."""
    return matchers(**namespace_of(role), name=naming.deployment_name(role))


def epp_flow(role: str) -> str:
    """Selector of one pool's flow-control series (labelled by the InferencePool as ``inference_pool``)."""
    return matchers(**namespace_of(role), job=epp_scrape_job(role), inference_pool=naming.deployment_name(role))


def epp_up(role: str) -> str:
    """Scrape-able endpoint-picker replicas of a pool; 0 (not empty) when none is left."""
    return f"sum({UP.series}{epp_job(role)}) or on() vector(0)"


def restarts(role: str, window: str) -> str:
    sel = matchers(**namespace_of(role), pod_re=pod_name_regex(role))
    return f"sum(increase({KSM_RESTARTS.total}{sel}[{window}]))"


def hpa_state(g: Gauge, role: str) -> str:
    return f"max({g.series}{matchers(**namespace_of(role), horizontalpodautoscaler=naming.deployment_name(role))})"
