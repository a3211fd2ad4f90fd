"""The ``autoscaling/v2`` HorizontalPodAutoscaler of one serving pool, rendered from the planner's
:class:`~components.observability.views.HpaPlan` (bounds, targets and scale-down timing are derived there)."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from ..monitoring.metrics import Gauge
from .metrics import gmp_custom_metric
from .views import HpaPlan

#: Scale-up policy period: 60 s = four HPA syncs (15 s each), long enough to see the previous step's effect on
#: the queue signal (scrape 15 s + adapter cache) before adding more.
SCALE_UP_PERIOD_S = 60
#: Scale-up may double the pool per period (Percent 100) ...
SCALE_UP_PERCENT = 100
#: ... or add 2 pods per period, whichever is more (selectPolicy Max): from a warm minimum of 1-2 replicas,
#: doubling alone would add a single pod per minute while the second clock (node + weights) already costs minutes.
SCALE_UP_PODS = 2


def quantity(value: float) -> str:
    """Kubernetes quantity text: 3 -> "3", 0.8 -> "800m"."""
    if float(value).is_integer():
        return str(int(value))
    return f"{round(value * 1000)}m"


def _pods_metric(metric: Gauge, average: float) -> k8s.autoscaling.v2.MetricSpecArgs:
    return k8s.autoscaling.v2.MetricSpecArgs(
        type="Pods",
        pods=k8s.autoscaling.v2.PodsMetricSourceArgs(
            metric=k8s.autoscaling.v2.MetricIdentifierArgs(name=gmp_custom_metric(metric)),
            target=k8s.autoscaling.v2.MetricTargetArgs(type="AverageValue", average_value=quantity(average)),
        ),
    )


def hpa_spec(p: HpaPlan, deployment: pulumi.Input[str]) -> k8s.autoscaling.v2.HorizontalPodAutoscalerSpecArgs:
    """``deployment``: the name of the Deployment to scale, as the model server hands it over."""
    metric_specs = [_pods_metric(Gauge(p.queue_metric), p.queue_target_per_pod)]
    if p.kv_cache_target is not None:
        metric_specs.append(_pods_metric(Gauge(p.kv_cache_metric), p.kv_cache_target))
    return k8s.autoscaling.v2.HorizontalPodAutoscalerSpecArgs(
        scale_target_ref=k8s.autoscaling.v2.CrossVersionObjectReferenceArgs(
            api_version="apps/v1", kind="Deployment", name=deployment
        ),
        min_replicas=p.min_replicas,
        max_replicas=p.max_replicas,
        metrics=metric_specs,
        behavior=k8s.autoscaling.v2.HorizontalPodAutoscalerBehaviorArgs(
            scale_up=k8s.autoscaling.v2.HPAScalingRulesArgs(
                # The cold load rounded up to minutes (scale_up_window_seconds): a burst shorter than the time a
                # new replica takes to become ready is over before it could help, so it must not add one.
                stabilization_window_seconds=p.scale_up_window_seconds,
                select_policy="Max",
                policies=[
                    k8s.autoscaling.v2.HPAScalingPolicyArgs(
                        type="Percent", value=SCALE_UP_PERCENT, period_seconds=SCALE_UP_PERIOD_S
                    ),
                    k8s.autoscaling.v2.HPAScalingPolicyArgs(
                        type="Pods", value=SCALE_UP_PODS, period_seconds=SCALE_UP_PERIOD_S
                    ),
                ],
            ),
            scale_down=k8s.autoscaling.v2.HPAScalingRulesArgs(
                # max(300 s, 2 x cold load): see scale_down_window_seconds.
                stabilization_window_seconds=p.scale_down_window_seconds,
                select_policy="Min",
                policies=[
                    # One pod per longest-stream period: pods leave one at a time, each after the last drained.
                    k8s.autoscaling.v2.HPAScalingPolicyArgs(
                        type="Pods", value=1, period_seconds=p.scale_down_period_seconds
                    ),
                ],
            ),
        ),
    )
