"""A co-hosted group on GKE, as seed 003 built co-hosting: one pod per node of the group's own GPU node pool runs the
co-host server (``components/cohost/server.py``). The pod owns every GPU of its node (``nvidia.com/gpu`` = the GPUs
per node: no time-sharing, so no device plugin decides which GPU a model lands on); the server starts each model's
instances as child processes, one after another, on the GPU sets the planner placed them on
(``CUDA_VISIBLE_DEVICES``), each with its partition as ``--gpu-memory-utilization``, and routes each request by the
``model`` its body names. The group is one Deployment behind one InferencePool (one endpoint picker); the gateway
sends a request naming one of the group's models to that pool (GAIE's body-based router copies the body's ``model``
into a header the API route matches), and inside the pod the server picks the instance.

Why one pod rather than a pod per model: Kubernetes' device plugin hands a whole GPU to one container, so models
sharing a GPU must share a container (seed 003's container-level co-hosting); the alternative, GPU time-sharing,
lets the device plugin place pods on GPUs the planner cannot see and forbids more than one GPU per container. What
the pod shape costs: the group's models scale together (a replica is a node with every model), and a model's restart
is the server's business, not Kubernetes'.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from infra.config.base import check
from infra.config.cohosting import CoHostedGroupCommon, UpdateModels

from .model_server import ModelServerOptions


class GkeCoHostedGroup(CoHostedGroupCommon):
    """A co-hosted group on GKE: the co-host server in one pod per node of the group's own GPU node pool, owning the
    node's GPUs, behind one InferencePool routed by model name at the stack's gateway."""

    target: Literal["gke"] = Field(
        description=(
            "``gke``: one pod per node of the group's own GPU node pool runs the co-host server with every model; one "
            "InferencePool, requests routed by the model name they send."
        )
    )
    model_server: ModelServerOptions = Field(
        ModelServerOptions(),
        description=(
            "How the co-host pod runs (CPU, memory, shm, probe margins, drain), as for a GKE pool: one pod per node "
            "holds every model, so its requests are the node's."
        ),
    )
    update_models: UpdateModels | None = Field(
        None, description="A model-set document in Cloud Storage the pods follow (update_models); none: the plan's."
    )

    @model_validator(mode="after")
    def _checks(self) -> GkeCoHostedGroup:
        problems = self._common_problems()
        o = self.model_server
        if o.speculative is not None:
            problems.append(("model_server.speculative", "not for a co-hosted group (each release has its own draft)"))
        check(problems)
        return self
