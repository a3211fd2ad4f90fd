"""The resolved stack plan: every pool resolved once per run from the validated config.

Each serving target plans its own pools (and co-hosted groups) into a :class:`TargetPlan`
(``infra/targets/<target>/planning``); :func:`build_plan` joins them into the one :class:`StackPlan` the rules, the
program and the offline tools read. What every target's pool plan carries is :class:`PoolPlan` (release identity,
capacity, the exact ``vllm serve`` arguments from the one renderer, the machine a measurement must have measured); a
target's plan type adds what it derived (probes, HPA bounds, instance shape, machine spec). A pool that cannot be
planned (a model that does not fit, a startup window that cannot cover the cold load) becomes a :class:`PlanIssue`
with the config key it concerns; the other pools are still planned, so every problem is reported together.

The maths lives in the pure modules beside this one (``capacity``, ``probes``, ``vllm_args``, ``cohosting``); this
module and the targets' planners only read the validated config and join their results.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypeVar

from components.serving.spec import ReleaseInfo

from ..config.cohosting import CoHostedGroupCommon
from ..config.measurement import Measurement
from ..config.pool import PoolCommon
from ..config.release import ReleaseIdentity
from ..config.stack import StackConfig
from . import capacity
from . import cohosting as ch
from . import tenants as tn

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class PlanIssue:
    """A configuration the planner proves cannot work: the config location it concerns and why."""

    loc: Loc
    message: str


class PoolPlanningError(ValueError):
    """A pool's configuration a target's planner proves cannot work; ``subject`` is the pool key (relative to
    ``serving.<role>``) it concerns, so the issue points at the key to change."""

    def __init__(self, subject: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        self.subject = subject


@dataclass(frozen=True)
class MachineIdentity:
    """The machine one replica runs on, as a measurement record names it (``Measurement.accelerator``)."""

    machine_type: str
    gpu_type: str
    gpus_per_node: int


@dataclass(frozen=True)
class PoolPlan:
    """What every target's pool plan carries."""

    role: str
    target: str
    release: ReleaseInfo
    weight: int
    #: Warm minimum: GKE replicas, Cloud Run instances (0 = scale to zero).
    min_replicas: int
    capacity: capacity.PoolCapacity
    vllm_args: tuple[str, ...]
    #: What the server loads (``--model``): the root ``/v1/models`` reports for every served name.
    model_root: str
    #: Accelerator topology key (``accelerators.<key>``) of a pool on GPU machine types; None on Cloud Run.
    accelerator: str | None
    #: The machine a record of this pool must have measured.
    machine: MachineIdentity
    #: The config keys of the pool's warm minimum and scaling bound (``serving.<role>.<key>``), for rules to name.
    MIN_KEY: ClassVar[str] = "min_replicas"
    MAX_KEY: ClassVar[str] = "max_replicas"

    def to_dict(self) -> dict[str, Any]:
        """The pool's entry of ``capacity.json``: its capacity, and what its target derived beyond it."""
        return self.capacity.to_dict()


class GroupPlan(Protocol):
    """A co-hosted group's plan, whatever its target."""

    @property
    def key(self) -> str: ...

    @property
    def target(self) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class AcceleratorPlan:
    capacity: capacity.AcceleratorCapacity
    #: Node-pool autoscaling bounds: every pool's warm minimum at the floor; max replicas + one rollout surge
    #: replica per pool at the ceiling ("maxSurge: 1 cannot manufacture a GPU").
    min_nodes: int
    max_nodes: int


@dataclass(frozen=True)
class TargetPlan:
    """One serving target's share of the stack plan. A target subclasses it to carry what only it derives."""

    target: str
    pools: Mapping[str, PoolPlan] = field(default_factory=dict)
    #: Its co-hosted groups, by key.
    groups: Mapping[str, GroupPlan] = field(default_factory=dict)
    #: Node arithmetic of the accelerator topologies it runs node pools on.
    accelerators: Mapping[str, AcceleratorPlan] = field(default_factory=dict)
    issues: tuple[PlanIssue, ...] = ()


class Planner(Protocol):
    """A serving target as the planner sees it (``infra/targets/base.py`` ``Target``)."""

    @property
    def name(self) -> str: ...

    def plan(self, cfg: StackConfig, measurements: Mapping[str, Measurement]) -> TargetPlan: ...


PartT = TypeVar("PartT", bound=TargetPlan)
PoolPlanT = TypeVar("PoolPlanT", bound=PoolPlan)


@dataclass(frozen=True)
class StackPlan:
    pools: dict[str, PoolPlan]
    accelerators: dict[str, AcceleratorPlan]
    #: Longest allowed stream: TTFT objective + max output tokens x ITL objective.
    stream_bound_seconds: float
    #: What clients send as ``model`` to every pool (``serving.model_name``).
    public_model_name: str
    #: The measurement record each measured pool cites, by role.
    measurements: dict[str, Measurement] = field(default_factory=dict)
    issues: tuple[PlanIssue, ...] = field(default_factory=tuple)
    #: Co-hosted groups by key, each of its target.
    cohosting: dict[str, GroupPlan] = field(default_factory=dict)
    #: Every target's share of the plan, by target name.
    parts: dict[str, TargetPlan] = field(default_factory=dict)
    #: The contract's tenant budgets against the pools' measured capacity (None: the contract names no tenants).
    tenants: tn.TenantFit | None = None

    @property
    def backend_timeout_seconds(self) -> int:
        """Load-balancer backend timeout: the stream bound rounded up to whole seconds. The load balancer cuts a
        response at this age, so anything shorter cuts the longest legitimate stream."""
        return math.ceil(self.stream_bound_seconds - 1e-9)

    def part(self, target: str, kind: type[PartT]) -> PartT:
        """A target's share of the plan, as the target's own plan type (an empty one when it planned nothing)."""
        found = self.parts.get(target)
        if found is None:
            return kind(target=target)
        if not isinstance(found, kind):
            raise TypeError(f"plan part {target!r} is a {type(found).__name__}, not {kind.__name__}")
        return found

    def pools_of(self, kind: type[PoolPlanT]) -> dict[str, PoolPlanT]:
        """The pools planned as ``kind`` (a target's pool plan type), by role."""
        return {r: p for r, p in self.pools.items() if isinstance(p, kind)}

    def to_dict(self) -> dict[str, Any]:
        """The capacity plan as the stack exports it and ``capacity.json`` stores it (``cohosting`` only when the
        stack has co-hosted groups)."""
        out: dict[str, Any] = {
            "formulas": {
                "weights": "P * b_w",
                "kv_bytes_per_token": "2 * L * H_KV * d_h * b_KV",
                "kv_budget_per_device": "M_gpu * gpu_memory_utilization - W / TP - runtime_overhead",
                "decode_replicas": "ceil(lambda * E[O] / (theta_o * rho))",
                "prefill_replicas": "ceil(lambda * E[I] / (theta_i * rho))",
                "required_replicas": "max(decode, prefill) + 1",
                "cost_per_million_output_tokens": "C_h * 1e6 / (3600 * theta_o)",
                "cold_load_seconds": "W / load_throughput + verify + engine_init_seconds",
                "verify_seconds": "W / min(load_throughput, hash_rate x workers) for a mounted copy; a metadata check for gs://",
            },
            "pools": {role: p.to_dict() for role, p in sorted(self.pools.items())},
            "accelerators": {n: a.capacity.to_dict() for n, a in sorted(self.accelerators.items())},
        }
        if self.cohosting:
            out["cohosting"] = {k: g.to_dict() for k, g in sorted(self.cohosting.items())}
        if self.tenants is not None:
            out["tenants"] = self.tenants.to_dict()
        return out


# ---- config -> planner inputs (every target) -------------------------------------------------------------------


def release_info(rel: ReleaseIdentity) -> ReleaseInfo:
    return ReleaseInfo(
        release=rel.release,
        model_revision=rel.model_revision,
        tokenizer_revision=rel.tokenizer_revision,
        image=rel.image,
        digest=rel.digest,
        weight_manifest=rel.weight_manifest,
        weights_uri=rel.weights_uri,
        weights_bucket=rel.weights_bucket,
        weights_prefix=rel.weights_prefix,
        sampling_defaults_version=rel.sampling_defaults_version,
        quantization=rel.quantization,
        dtype=rel.dtype,
        kv_cache_dtype=rel.kv_cache_dtype,
        max_model_len=rel.max_model_len,
        tensor_parallel_size=rel.tensor_parallel_size,
        vllm_version=rel.vllm_version,
    )


def release_geometry(rel: ReleaseIdentity) -> capacity.Geometry:
    """The memory formulas' inputs of a release: its model shape and precision."""
    params, layers, kv_heads, head_dim = rel.model.resolved()
    emb = rel.model.embedding_parameters()
    return capacity.Geometry(
        params,
        layers,
        kv_heads,
        head_dim,
        rel.bytes_per_weight,
        rel.bytes_per_kv_element,
        embedding_parameters=emb or 0,
        bytes_per_embedding_weight=rel.bytes_per_embedding_weight if emb else 0.0,
    )


@dataclass(frozen=True)
class Demand:
    """What the contract asks of one pool: its share of the peak arrival rate, the mean lengths, the target
    utilisation ρ, and θ_o / θ_i at the operating point of its measurement record (None: unmeasured)."""

    arrival_rps: float
    mean_prompt_tokens: float
    mean_output_tokens: float
    target_utilization: float
    theta_o: float | None
    theta_i: float | None


def demand(cfg: StackConfig, pool: PoolCommon, record: Measurement | None) -> Demand:
    """The pool's demand: λ x weight / 100 of the contract's peak rate, θ from the record's operating point."""
    c = cfg.contract
    op = record.operating_point if record is not None else None
    return Demand(
        arrival_rps=c.peak_arrival_rate_rps * pool.weight / 100,
        mean_prompt_tokens=c.prompt_tokens.mean,
        mean_output_tokens=c.output_tokens.mean,
        target_utilization=c.target_utilization,
        theta_o=op.output_tokens_per_s if op else None,
        theta_i=op.input_tokens_per_s if op else None,
    )


def planning_loc(cfg: StackConfig, role: str, pool: PoolCommon, subject: str) -> Loc:
    """Where a capacity refusal points: the release's ``max_model_len`` when the context leaves no concurrency, else
    the pool (its machine or its release's tensor parallelism do not fit)."""
    if subject == "max_model_len":
        return ("releases", cfg.release_index(pool.release), "max_model_len")
    return ("serving", role)


def plan_capacity(
    cfg: StackConfig, role: str, pool: PoolCommon, inputs: capacity.PoolInputs, where: str, issues: list[PlanIssue]
) -> capacity.PoolCapacity | None:
    """The pool's capacity from the design's formulas, or None with the refusal recorded as an issue that names the
    key and ``where`` the pool runs ("on accelerator 'l4'")."""
    try:
        return capacity.plan_pool(inputs)
    except capacity.PlanningError as exc:
        issues.append(
            PlanIssue(planning_loc(cfg, role, pool, exc.subject), f"{exc} (release {pool.release!r} {where})")
        )
        return None


def layout_inputs(cfg: StackConfig, group: CoHostedGroupCommon) -> list[ch.ModelInputs]:
    """The co-hosting layout's inputs of a group's models (whatever the group's target)."""
    return [
        ch.ModelInputs(
            release=m.release,
            model_name=m.model_name,
            geometry=release_geometry(cfg.release(m.release)),
            tensor_parallel_size=cfg.release(m.release).tensor_parallel_size,
            max_model_len=cfg.release(m.release).max_model_len,
            partition=m.gpu_memory_partition,
            instances=m.instances,
            useful_concurrency=m.useful_concurrency,
            runtime_overhead_gib=m.runtime_overhead_gib,
        )
        for m in group.models
    ]


def tenant_fit(
    cfg: StackConfig, pools: Mapping[str, PoolPlan], measurements: Mapping[str, Measurement]
) -> tn.TenantFit | None:
    """The contract's tenant budgets against the planned pools, theta from each pool's measurement record (None: the
    contract names no tenants)."""
    c = cfg.contract
    if not c.tenants:
        return None
    throughput = []
    for role, pp in sorted(pools.items()):
        record = measurements.get(role)
        op = record.operating_point if record is not None else None
        throughput.append(
            tn.PoolThroughput(
                role=role,
                weight=pp.weight,
                max_replicas=pp.capacity.max_replicas,
                theta_o=op.output_tokens_per_s if op else None,
                theta_i=op.input_tokens_per_s if op else None,
            )
        )
    return tn.tenant_fit(
        [tn.TenantBudget(t.id, t.requests_per_minute, t.output_tokens_per_minute) for t in c.tenants],
        throughput,
        c.prompt_tokens.mean,
        c.output_tokens.mean,
        c.target_utilization,
    )


def accelerator_plan(name: str, pools: list[capacity.PoolCapacity], reserved_nodes: int | None) -> AcceleratorPlan:
    """Node arithmetic of one topology: the warm minimum of every pool on it at the floor, max replicas plus one
    rollout surge replica per pool at the ceiling."""
    acap = capacity.plan_accelerator(name, pools, reserved_nodes)
    min_nodes = capacity.nodes_for(sum(p.min_replicas for p in pools), acap.replicas_per_node)
    return AcceleratorPlan(acap, min_nodes=min_nodes, max_nodes=acap.nodes_for_max_plus_surge)


# ---- the plan ------------------------------------------------------------------------------------------------


def build_plan(
    cfg: StackConfig, planners: Iterable[Planner], measurements: Mapping[str, Measurement] | None = None
) -> StackPlan:
    """Plan every pool whose references resolve (dangling references are the rules' to report), each by its target's
    planner. ``measurements``: the records the pools cite, by role (read by the resolver; whether each measured this
    pool is a rule's)."""
    measurements = dict(measurements or {})
    parts = {p.name: p.plan(cfg, measurements) for p in planners}
    planned: dict[str, PoolPlan] = {r: pp for part in parts.values() for r, pp in part.pools.items()}
    pools = {role: planned[role] for role, _ in cfg.pools() if role in planned}
    measured = {r: m for r, m in sorted(measurements.items()) if r in pools}
    return StackPlan(
        pools=pools,
        accelerators={n: a for part in parts.values() for n, a in sorted(part.accelerators.items())},
        stream_bound_seconds=cfg.contract.stream_bound_seconds,
        public_model_name=cfg.serving.model_name,
        measurements=measured,
        issues=tuple(i for part in parts.values() for i in part.issues),
        cohosting={k: g for part in parts.values() for k, g in part.groups.items()},
        parts=parts,
        tenants=tenant_fit(cfg, pools, measured),
    )
