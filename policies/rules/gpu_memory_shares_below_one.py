"""gpu-memory-shares-below-one: vLLM servers sharing one GPU claim less than all of its memory together.

Each vLLM process pre-allocates ``--gpu-memory-utilization`` of the *whole* GPU (Vertex AI model co-hosting: co-hosting gives each
model a memory partition such as 0.4). On a GPU-sharing node pool (MPS / time-sharing), up to
``maxSharedClientsPerGpu`` containers land on one GPU and the scheduler does not look at memory, so the worst case
is the largest utilisations that can meet: the top ``maxSharedClientsPerGpu`` values over every replica the pool
may run. A Deployment whose pods repel each other per node (required pod anti-affinity on ``kubernetes.io/hostname``
over its own pod labels, as a co-hosted model's) puts at most one replica on a GPU, so it counts once. Their sum must
stay below 1.0, or the last server to start fails to allocate its KV cache.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import Severity, StackValidationPolicy

from ._common import (
    DEPLOYMENT,
    HPA,
    NODE_POOL,
    UNKNOWN,
    Res,
    argv,
    as_float,
    as_int,
    deployment_max_replicas,
    flag_value,
    fmt,
    get,
    is_gpu_node_pool,
    is_serving_deployment,
    node_pool_accelerators,
    of_type,
    pod_labels,
    pod_spec,
    pool_for_deployment,
    serving_container,
    stack_validator,
)

NAME = "gpu-memory-shares-below-one"
SEVERITY = Severity.HIGH
FRAMEWORK = None
#: vLLM 0.32's default --gpu-memory-utilization.
VLLM_DEFAULT_UTILIZATION = 0.9
REMEDIATION = (
    "Lower --gpu-memory-utilization of the co-hosted servers (or maxSharedClientsPerGpu) until the "
    "largest utilisations that can share one GPU sum below 1.0."
)


def utilization(dep: Res) -> float | None:
    args = argv(serving_container(dep))
    if args is UNKNOWN:
        return None
    raw = flag_value(args, "--gpu-memory-utilization")
    if raw is UNKNOWN:
        return None
    return VLLM_DEFAULT_UTILIZATION if raw is None else as_float(raw)


HOSTNAME = "kubernetes.io/hostname"


def one_per_node(dep: Res) -> bool:
    """Required anti-affinity on the node over the Deployment's own pod labels: at most one of its pods per node."""
    terms = get(pod_spec(dep), "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
    labels = pod_labels(dep)
    if not isinstance(terms, list) or not isinstance(labels, dict):
        return False
    for t in terms:
        match = get(t, "labelSelector", "matchLabels")
        if (
            get(t, "topologyKey") == HOSTNAME
            and isinstance(match, dict)
            and match
            and all(labels.get(k) == v for k, v in match.items())
        ):
            return True
    return False


def check(resources: list[Res], _cfg: dict[str, Any]) -> Iterator[tuple[str, str]]:
    pools = [p for p in of_type(resources, NODE_POOL) if is_gpu_node_pool(p)]
    hpas = of_type(resources, HPA)
    deps = sorted((d for d in resources if is_serving_deployment(d)), key=lambda d: d.k8s_name)
    for pool in pools:
        clients = max(
            (as_int(get(a, "gpuSharingConfig", "maxSharedClientsPerGpu")) or 1 for a in node_pool_accelerators(pool)),
            default=1,
        )
        if clients < 2:
            continue
        slots: list[tuple[float, str]] = []
        for d in deps:
            if pool_for_deployment(d, pools) is not pool:
                continue
            u, n = utilization(d), deployment_max_replicas(d, hpas)
            if u is None or n is None:
                return
            slots += [(u, d.k8s_name)] * (min(n, 1) if one_per_node(d) else n)
        worst = sorted(slots, key=lambda s: (-s[0], s[1]))[:clients]
        total = round(sum(u for u, _ in worst), 6)
        if len(worst) > 1 and total >= 1.0:
            shares = " + ".join(f"{fmt(u)} ({name})" for u, name in worst)
            yield (
                pool.urn,
                (
                    f"up to {len(worst)} servers share one GPU of this pool (maxSharedClientsPerGpu "
                    f"{clients}) and their --gpu-memory-utilization sums to {fmt(total)} = {shares}: keep "
                    "the sum below 1.0"
                ),
            )


POLICY = StackValidationPolicy(
    name=NAME,
    description="Co-hosted vLLM servers' --gpu-memory-utilization shares per GPU sum below 1.0.",
    validate=stack_validator(check, (DEPLOYMENT, HPA, NODE_POOL)),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["capacity", "co-hosting"],
)
