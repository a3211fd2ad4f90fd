"""A co-hosted group on GKE: one vLLM Deployment per model on a dedicated GPU node pool with GKE GPU time-sharing,
each pod taking one shared slot of a GPU (``nvidia.com/gpu: 1``), at most one pod of a model per node, behind its own
InferencePool; the gateway routes by the ``model`` a request names (GAIE's body-based router copies it into a header
the API route matches). Not containers in one pod: Kubernetes' device plugin hands a GPU to one container only, so a
second container of the pod could not see it; separate pods also roll, scale and fail alone. Time-sharing, not MPS:
every process then sees the whole GPU, as on a Vertex machine, so ``--gpu-memory-utilization`` is the fraction of the
GPU the planner sized; MPS caps each client's pinned memory at a share of the GPU, which changes what that fraction
means."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from infra.config.base import check
from infra.config.cohosting import CoHostedGroupCommon

from .model_server import ModelServerOptions


class GkeCoHostedGroup(CoHostedGroupCommon):
    """A co-hosted group on GKE: one vLLM Deployment per model on the group's GPU time-sharing node pool, routed by
    model name at the stack's gateway."""

    target: Literal["gke"] = Field(
        description=(
            "``gke``: one Deployment per model on a time-shared GPU node pool of the stack's cluster, each model behind "
            "its own InferencePool, routed by the model name a request sends."
        )
    )
    model_server: ModelServerOptions = Field(
        ModelServerOptions(),
        description=(
            "How every model's vLLM pods run (CPU, memory, shm, probe margins, drain), as for a GKE pool; the pods of "
            "all models share the node, so their requests together must fit it."
        ),
    )

    @model_validator(mode="after")
    def _checks(self) -> GkeCoHostedGroup:
        problems = self._common_problems(
            "GKE places one pod of a model per node (GPU time-sharing gives no control "
            "over which GPU a pod's slot is on, so the memory bound counts each model "
            "once per GPU): 1, got {got}"
        )
        for i, m in enumerate(self.models):
            if m.endpoint_id is not None:
                problems.append((f"models.{i}.endpoint_id", "only on vertex: the GKE gateway routes by model name"))
        check(problems)
        return self
