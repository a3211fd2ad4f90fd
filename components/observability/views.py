"""What the GKE target's autoscaling and observability need to know about each serving pool, derived once from
config + capacity plan (the alert thresholds every target shares are ``components/monitoring/alerts.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from .. import naming


@dataclass(frozen=True)
class HpaPlan:
    role: str
    release: str
    min_replicas: int
    max_replicas: int
    #: Why max_replicas is what it is (pool bound or reservation bound), for the plan output and reviewers.
    max_reason: str
    queue_target_per_pod: int
    kv_cache_target: float | None
    #: Scale-up acts only on a queue that stayed above target this long: the replica's time to ready.
    scale_up_window_seconds: int
    scale_down_window_seconds: int
    scale_down_period_seconds: int
    #: The per-pod series the HPA averages: vLLM's own for a pool; a co-host pod's server aggregates (one series per
    #: pod) for a co-hosted group, whose pod runs several vLLM instances.
    queue_metric: str = naming.VLLM_NUM_REQUESTS_WAITING
    kv_cache_metric: str = naming.VLLM_KV_CACHE_USAGE


@dataclass(frozen=True)
class CoHostedModelView:
    """One model of a co-hosted group's pool."""

    model_name: str
    release: str
    #: Its instances in each pod.
    instances: int


@dataclass(frozen=True)
class PoolView:
    role: str
    release: str
    #: Percent of traffic routed to the pool: 0 = dark (warm, scraped, no users).
    weight: int
    hpa: HpaPlan
    replica_hourly_usd: float
    #: Capacity plan's cost per 1M output tokens at the measured throughput; None = unmeasured.
    planned_cost_per_million_usd: float | None
    measurement_source: str | None
    #: A co-hosted group's models (their own panels and alerts); empty for a pool.
    models: tuple[CoHostedModelView, ...] = ()
