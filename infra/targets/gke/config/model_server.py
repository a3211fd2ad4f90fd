"""Per-pool vLLM model-server settings for the GKE target : pod resources, probe margins, the drain
window, and optional n-gram speculative decoding.

These belong to a pool, not to the release: the release is target-neutral (the same identity can run on Cloud
Run or Vertex), while CPU/memory requests, probe timing and the drain protocol are properties of how this
target runs it. Every field has a documented default, so ``serving.<role>.model_server`` may be omitted.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from infra.config.base import FieldErrors, Strict, check


class NgramSpeculation(Strict):
    """Prompt-lookup (n-gram) speculative decoding (``--speculative-config``). Only the n-gram method is
    offered: it needs no draft weights, whereas a draft model brings its own weights and KV cache that the
    capacity planner does not size (the design, "Speculative Decoding Fits Inside the Model Server")."""

    method: Literal["ngram"] = Field(description=("Proposal method; only ``ngram`` (prompt lookup, no draft weights)."))
    num_speculative_tokens: Annotated[int, Field(ge=1, le=16)] = Field(
        description=("Tokens proposed per step; more raises the payoff when accepted and the waste when rejected.")
    )
    prompt_lookup_max: Annotated[int, Field(ge=1, le=64)] = Field(description="Longest n-gram matched in the prompt.")
    prompt_lookup_min: Annotated[int, Field(ge=1, le=64)] | None = Field(
        None, description=("Shortest n-gram matched (vLLM's default when unset).")
    )

    @model_validator(mode="after")
    def _order(self) -> NgramSpeculation:
        check(
            [
                (
                    "prompt_lookup_min",
                    f"must be <= prompt_lookup_max ({self.prompt_lookup_max}), got {self.prompt_lookup_min}",
                )
            ]
            if self.prompt_lookup_min is not None and self.prompt_lookup_min > self.prompt_lookup_max
            else []
        )
        return self


class ModelServerOptions(Strict):
    """How one pool's vLLM pods run on GKE."""

    cpu: Annotated[float, Field(gt=0, le=256)] = Field(
        4.0,
        description=(
            "CPU cores requested per replica (no CPU limit: throttling the tokenizer/scheduler threads only adds "
            "latency). 4 cores cover the API server, tokenisation and one engine process per GPU at TP <= 2."
        ),
    )
    memory_gib: Annotated[int, Field(ge=1, le=4096)] = Field(
        32,
        description=(
            "Memory per replica in GiB, request = limit (the pod is never a candidate for memory overcommit). It must "
            "hold the Python processes, the streamer's read buffers and the /dev/shm tmpfs (``shm_gib``), which is "
            "charged to the same cgroup. 32 GiB fits a g2-standard-12 (48 GB) node with system reserve."
        ),
    )
    shm_gib: Annotated[int, Field(ge=1, le=1024)] = Field(
        4,
        description=(
            "Size of the in-memory /dev/shm (NCCL and PyTorch inter-process buffers); counted inside ``memory_gib``."
        ),
    )
    startup_margin: Annotated[float, Field(ge=0, le=4)] = Field(
        0.5,
        description=(
            "Extra fraction over the planner's cold-load estimate the startup probe waits: window >= cold_load_seconds "
            "x (1 + margin). 0.5 absorbs a slower-than-stated read or init without letting a stuck pod hold its GPU for "
            "long; change it with ``loading.throughput_mib_s`` if that is unmeasured."
        ),
    )
    startup_period_seconds: Annotated[int, Field(ge=1, le=60)] = Field(
        10,
        description=(
            "Seconds between startup probes: the granularity at which a loaded replica is noticed; 10 s is small next "
            "to a cold load of minutes and keeps failureThreshold readable."
        ),
    )
    max_startup_seconds: Annotated[int, Field(ge=60, le=7200)] = Field(
        1800,
        description=(
            "Longest startup window allowed. A cold load that needs more (after the margin) is a configuration error: "
            "the window is also how long a broken pod holds a GPU before it is restarted, and the delay before a "
            'scale-up adds capacity (the design, "Autoscaling Has Two Clocks").'
        ),
    )
    drain_seconds: Annotated[int, Field(ge=0, le=300)] = Field(
        30,
        description=(
            "preStop sleep: how long the pod keeps serving after it is marked terminating so the endpoint picker and "
            "the load balancer stop sending it new requests. 30 s is the upstream reference deployment's p99 "
            "de-registration bound (GAIE vllm-gpu-deployment); terminationGracePeriodSeconds grows with it."
        ),
    )
    speculative: NgramSpeculation | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_lora(cls, data: object) -> object:
        if isinstance(data, dict) and "lora" in data:
            raise FieldErrors(
                [
                    (
                        "lora",
                        "LoRA adapters are not served: nothing stages, verifies, lists or routes "
                        "adapters end to end, and --enable-lora alone only costs memory; remove "
                        "the key",
                    )
                ]
            )
        return data

    @model_validator(mode="after")
    def _shm_inside_memory(self) -> ModelServerOptions:
        check(
            [
                (
                    "shm_gib",
                    f"/dev/shm is charged to the pod's memory: {self.shm_gib} GiB may use at most half of "
                    f"memory_gib ({self.memory_gib} GiB), the rest is for the server processes",
                )
            ]
            if self.shm_gib * 2 > self.memory_gib
            else []
        )
        return self
