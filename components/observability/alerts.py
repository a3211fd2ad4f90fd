"""The GKE target's alert specs: the alerts every target raises on vLLM's series (``components/monitoring/
alerts.py``), plus per pool a queue the HPA cannot relieve, an unreachable endpoint picker and restarting model
servers. Pure."""

from __future__ import annotations

from .. import naming
from ..monitoring import cohosted
from ..monitoring.alerts import AlertedPool, AlertSpec, Thresholds, pool_alert_specs
from . import metrics as gke
from .views import PoolView


def alert_specs(pools: list[PoolView], t: Thresholds) -> list[AlertSpec]:
    by_role = {p.role: p for p in pools}

    def gke_specs(role: str, severity: str) -> list[AlertSpec]:
        hpa = by_role[role].hpa
        return [
            AlertSpec(
                "QueueBuildingAtMaxReplicas",
                role,
                f"Pool {role} queues more than {hpa.queue_target_per_pod} request(s) per pod while at "
                f"maxReplicas {hpa.max_replicas}: the HPA cannot add capacity",
                gke.waiting_per_pod(role),
                ">",
                hpa.queue_target_per_pod,
                300,
                severity,
                guard_signal=gke.pod_count(role),
                guard_min=hpa.max_replicas,
            ),
            # Without a picker the pool runs on the load balancer's own choice (FailOpen) or receives nothing
            # (FailClose): no cache awareness, priority or flow-control bounds either way. 60 s = four scrapes.
            AlertSpec(
                "EndpointPickerUnavailable",
                role,
                f"No endpoint picker of pool {role} ({naming.epp_name(role)}) answers its scrape",
                gke.epp_up(role),
                "<",
                1,
                60,
                severity,
            ),
            AlertSpec(
                "ServingPodsRestarting",
                role,
                f"Model-server containers of pool {role} restarted in the last 15 min",
                gke.restarts(role, "15m"),
                ">",
                0,
                0,
                "WARNING",
            ),
        ]

    # A pool's series are labelled with its role; the HPA keeps min_replicas (>= 1 by config) of it warm.
    alerted = [
        AlertedPool(p.role, p.role, p.weight, warm=p.hpa.min_replicas > 0, objectives=not p.models) for p in pools
    ]
    return pool_alert_specs(gke.GKE, alerted, t, gke_specs) + [
        spec for model in cohosted_models(pools) for spec in cohosted.alert_specs(gke.GKE, model, t)
    ]


def cohosted_models(pools: list[PoolView]) -> list[cohosted.CoHostedModel]:
    """Every co-hosted model of the GKE groups: a group's series are its pool's (its role)."""
    return [
        cohosted.CoHostedModel(p.role, p.role, v.model_name, v.release, v.instances) for p in pools for v in p.models
    ]
