"""Model co-hosting: several releases (different models allowed), or several instances of one, sharing one accelerator
set, each with a fixed GPU-memory partition (seed 003, Vertex AI Engineering's model co-hosting: "a 0.4 GPU memory
partition per model", the partitions summing below 1.0 to leave room for "transient" memory).

A co-hosted group names one accelerator topology (its machine = the accelerator set), replica bounds of that
machine, a transient reserve, and its models. Each model is one release served under its own public model name,
with its partition (``--gpu-memory-utilization`` of every GPU its instances use: the "pre-allocated" memory of weights
+ KV cache), its instance count (tensor parallelism is the release's) and the concurrency it must be useful at. The
planner proves per model that weights + KV for that concurrency fit the partition, per GPU that the partitions of
everything placed on it sum to at most ``1 - transient_reserve``, and reports each model's concurrency at its
``max_model_len`` and the GPUs each instance uses.

Rendered on GKE (``target: gke``) as seed 003 built it: one pod per node runs the co-host server
(``components/cohost/server.py``), which owns the node's GPUs and starts every instance as a child process with its
GPU set and partition, routing by model name inside the pod (``infra/targets/gke/config/cohosting.py``). Rendered on
Vertex AI (``target: vertex``) the same way: one deployed model per group, whose container runs the co-host server on
every GPU of its machine, behind one endpoint (``infra/targets/vertex/config/cohosting.py``).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from .base import MAX_NODES, Strict
from .loading import GcsStreamingLoading
from .serving import PUBLIC_MODEL_NAME

#: The endpoint id (aiplatform.v1 ``endpoints.create`` ``endpointId``: letter first, ``[a-z0-9-]``), cut to 26
#: characters here so the serving account id ``<endpoint>-vtx`` fits IAM's 30. A ``vertex`` co-hosted group names
#: one (its endpoint); the Vertex target's own endpoint id has the same rule.
ENDPOINT_ID_PATTERN = r"^[a-z][-a-z0-9]{0,24}[a-z0-9]$"
#: A group key becomes part of the resource pool id (``<key>-<8 hex>``, at most 54 + 9 characters).
GROUP_KEY_PATTERN = r"^[a-z]([-a-z0-9]{0,30}[a-z0-9])?$"


#: An object name inside the releases' weights bucket: Cloud Storage allows any UTF-8 up to 1,024 bytes; this keeps
#: it to a path of safe characters (https://cloud.google.com/storage/docs/objects#naming).
OBJECT_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,511}$"


class UpdateModels(Strict):
    """update_models (seed 003): the co-host server follows a model-set document in Cloud Storage."""

    object: Annotated[str, Field(pattern=OBJECT_NAME_PATTERN)] = Field(
        description=(
            "Object in the group's weights bucket holding the model set (the co-host server's configuration "
            "document, JSON). When it exists it is every replica's model set, at start-up and whenever its generation "
            "changes: instances that left are drained, new ones started, unchanged ones keep running. Written by "
            "the bucket's writers only (the release pipeline's identity)."
        )
    )
    # 5 s: a metadata request per pod per poll stays far below Cloud Storage's per-object read rates; 3,600 s: an
    # hour is the longest an operator would wait for a change to take.
    poll_seconds: Annotated[int, Field(ge=5, le=3600)] = Field(
        30, description="How often each replica reads the object's generation (one metadata request), s."
    )


class CoHostedModel(Strict):
    """One release of a co-hosted group."""

    release: str = Field(description="Release id (``releases``) this model serves.")
    model_name: Annotated[str, Field(pattern=PUBLIC_MODEL_NAME)] = Field(
        description=(
            "Public model name clients send as ``model``; vLLM serves it beside the release id. Unique in the stack."
        )
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
            "vLLM server instances of this model per machine (data parallel), each on tensor_parallel_size GPUs "
            "(the release's), placed by the planner on GPUs of their own or beside other models' instances."
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
            "Warm minimum machines (Vertex: replicas of the group's deployed model; GKE: nodes of the group's node "
            "pool), each running every "
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
    models: Annotated[list[CoHostedModel], Field(min_length=1, max_length=8)] = Field(
        description=(
            "The co-hosted releases (different models allowed); together at least 2 instances (one model with "
            "several instances is the data-parallel layout)."
        )
    )

    def _common_problems(self) -> list[tuple[str, str]]:
        """Problems every target shares."""
        problems: list[tuple[str, str]] = []
        total = sum(m.instances for m in self.models)
        if total < 2:
            problems.append(
                ("models", f"a group runs at least 2 instances (one instance alone is a pool), got {total}")
            )
        if self.max_replicas < self.min_replicas:
            problems.append(("max_replicas", f"must be >= min_replicas ({self.min_replicas}), got {self.max_replicas}"))
        seen: list[str] = []
        for i, m in enumerate(self.models):
            if m.model_name in seen:
                problems.append((f"models.{i}.model_name", f"{m.model_name!r} is given twice"))
            seen.append(m.model_name)
        return problems
