"""The workload contract: what the service promises and the traffic it is sized for (the design,
"Start With a Workload Contract"). Target-neutral: the same contract sizes GKE, Cloud Run or Vertex."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from .base import MAX_CONTEXT_TOKENS, MAX_OBJECTIVE_MS, Strict, check
from .tenants import Tenant, TenantIdentity

Tokens = Annotated[int, Field(gt=0, le=MAX_CONTEXT_TOKENS)]
MeanTokens = Annotated[float, Field(gt=0, le=MAX_CONTEXT_TOKENS)]
ObjectiveMs = Annotated[int, Field(gt=0, le=MAX_OBJECTIVE_MS)]
#: A million requests per second is orders of magnitude above one regional load balancer's default quota.
ArrivalRps = Annotated[float, Field(gt=0, le=1_000_000)]


class LengthDistribution(Strict):
    """Token-length distribution of prompts or outputs: the mean sizes capacity, p95 sizes the tail."""

    mean: MeanTokens = Field(description=("Mean length in tokens (sizes throughput and the mean-context concurrency)."))
    p95: Tokens = Field(description=("95th percentile length in tokens (load tests must preserve it)."))

    @model_validator(mode="after")
    def _p95_not_below_mean(self) -> LengthDistribution:
        check([("p95", f"must be >= mean ({self.mean}), got {self.p95}")] if self.p95 < self.mean else [])
        return self


#: Priority the endpoint picker gives a request that names no class (no ``x-llm-d-inference-objective``
#: header) or a class it does not know: 0, neither preferred nor shed. See :class:`PriorityClass`.
DEFAULT_REQUEST_PRIORITY = 0


class PriorityClass(Strict):
    """An admission class, rendered as one InferenceObjective per pool under the class name. Clients pick it with
    the ``x-llm-d-inference-objective: <name>`` header.

    The endpoint picker's semantics, which ``priority`` and ``sheddable`` state explicitly: higher priority is
    dispatched first when requests queue (fairness applies within one priority); a request whose priority is
    **negative** is *sheddable*: when the pool is saturated the picker rejects it at once with HTTP 429 instead of
    queueing it. A request without the header, or naming an unknown class, is served at priority 0: never shed,
    dispatched after every positive class."""

    name: Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")] = Field(
        description=(
            "Class name: the InferenceObjective's name and what clients send in ``x-llm-d-inference-objective``."
        )
    )
    priority: Annotated[int, Field(ge=-1000, le=1000)] = Field(
        description=(
            "Higher is served first when requests queue; negative = sheddable (rejected with 429 when the pool is "
            "saturated). Requests without a class get 0."
        )
    )
    sheddable: bool = Field(
        description=(
            "Whether this class is shed under saturation; must agree with the priority's sign (true exactly when "
            "priority < 0), so the config says in words what the number does."
        )
    )
    description: Annotated[str, Field(min_length=3)] = Field(description="What traffic belongs to this class.")

    @model_validator(mode="after")
    def _sheddable_is_negative(self) -> PriorityClass:
        if self.sheddable and self.priority >= 0:
            check(
                [
                    (
                        "priority",
                        f"a sheddable class needs a negative priority (the picker sheds only priority < 0), "
                        f"got {self.priority}",
                    )
                ]
            )
        if not self.sheddable and self.priority < 0:
            check(
                [
                    (
                        "sheddable",
                        f"priority {self.priority} < 0 is shed under saturation: set sheddable: true, or "
                        f"use a priority >= 0",
                    )
                ]
            )
        return self


class WorkloadContract(Strict):
    """TTFT/ITL objectives are p95 targets in milliseconds; λ is the peak arrival rate in requests/s."""

    ttft_p95_ms: ObjectiveMs = Field(description=("Time-to-first-token objective at p95, ms (queueing + prefill)."))
    itl_p95_ms: ObjectiveMs = Field(description=("Inter-token latency objective at p95, ms (decode smoothness)."))
    max_input_tokens: Tokens = Field(description="Largest prompt the service admits, in tokens.")
    max_output_tokens: Tokens = Field(description="Largest completion a request may ask for, in tokens.")
    max_model_len: Tokens = Field(
        description=("Service context limit; must be >= max_input_tokens + max_output_tokens.")
    )
    peak_arrival_rate_rps: ArrivalRps = Field(description="Peak arrival rate λ in requests per second.")
    prompt_tokens: LengthDistribution = Field(description="Prompt length distribution.")
    output_tokens: LengthDistribution = Field(description="Generated length distribution.")
    target_utilization: Annotated[float, Field(gt=0, lt=1)] = Field(
        description=("Target utilisation ρ of measured throughput (headroom below saturation).")
    )
    priority_classes: Annotated[list[PriorityClass], Field(min_length=1)] = Field(
        description=("Admission classes; each becomes an InferenceObjective per pool under the class name.")
    )
    tenants: list[Tenant] = Field(
        default_factory=list,
        description=(
            "Who shares the service (docs/tenants.md): each tenant's fairness weight and hard budgets. Empty: every "
            "request is one tenant (the router's default flow), allowed in dev only on GKE."
        ),
    )
    tenant_identity: TenantIdentity | None = Field(
        default=None,
        description="How a request's tenant header is set from a verified caller identity; required with tenants.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> WorkloadContract:
        problems = []
        if self.max_model_len < self.max_input_tokens + self.max_output_tokens:
            problems.append(
                (
                    "max_model_len",
                    f"must be >= max_input_tokens + max_output_tokens "
                    f"({self.max_input_tokens} + {self.max_output_tokens} = {self.max_input_tokens + self.max_output_tokens}), got {self.max_model_len}",
                )
            )
        if self.prompt_tokens.p95 > self.max_input_tokens:
            problems.append(
                ("prompt_tokens.p95", f"{self.prompt_tokens.p95} exceeds max_input_tokens ({self.max_input_tokens})")
            )
        if self.output_tokens.p95 > self.max_output_tokens:
            problems.append(
                ("output_tokens.p95", f"{self.output_tokens.p95} exceeds max_output_tokens ({self.max_output_tokens})")
            )
        names = [p.name for p in self.priority_classes]
        if len(set(names)) != len(names):
            problems.append(("priority_classes", f"names must be unique, got {names}"))
        ids = [t.id for t in self.tenants]
        for i, tid in enumerate(ids):
            if ids.index(tid) != i:
                problems.append((f"tenants.{i}.id", f"duplicate tenant id {tid!r} (also tenants[{ids.index(tid)}])"))
        if self.tenants and self.tenant_identity is None:
            problems.append(
                (
                    "tenant_identity",
                    "tenants need an identity source: how the gateway's tenant header comes from a verified caller",
                )
            )
        check(problems)
        return self

    @property
    def stream_bound_seconds(self) -> float:
        """Longest allowed stream: TTFT objective + max output tokens x ITL objective (the design)."""
        return (self.ttft_p95_ms + self.max_output_tokens * self.itl_p95_ms) / 1000.0
