"""Autoscaling bounds and behaviour of one serving pool (the design, "Autoscaling Has Two Clocks"): pure
derivations from the capacity plan, the reservation and the contract; the HPA object is rendered by
``components/observability/autoscaling.py``."""

from __future__ import annotations

import math

from components import naming
from components.observability.views import HpaPlan
from infra.planning.capacity import ROLLOUT_SURGE_REPLICAS

#: Floor of the scale-down stabilisation window: Kubernetes' own default (300 s) and the issue's minimum.
SCALE_DOWN_WINDOW_FLOOR_S = 300
#: Longest ``periodSeconds`` the autoscaling/v2 API accepts for a scaling policy.
HPA_MAX_POLICY_PERIOD_S = 1800
#: Longest ``stabilizationWindowSeconds`` the autoscaling/v2 API accepts.
HPA_MAX_STABILIZATION_S = 3600


def round_up_to_minute(seconds: float) -> int:
    return int(math.ceil(seconds / 60.0) * 60)


def reservation_replica_cap(
    reserved_nodes: int, replicas_per_node: int, other_pools_max: int, pools_on_accelerator: int
) -> int:
    """Replicas of one pool the reservation can hold: reserved nodes x replicas per node, minus what the other
    pools on the same reservation may scale to, minus one rollout surge replica per pool on it (a rolling update
    needs a free slot: "maxSurge: 1 cannot manufacture a GPU", the design)."""
    return reserved_nodes * replicas_per_node - other_pools_max - ROLLOUT_SURGE_REPLICAS * pools_on_accelerator


def scale_up_window_seconds(cold_load_seconds: float) -> int:
    """A replica added now serves its first request one cold load later (weights + engine init; node provisioning
    comes on top when no warm node is free). A queue that builds and drains within that time is over before the
    new replica could take any of it, so scaling for it only creates a late pod that then idles through the
    scale-down window (the design's "burst creates late pods" pattern). The HPA acts on the lowest recommendation
    of the window, i.e. only on a queue that stayed above target for a whole cold load; rounded up to whole
    minutes (HPA syncs are 15 s apart), at most the API's 3600 s."""
    return min(HPA_MAX_STABILIZATION_S, round_up_to_minute(cold_load_seconds))


def scale_down_window_seconds(cold_load_seconds: float) -> int:
    """A replica given up costs ``cold_load_seconds`` to get back (plus node provisioning). Keep the load low for
    at least two cold loads before removing one, so one burst-gap-burst cycle does not pay the cold load twice;
    never below the 300 s floor."""
    return max(SCALE_DOWN_WINDOW_FLOOR_S, round_up_to_minute(2 * cold_load_seconds))


def scale_down_period_seconds(stream_bound_seconds: float) -> int:
    """One pod per period, the period being the longest stream the contract allows (TTFT objective + max output
    tokens x ITL objective): the previous pod has drained its streams before the next one starts draining."""
    return min(HPA_MAX_POLICY_PERIOD_S, max(60, round_up_to_minute(stream_bound_seconds)))


def plan_hpa(
    *,
    role: str,
    release: str,
    min_replicas: int,
    pool_max_replicas: int,
    cold_load_seconds: float,
    stream_bound_seconds: float,
    queue_target_per_pod: int,
    kv_cache_target: float | None,
    reservation_cap: int | None,
    queue_metric: str = naming.VLLM_NUM_REQUESTS_WAITING,
    kv_cache_metric: str = naming.VLLM_KV_CACHE_USAGE,
) -> HpaPlan:
    """minReplicas = the warm minimum; maxReplicas = min(pool max, what the reservation holds for the pool)."""
    if reservation_cap is None:
        max_r, reason = pool_max_replicas, "pool max_replicas (no reservation: on-demand/Spot capacity is not held)"
    elif reservation_cap < pool_max_replicas:
        max_r, reason = reservation_cap, f"reservation holds {reservation_cap} replica(s) for this pool"
    else:
        max_r, reason = pool_max_replicas, f"pool max_replicas (reservation holds {reservation_cap})"
    return HpaPlan(
        role=role,
        release=release,
        min_replicas=min_replicas,
        max_replicas=max(min_replicas, max_r),
        max_reason=reason,
        queue_target_per_pod=queue_target_per_pod,
        kv_cache_target=kv_cache_target,
        scale_up_window_seconds=scale_up_window_seconds(cold_load_seconds),
        scale_down_window_seconds=scale_down_window_seconds(cold_load_seconds),
        scale_down_period_seconds=scale_down_period_seconds(stream_bound_seconds),
        queue_metric=queue_metric,
        kv_cache_metric=kv_cache_metric,
    )
