"""gpu-memory-shares-below-one: vLLM servers that can meet on one GPU claim less than all of its memory together.

Each vLLM process pre-allocates ``--gpu-memory-utilization`` of the *whole* GPU (weights + KV cache: the
"pre-allocated" memory of Vertex AI model co-hosting, e.g. 0.4 + 0.4). Where servers share GPUs:

* a GKE GPU-sharing node pool (MPS / time-sharing): up to ``maxSharedClientsPerGpu`` containers land on one GPU and
  the scheduler does not look at memory, so the worst case is the largest utilisations over every replica the pool
  may run; a Deployment whose pods repel each other per node (required pod anti-affinity on
  ``kubernetes.io/hostname`` over its own pod labels, as a co-hosted model's) counts once;
* a co-host server's container (``components/cohost/server.py``: a GKE pod, a Vertex AI deployed model): its
  configuration places each vLLM instance on GPUs (``gpus``), so every instance listed on a GPU meets the others
  there on every replica.

Their sum must stay at most ``1 - transientReserve`` (default 0.1: the "transient" memory CUDA contexts, activations
and NCCL buffers take outside the partitions, the program's co-hosting planner's bound too), or the last server to
start fails to allocate its KV cache.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import PolicyConfigSchema, Severity, StackValidationPolicy

from ._adapters import ADAPTERS, types_of
from ._adapters.facts import FactKind
from ._common import Res, as_float, fmt, stack_validator

NAME = "gpu-memory-shares-below-one"
SEVERITY = Severity.HIGH
FRAMEWORK = None
DEFAULT_TRANSIENT_RESERVE = 0.1
REMEDIATION = (
    "Lower --gpu-memory-utilization of the servers that share a GPU (or, on GKE, maxSharedClientsPerGpu; or move a "
    "model out of the co-host group) until the largest partitions that can meet on one GPU sum to at "
    "most 1 - transientReserve."
)
FACTS: tuple[FactKind, ...] = ("shared_gpus",)


def check(resources: list[Res], cfg: dict[str, Any]) -> Iterator[tuple[str, str]]:
    reserve = as_float(cfg.get("transientReserve", DEFAULT_TRANSIENT_RESERVE))
    reserve = round(DEFAULT_TRANSIENT_RESERVE if reserve is None else reserve, 6)
    limit = round(1.0 - reserve, 6)
    for adapter in ADAPTERS:
        for gpu in adapter.shared_gpus(resources):
            total = round(sum(u for u, _ in gpu.shares), 6)
            if len(gpu.shares) > 1 and total > limit:
                parts = " + ".join(f"{fmt(u)} ({name})" for u, name in gpu.shares)
                yield (
                    gpu.urn,
                    f"{gpu.sharing} and their --gpu-memory-utilization partitions sum to {fmt(total)} = {parts}: "
                    f"keep the sum at most {fmt(limit)} (1 - transient reserve {fmt(reserve)})",
                )


POLICY = StackValidationPolicy(
    name=NAME,
    description="vLLM servers sharing a GPU (GKE GPU-sharing pools, co-host pods and Vertex AI co-host models) leave "
    "a transient reserve of its memory.",
    validate=stack_validator(check, types_of(*FACTS)),
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
    tags=["capacity", "co-hosting"],
)
