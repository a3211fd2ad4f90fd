"""The workload contract: what the service promises and the traffic it is sized for (the design,
"Start With a Workload Contract"). Target-neutral: the same contract sizes GKE, Cloud Run or Vertex."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from .base import Strict, check

PositiveInt = Annotated[int, Field(gt=0)]
PositiveFloat = Annotated[float, Field(gt=0)]


class LengthDistribution(Strict):
    """Token-length distribution of prompts or outputs: the mean sizes capacity, p95 sizes the tail."""

    mean: PositiveFloat = Field(description=(
        "Mean length in tokens (sizes throughput and the mean-context concurrency)."))
    p95: PositiveInt = Field(description=(
        "95th percentile length in tokens (load tests must preserve it)."))

    @model_validator(mode="after")
    def _p95_not_below_mean(self) -> "LengthDistribution":
        check([("p95", f"must be >= mean ({self.mean}), got {self.p95}")] if self.p95 < self.mean else [])
        return self


class PriorityClass(Strict):
    """An admission class (becomes an InferenceObjective): higher priority is served first when queued."""

    name: Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")] = Field(description="Class name (InferenceObjective name suffix).")
    priority: int = Field(description=(
        "Higher is served first when requests queue; fairness applies within one priority."))
    description: str = Field(description="What traffic belongs to this class.")


class WorkloadContract(Strict):
    """TTFT/ITL objectives are p95 targets in milliseconds; λ is the peak arrival rate in requests/s."""

    ttft_p95_ms: PositiveInt = Field(description=(
        "Time-to-first-token objective at p95, ms (queueing + prefill)."))
    itl_p95_ms: PositiveInt = Field(description=(
        "Inter-token latency objective at p95, ms (decode smoothness)."))
    max_input_tokens: PositiveInt = Field(description="Largest prompt the service admits, in tokens.")
    max_output_tokens: PositiveInt = Field(description="Largest completion a request may ask for, in tokens.")
    max_model_len: PositiveInt = Field(description=(
        "Service context limit; must be >= max_input_tokens + max_output_tokens."))
    peak_arrival_rate_rps: PositiveFloat = Field(description="Peak arrival rate λ in requests per second.")
    prompt_tokens: LengthDistribution = Field(description="Prompt length distribution.")
    output_tokens: LengthDistribution = Field(description="Generated length distribution.")
    target_utilization: Annotated[float, Field(gt=0, lt=1)] = Field(description=(
        "Target utilisation ρ of measured throughput (headroom below saturation)."))
    priority_classes: Annotated[list[PriorityClass], Field(min_length=1)] = Field(description=(
        "Admission classes; each becomes an InferenceObjective per pool."))

    @model_validator(mode="after")
    def _consistent(self) -> "WorkloadContract":
        problems = []
        if self.max_model_len < self.max_input_tokens + self.max_output_tokens:
            problems.append((
                "max_model_len",
                f"must be >= max_input_tokens + max_output_tokens "
                f"({self.max_input_tokens} + {self.max_output_tokens} = {self.max_input_tokens + self.max_output_tokens}), got {self.max_model_len}",
            ))
        if self.prompt_tokens.p95 > self.max_input_tokens:
            problems.append(("prompt_tokens.p95", f"{self.prompt_tokens.p95} exceeds max_input_tokens ({self.max_input_tokens})"))
        if self.output_tokens.p95 > self.max_output_tokens:
            problems.append(("output_tokens.p95", f"{self.output_tokens.p95} exceeds max_output_tokens ({self.max_output_tokens})"))
        names = [p.name for p in self.priority_classes]
        if len(set(names)) != len(names):
            problems.append(("priority_classes", f"names must be unique, got {names}"))
        check(problems)
        return self

    @property
    def stream_bound_seconds(self) -> float:
        """Longest allowed stream: TTFT objective + max output tokens x ITL objective (the design)."""
        return (self.ttft_p95_ms + self.max_output_tokens * self.itl_p95_ms) / 1000.0
