"""The resolved stack plan: every pool resolved once per run from the validated config.

Each :class:`PoolPlan` carries what the targets and the offline tools need about one pool: its release identity,
capacity, probe timing, autoscaling bounds, the exact ``vllm serve`` arguments, and its reservation cap; each
:class:`AcceleratorPlan` the node arithmetic of one accelerator topology. A pool that cannot be planned (a model
that does not fit, a startup window that cannot cover the cold load) becomes a :class:`PlanIssue` with the config
key it concerns; the other pools are still planned, so every problem is reported together.

The maths lives in the pure modules beside this one (``capacity``, ``probes``, ``autoscaling``, ``vllm_args``);
this module only reads the validated config and joins their results.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any

from components import naming
from components.observability.views import HpaPlan
from components.serving.verify_release import MAX_HASH_WORKERS
from components.serving.spec import ProbeTimings, ReleaseInfo

from ..config.measurement import Measurement
from ..config.release import ReleaseIdentity
from ..config.serving import GkePool
from ..config.stack import StackConfig
from . import capacity
from .autoscaling import plan_hpa, reservation_replica_cap
from .probes import ProbeError, plan_probes
from .vllm_args import VllmInputs, render_vllm_args

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class PlanIssue:
    """A configuration the planner proves cannot work: the config location it concerns and why."""

    loc: Loc
    message: str


@dataclass(frozen=True)
class PoolPlan:
    role: str
    target: str
    release: ReleaseInfo
    weight: int
    min_replicas: int
    capacity: capacity.PoolCapacity
    probes: ProbeTimings
    hpa: HpaPlan
    vllm_args: tuple[str, ...]
    #: What the server loads (``--model``): the root ``/v1/models`` reports for every served name.
    model_root: str
    #: Accelerator topology key (targets that run on GPU machine types).
    accelerator: str | None
    #: Replicas of this pool the accelerator's reservation holds (None: no reservation).
    reservation_cap: int | None


@dataclass(frozen=True)
class AcceleratorPlan:
    capacity: capacity.AcceleratorCapacity
    #: Node-pool autoscaling bounds: every pool's warm minimum at the floor; max replicas + one rollout surge
    #: replica per pool at the ceiling ("maxSurge: 1 cannot manufacture a GPU").
    min_nodes: int
    max_nodes: int


@dataclass(frozen=True)
class StackPlan:
    pools: dict[str, PoolPlan]
    accelerators: dict[str, AcceleratorPlan]
    #: Longest allowed stream: TTFT objective + max output tokens x ITL objective.
    stream_bound_seconds: float
    #: Release id -> zone of its Hyperdisk ML volume, for every release a pool loads via ``hyperdisk_ml``.
    hyperdisk_releases: dict[str, str]
    #: What clients send as ``model`` to every pool (``serving.model_name``).
    public_model_name: str
    #: The measurement record each measured pool cites, by role.
    measurements: dict[str, Measurement] = field(default_factory=dict)
    issues: tuple[PlanIssue, ...] = field(default_factory=tuple)

    @property
    def backend_timeout_seconds(self) -> int:
        """Load-balancer backend timeout: the stream bound rounded up to whole seconds. The load balancer cuts a
        response at this age, so anything shorter cuts the longest legitimate stream."""
        return math.ceil(self.stream_bound_seconds - 1e-9)

    def to_dict(self) -> dict[str, Any]:
        """The capacity plan as the stack exports it and ``capacity.json`` stores it."""
        return {
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
            "pools": {role: p.capacity.to_dict() for role, p in sorted(self.pools.items())},
            "accelerators": {n: a.capacity.to_dict() for n, a in sorted(self.accelerators.items())},
        }


# ---- config -> planner inputs --------------------------------------------------------------------------------

def release_info(rel: ReleaseIdentity) -> ReleaseInfo:
    return ReleaseInfo(
        release=rel.release, model_revision=rel.model_revision, tokenizer_revision=rel.tokenizer_revision,
        image=rel.image, digest=rel.digest, weight_manifest=rel.weight_manifest, weights_uri=rel.weights_uri,
        weights_bucket=rel.weights_bucket, weights_prefix=rel.weights_prefix,
        sampling_defaults_version=rel.sampling_defaults_version, quantization=rel.quantization, dtype=rel.dtype,
        kv_cache_dtype=rel.kv_cache_dtype, max_model_len=rel.max_model_len,
        tensor_parallel_size=rel.tensor_parallel_size, vllm_version=rel.vllm_version)


def release_geometry(rel: ReleaseIdentity) -> capacity.Geometry:
    """The memory formulas' inputs of a release: its model shape and precision."""
    params, layers, kv_heads, head_dim = rel.model.resolved()
    return capacity.Geometry(params, layers, kv_heads, head_dim, rel.bytes_per_weight, rel.bytes_per_kv_element)


def verify_workers(pool: GkePool) -> int:
    """Hashing threads of the release verification: one per requested CPU core (at least 1, at most the
    verifier's cap), so the init container never competes for more CPU than the pod requests."""
    return max(1, min(MAX_HASH_WORKERS, math.floor(pool.model_server.cpu)))


def verify_read_mib_s(pool: GkePool) -> float | None:
    """A mounted copy is hashed at the slower of the volume's stated throughput and the hashing threads; a gs://
    stream is checked against object metadata only (None)."""
    if pool.loading.path == "gcs_streaming":
        return None
    return min(pool.loading.throughput_mib_s, capacity.HASH_MIB_S_PER_WORKER * verify_workers(pool))


def pool_inputs(cfg: StackConfig, role: str, pool: GkePool, record: Measurement | None = None) -> capacity.PoolInputs:
    """``record``: the pool's measurement (θ_o, θ_i at its operating point); None = unmeasured."""
    rel = cfg.release(pool.release)
    op = record.operating_point if record is not None else None
    acc = cfg.accelerators[pool.accelerator]
    return capacity.PoolInputs(
        role=role, release=rel.release, accelerator=pool.accelerator, geometry=release_geometry(rel),
        tensor_parallel_size=rel.tensor_parallel_size, max_model_len=rel.max_model_len,
        gpu_memory_gib=acc.gpu_memory_gib, gpus_per_node=acc.gpus_per_node, node_hourly_usd=acc.node_hourly_usd,
        gpu_memory_utilization=pool.gpu_memory_utilization, runtime_overhead_gib=pool.runtime_overhead_gib,
        arrival_rps=cfg.contract.peak_arrival_rate_rps * pool.weight / 100,
        mean_prompt_tokens=cfg.contract.prompt_tokens.mean, mean_output_tokens=cfg.contract.output_tokens.mean,
        target_utilization=cfg.contract.target_utilization,
        load_throughput_mib_s=pool.loading.throughput_mib_s, engine_init_seconds=pool.loading.engine_init_seconds,
        verify_read_mib_s=verify_read_mib_s(pool),
        theta_o=op.output_tokens_per_s if op else None,
        theta_i=op.input_tokens_per_s if op else None,
        min_replicas=pool.min_replicas, max_replicas=pool.max_replicas,
    )


def gke_vllm_inputs(rel: ReleaseIdentity, pool: GkePool, cap: capacity.PoolCapacity,
                    shutdown_timeout_seconds: int, public_model_name: str, max_output_tokens: int) -> VllmInputs:
    """GKE: the Run:ai streamer reads ``gs://`` directly; Hyperdisk ML and GCS FUSE mount the release folder at
    ``/weights/<model>/<revision>``, so the model root vLLM reports in ``/v1/models`` names the revision either
    way."""
    streaming = pool.loading.path == "gcs_streaming"
    o = pool.model_server
    return VllmInputs(
        model=rel.weights_uri if streaming else naming.weights_mount_path(rel.weights_prefix),
        streamer_concurrency=pool.loading.streamer_concurrency if streaming else None,
        served_model_names=(rel.release, public_model_name), port=naming.VLLM_PORT,
        tensor_parallel_size=rel.tensor_parallel_size, max_model_len=rel.max_model_len,
        gpu_memory_utilization=pool.gpu_memory_utilization, max_num_seqs=cap.max_num_seqs,
        max_num_batched_tokens=cap.max_num_batched_tokens, dtype=rel.dtype, kv_cache_dtype=rel.kv_cache_dtype,
        quantization=rel.quantization, shutdown_timeout_seconds=shutdown_timeout_seconds,
        max_output_tokens=max_output_tokens,
        speculative=(tuple(sorted(o.speculative.model_dump(exclude_none=True).items())) if o.speculative else None),
    )


def _planning_loc(cfg: StackConfig, role: str, pool: GkePool, subject: str) -> Loc:
    """Where a planner refusal points: the release's ``max_model_len`` when the context leaves no concurrency,
    else the pool (its accelerator or its release's tensor parallelism do not fit)."""
    if subject == "max_model_len":
        return ("releases", cfg.release_index(pool.release), "max_model_len")
    return ("serving", role)


# ---- the plan ------------------------------------------------------------------------------------------------

def accelerator_plan(name: str, pools: list[capacity.PoolCapacity], reserved_nodes: int | None) -> AcceleratorPlan:
    """Node arithmetic of one topology: the warm minimum of every pool on it at the floor, max replicas plus one
    rollout surge replica per pool at the ceiling."""
    acap = capacity.plan_accelerator(name, pools, reserved_nodes)
    min_nodes = capacity.nodes_for(sum(p.min_replicas for p in pools), acap.replicas_per_node)
    return AcceleratorPlan(acap, min_nodes=min_nodes, max_nodes=acap.nodes_for_max_plus_surge)


def build_plan(cfg: StackConfig, measurements: Mapping[str, Measurement] | None = None) -> StackPlan:
    """Plan every pool whose references resolve (dangling references are the rules' to report). ``measurements``:
    the records the pools cite, by role (read by the resolver; whether each measured this pool is a rule's)."""
    measurements = dict(measurements or {})
    issues: list[PlanIssue] = []
    release_ids = {r.release for r in cfg.releases}
    contract = cfg.contract
    stream_bound = contract.stream_bound_seconds
    caps: dict[str, capacity.PoolCapacity] = {}
    probes: dict[str, ProbeTimings] = {}
    for role, pool in cfg.pools():
        if pool.release not in release_ids or pool.accelerator not in cfg.accelerators:
            continue
        try:
            cap = capacity.plan_pool(pool_inputs(cfg, role, pool, measurements.get(role)))
        except capacity.PlanningError as exc:
            issues.append(PlanIssue(_planning_loc(cfg, role, pool, exc.subject),
                                    f"{exc} (release {pool.release!r} on accelerator {pool.accelerator!r})"))
            continue
        o = pool.model_server
        try:
            probes[role] = plan_probes(
                cold_load_seconds=cap.cold_load_seconds, stream_bound_seconds=stream_bound,
                ttft_p95_ms=contract.ttft_p95_ms, startup_margin=o.startup_margin,
                startup_period_seconds=o.startup_period_seconds, max_startup_seconds=o.max_startup_seconds,
                drain_seconds=o.drain_seconds)
        except ProbeError as exc:
            issues.append(PlanIssue(("serving", role, "model_server", "max_startup_seconds"), str(exc)))
            continue
        caps[role] = cap

    accelerators: dict[str, AcceleratorPlan] = {}
    pools_on: dict[str, list[str]] = {}
    for role, pool in cfg.pools():
        if role in caps:
            pools_on.setdefault(pool.accelerator, []).append(role)
    for name, roles in sorted(pools_on.items()):
        acc = cfg.accelerators[name]
        accelerators[name] = accelerator_plan(name, [caps[r] for r in roles],
                                              acc.reservation.count if acc.reservation else None)

    auto = cfg.observability.autoscaling
    pools: dict[str, PoolPlan] = {}
    for role, pool in cfg.pools():
        if role not in caps:
            continue
        cap, rel = caps[role], cfg.release(pool.release)
        acc = cfg.accelerators[pool.accelerator]
        others = [r for r in pools_on[pool.accelerator] if r != role]
        cap_replicas = None if acc.reservation is None else reservation_replica_cap(
            reserved_nodes=acc.reservation.count, replicas_per_node=cap.replicas_per_node,
            other_pools_max=sum(caps[r].max_replicas for r in others), pools_on_accelerator=len(others) + 1)
        hpa = plan_hpa(
            role=role, release=pool.release, min_replicas=pool.min_replicas, pool_max_replicas=pool.max_replicas,
            cold_load_seconds=cap.cold_load_seconds, stream_bound_seconds=stream_bound,
            queue_target_per_pod=auto.queue_target_per_pod, kv_cache_target=auto.kv_cache_target,
            reservation_cap=cap_replicas)
        inputs = gke_vllm_inputs(rel, pool, cap, probes[role].shutdown_timeout_seconds, cfg.serving.model_name,
                                 contract.max_output_tokens)
        pools[role] = PoolPlan(
            role=role, target=pool.target, release=release_info(rel), weight=pool.weight,
            min_replicas=pool.min_replicas, capacity=cap, probes=probes[role], hpa=hpa,
            vllm_args=tuple(render_vllm_args(inputs)), model_root=inputs.model,
            accelerator=pool.accelerator, reservation_cap=cap_replicas)

    hyperdisk: dict[str, str] = {}
    for _, pool in cfg.pools():
        if pool.loading.path == "hyperdisk_ml" and pool.accelerator in cfg.accelerators:
            hyperdisk.setdefault(pool.release, cfg.accelerators[pool.accelerator].zone)
    return StackPlan(pools=pools, accelerators=accelerators, stream_bound_seconds=stream_bound,
                     hyperdisk_releases=dict(sorted(hyperdisk.items())), public_model_name=cfg.serving.model_name,
                     measurements={r: m for r, m in sorted(measurements.items()) if r in pools},
                     issues=tuple(issues))
