"""Model co-hosting: several releases (different models allowed) sharing one accelerator set, each with a fixed
GPU-memory partition (Vertex AI's model co-hosting, as Vertex AI Engineering describes it: "a 0.4 GPU memory
partition per model", the partitions summing below 1.0 to leave room for "transient" memory).

A co-hosted group names one accelerator topology (its machine = the accelerator set), replica bounds of that
machine, a transient reserve, and its models. Each model is one release served under its own public model name,
with its partition (``--gpu-memory-utilization`` of every GPU its instances use: the "pre-allocated" memory of weights
+ KV cache), its instance count (tensor parallelism is the release's) and the concurrency it must be useful at. The
planner proves per model that weights + KV for that concurrency fit the partition, per GPU that the partitions of
everything placed on it sum to at most ``1 - transient_reserve``, and reports each model's concurrency at its
``max_model_len`` and the GPUs each instance uses.

Rendered on Vertex AI (``target: vertex``) as a deployment resource pool (aiplatform.v1 ``DeploymentResourcePool``:
"resources that can be shared by multiple DeployedModels") that every model's deployed model names in
``sharedResources``; each model has its own endpoint, so a request reaches the model it names (a Vertex traffic split
is by percentage, never by model name).

Rendered on GKE (``target: gke``) as one vLLM Deployment per model on a dedicated GPU node pool with GKE GPU
time-sharing, each pod taking one shared slot of a GPU (``nvidia.com/gpu: 1``), at most one pod of a model per node,
behind its own InferencePool; the gateway routes by the ``model`` a request names (GAIE's body-based router copies it
into a header the API route matches). Not containers in one pod: Kubernetes' device plugin hands a GPU to one
container only, so a second container of the pod could not see it; separate pods also roll, scale and fail alone.
Time-sharing, not MPS: every process then sees the whole GPU, as on a Vertex machine, so ``--gpu-memory-utilization``
is the fraction of the GPU the planner sized; MPS caps each client's pinned memory at a share of the GPU, which changes
what that fraction means.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from .base import MAX_NODES, Strict
from .loading import GcsStreamingLoading
from .serving import PUBLIC_MODEL_NAME

#: The endpoint id (aiplatform.v1 ``endpoints.create`` ``endpointId``: letter first, ``[a-z0-9-]``), cut to 26
#: characters here so the serving account id ``<endpoint>-vtx`` fits IAM's 30. A co-hosted model names one on
#: ``vertex`` (one endpoint per model); the Vertex target's own endpoint id has the same rule.
ENDPOINT_ID_PATTERN = r"^[a-z][-a-z0-9]{0,24}[a-z0-9]$"
#: A group key becomes part of the resource pool id (``<key>-<8 hex>``, at most 54 + 9 characters).
GROUP_KEY_PATTERN = r"^[a-z]([-a-z0-9]{0,30}[a-z0-9])?$"


class CoHostedModel(Strict):
    """One release of a co-hosted group."""

    release: str = Field(description="Release id (``releases``) this model serves.")
    model_name: Annotated[str, Field(pattern=PUBLIC_MODEL_NAME)] = Field(
        description=(
            "Public model name clients send as ``model``; vLLM serves it beside the release id. Unique in the stack."
        )
    )
    endpoint_id: Annotated[str, Field(pattern=ENDPOINT_ID_PATTERN)] | None = Field(
        None,
        description=(
            "Vertex endpoint id of this model (2-26 characters): one endpoint per co-hosted model, so requests reach "
            "the model they name. Required on ``vertex``; not given on ``gke`` (the gateway routes by model name)."
        ),
    )
    gpu_memory_partition: Annotated[float, Field(gt=0, lt=1)] = Field(
        description=(
            "Fraction of each GPU's memory this model's instances pre-allocate for weights + KV cache "
            "(``--gpu-memory-utilization``), e.g. 0.4."
        )
    )
    # 16 instances: one per GPU of the largest machine (16 x A100 40GB); more is a slip.
    instances: Annotated[int, Field(ge=1, le=16)] = Field(
        1,
        description=(
            "vLLM server instances of this model per machine, each on tensor_parallel_size GPUs (the release's). On "
            "Vertex one deployed model is one container, on GKE one pod per node: 1."
        ),
    )
    # 1,024: vLLM 0.32's --max-num-seqs default ceiling on large GPUs (capacity.MAX_NUM_SEQS_CAP).
    useful_concurrency: Annotated[int, Field(ge=1, le=1024)] = Field(
        description=(
            "Concurrent sequences at the contract's mean context (mean prompt + mean output tokens) each instance "
            "must hold in its partition for the model to be useful; the planner refuses a partition that cannot."
        )
    )
    runtime_overhead_gib: Annotated[float, Field(ge=0, le=64)] = Field(
        2.0,
        description=(
            "Activation / CUDA-graph / allocator memory inside the partition outside weights and KV cache (GiB), as "
            "for a pool."
        ),
    )


class CoHostedGroupCommon(Strict):
    """Releases sharing one accelerator set: one machine shape, its replicas, and the models on it. Each target's
    group type derives from it and fixes ``target`` to its own literal."""

    target: str = Field(description="Serving target of this group; selects the group type.")
    accelerator: str = Field(
        description=(
            "Accelerator topology key (``accelerators.<key>``): the machine every replica of the group is, and the "
            "reservation it consumes."
        )
    )
    min_replicas: Annotated[int, Field(ge=1, le=MAX_NODES)] = Field(
        description=(
            "Warm minimum machines (Vertex: of the resource pool; GKE: of the group's node pool), each running every "
            "model."
        )
    )
    max_replicas: Annotated[int, Field(ge=1, le=MAX_NODES)] = Field(description="Machine ceiling of the group.")
    transient_reserve: Annotated[float, Field(ge=0.02, le=0.5)] = Field(
        0.1,
        description=(
            "Fraction of each GPU's memory left outside every partition for transient memory (CUDA contexts of "
            "several processes, NCCL buffers, fragmentation): the partitions on a GPU sum to at most 1 minus this."
        ),
    )
    loading: GcsStreamingLoading = Field(description="How the models' weights arrive, and the stated throughput.")
    # 8 models: more servers than GPUs on the largest machine is a slip.
    models: Annotated[list[CoHostedModel], Field(min_length=2, max_length=8)] = Field(
        description=("The co-hosted releases (at least 2; different models allowed).")
    )

    def _common_problems(self, one_instance_reason: str) -> list[tuple[str, str]]:
        """Problems every target shares; ``one_instance_reason`` says why the target runs one instance per machine
        (``{got}`` is the configured count)."""
        problems: list[tuple[str, str]] = []
        if self.max_replicas < self.min_replicas:
            problems.append(("max_replicas", f"must be >= min_replicas ({self.min_replicas}), got {self.max_replicas}"))
        for field in ("model_name", "endpoint_id"):
            seen: list[str] = []
            for i, m in enumerate(self.models):
                value = getattr(m, field)
                if value is not None and value in seen:
                    problems.append((f"models.{i}.{field}", f"{value!r} is given twice"))
                seen.append(value)
        for i, m in enumerate(self.models):
            if m.instances != 1:
                problems.append((f"models.{i}.instances", one_instance_reason.format(got=m.instances)))
        return problems
