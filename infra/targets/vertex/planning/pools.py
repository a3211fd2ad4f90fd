"""Planning of one Vertex AI pool (pure): the capacity planner's inputs for a Vertex replica (one machine of an
accelerator topology), the cold load of a streamed release, replica bounds within the reservation, the autoscaling
signal, probes, shared memory and the deployment timeout.

Cold load, in the order the container runs it (``components/vertex/container.py``): the verifier's metadata check
of the release folder against its manifest (``capacity.METADATA_VERIFY_SECONDS``), vLLM streaming the weights from
``gs://`` (W / stated throughput), engine init.

Reservation: a Vertex replica is one whole machine, so ``reservation.count`` machines hold every Vertex pool's
``max_replicas`` plus, per ``replacement: create_first`` pool, its ``min_replicas`` once more: a deployed model whose
immutable fields change (new release, new arguments) is then replaced create-before-delete, the new one starting its
``min_replicas`` beside the old before the old is undeployed (``components/vertex/provider.py``). A
``replacement: delete_first`` pool needs no such room: its old deployment is undeployed first.

Cost: a Vertex replica is billed at Vertex AI's prediction prices (``vertex.pricing``: the machine type's node hour
plus each accelerator's hour), not at the Compute Engine price of the accelerator topology (``node_hourly_usd``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from components import naming
from components.vertex.requests import (
    AUTOSCALING_METRICS,
    MAX_DEPLOYMENT_TIMEOUT_S,
    PROBE_PERIOD_S,
    READINESS_FAILURE_THRESHOLD,
    VLLM_CHAT_ROUTE,
    VLLM_HEALTH_ROUTE,
)
from infra.config.accelerator import AcceleratorTopology
from infra.config.measurement import Measurement
from infra.config.release import ReleaseIdentity
from infra.config.stack import StackConfig
from infra.planning import capacity
from infra.planning.plan import (
    Demand,
    MachineIdentity,
    PlanIssue,
    PoolPlan,
    PoolPlanningError,
    demand,
    plan_capacity,
    release_geometry,
    release_info,
)
from infra.planning.vllm_args import VllmInputs, release_vllm_inputs, render_vllm_args

from ..config import TARGET, VertexPool, vertex_section

#: Vertex's own default target for ``accelerator_duty_cycle`` ("The default value is 60", aiplatform.v1
#: AutoscalingMetricSpec.target).
DEFAULT_DUTY_CYCLE_TARGET = 60
#: Allowance inside ``deploymentTimeout`` for what happens before the startup probe's first answer could come:
#: pulling the ~10 GB vLLM image onto a fresh machine and starting the container. Stated, not measured here;
#: re-measure from the deployment's log timestamps (image pulled -> first probe).
IMAGE_PULL_ALLOWANCE_S = 600
#: A Vertex pool's capacity-plan accelerator key: ``vertex:<accelerator key>`` (the machines are Vertex's, not a
#: GKE node pool's, even where a topology is shared with a GKE pool).
ACCELERATOR_PREFIX = "vertex:"


@dataclass(frozen=True)
class VertexPlan:
    """What the planner derived for one Vertex pool (one deployed model), beside its capacity."""

    machine_type: str
    #: GKE / Compute Engine accelerator name (``nvidia-h100-80gb``); the request builder maps it to the Vertex enum.
    gpu_type: str
    accelerator_count: int
    zone: str
    spot: bool
    #: The reservation the replicas consume: ``projects/<owner>/zones/<zone>/reservations/<name>`` (None: none).
    reservation_project: str | None
    reservation_name: str | None
    min_replicas: int
    #: min(pool max_replicas, what the reservation holds for this pool).
    max_replicas: int
    max_reason: str
    #: Replicas of this pool the reservation holds (None: no reservation).
    reservation_cap: int | None
    #: Key of components.vertex.requests.AUTOSCALING_METRICS, its metric name, and the per-replica target.
    autoscaling_signal: str
    autoscaling_metric: str
    autoscaling_target: int
    shared_memory_mb: int
    port: int
    predict_route: str
    health_route: str
    #: Startup probe on the health route: period x failureThreshold >= cold load x (1 + margin).
    startup_required_seconds: float
    startup_period_seconds: int
    startup_failure_threshold: int
    startup_window_seconds: int
    health_failure_threshold: int
    #: ``deploymentTimeout``: the startup window + the image-pull allowance, within Vertex's 2 h.
    deployment_timeout_seconds: int
    #: Endpoint ``inferenceTimeout`` and vLLM ``--shutdown-timeout``: the stream bound rounded up to whole seconds.
    inference_timeout_seconds: int
    verify_seconds: float
    weights_read_seconds: float
    engine_init_seconds: float
    cold_load_seconds: float
    #: ``create_first`` / ``delete_first`` (VertexPool.replacement).
    replacement: str = "create_first"
    #: Vertex AI prediction price of one replica (machine node hour + its accelerators' hours), USD; None: no price
    #: (co-hosted groups' machines are costed by their group).
    replica_hour_usd: float | None = None

    @property
    def reservation_resource(self) -> str | None:
        if self.reservation_name is None:
            return None
        return f"projects/{self.reservation_project}/zones/{self.zone}/reservations/{self.reservation_name}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["reservation"] = self.reservation_resource
        return d


def accelerator_key(pool: VertexPool) -> str:
    return f"{ACCELERATOR_PREFIX}{pool.accelerator}"


def replica_hour_usd(cfg: StackConfig, acc: AcceleratorTopology) -> float | None:
    """Vertex AI's price of one replica on ``acc`` (``vertex.pricing``); None when the section or a price is missing
    (the rules report it: ``vertex_pricing_covers_the_machines``)."""
    v = vertex_section(cfg)
    return None if v is None else v.pricing.replica_hour_usd(acc.machine_type, acc.gpu_type, acc.gpus_per_node)


def pool_inputs(
    rel: ReleaseIdentity,
    role: str,
    pool: VertexPool,
    acc: AcceleratorTopology,
    geometry: capacity.Geometry,
    d: Demand,
    hour_usd: float,
) -> capacity.PoolInputs:
    """The capacity planner's inputs for a Vertex replica: one machine of the topology (its GPUs) at Vertex AI's
    price of it (``hour_usd``: one replica uses the whole machine, so it is the node price the planner divides by
    tensor_parallel_size / gpus_per_node = 1); the release is streamed from gs://, so verification is the metadata
    check (``verify_read_mib_s`` None)."""
    return capacity.PoolInputs(
        role=role,
        release=rel.release,
        accelerator=accelerator_key(pool),
        geometry=geometry,
        tensor_parallel_size=rel.tensor_parallel_size,
        max_model_len=rel.max_model_len,
        gpu_memory_gib=acc.gpu_memory_gib,
        gpus_per_node=acc.gpus_per_node,
        node_hourly_usd=hour_usd,
        gpu_memory_utilization=pool.gpu_memory_utilization,
        runtime_overhead_gib=pool.runtime_overhead_gib,
        arrival_rps=d.arrival_rps,
        mean_prompt_tokens=d.mean_prompt_tokens,
        mean_output_tokens=d.mean_output_tokens,
        target_utilization=d.target_utilization,
        load_throughput_mib_s=pool.loading.throughput_mib_s,
        engine_init_seconds=pool.loading.engine_init_seconds,
        verify_read_mib_s=None,
        theta_o=d.theta_o,
        theta_i=d.theta_i,
        min_replicas=pool.min_replicas,
        max_replicas=pool.max_replicas,
    )


def replacement_room(pool: VertexPool) -> int:
    """Machines a replacement of ``pool`` needs beside its running replicas: its ``min_replicas`` when the new
    deployment starts before the old one is undeployed (``create_first``), none with ``delete_first``."""
    return pool.min_replicas if pool.replacement == "create_first" else 0


def reservation_cap(reserved_machines: int, own_min: int, others: list[tuple[int, int]]) -> int:
    """Replicas of one pool the reservation holds: reserved machines minus the other Vertex pools' (max + replacement
    room) on it, minus this pool's own replacement room. ``others``: (replacement room, max) per pool."""
    return reserved_machines - sum(mx + mn for mn, mx in others) - own_min


def replica_bounds(pool: VertexPool, cap: int | None) -> tuple[int, str]:
    if cap is None:
        return pool.max_replicas, "pool max_replicas (no reservation: on-demand/Spot capacity is not held)"
    if cap < pool.max_replicas:
        return max(pool.min_replicas, cap), f"reservation holds {cap} replica(s) for this pool"
    return pool.max_replicas, f"pool max_replicas (reservation holds {cap})"


def autoscaling(pool: VertexPool, queue_target_per_pod: int) -> tuple[str, str, int]:
    """(signal, Vertex metric name, target). The queue target defaults to the GKE HPA's per-pod target."""
    a = pool.autoscaling
    if a.target is not None:
        target = a.target
    else:
        target = queue_target_per_pod if a.signal == "vllm_queue" else DEFAULT_DUTY_CYCLE_TARGET
    return a.signal, AUTOSCALING_METRICS[a.signal], target


def inference_timeout_seconds(stream_bound_seconds: float) -> int:
    return math.ceil(stream_bound_seconds - 1e-9)


def vllm_inputs(
    rel: ReleaseIdentity,
    pool: VertexPool,
    cap: capacity.PoolCapacity,
    stream_bound_seconds: float,
    public_model_name: str,
    max_output_tokens: int,
) -> VllmInputs:
    """The same renderer's inputs as GKE's gs:// streaming: the Run:ai streamer reads the release folder, served
    names = release id + public name, the output cap, the planner's concurrency, vLLM's port 8000."""
    return release_vllm_inputs(
        rel,
        pool,
        cap,
        model=rel.weights_uri,
        streamer_concurrency=pool.loading.streamer_concurrency,
        port=naming.VLLM_PORT,
        public_model_name=public_model_name,
        shutdown_timeout_seconds=inference_timeout_seconds(stream_bound_seconds),
        max_output_tokens=max_output_tokens,
    )


def plan_vertex(
    pool: VertexPool,
    acc: AcceleratorTopology,
    project: str,
    cap: capacity.PoolCapacity,
    weights_bytes: float,
    stream_bound_seconds: float,
    queue_target_per_pod: int,
    cap_replicas: int | None,
    hour_usd: float | None = None,
) -> VertexPlan:
    """Everything beside capacity; raises PoolPlanningError naming the pool key a refusal concerns."""
    required = cap.cold_load_seconds * (1 + pool.startup_margin)
    threshold = max(1, math.ceil(required / PROBE_PERIOD_S))
    window = threshold * PROBE_PERIOD_S
    deployment_timeout = window + IMAGE_PULL_ALLOWANCE_S
    if deployment_timeout > MAX_DEPLOYMENT_TIMEOUT_S:
        raise PoolPlanningError(
            ("loading",),
            (
                f"the deployment cannot wait for the cold load: {cap.cold_load_seconds:.0f} s x (1 + margin "
                f"{pool.startup_margin:g}) = {required:.0f} s needs a {window} s startup window ({threshold} x "
                f"{PROBE_PERIOD_S} s), + {IMAGE_PULL_ALLOWANCE_S} s image pull = {deployment_timeout} s, above Vertex's "
                f"deploymentTimeout limit of {MAX_DEPLOYMENT_TIMEOUT_S} s; load faster (loading.throughput_mib_s) or "
                "lower startup_margin knowingly"
            ),
        )
    signal, metric, target = autoscaling(pool, queue_target_per_pod)
    max_r, reason = replica_bounds(pool, cap_replicas)
    r = acc.reservation
    return VertexPlan(
        machine_type=acc.machine_type,
        gpu_type=acc.gpu_type,
        accelerator_count=acc.gpus_per_node,
        zone=acc.zone,
        spot=acc.spot,
        reservation_project=(r.owner_project or project) if r else None,
        reservation_name=r.name if r else None,
        min_replicas=pool.min_replicas,
        max_replicas=max_r,
        max_reason=reason,
        reservation_cap=cap_replicas,
        autoscaling_signal=signal,
        autoscaling_metric=metric,
        autoscaling_target=target,
        shared_memory_mb=pool.shm_gib * 1024,
        port=naming.VLLM_PORT,
        predict_route=VLLM_CHAT_ROUTE,
        health_route=VLLM_HEALTH_ROUTE,
        startup_required_seconds=required,
        startup_period_seconds=PROBE_PERIOD_S,
        startup_failure_threshold=threshold,
        startup_window_seconds=window,
        health_failure_threshold=READINESS_FAILURE_THRESHOLD,
        deployment_timeout_seconds=deployment_timeout,
        inference_timeout_seconds=inference_timeout_seconds(stream_bound_seconds),
        verify_seconds=cap.verify_seconds,
        weights_read_seconds=weights_bytes / (pool.loading.throughput_mib_s * capacity.MIB),
        engine_init_seconds=float(pool.loading.engine_init_seconds),
        cold_load_seconds=cap.cold_load_seconds,
        replacement=pool.replacement,
        replica_hour_usd=hour_usd,
    )


@dataclass(frozen=True)
class VertexPoolPlan(PoolPlan):
    """A ``vertex`` pool: one deployed model of the stack's Vertex AI endpoint."""

    vertex: VertexPlan

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "vertex": self.vertex.to_dict()}


def vertex_pools(cfg: StackConfig) -> list[tuple[str, VertexPool]]:
    """The stack's pools of this target."""
    return [(role, pool) for role, pool in cfg.pools() if isinstance(pool, VertexPool)]


def groups_on(cfg: StackConfig, accelerator: str, but: str | None = None) -> list[tuple[int, int]]:
    """(min, max) machines of the Vertex co-hosted groups on an accelerator's reservation."""
    return [
        (g.min_replicas, g.max_replicas)
        for k, g in cfg.groups()
        if g.target == TARGET and g.accelerator == accelerator and k != but
    ]


def plan_pools(
    cfg: StackConfig, measurements: Mapping[str, Measurement], issues: list[PlanIssue]
) -> dict[str, VertexPoolPlan]:
    """The ``vertex`` pools: capacity from the same formulas on one machine of the pool's accelerator topology,
    the streamed cold load, probes and deployment timeout, replica bounds within the reservation (shared by the
    Vertex pools on it), the autoscaling signal. A pool whose release does not use every GPU of the machine is left
    to the rules (``rules.endpoint.release_fills_the_machine``)."""
    release_ids = {r.release for r in cfg.releases}
    contract = cfg.contract
    vertex = [
        (role, pool)
        for role, pool in vertex_pools(cfg)
        if pool.release in release_ids
        and pool.accelerator in cfg.accelerators
        and cfg.release(pool.release).tensor_parallel_size == cfg.accelerators[pool.accelerator].gpus_per_node
    ]
    pools: dict[str, VertexPoolPlan] = {}
    for role, pool in vertex:
        rel, acc = cfg.release(pool.release), cfg.accelerators[pool.accelerator]
        hour_usd = replica_hour_usd(cfg, acc)
        if hour_usd is None:
            continue  # no Vertex price for its machine: the rules report it
        geometry = release_geometry(rel)
        cap = plan_capacity(
            cfg,
            role,
            pool,
            pool_inputs(rel, role, pool, acc, geometry, demand(cfg, pool, measurements.get(role)), hour_usd),
            f"on accelerator {pool.accelerator!r}",
            issues,
        )
        if cap is None:
            continue
        others = [
            (replacement_room(o), o.max_replicas) for r, o in vertex if r != role and o.accelerator == pool.accelerator
        ]
        others += groups_on(cfg, pool.accelerator)
        cap_replicas = (
            None if acc.reservation is None else reservation_cap(acc.reservation.count, replacement_room(pool), others)
        )
        try:
            plan = plan_vertex(
                pool,
                acc,
                cfg.project,
                cap,
                capacity.weight_bytes(geometry),
                contract.stream_bound_seconds,
                cfg.observability.autoscaling.queue_target_per_pod,
                cap_replicas,
                hour_usd,
            )
        except PoolPlanningError as exc:
            issues.append(PlanIssue(("serving", role, *exc.subject), str(exc)))
            continue
        inputs = vllm_inputs(
            rel, pool, cap, contract.stream_bound_seconds, cfg.serving.model_name, contract.max_output_tokens
        )
        pools[role] = VertexPoolPlan(
            role=role,
            target=pool.target,
            release=release_info(rel),
            weight=pool.weight,
            min_replicas=pool.min_replicas,
            capacity=cap,
            vllm_args=tuple(render_vllm_args(inputs)),
            model_root=inputs.model,
            accelerator=pool.accelerator,
            machine=MachineIdentity(acc.machine_type, acc.gpu_type, acc.gpus_per_node),
            vertex=plan,
        )
    return pools
