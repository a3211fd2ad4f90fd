"""The ``gke`` pool: vLLM pods on a GPU node pool behind the GKE Inference Gateway, and how its weights arrive."""

from __future__ import annotations

from typing import Annotated, ClassVar, Final, Literal

from pydantic import Field, model_validator

from infra.config.base import MAX_NODES, Strict, check
from infra.config.pool import PoolCommon

from .model_server import ModelServerOptions

LoadingPath = Literal["gcs_streaming", "hyperdisk_ml", "gcs_fuse"]


class WeightLoading(Strict):
    """How a replica gets its weights, and the sustained read throughput the cold-load estimate uses.

    ``throughput_mib_s`` is a stated (ideally measured) number for this path and weight layout; the planner
    divides the weight bytes by it. ``engine_init_seconds`` covers what is not weight I/O (process start,
    KV-cache allocation, CUDA graph capture / compilation) and is also stated, not guessed by the planner.
    """

    path: LoadingPath = Field(
        description=("gcs_streaming (Run:ai streamer from gs://), hyperdisk_ml (read-only volume) or gcs_fuse (mount).")
    )
    # 100,000 MiB/s: four times the fastest VM's storage network (200 Gbit/s); a figure in KiB/s is caught.
    throughput_mib_s: Annotated[float, Field(gt=0, le=100_000)] = Field(
        description=("Stated sustained weight read throughput for this path, MiB/s.")
    )
    # 7,200 s: the longest startup window ``max_startup_seconds`` allows.
    engine_init_seconds: Annotated[int, Field(ge=0, le=7200)] = Field(
        description="Stated start-up time outside weight I/O, s."
    )
    streamer_concurrency: Annotated[int, Field(ge=1, le=256)] = Field(
        16,
        description=(
            'Run:ai streamer reader threads per process (``--model-loader-extra-config {"concurrency": N}``).'
        ),
    )


#: The ``target`` value of this target's pools and co-hosted groups.
TARGET: Final = "gke"


class GkePool(PoolCommon):
    """A pool of vLLM pods on GKE GPU nodes behind the GKE Inference Gateway."""

    SPLIT_MECHANISM: ClassVar[str] = "the Inference Gateway's route"

    target: Literal["gke"] = Field(
        description=("``gke``: vLLM Deployments on a GPU node pool, routed by the GKE Inference Gateway.")
    )
    min_replicas: Annotated[int, Field(ge=1, le=MAX_NODES)] = Field(description="Warm minimum replicas (>= 2 in prod).")
    max_replicas: Annotated[int, Field(ge=1, le=MAX_NODES)] = Field(
        description=(
            "Replica ceiling (bounded by the reservation; at most the 1,000 nodes a GKE node pool holds per zone)."
        )
    )
    accelerator: str = Field(description="Accelerator topology key (``accelerators.<key>``) this pool runs on.")
    loading: WeightLoading = Field(description="Weight loading path and its stated throughput.")
    model_server: ModelServerOptions = Field(
        ModelServerOptions(),
        description=(
            "How this pool's vLLM pods run on GKE (resources, probe margins, drain, LoRA / speculative decoding); every "
            "field has a default."
        ),
    )

    def accelerator_key(self) -> str | None:
        return self.accelerator

    @model_validator(mode="after")
    def _bounds(self) -> GkePool:
        check(
            [("max_replicas", f"must be >= min_replicas ({self.min_replicas}), got {self.max_replicas}")]
            if self.max_replicas < self.min_replicas
            else []
        )
        return self
