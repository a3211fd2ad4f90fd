"""What every serving pool states whatever its target (``PoolCommon``); each target's pool type derives from it
(``infra/targets/<target>/config``) and fixes ``target`` to its own literal."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from .base import Strict
from .environment import WarmMinimum

#: Where measurement records live (``llm-serving bench --record``), relative to the project root.
MEASUREMENTS_DIR = "stacks/measurements"


class PoolCommon(Strict):
    """What every pool states whatever it runs on: the release, its traffic share, the memory share vLLM may
    take, and an optional measurement. Target-specific keys (replica or instance bounds among them) live in the
    target's pool type."""

    #: How the target names itself in messages ("Cloud Run pool", "Vertex pool").
    TARGET_LABEL: ClassVar[str] = "pool"
    #: The key holding the pool's warm floor, and which unit of :class:`WarmMinimum` it counts.
    WARM_KEY: ClassVar[str] = "min_replicas"
    WARM_UNIT: ClassVar[Literal["replicas", "instances"]] = "replicas"
    #: Why that floor matters on this target (appended to the warm-minimum message), or "".
    WARM_REASON: ClassVar[str] = ""
    #: What splits traffic between two pools of this target (named when a split would cross targets).
    SPLIT_MECHANISM: ClassVar[str] = "one target's split"

    target: str = Field(description="Serving target of this pool; selects the pool type.")
    release: str = Field(description="Release id served by this pool.")
    weight: Annotated[int, Field(ge=0, le=100)] = Field(
        description=("Percent of traffic routed to this pool by the target's weight split (stable + canary = 100).")
    )
    gpu_memory_utilization: Annotated[float, Field(gt=0, lt=1)] = Field(
        0.90,
        description=(
            "Fraction of each GPU's memory vLLM may use (``--gpu-memory-utilization``); vLLM 0.32's default is 0.90."
        ),
    )
    runtime_overhead_gib: Annotated[float, Field(ge=0, le=64)] = Field(
        2.0,
        description=(
            "Activation / CUDA-graph / NCCL / allocator overhead per GPU outside weights and KV cache (GiB). 2 GiB is "
            "the planner's documented default for dense models at <= 8K batched tokens; raise it for large "
            "``max_num_batched_tokens`` or multimodal models."
        ),
    )
    measured: Annotated[str, Field(pattern=r"^stacks/measurements/[A-Za-z0-9._-]+\.json$")] | None = Field(
        None,
        description=(
            "Measurement record of this pool's release on its topology (``stacks/measurements/<name>.json``, written "
            "by ``llm-serving bench --record``): θ_o and θ_i at its operating point size the pool. It must have "
            "measured exactly this release, image, vLLM version, accelerator and rendered arguments. Absent = "
            "unmeasured: no replica or cost figure is invented."
        ),
    )
    measured_with_adapted_args: Annotated[str, Field(min_length=10, max_length=300)] | None = Field(
        None,
        description=(
            "Accept a record whose server ran other arguments than the rendered ones (e.g. a CPU-adapted run), giving "
            "why; dev only: its θ describes another configuration than the one deployed."
        ),
    )

    def accelerator_key(self) -> str | None:
        """The accelerator topology (``accelerators.<key>``) this pool's machines are, if its target uses one."""
        return None

    def warm_count(self) -> int:
        """The pool's warm floor, the value of ``WARM_KEY``."""
        value = getattr(self, self.WARM_KEY)
        assert isinstance(value, int)
        return value

    @classmethod
    def warm_floor(cls, minimum: WarmMinimum) -> int:
        """What an environment's :class:`WarmMinimum` requires of a pool of this type."""
        return minimum.replicas if cls.WARM_UNIT == "replicas" else minimum.instances
