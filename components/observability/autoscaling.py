"""HPA per serving pool on the vLLM queue (seed 000, "Autoscaling Has Two Clocks"): pure derivations + the
``autoscaling/v2`` spec. Every number is derived from the capacity plan, the reservation or the contract.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pulumi_kubernetes as k8s

from infra.planning.capacity import ROLLOUT_SURGE_REPLICAS

from . import metrics

#: Floor of the scale-down stabilisation window: Kubernetes' own default (300 s) and the issue's minimum.
SCALE_DOWN_WINDOW_FLOOR_S = 300
#: Longest ``periodSeconds`` the autoscaling/v2 API accepts for a scaling policy.
HPA_MAX_POLICY_PERIOD_S = 1800
#: Scale-up policy period: 60 s = four HPA syncs (15 s each), long enough to see the previous step's effect on
#: the queue signal (scrape 15 s + adapter cache) before adding more.
SCALE_UP_PERIOD_S = 60
#: Scale-up may double the pool per period (Percent 100) ...
SCALE_UP_PERCENT = 100
#: ... or add 2 pods per period, whichever is more (selectPolicy Max): from a warm minimum of 1-2 replicas,
#: doubling alone would add a single pod per minute while the second clock (node + weights) already costs minutes.
SCALE_UP_PODS = 2


def round_up_to_minute(seconds: float) -> int:
    return int(math.ceil(seconds / 60.0) * 60)


def reservation_replica_cap(reserved_nodes: int, replicas_per_node: int, other_pools_max: int,
                            pools_on_accelerator: int) -> int:
    """Replicas of one pool the reservation can hold: reserved nodes x replicas per node, minus what the other
    pools on the same reservation may scale to, minus one rollout surge replica per pool on it (a rolling update
    needs a free slot: "maxSurge: 1 cannot manufacture a GPU", seed 000)."""
    return reserved_nodes * replicas_per_node - other_pools_max - ROLLOUT_SURGE_REPLICAS * pools_on_accelerator


def scale_down_window_seconds(cold_load_seconds: float) -> int:
    """A replica given up costs ``cold_load_seconds`` to get back (plus node provisioning). Keep the load low for
    at least two cold loads before removing one, so one burst-gap-burst cycle does not pay the cold load twice;
    never below the 300 s floor."""
    return max(SCALE_DOWN_WINDOW_FLOOR_S, round_up_to_minute(2 * cold_load_seconds))


def scale_down_period_seconds(stream_bound_seconds: float) -> int:
    """One pod per period, the period being the longest stream the contract allows (TTFT objective + max output
    tokens x ITL objective): the previous pod has drained its streams before the next one starts draining."""
    return min(HPA_MAX_POLICY_PERIOD_S, max(60, round_up_to_minute(stream_bound_seconds)))


def quantity(value: float) -> str:
    """Kubernetes quantity text: 3 -> "3", 0.8 -> "800m"."""
    if float(value).is_integer():
        return str(int(value))
    return f"{int(round(value * 1000))}m"


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
    scale_down_window_seconds: int
    scale_down_period_seconds: int


def plan_hpa(*, role: str, release: str, min_replicas: int, pool_max_replicas: int, cold_load_seconds: float,
             stream_bound_seconds: float, queue_target_per_pod: int, kv_cache_target: float | None,
             reservation_cap: int | None) -> HpaPlan:
    """minReplicas = the warm minimum; maxReplicas = min(pool max, what the reservation holds for the pool)."""
    if reservation_cap is None:
        max_r, reason = pool_max_replicas, "pool max_replicas (no reservation: on-demand/Spot capacity is not held)"
    elif reservation_cap < pool_max_replicas:
        max_r, reason = reservation_cap, f"reservation holds {reservation_cap} replica(s) for this pool"
    else:
        max_r, reason = pool_max_replicas, f"pool max_replicas (reservation holds {reservation_cap})"
    return HpaPlan(
        role=role, release=release, min_replicas=min_replicas, max_replicas=max(min_replicas, max_r),
        max_reason=reason, queue_target_per_pod=queue_target_per_pod, kv_cache_target=kv_cache_target,
        scale_down_window_seconds=scale_down_window_seconds(cold_load_seconds),
        scale_down_period_seconds=scale_down_period_seconds(stream_bound_seconds),
    )


def _pods_metric(metric: metrics.Gauge, average: float) -> k8s.autoscaling.v2.MetricSpecArgs:
    return k8s.autoscaling.v2.MetricSpecArgs(
        type="Pods",
        pods=k8s.autoscaling.v2.PodsMetricSourceArgs(
            metric=k8s.autoscaling.v2.MetricIdentifierArgs(name=metrics.gmp_custom_metric(metric)),
            target=k8s.autoscaling.v2.MetricTargetArgs(type="AverageValue", average_value=quantity(average)),
        ),
    )


def hpa_spec(p: HpaPlan) -> k8s.autoscaling.v2.HorizontalPodAutoscalerSpecArgs:
    metric_specs = [_pods_metric(metrics.NUM_REQUESTS_WAITING, p.queue_target_per_pod)]
    if p.kv_cache_target is not None:
        metric_specs.append(_pods_metric(metrics.KV_CACHE_USAGE, p.kv_cache_target))
    return k8s.autoscaling.v2.HorizontalPodAutoscalerSpecArgs(
        scale_target_ref=k8s.autoscaling.v2.CrossVersionObjectReferenceArgs(
            api_version="apps/v1", kind="Deployment", name=metrics.deployment_name(p.role)),
        min_replicas=p.min_replicas,
        max_replicas=p.max_replicas,
        metrics=metric_specs,
        behavior=k8s.autoscaling.v2.HorizontalPodAutoscalerBehaviorArgs(
            scale_up=k8s.autoscaling.v2.HPAScalingRulesArgs(
                # 0: the queue is already a lagging signal and the second clock (node + weights) takes minutes;
                # waiting longer only moves the new replica further past the burst.
                stabilization_window_seconds=0,
                select_policy="Max",
                policies=[
                    k8s.autoscaling.v2.HPAScalingPolicyArgs(type="Percent", value=SCALE_UP_PERCENT,
                                                            period_seconds=SCALE_UP_PERIOD_S),
                    k8s.autoscaling.v2.HPAScalingPolicyArgs(type="Pods", value=SCALE_UP_PODS,
                                                            period_seconds=SCALE_UP_PERIOD_S),
                ],
            ),
            scale_down=k8s.autoscaling.v2.HPAScalingRulesArgs(
                # max(300 s, 2 x cold load): see scale_down_window_seconds.
                stabilization_window_seconds=p.scale_down_window_seconds,
                select_policy="Min",
                policies=[
                    # One pod per longest-stream period: pods leave one at a time, each after the last drained.
                    k8s.autoscaling.v2.HPAScalingPolicyArgs(type="Pods", value=1,
                                                            period_seconds=p.scale_down_period_seconds),
                ],
            ),
        ),
    )
