"""The resolved stack plan: every pool resolved once per run from the validated config.

Each pool gets the plan of its target: a :class:`GkePoolPlan` (probe timing, HPA bounds, reservation cap), a
:class:`CloudRunPoolPlan` (instance shape, probes, concurrency, timeout, cost) or a :class:`VertexPoolPlan`
(machine spec, reservation affinity, replica bounds, autoscaling signal, probes), each carrying what every target
shares (:class:`PoolPlan`: release identity, capacity, the exact ``vllm serve`` arguments from the one renderer);
each :class:`AcceleratorPlan` the node arithmetic of one GKE accelerator topology. A pool that cannot be planned (a model
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
from ..config.cloud_run import CloudRunPool
from ..config.cohosting import GkeCoHostedGroup
from ..config.serving import GkePool, WeightLoading
from ..config.vertex import VertexPool
from ..config.stack import StackConfig
from . import capacity
from . import cloud_run as cr
from . import cohosting as ch
from . import vertex as vx
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


@dataclass(frozen=True)
class GkePoolPlan(PoolPlan):
    """A ``gke`` pool: probe timing, HPA bounds and what the reservation holds for it."""

    probes: ProbeTimings
    hpa: HpaPlan
    #: Replicas of this pool the accelerator's reservation holds (None: no reservation).
    reservation_cap: int | None


@dataclass(frozen=True)
class CloudRunPoolPlan(PoolPlan):
    """A ``cloud_run`` pool: one revision of the stack's Cloud Run service."""

    cloud_run: cr.CloudRunPlan


@dataclass(frozen=True)
class VertexPoolPlan(PoolPlan):
    """A ``vertex`` pool: one deployed model of the stack's Vertex AI endpoint."""

    vertex: vx.VertexPlan


@dataclass(frozen=True)
class CoHostedModelPlan:
    """One model of a co-hosted group: its release, public name, placement and the arguments of its vLLM server."""

    release: ReleaseInfo
    model_name: str
    endpoint_id: str
    placement: ch.ModelPlacement
    vllm_args: tuple[str, ...]
    cold_load_seconds: float
    startup_failure_threshold: int
    startup_window_seconds: int
    deployment_timeout_seconds: int

    def to_dict(self) -> dict[str, Any]:
        return {"release": self.release.release, "model_name": self.model_name, "endpoint_id": self.endpoint_id,
                "cold_load_seconds": self.cold_load_seconds, "startup_window_seconds": self.startup_window_seconds,
                "deployment_timeout_seconds": self.deployment_timeout_seconds, "vllm_args": list(self.vllm_args)}


@dataclass(frozen=True)
class CoHostedGroupPlan:
    """A co-hosted group: the machine its models share, the pool's replica bounds and every model's plan."""

    key: str
    target: str
    accelerator: str
    machine: vx.VertexPlan
    layout: ch.GroupLayout
    models: tuple[CoHostedModelPlan, ...]

    def to_dict(self) -> dict[str, Any]:
        m = self.machine
        return {"target": self.target, "accelerator": self.accelerator, "machine_type": m.machine_type,
                "gpu_type": m.gpu_type, "accelerator_count": m.accelerator_count,
                "reservation": m.reservation_resource, "min_replicas": m.min_replicas,
                "max_replicas": m.max_replicas, "max_reason": m.max_reason, "layout": self.layout.to_dict(),
                "models": [x.to_dict() for x in self.models]}


@dataclass(frozen=True)
class GkeCoHostedModelPlan:
    """One model of a GKE co-hosted group: planned as a GKE pool of its own role (namespace, Deployment,
    InferencePool, picker, HPA) whose vLLM takes its partition of a time-shared GPU."""

    role: str
    model_name: str
    placement: ch.ModelPlacement
    pool: GkePoolPlan
    #: The GKE pool this model is planned and rendered as (:func:`cohosted_pool`), built once here.
    pool_config: GkePool

    def to_dict(self) -> dict[str, Any]:
        p = self.pool
        return {"role": self.role, "release": p.release.release, "model_name": self.model_name,
                "cold_load_seconds": p.capacity.cold_load_seconds,
                "startup_window_seconds": p.probes.startup_window_seconds,
                "hpa": {"min_replicas": p.hpa.min_replicas, "max_replicas": p.hpa.max_replicas},
                "vllm_args": list(p.vllm_args)}


@dataclass(frozen=True)
class GkeCoHostedGroupPlan:
    """A GKE co-hosted group: its node pool's bounds, the time-sharing slots per GPU and the worst-case memory
    asked of one GPU, and every model's pool plan."""

    key: str
    target: str
    accelerator: str
    layout: ch.GroupLayout
    models: tuple[GkeCoHostedModelPlan, ...]
    #: Node-pool bounds: the group's warm minimum; its ceiling plus one node the models' rollout surge pods share.
    min_nodes: int
    max_nodes: int
    clients_per_gpu: int
    #: Sum of the ``clients_per_gpu`` largest partitions: what one GPU holds if the device plugin puts them together.
    worst_case_partition_sum: float

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "accelerator": self.accelerator, "min_nodes": self.min_nodes,
                "max_nodes": self.max_nodes, "clients_per_gpu": self.clients_per_gpu,
                "worst_case_partition_sum": self.worst_case_partition_sum, "layout": self.layout.to_dict(),
                "models": [x.to_dict() for x in self.models]}


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
    #: Co-hosted groups by key (``cohosting``), each of its target.
    cohosting: dict[str, CoHostedGroupPlan | GkeCoHostedGroupPlan] = field(default_factory=dict)

    @property
    def backend_timeout_seconds(self) -> int:
        """Load-balancer backend timeout: the stream bound rounded up to whole seconds. The load balancer cuts a
        response at this age, so anything shorter cuts the longest legitimate stream."""
        return math.ceil(self.stream_bound_seconds - 1e-9)

    def to_dict(self) -> dict[str, Any]:
        """The capacity plan as the stack exports it and ``capacity.json`` stores it (``cohosting`` only when the
        stack has co-hosted groups)."""
        out = self._to_dict()
        if self.cohosting:
            out["cohosting"] = {k: g.to_dict() for k, g in sorted(self.cohosting.items())}
        return out

    def _to_dict(self) -> dict[str, Any]:
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
            "pools": {role: _pool_dict(p) for role, p in sorted(self.pools.items())},
            "accelerators": {n: a.capacity.to_dict() for n, a in sorted(self.accelerators.items())},
        }


    def gke_pools(self) -> dict[str, GkePoolPlan]:
        return {r: p for r, p in self.pools.items() if isinstance(p, GkePoolPlan)}

    def cloud_run_pools(self) -> dict[str, CloudRunPoolPlan]:
        return {r: p for r, p in self.pools.items() if isinstance(p, CloudRunPoolPlan)}

    def vertex_pools(self) -> dict[str, VertexPoolPlan]:
        return {r: p for r, p in self.pools.items() if isinstance(p, VertexPoolPlan)}

    def vertex_groups(self) -> dict[str, CoHostedGroupPlan]:
        return {k: g for k, g in self.cohosting.items() if isinstance(g, CoHostedGroupPlan)}

    def gke_groups(self) -> dict[str, GkeCoHostedGroupPlan]:
        return {k: g for k, g in self.cohosting.items() if isinstance(g, GkeCoHostedGroupPlan)}

    def gke_cohosted(self) -> dict[str, GkeCoHostedModelPlan]:
        """Every GKE co-hosted model by role, groups in key order."""
        return {m.role: m for _, g in sorted(self.gke_groups().items()) for m in g.models}


def _pool_dict(p: PoolPlan) -> dict[str, Any]:
    """A pool's capacity, and for a Cloud Run pool what its target derived (shape, probes, concurrency, cost)."""
    d = p.capacity.to_dict()
    if isinstance(p, CloudRunPoolPlan):
        d["cloud_run"] = p.cloud_run.to_dict()
    if isinstance(p, VertexPoolPlan):
        d["vertex"] = p.vertex.to_dict()
    return d


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
    """Plan every pool whose references resolve (dangling references are the rules' to report), each by its target.
    ``measurements``: the records the pools cite, by role (read by the resolver; whether each measured this pool is
    a rule's)."""
    measurements = dict(measurements or {})
    issues: list[PlanIssue] = []
    gke_pools, accelerators = _plan_gke(cfg, measurements, issues)
    run_pools = _plan_cloud_run(cfg, measurements, issues)
    vertex_pools = _plan_vertex(cfg, measurements, issues)
    cohosting: dict[str, CoHostedGroupPlan | GkeCoHostedGroupPlan] = {
        **_plan_cohosting(cfg, issues), **_plan_gke_cohosting(cfg, issues)}
    planned: dict[str, PoolPlan] = {**gke_pools, **run_pools, **vertex_pools}
    pools = {role: planned[role] for role, _ in cfg.pools() if role in planned}

    hyperdisk: dict[str, str] = {}
    for _, pool in cfg.pools():
        if isinstance(pool, GkePool) and pool.loading.path == "hyperdisk_ml" and pool.accelerator in cfg.accelerators:
            hyperdisk.setdefault(pool.release, cfg.accelerators[pool.accelerator].zone)
    return StackPlan(pools=pools, accelerators=accelerators, stream_bound_seconds=cfg.contract.stream_bound_seconds,
                     hyperdisk_releases=dict(sorted(hyperdisk.items())), public_model_name=cfg.serving.model_name,
                     measurements={r: m for r, m in sorted(measurements.items()) if r in pools},
                     issues=tuple(issues), cohosting=cohosting)


def _plan_gke(cfg: StackConfig, measurements: Mapping[str, Measurement],
              issues: list[PlanIssue]) -> tuple[dict[str, PoolPlan], dict[str, AcceleratorPlan]]:
    """The ``gke`` pools: capacity, probes, node arithmetic per accelerator, HPA bounds within the reservation."""
    release_ids = {r.release for r in cfg.releases}
    contract = cfg.contract
    stream_bound = contract.stream_bound_seconds
    gke = [(role, pool) for role, pool in cfg.pools() if isinstance(pool, GkePool)]
    caps: dict[str, capacity.PoolCapacity] = {}
    probes: dict[str, ProbeTimings] = {}
    for role, pool in gke:
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
    for role, pool in gke:
        if role in caps:
            pools_on.setdefault(pool.accelerator, []).append(role)
    for name, roles in sorted(pools_on.items()):
        acc = cfg.accelerators[name]
        accelerators[name] = accelerator_plan(name, [caps[r] for r in roles],
                                              acc.reservation.count if acc.reservation else None)

    auto = cfg.observability.autoscaling
    pools: dict[str, PoolPlan] = {}
    for role, pool in gke:
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
        pools[role] = GkePoolPlan(
            role=role, target=pool.target, release=release_info(rel), weight=pool.weight,
            min_replicas=pool.min_replicas, capacity=cap, vllm_args=tuple(render_vllm_args(inputs)),
            model_root=inputs.model, accelerator=pool.accelerator, probes=probes[role], hpa=hpa,
            reservation_cap=cap_replicas)
    return pools, accelerators


def _plan_cloud_run(cfg: StackConfig, measurements: Mapping[str, Measurement],
                    issues: list[PlanIssue]) -> dict[str, PoolPlan]:
    """The ``cloud_run`` pools: GPU-memory fit and concurrency from the same capacity formulas, the cold load
    through the Cloud Storage volume, probes, timeout, the memory rule of in-memory staging, cost. A pool whose
    release needs more GPUs than Cloud Run attaches is left to the rules (``cloud_run.release_fits_one_gpu``)."""
    release_ids = {r.release for r in cfg.releases}
    contract = cfg.contract
    pools: dict[str, PoolPlan] = {}
    for role, pool in cfg.pools():
        if not isinstance(pool, CloudRunPool) or pool.release not in release_ids:
            continue
        rel = cfg.release(pool.release)
        if rel.tensor_parallel_size != pool.gpu_count:
            continue
        record = measurements.get(role)
        op = record.operating_point if record is not None else None
        geometry = release_geometry(rel)
        try:
            cap = capacity.plan_pool(cr.pool_inputs(
                rel, role, pool, geometry, arrival_rps=contract.peak_arrival_rate_rps * pool.weight / 100,
                mean_prompt_tokens=contract.prompt_tokens.mean, mean_output_tokens=contract.output_tokens.mean,
                target_utilization=contract.target_utilization,
                theta_o=op.output_tokens_per_s if op else None, theta_i=op.input_tokens_per_s if op else None))
        except capacity.PlanningError as exc:
            loc: Loc = (("releases", cfg.release_index(pool.release), "max_model_len") if exc.subject == "max_model_len"
                        else ("serving", role))
            issues.append(PlanIssue(loc, f"{exc} (release {pool.release!r} on Cloud Run {pool.gpu})"))
            continue
        try:
            run = cr.plan_cloud_run(rel, pool, cap, capacity.weight_bytes(geometry), contract.stream_bound_seconds)
        except cr.CloudRunPlanningError as exc:
            issues.append(PlanIssue(("serving", role, *exc.subject), str(exc)))
            continue
        except ProbeError as exc:
            issues.append(PlanIssue(("serving", role, "loading"), str(exc)))
            continue
        inputs = cr.vllm_inputs(rel, pool, cap, contract.stream_bound_seconds, cfg.serving.model_name,
                                contract.max_output_tokens)
        pools[role] = CloudRunPoolPlan(
            role=role, target=pool.target, release=release_info(rel), weight=pool.weight,
            min_replicas=pool.min_instances, capacity=cap, vllm_args=tuple(render_vllm_args(inputs)),
            model_root=inputs.model, accelerator=None, cloud_run=run)
    return pools


def _plan_vertex(cfg: StackConfig, measurements: Mapping[str, Measurement],
                 issues: list[PlanIssue]) -> dict[str, PoolPlan]:
    """The ``vertex`` pools: capacity from the same formulas on one machine of the pool's accelerator topology,
    the streamed cold load, probes and deployment timeout, replica bounds within the reservation (shared by the
    Vertex pools on it), the autoscaling signal. A pool whose release does not use every GPU of the machine is left
    to the rules (``vertex.release_fills_the_machine``)."""
    release_ids = {r.release for r in cfg.releases}
    contract = cfg.contract
    vertex = [(role, pool) for role, pool in cfg.pools() if isinstance(pool, VertexPool)
              and pool.release in release_ids and pool.accelerator in cfg.accelerators
              and cfg.release(pool.release).tensor_parallel_size == cfg.accelerators[pool.accelerator].gpus_per_node]
    pools: dict[str, PoolPlan] = {}
    for role, pool in vertex:
        rel, acc = cfg.release(pool.release), cfg.accelerators[pool.accelerator]
        record = measurements.get(role)
        op = record.operating_point if record is not None else None
        geometry = release_geometry(rel)
        try:
            cap = capacity.plan_pool(vx.pool_inputs(
                rel, role, pool, acc, geometry, arrival_rps=contract.peak_arrival_rate_rps * pool.weight / 100,
                mean_prompt_tokens=contract.prompt_tokens.mean, mean_output_tokens=contract.output_tokens.mean,
                target_utilization=contract.target_utilization,
                theta_o=op.output_tokens_per_s if op else None, theta_i=op.input_tokens_per_s if op else None))
        except capacity.PlanningError as exc:
            loc: Loc = (("releases", cfg.release_index(pool.release), "max_model_len") if exc.subject == "max_model_len"
                        else ("serving", role))
            issues.append(PlanIssue(loc, f"{exc} (release {pool.release!r} on accelerator {pool.accelerator!r})"))
            continue
        others = [(o.min_replicas, o.max_replicas) for r, o in vertex if r != role and o.accelerator == pool.accelerator]
        others += _groups_on(cfg, pool.accelerator)
        cap_replicas = (None if acc.reservation is None
                        else vx.reservation_cap(acc.reservation.count, pool.min_replicas, others))
        try:
            plan = vx.plan_vertex(pool, acc, cfg.project, cap, capacity.weight_bytes(geometry),
                                  contract.stream_bound_seconds, cfg.observability.autoscaling.queue_target_per_pod,
                                  cap_replicas)
        except vx.VertexPlanningError as exc:
            issues.append(PlanIssue(("serving", role, *exc.subject), str(exc)))
            continue
        inputs = vx.vllm_inputs(rel, pool, cap, contract.stream_bound_seconds, cfg.serving.model_name,
                                contract.max_output_tokens)
        pools[role] = VertexPoolPlan(
            role=role, target=pool.target, release=release_info(rel), weight=pool.weight,
            min_replicas=pool.min_replicas, capacity=cap, vllm_args=tuple(render_vllm_args(inputs)),
            model_root=inputs.model, accelerator=pool.accelerator, vertex=plan)
    return pools


def _groups_on(cfg: StackConfig, accelerator: str, but: str | None = None) -> list[tuple[int, int]]:
    """(min, max) machines of the co-hosted groups on an accelerator's reservation."""
    return [(g.min_replicas, g.max_replicas) for k, g in sorted((cfg.cohosting or {}).items())
            if g.accelerator == accelerator and k != but]


def _plan_cohosting(cfg: StackConfig, issues: list[PlanIssue]) -> dict[str, CoHostedGroupPlan]:
    """Each co-hosted group whose references resolve: the layout and memory checks of ``cohosting``, then per model
    the streamed cold load and probes, and the machine's replica bounds within the reservation it shares with the
    Vertex pools and other groups on it."""
    release_ids = {r.release for r in cfg.releases}
    contract = cfg.contract
    mean_ctx = contract.prompt_tokens.mean + contract.output_tokens.mean
    out: dict[str, CoHostedGroupPlan] = {}
    for key, group in sorted((cfg.cohosting or {}).items()):
        if group.target != "vertex":
            continue
        if group.accelerator not in cfg.accelerators or any(m.release not in release_ids for m in group.models):
            continue  # the rules report dangling references
        acc = cfg.accelerators[group.accelerator]
        inputs = [ch.ModelInputs(
            release=m.release, model_name=m.model_name, geometry=release_geometry(cfg.release(m.release)),
            tensor_parallel_size=cfg.release(m.release).tensor_parallel_size,
            max_model_len=cfg.release(m.release).max_model_len, partition=m.gpu_memory_partition,
            instances=m.instances, useful_concurrency=m.useful_concurrency,
            runtime_overhead_gib=m.runtime_overhead_gib) for m in group.models]
        try:
            layout = ch.plan_layout(inputs, acc.gpus_per_node, acc.gpu_memory_gib, group.transient_reserve, mean_ctx)
        except ch.CoHostingError as exc:
            issues.append(PlanIssue(("cohosting", key, *exc.subject), str(exc)))
            continue
        others = [(p.min_replicas, p.max_replicas) for _, p in cfg.pools()
                  if isinstance(p, VertexPool) and p.accelerator == group.accelerator]
        others += _groups_on(cfg, group.accelerator, but=key)
        cap_replicas = (None if acc.reservation is None
                        else vx.reservation_cap(acc.reservation.count, group.min_replicas, others))
        models: list[CoHostedModelPlan] = []
        machine: vx.VertexPlan | None = None
        for i, (m, placed) in enumerate(zip(group.models, layout.models)):
            rel = cfg.release(m.release)
            # The group's machine as a Vertex pool of this model: the same cold-load, probe and bound arithmetic.
            as_pool = VertexPool(target="vertex", release=m.release, weight=0, accelerator=group.accelerator,
                                 min_replicas=group.min_replicas, max_replicas=group.max_replicas,
                                 loading=group.loading, shm_gib=group.shm_gib, startup_margin=group.startup_margin,
                                 gpu_memory_utilization=m.gpu_memory_partition,
                                 runtime_overhead_gib=m.runtime_overhead_gib)
            geometry = release_geometry(rel)
            w = capacity.weight_bytes(geometry)
            cold = capacity.cold_load_seconds(w, group.loading.throughput_mib_s, group.loading.engine_init_seconds,
                                              capacity.verify_seconds(w, None))
            cap = _cohosted_capacity(placed, cold)
            try:
                plan = vx.plan_vertex(as_pool, acc, cfg.project, cap, w, contract.stream_bound_seconds,
                                      cfg.observability.autoscaling.queue_target_per_pod, cap_replicas)
            except vx.VertexPlanningError as exc:
                issues.append(PlanIssue(("cohosting", key, "loading"), f"{m.model_name}: {exc}"))
                break
            machine = machine or plan
            args = render_vllm_args(vx.vllm_inputs(rel, as_pool, cap, contract.stream_bound_seconds, m.model_name,
                                                   contract.max_output_tokens))
            models.append(CoHostedModelPlan(
                release=release_info(rel), model_name=m.model_name, endpoint_id=m.endpoint_id, placement=placed,
                vllm_args=tuple(args), cold_load_seconds=cold, startup_failure_threshold=plan.startup_failure_threshold,
                startup_window_seconds=plan.startup_window_seconds,
                deployment_timeout_seconds=plan.deployment_timeout_seconds))
        else:
            assert machine is not None
            out[key] = CoHostedGroupPlan(key=key, target=group.target, accelerator=group.accelerator,
                                         machine=machine, layout=layout, models=tuple(models))
    return out


def _layout_inputs(cfg: StackConfig, group: GkeCoHostedGroup) -> list[ch.ModelInputs]:
    return [ch.ModelInputs(
        release=m.release, model_name=m.model_name, geometry=release_geometry(cfg.release(m.release)),
        tensor_parallel_size=cfg.release(m.release).tensor_parallel_size,
        max_model_len=cfg.release(m.release).max_model_len, partition=m.gpu_memory_partition,
        instances=m.instances, useful_concurrency=m.useful_concurrency,
        runtime_overhead_gib=m.runtime_overhead_gib) for m in group.models]


def cohosted_pool(group: GkeCoHostedGroup, index: int) -> GkePool:
    """A GKE co-hosted model as the GKE pool it is planned and rendered as: the group's machine bounds, loading and
    pod options, the model's partition as ``gpu_memory_utilization``; weight 0 because no weighted split sends it
    traffic (requests reach it by model name), so no arrival share is invented for it."""
    m = group.models[index]
    loading = WeightLoading(path="gcs_streaming", throughput_mib_s=group.loading.throughput_mib_s,
                            engine_init_seconds=group.loading.engine_init_seconds,
                            streamer_concurrency=group.loading.streamer_concurrency)
    return GkePool(target="gke", release=m.release, weight=0, accelerator=group.accelerator,
                   min_replicas=group.min_replicas, max_replicas=group.max_replicas, loading=loading,
                   model_server=group.model_server, gpu_memory_utilization=m.gpu_memory_partition,
                   runtime_overhead_gib=m.runtime_overhead_gib)


def _plan_gke_cohosting(cfg: StackConfig, issues: list[PlanIssue]) -> dict[str, GkeCoHostedGroupPlan]:
    """Each GKE co-hosted group whose references resolve: the memory checks of ``cohosting`` (per model, and the
    worst case of the time-shared slots on one GPU), then per model the GKE pool plan (capacity, probes, HPA within
    the reservation less the one surge node the group's rollouts share, the vLLM arguments)."""
    release_ids = {r.release for r in cfg.releases}
    contract = cfg.contract
    mean_ctx = contract.prompt_tokens.mean + contract.output_tokens.mean
    auto = cfg.observability.autoscaling
    out: dict[str, GkeCoHostedGroupPlan] = {}
    for key, group in sorted((cfg.cohosting or {}).items()):
        if not isinstance(group, GkeCoHostedGroup):
            continue
        acc = cfg.accelerators.get(group.accelerator)
        if acc is None or acc.gpu_sharing is None or any(m.release not in release_ids for m in group.models):
            continue  # the rules report dangling references and a node pool without time-sharing
        try:
            layout = ch.plan_layout(_layout_inputs(cfg, group), acc.gpus_per_node, acc.gpu_memory_gib,
                                    group.transient_reserve, mean_ctx, check_gpu_sums=False)
        except ch.CoHostingError as exc:
            issues.append(PlanIssue(("cohosting", key, *exc.subject), str(exc)))
            continue
        clients = acc.gpu_sharing.max_shared_clients_per_gpu
        worst = ch.worst_case_partition_sum([m.gpu_memory_partition for m in group.models], clients)
        if worst > round(1 - group.transient_reserve, 9):
            issues.append(PlanIssue(("cohosting", key, "models"), (
                f"{clients} time-shared clients per GPU ({group.accelerator}.gpu_sharing) may put the {clients} largest "
                f"partitions on one GPU: {worst:g} > 1 - transient_reserve {group.transient_reserve:g}; the device "
                "plugin, not the planner, picks each pod's GPU: lower the partitions or the clients per GPU")))
            continue
        cap_replicas = (None if acc.reservation is None else reservation_replica_cap(
            reserved_nodes=acc.reservation.count, replicas_per_node=1, other_pools_max=0, pools_on_accelerator=1))
        models: list[GkeCoHostedModelPlan] = []
        for i, (m, placed) in enumerate(zip(group.models, layout.models)):
            role = ch.gke_role(m.model_name)
            pool = cohosted_pool(group, i)
            rel = cfg.release(m.release)
            try:
                cap = capacity.plan_pool(pool_inputs(cfg, role, pool))
                probes = plan_probes(
                    cold_load_seconds=cap.cold_load_seconds, stream_bound_seconds=contract.stream_bound_seconds,
                    ttft_p95_ms=contract.ttft_p95_ms, startup_margin=pool.model_server.startup_margin,
                    startup_period_seconds=pool.model_server.startup_period_seconds,
                    max_startup_seconds=pool.model_server.max_startup_seconds,
                    drain_seconds=pool.model_server.drain_seconds)
            except (capacity.PlanningError, ProbeError) as exc:
                issues.append(PlanIssue(("cohosting", key, "models", i), f"{m.model_name}: {exc}"))
                break
            hpa = plan_hpa(
                role=role, release=m.release, min_replicas=group.min_replicas, pool_max_replicas=group.max_replicas,
                cold_load_seconds=cap.cold_load_seconds, stream_bound_seconds=contract.stream_bound_seconds,
                queue_target_per_pod=auto.queue_target_per_pod, kv_cache_target=auto.kv_cache_target,
                reservation_cap=cap_replicas)
            inputs = gke_vllm_inputs(rel, pool, cap, probes.shutdown_timeout_seconds, m.model_name,
                                     contract.max_output_tokens)
            models.append(GkeCoHostedModelPlan(role=role, model_name=m.model_name, placement=placed, pool_config=pool,
                                               pool=GkePoolPlan(
                role=role, target="gke", release=release_info(rel), weight=0, min_replicas=group.min_replicas,
                capacity=cap, vllm_args=tuple(render_vllm_args(inputs)), model_root=inputs.model,
                accelerator=group.accelerator, probes=probes, hpa=hpa, reservation_cap=cap_replicas)))
        else:
            out[key] = GkeCoHostedGroupPlan(
                key=key, target="gke", accelerator=group.accelerator, layout=layout, models=tuple(models),
                min_nodes=group.min_replicas, max_nodes=group.max_replicas + ROLLOUT_SURGE_NODES,
                clients_per_gpu=clients, worst_case_partition_sum=worst)
    return out


#: One spare node holds the rollout surge pod of every model of a GKE group (one pod of each model fits a node).
ROLLOUT_SURGE_NODES = 1


def _cohosted_capacity(p: ch.ModelPlacement, cold_load_seconds: float) -> capacity.PoolCapacity:
    """The capacity figures the Vertex planner and the vLLM renderer read, from the co-hosting layout."""
    return capacity.PoolCapacity(
        role=p.model_name, release=p.release, accelerator="", tensor_parallel_size=p.tensor_parallel_size,
        gpus_per_replica=p.tensor_parallel_size, replicas_per_node=p.instances, weights_gib=p.weights_gib,
        weight_shard_gib_per_device=p.weight_shard_gib_per_gpu, kv_bytes_per_token=0.0,
        kv_bytes_per_token_per_device=p.kv_bytes_per_token_per_gpu, kv_budget_gib_per_device=p.kv_budget_gib_per_gpu,
        kv_tokens_per_replica=p.kv_tokens_per_instance, max_model_len=p.max_model_len,
        mean_context_tokens=p.mean_context_tokens, max_seqs_at_max_model_len=p.max_seqs_at_max_model_len,
        max_seqs_at_mean_context=p.max_seqs_at_mean_context, max_num_seqs=p.max_num_seqs,
        max_num_batched_tokens=max(capacity.default_max_num_batched_tokens(p.preallocated_gib_per_gpu / p.partition),
                                   p.max_num_seqs),
        verify_seconds=capacity.METADATA_VERIFY_SECONDS, cold_load_seconds=cold_load_seconds, replica_hourly_usd=0.0,
        throughput="unmeasured", decode_replicas=None, prefill_replicas=None, required_replicas=None,
        cost_per_million_output_tokens_usd=None, cost_per_million_input_tokens_usd=None, min_replicas=1,
        max_replicas=1)
