"""Serving pools: which release runs where, with what share of traffic and what replica bounds.

Stable and canary are separate pools (the design, "Rollouts Without Corrupting the Cache Boundary"): each
names one immutable release, an accelerator topology, a traffic weight and replica bounds. Each pool names
its serving target (``target``); the keys that only make sense on one target live in that target's pool type.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from .base import MAX_NODES, Strict, check
from .model_server import ModelServerOptions
from .pool import MEASUREMENTS_DIR, PoolCommon  # noqa: F401  (re-exported)

LoadingPath = Literal["gcs_streaming", "hyperdisk_ml", "gcs_fuse"]


class WeightLoading(Strict):
    """How a replica gets its weights, and the sustained read throughput the cold-load estimate uses.

    ``throughput_mib_s`` is a stated (ideally measured) number for this path and weight layout; the planner
    divides the weight bytes by it. ``engine_init_seconds`` covers what is not weight I/O (process start,
    KV-cache allocation, CUDA graph capture / compilation) and is also stated, not guessed by the planner.
    """

    path: LoadingPath = Field(description=(
        "gcs_streaming (Run:ai streamer from gs://), hyperdisk_ml (read-only volume) or gcs_fuse (mount)."))
    # 100,000 MiB/s: four times the fastest VM's storage network (200 Gbit/s); a figure in KiB/s is caught.
    throughput_mib_s: Annotated[float, Field(gt=0, le=100_000)] = Field(description=(
        "Stated sustained weight read throughput for this path, MiB/s."))
    # 7,200 s: the longest startup window ``max_startup_seconds`` allows.
    engine_init_seconds: Annotated[int, Field(ge=0, le=7200)] = Field(description="Stated start-up time outside weight I/O, s.")
    streamer_concurrency: Annotated[int, Field(ge=1, le=256)] = Field(16, description=(
        "Run:ai streamer reader threads per process (``--model-loader-extra-config {\"concurrency\": N}``)."))


class GkePool(PoolCommon):
    """A pool of vLLM pods on GKE GPU nodes behind the GKE Inference Gateway."""

    target: Literal["gke"] = Field(description=(
        "``gke``: vLLM Deployments on a GPU node pool, routed by the GKE Inference Gateway."))
    min_replicas: Annotated[int, Field(ge=1, le=MAX_NODES)] = Field(description="Warm minimum replicas (>= 2 in prod).")
    max_replicas: Annotated[int, Field(ge=1, le=MAX_NODES)] = Field(description=(
        "Replica ceiling (bounded by the reservation; at most the 1,000 nodes a GKE node pool holds per zone)."))
    accelerator: str = Field(description="Accelerator topology key (``accelerators.<key>``) this pool runs on.")
    loading: WeightLoading = Field(description="Weight loading path and its stated throughput.")
    model_server: ModelServerOptions = Field(ModelServerOptions(), description=(
        "How this pool's vLLM pods run on GKE (resources, probe margins, drain, LoRA / speculative decoding); every "
        "field has a default."))

    @model_validator(mode="after")
    def _bounds(self) -> "GkePool":
        check([("max_replicas", f"must be >= min_replicas ({self.min_replicas}), got {self.max_replicas}")]
              if self.max_replicas < self.min_replicas else [])
        return self


from .cloud_run import CloudRunPool  # noqa: E402  (it derives from PoolCommon like GkePool)
from .vertex import VertexPool  # noqa: E402  (likewise)

#: A serving pool, by target: a pydantic discriminated union on ``target`` (``gke`` | ``cloud_run`` | ``vertex``).
ServingPool = Annotated[GkePool | CloudRunPool | VertexPool, Field(discriminator="target")]


#: An OpenAI ``model`` value: what clients send. Lower-case so it cannot collide with a release id by case only.
PUBLIC_MODEL_NAME = r"^[a-z0-9]([-a-z0-9._]{0,62}[a-z0-9])?$"


class ServingPools(Strict):
    """The pools of a stack and the one public model name every pool answers to."""

    model_name: Annotated[str, Field(pattern=PUBLIC_MODEL_NAME)] = Field(description=(
        "Public model name: the ``model`` clients send to every pool, whatever release serves them. Each pool's "
        "vLLM serves it beside its release id (``--served-model-name <release id> <model_name>``), so a weighted "
        "canary split never answers 404 and a rollout never asks clients to change names; responses carry the "
        "release id in ``model``, so the release that served a request stays identifiable. Must differ from every "
        "release id."))
    stable: ServingPool = Field(description="The pool serving the current release.")
    canary: ServingPool | None = Field(None, description="Optional canary pool with a new release.")
    allow_mixed_split: bool = Field(False, description=(
        "Allow a weight split between pools of different base models / serving configurations. Off by default: KV "
        "caches and adapters belong to one base model and configuration (the design, cache compatibility)."))

    @model_validator(mode="after")
    def _weights(self) -> "ServingPools":
        total = self.stable.weight + (self.canary.weight if self.canary else 0)
        path = "canary.weight" if self.canary else "stable.weight"
        check([(path, f"stable + canary weights must sum to 100, got {total}")] if total != 100 else [])
        return self

    def items(self) -> list[tuple[str, ServingPool]]:
        """(role, pool) for every configured pool, stable first."""
        return [("stable", self.stable)] + ([("canary", self.canary)] if self.canary else [])
