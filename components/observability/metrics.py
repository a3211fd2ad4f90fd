"""The one module that owns every metric name the program emits, and the PromQL built from them.

vLLM names are the ones vLLM 0.32 exports (vLLM vllm/v1/metrics/loggers.py; the set is identical in 0.33, see
``../shared/reference/vllm/vllm-0.33.0-prometheus-metrics.tsv``): prometheus_client exports a Counter ``x`` as
``x_total`` and a Histogram ``x`` as ``x_bucket`` / ``x_sum`` / ``x_count``, so the classes below only hand out
those exported series names — a bare histogram or counter family name can never reach a query.

Endpoint-picker names are the Gateway API Inference Extension's (``pkg/epp/metrics``, v1.x); DCGM names are the
GKE-managed DCGM exporter's (``DCGM_FI_*``, pod attribution as ``exported_namespace`` / ``exported_pod`` because
the collector's own target labels own ``namespace`` / ``pod``); kube-state names are GKE's kube-state package's.

Label model (what Managed Service for Prometheus attaches): ``namespace`` (the PodMonitoring's: each pool has its
own, ``llm-serving-<role>``), ``pod``, and ``pool`` / ``release`` copied from the pod labels ``llm-serving.io/pool`` /
``llm-serving.io/release``. Every vLLM query therefore filters on ``namespace`` and ``pool`` and groups by
``pool, release``: the stable and canary pools are separate metric dimensions (the design, "Rollouts Without
Corrupting the Cache Boundary").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

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
    return (f"{agg('sum', group)} (rate({h.sum}{sel}[{window}])) / "
            f"{agg('sum', group)} (rate({h.count}{sel}[{window}]))")


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


def prefix_hit_rate(window: str, sel: str) -> str:
    return (f"{rate_sum(PREFIX_CACHE_HITS, window, sel)} / {rate_sum(PREFIX_CACHE_QUERIES, window, sel)}")


def finish_success_ratio(window: str, sel_role: str | None = None) -> str:
    good = matchers(**namespace_of(sel_role), **({POOL_LABEL: sel_role} if sel_role else {}),
                    finished_reason_re="|".join(GOOD_FINISH_REASONS))
    return f"{rate_sum(REQUEST_SUCCESS, window, good)} / {rate_sum(REQUEST_SUCCESS, window, serving(sel_role))}"


def cost_per_million_output_tokens(role: str, replica_hourly_usd: float, window: str) -> str:
    """Observed accelerator cost per 1M output tokens: replicas x $/h over generated tokens/h (the design, C_h·10⁶ /
    (3600·θ_o), with θ_o the pool's measured generation rate instead of the benchmark's)."""
    return (f"{_fmt(replica_hourly_usd)} * {pod_count(role)} * 1000000 / "
            f"(3600 * sum(rate({GENERATION_TOKENS.total}{serving(role)}[{window}])))")


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
