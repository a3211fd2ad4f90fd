"""Serving pools: which release runs where, with what share of traffic and what replica bounds.

Stable and canary are separate pools (seed 000, "Rollouts Without Corrupting the Cache Boundary"): each
names one immutable release, an accelerator topology, a traffic weight and replica bounds. Target-neutral
except ``loading``, which names the weight-loading path used by the GKE target.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from .base import Strict, check
from .model_server import ModelServerOptions

LoadingPath = Literal["gcs_streaming", "hyperdisk_ml", "gcs_fuse"]


class WeightLoading(Strict):
    """How a replica gets its weights, and the sustained read throughput the cold-load estimate uses.

    ``throughput_mib_s`` is a stated (ideally measured) number for this path and weight layout; the planner
    divides the weight bytes by it. ``engine_init_seconds`` covers what is not weight I/O (process start,
    KV-cache allocation, CUDA graph capture / compilation) and is also stated, not guessed by the planner.
    """

    #: gcs_streaming (Run:ai streamer from gs://), hyperdisk_ml (read-only volume) or gcs_fuse (mount).
    path: LoadingPath
    #: Stated sustained weight read throughput for this path, MiB/s.
    throughput_mib_s: Annotated[float, Field(gt=0)]
    #: Stated start-up time outside weight I/O, s.
    engine_init_seconds: Annotated[int, Field(ge=0)]
    #: Run:ai streamer reader threads per process (``--model-loader-extra-config {"concurrency": N}``).
    streamer_concurrency: Annotated[int, Field(ge=1, le=256)] = 16


class MeasuredThroughput(Strict):
    """Per-replica throughput measured at the SLO (TTFT/ITL objectives met) with this release and topology."""

    #: θ_o: output tokens/s per replica at the SLO.
    output_tokens_per_s: Annotated[float, Field(gt=0)]
    #: θ_i: prompt tokens/s per replica at the SLO.
    input_tokens_per_s: Annotated[float, Field(gt=0)]
    #: Where the number comes from (benchmark run id, date): a number without a source is not a measurement.
    source: Annotated[str, Field(min_length=3)]


class ServingPool(Strict):
    #: Release id served by this pool.
    release: str
    #: Accelerator topology key this pool runs on.
    accelerator: str
    #: Percent of traffic routed to this pool by the HTTPRoute weight split (stable + canary = 100).
    weight: Annotated[int, Field(ge=0, le=100)]
    #: Warm minimum replicas (>= 2 in prod).
    min_replicas: Annotated[int, Field(ge=1)]
    #: Replica ceiling (bounded by the reservation).
    max_replicas: Annotated[int, Field(ge=1)]
    #: Weight loading path and its stated throughput.
    loading: WeightLoading
    #: Fraction of each GPU's memory vLLM may use (``--gpu-memory-utilization``); vLLM 0.32's default is 0.90.
    gpu_memory_utilization: Annotated[float, Field(gt=0, lt=1)] = 0.90
    #: Activation / CUDA-graph / NCCL / allocator overhead per GPU outside weights and KV cache (GiB).
    #: 2 GiB is the planner's documented default for dense models at <= 8K batched tokens; raise it for
    #: large ``max_num_batched_tokens`` or multimodal models.
    runtime_overhead_gib: Annotated[float, Field(ge=0)] = 2.0
    #: Measured throughput; absent = unmeasured (no replica/cost figures invented).
    measured: MeasuredThroughput | None = None
    #: How this pool's vLLM pods run on GKE (resources, probe margins, drain, LoRA / speculative decoding);
    #: every field has a default (infra/config/model_server.py).
    model_server: ModelServerOptions = ModelServerOptions()

    @model_validator(mode="after")
    def _bounds(self) -> "ServingPool":
        check([("max_replicas", f"must be >= min_replicas ({self.min_replicas}), got {self.max_replicas}")]
              if self.max_replicas < self.min_replicas else [])
        return self


class ServingPools(Strict):
    #: The pool serving the current release.
    stable: ServingPool
    #: Optional canary pool with a new release.
    canary: ServingPool | None = None
    #: Allow a weight split between pools of different base models / serving configurations. Off by default:
    #: KV caches and adapters belong to one base model and configuration (seed 000, cache compatibility).
    allow_mixed_split: bool = False

    @model_validator(mode="after")
    def _weights(self) -> "ServingPools":
        total = self.stable.weight + (self.canary.weight if self.canary else 0)
        path = "canary.weight" if self.canary else "stable.weight"
        check([(path, f"stable + canary weights must sum to 100, got {total}")] if total != 100 else [])
        return self

    def items(self) -> list[tuple[str, ServingPool]]:
        """(role, pool) for every configured pool, stable first."""
        return [("stable", self.stable)] + ([("canary", self.canary)] if self.canary else [])
