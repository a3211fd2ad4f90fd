"""hpa-max-within-reservation: every replica the autoscalers may ask for, plus rollout surge, has a reserved node."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import PolicyConfigSchema, Severity, StackValidationPolicy

from ._common import (
    DEPLOYMENT,
    HPA,
    NODE_POOL,
    RESERVATION,
    UNKNOWN,
    Res,
    as_int,
    deployment_max_replicas,
    fleet_regions,
    get,
    gpus_per_node,
    gpus_per_replica,
    is_gpu_node_pool,
    is_serving_deployment,
    node_pool_accelerators,
    of_type,
    pool_for_deployment,
    reservation_name,
    rolling_surge,
    stack_validator,
)

NAME = "hpa-max-within-reservation"
SEVERITY = Severity.HIGH
FRAMEWORK = None
REMEDIATION = (
    "Keep the sum over a reservation's Deployments of (HPA maxReplicas + rollout maxSurge) within "
    "reserved nodes x replicas per node: lower maxReplicas or grow the reservation."
)


def reserved_nodes(name: str, resources: list[Res], cfg: dict[str, Any]) -> Any:
    """Node count of a reservation: the stack's own Reservation, else the policy config's ``reservedNodes``."""
    for r in of_type(resources, RESERVATION):
        rname = r.props.get("name")
        if (rname if isinstance(rname, str) else r.name) == name:
            return as_int(get(r.props, "specificReservation", "count"))
    external = cfg.get("reservedNodes") or {}
    return as_int(external.get(name)) if name in external else None


def replicas_per_node(pool: Res, dep: Res) -> int | None:
    gpus, per_replica = gpus_per_node(pool), gpus_per_replica(dep)
    if gpus is None or per_replica is None:
        return None
    clients = 1
    for acc in node_pool_accelerators(pool):
        n = as_int(get(acc, "gpuSharingConfig", "maxSharedClientsPerGpu"))
        if n:
            clients = max(clients, n)
    return (gpus * clients) // per_replica


def check(resources: list[Res], cfg: dict[str, Any]) -> Iterator[tuple[str, str]]:
    pools = [p for p in of_type(resources, NODE_POOL) if is_gpu_node_pool(p)]
    hpas = of_type(resources, HPA)
    deps = [d for d in resources if is_serving_deployment(d)]
    members = fleet_regions(deps)
    for pool in pools:
        rname = reservation_name(pool)
        if rname is None or rname is UNKNOWN:
            continue
        mine = [d for d in deps if pool_for_deployment(d, pools, members) is pool]
        if not mine:
            continue
        nodes = reserved_nodes(rname, resources, cfg)
        if nodes is None:
            yield (
                pool.urn,
                (
                    f"capacity of reservation {rname} is unknown: it is not in this stack, so add its node "
                    "count to this policy's reservedNodes"
                ),
            )
            continue
        demand, parts, per_node = 0, [], None
        for d in sorted(mine, key=lambda x: x.k8s_name):
            mx, rpn = deployment_max_replicas(d, hpas), replicas_per_node(pool, d)
            surge = rolling_surge(d, mx) if mx is not None else None
            if mx is None or rpn is None or surge is None or rpn == 0:
                break
            per_node = rpn if per_node is None else min(per_node, rpn)
            demand += mx + surge
            parts.append(f"{d.k8s_name} max {mx} + surge {surge}")
        else:
            capacity = nodes * per_node if per_node is not None else 0
            if demand > capacity:
                need = -(-demand // per_node) if per_node else demand
                yield (
                    pool.urn,
                    (
                        f"reservation {rname} holds {nodes} node(s) x {per_node} replica(s)/node = "
                        f"{capacity} replicas, but its Deployments can reach {demand} "
                        f"({', '.join(parts)}): lower maxReplicas or reserve at least {need} node(s)"
                    ),
                )


POLICY = StackValidationPolicy(
    name=NAME,
    description="HPA maxReplicas plus rollout surge fit in the reserved GPU capacity.",
    validate=stack_validator(check, (DEPLOYMENT, HPA, NODE_POOL, RESERVATION)),
    config_schema=PolicyConfigSchema(
        properties={
            "reservedNodes": {
                "type": "object",
                "additionalProperties": {"type": "integer", "minimum": 0},
                "default": {},
                "description": "Node count of reservations owned outside this stack, by reservation name.",
            },
        }
    ),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["capacity", "autoscaling"],
)
