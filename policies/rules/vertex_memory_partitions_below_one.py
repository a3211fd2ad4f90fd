"""vertex-memory-partitions-below-one: the vLLM servers co-hosted on one Vertex AI deployment resource pool claim
less than all of each GPU's memory together.

On a ``DeploymentResourcePool`` (Vertex AI model co-hosting) every deployed model that names the pool in
``sharedResources`` runs on the pool's machines, and each vLLM process pre-allocates ``--gpu-memory-utilization`` of
the *whole* GPU (weights + KV cache: the "pre-allocated" memory of co-hosting, e.g. 0.4 + 0.4). The partitions must
sum to at most ``1 - transientReserve`` (default 0.1: the "transient" memory CUDA contexts, activations and NCCL
buffers take outside the partitions), or the last server to start fails to allocate its KV cache.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import PolicyConfigSchema, Severity, StackValidationPolicy

from ._common import UNKNOWN, Res, as_float, flag_value, fmt, get, of_type, stack_validator
from ._vertex import DEPLOYED_MODEL, RESOURCE_POOL, serve_args

NAME = "vertex-memory-partitions-below-one"
SEVERITY = Severity.HIGH
FRAMEWORK = None
#: vLLM 0.32's default --gpu-memory-utilization.
VLLM_DEFAULT_UTILIZATION = 0.9
DEFAULT_TRANSIENT_RESERVE = 0.1
REMEDIATION = (
    "Lower --gpu-memory-utilization of the models co-hosted on the resource pool (or move one to its own "
    "pool) until their partitions sum to at most 1 - transientReserve."
)


def utilization(dm: Res) -> float | None:
    args = serve_args(dm)
    if args is UNKNOWN:
        return None
    raw = flag_value(args, "--gpu-memory-utilization")
    if raw is UNKNOWN:
        return None
    return VLLM_DEFAULT_UTILIZATION if raw is None else as_float(raw)


def pool_name(pool: Res) -> Any:
    """``projects/<p>/locations/<r>/deploymentResourcePools/<id>``, as deployed models name it."""
    project, region, pool_id = (get(pool.props, k) for k in ("project", "region", "pool_id"))
    if UNKNOWN in (project, region, pool_id) or None in (project, region, pool_id):
        return UNKNOWN
    return f"projects/{project}/locations/{region}/deploymentResourcePools/{pool_id}"


def check(resources: list[Res], cfg: dict[str, Any]) -> Iterator[tuple[str, str]]:
    reserve = as_float(cfg.get("transientReserve", DEFAULT_TRANSIENT_RESERVE))
    limit = 1.0 - (DEFAULT_TRANSIENT_RESERVE if reserve is None else reserve)
    models = of_type(resources, DEPLOYED_MODEL)
    for pool in of_type(resources, RESOURCE_POOL):
        name = pool_name(pool)
        if name is UNKNOWN:
            continue
        shares: list[tuple[float, str]] = []
        for dm in sorted(models, key=lambda r: r.name):
            shared = get(dm.props, "deployed_model", "sharedResources")
            if shared is UNKNOWN:
                return  # which pool it runs on is unknown at preview: the sum cannot be known either
            if shared != name:
                continue
            u = utilization(dm)
            if u is None:
                return
            shares.append((u, dm.name))
        total = round(sum(u for u, _ in shares), 6)
        if len(shares) > 1 and total > round(limit, 6):
            parts = " + ".join(f"{fmt(u)} ({n})" for u, n in shares)
            yield (
                pool.urn,
                (
                    f"{len(shares)} models are co-hosted on this resource pool and their "
                    f"--gpu-memory-utilization partitions sum to {fmt(total)} = {parts}: keep the sum at "
                    f"most {fmt(round(limit, 6))} (1 - transient reserve {fmt(round(1 - limit, 6))})"
                ),
            )


POLICY = StackValidationPolicy(
    name=NAME,
    description="Models co-hosted on one Vertex AI resource pool leave a transient reserve of GPU memory.",
    validate=stack_validator(check, (DEPLOYED_MODEL, RESOURCE_POOL)),
    config_schema=PolicyConfigSchema(
        properties={
            "transientReserve": {
                "type": "number",
                "minimum": 0,
                "maximum": 0.5,
                "default": DEFAULT_TRANSIENT_RESERVE,
                "description": "Fraction of each GPU's memory kept outside every partition.",
            },
        }
    ),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["capacity", "co-hosting", "vertex"],
)
