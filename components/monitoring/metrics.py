"""vLLM's metric names and the PromQL built from them, on every serving target.

vLLM names are the ones vLLM 0.32 exports (vLLM vllm/v1/metrics/loggers.py; the set is identical in 0.33, see
``../shared/reference/vllm/vllm-0.33.0-prometheus-metrics.tsv``): prometheus_client exports a Counter ``x`` as
``x_total`` and a Histogram ``x`` as ``x_bucket`` / ``x_sum`` / ``x_count``, so the classes below only hand out
those exported series names — a bare histogram or counter family name can never reach a query.

The series are the same on every target; what differs is who scrapes them, what labels the collector attaches and
under which name it stores them. Each target describes that once, as a :class:`VllmSeries` (its "label model"):

* GKE (``components/observability/metrics.py``): Managed Service for Prometheus, a pool is its namespace and its
  ``pool`` / ``release`` pod labels; the target also owns the endpoint-picker, DCGM and kube-state names;
* Cloud Run (``components/cloud_run/monitoring.py``): the Managed Prometheus sidecar, a pool is its revision
  (``revision_name``), its release vLLM's own ``model_name``;
* Vertex AI (``components/vertex/monitoring.py``): AI AutoMetrics, which renames every series ``vertex_*``; a pool is
  its deployed model (``model_display_name``); the target also owns the endpoint's own Cloud Monitoring metrics.

Every panel and alert groups by the label model's ``split`` (pool, release): the stable and canary pools are
separate metric dimensions (the design, "Rollouts Without Corrupting the Cache Boundary").
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar, TypeVar

from .. import naming


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
#: The project's one inter-token latency: one observation per generated token after a request's first, the gap since
#: its previous token (vLLM 0.32 ``PrometheusStatLogger``: ``inter_token_latencies_iter``). The alerts, the dashboards
#: and the bench's SLO verdict (infra/offline/bench/scrape.py) all take ``histogram_quantile`` of it; a request's *mean*
#: gap (``vllm:request_time_per_output_token_seconds``, guidellm's ITL) is a different statistic. Not the removed
#: ``vllm:time_per_output_token_seconds`` (hidden in 0.12, absent in 0.33).
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
#: vLLM's own label on every series: the first served name, which the renderer makes the release id. The release
#: label of the targets that cannot copy pod labels (Cloud Run, Vertex AI).
VLLM_MODEL_NAME_LABEL = "model_name"


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


def agg(op: str, labels: Iterable[str]) -> str:
    """``sum by (a, b)``, or plain ``sum`` when there is nothing to group by."""
    labels = tuple(labels)
    return f"{op} by ({', '.join(labels)})" if labels else op


def quantile(h: Histogram, q: float, window: str, sel: str, group: Iterable[str]) -> str:
    """``histogram_quantile(q, sum by (le, ...) (rate(h_bucket{sel}[window])))``."""
    return f"histogram_quantile({_fmt(q)}, {agg('sum', ('le', *group))} (rate({h.bucket}{sel}[{window}])))"


def mean_of(h: Histogram, window: str, sel: str, group: Iterable[str]) -> str:
    return f"{agg('sum', group)} (rate({h.sum}{sel}[{window}])) / {agg('sum', group)} (rate({h.count}{sel}[{window}]))"


def rate_sum(c: Counter, window: str, sel: str, group: Iterable[str]) -> str:
    return f"{agg('sum', group)} (rate({c.total}{sel}[{window}]))"


def gauge_agg(g: Gauge, op: str, sel: str, group: Iterable[str]) -> str:
    return f"{agg(op, group)} ({g.series}{sel})"


def cloud_monitoring_promql_name(metric_type: str) -> str:
    """A Cloud Monitoring metric type as PromQL names it ("Mapping Cloud Monitoring metrics to PromQL": the first
    '/' -> ':', every other '.' and '/' -> '_'; distributions gain _bucket / _sum / _count):
    ``aiplatform.googleapis.com/prediction/online/replicas`` -> ``aiplatform_googleapis_com:prediction_online_replicas``."""
    domain, _, path = metric_type.partition("/")
    return domain.replace(".", "_") + ":" + path.replace(".", "_").replace("/", "_")


# ---- a target's label model -------------------------------------------------------------------------------------


class VllmSeries(ABC):
    """Where one target's vLLM series are and how they are labelled: the matchers of every pool's series or of one
    pool's, the labels panels and alerts split them by, the label that tells one server from another, and the name
    the target stores each vLLM family under. Every shared panel and alert is built from it (``dashboard.py``,
    ``alerts.py``), so the three targets differ only here."""

    #: What panels and alerts group by: the pool's label, then the release's.
    split: ClassVar[tuple[str, str]]
    #: The label of one server of a pool (a pod, an instance, a replica): replica counts count its values.
    replica_label: ClassVar[str]

    @abstractmethod
    def labels(self, pool: str | None = None) -> dict[str, str]:
        """Matchers of every pool's series (``pool`` None), or of one pool's by its value of the pool label."""

    def family(self, metric: _M) -> _M:
        """``metric`` under the name the target stores it (by default vLLM's own)."""
        return metric

    def selector(self, pool: str | None = None) -> str:
        return matchers(**self.labels(pool))

    def replica_count(self, pool: str) -> str:
        """Servers of a pool whose vLLM metrics are currently reported (one vLLM may run several engines: count
        servers, not series)."""
        running = self.family(NUM_REQUESTS_RUNNING).series
        return f"count(count by ({self.replica_label}) ({running}{self.selector(pool)}))"

    def per_replica(self, g: Gauge, pool: str) -> str:
        """A gauge summed over a pool and averaged over its servers (the HPA's ``AverageValue`` on GKE)."""
        return f"sum({self.family(g).series}{self.selector(pool)}) / {self.replica_count(pool)}"

    def prefix_hit_rate(self, window: str, sel: str) -> str:
        """Cached over queried prompt tokens, per pool and release."""
        hits, queries = self.family(PREFIX_CACHE_HITS), self.family(PREFIX_CACHE_QUERIES)
        return f"{rate_sum(hits, window, sel, self.split)} / {rate_sum(queries, window, sel, self.split)}"

    def success_ratio(self, window: str, pool: str | None = None) -> str:
        """Finished requests that delivered an answer over all finished, per pool and release."""
        c, labels = self.family(REQUEST_SUCCESS), self.labels(pool)
        good = matchers(**labels, finished_reason_re="|".join(GOOD_FINISH_REASONS))
        return f"{rate_sum(c, window, good, self.split)} / {rate_sum(c, window, matchers(**labels), self.split)}"

    def cost_per_million(self, pool: str, replica_hourly_usd: float, window: str) -> str:
        """Observed accelerator cost per 1M output tokens of a pool: its servers x $/h over its generated tokens/h
        (the design, C_h·10⁶ / (3600·θ_o), with θ_o the pool's measured generation rate instead of the
        benchmark's)."""
        tokens = self.family(GENERATION_TOKENS).total
        return (
            f"{_fmt(replica_hourly_usd)} * {self.replica_count(pool)} * 1000000 / "
            f"(3600 * sum(rate({tokens}{self.selector(pool)}[{window}])))"
        )
