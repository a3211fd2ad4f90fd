"""The ``gke`` pools: capacity, probes, node arithmetic per accelerator topology, HPA bounds within the reservation
and the exact ``vllm serve`` arguments of each pool."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from components import naming
from components.observability.views import HpaPlan
from components.serving.spec import ProbeTimings
from components.serving.verify_release import MAX_HASH_WORKERS
from infra.config.measurement import Measurement
from infra.config.release import ReleaseIdentity
from infra.config.stack import StackConfig
from infra.planning import capacity
from infra.planning.plan import (
    AcceleratorPlan,
    Demand,
    MachineIdentity,
    PlanIssue,
    PoolPlan,
    accelerator_plan,
    demand,
    plan_capacity,
    release_geometry,
    release_info,
)
from infra.planning.probes import ProbeError, plan_probes
from infra.planning.vllm_args import VllmInputs, release_vllm_inputs, render_vllm_args

from ..config import GkePool
from .autoscaling import plan_hpa, reservation_replica_cap
from .flow_control import FlowControlError, request_ttl_ms


@dataclass(frozen=True)
class GkePoolPlan(PoolPlan):
    """A ``gke`` pool: probe timing, HPA bounds and what the reservation holds for it."""

    probes: ProbeTimings
    hpa: HpaPlan
    #: Replicas of this pool the accelerator's reservation holds (None: no reservation).
    reservation_cap: int | None


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


def pool_inputs(
    cfg: StackConfig, role: str, pool: GkePool, record: Measurement | None = None, d: Demand | None = None
) -> capacity.PoolInputs:
    """``record``: the pool's measurement (θ_o, θ_i at its operating point); None = unmeasured. ``d``: the demand
    (default: the pool's share of the contract)."""
    rel = cfg.release(pool.release)
    d = d or demand(cfg, pool, record)
    acc = cfg.accelerators[pool.accelerator]
    return capacity.PoolInputs(
        role=role,
        release=rel.release,
        accelerator=pool.accelerator,
        geometry=release_geometry(rel),
        tensor_parallel_size=rel.tensor_parallel_size,
        max_model_len=rel.max_model_len,
        gpu_memory_gib=acc.gpu_memory_gib,
        gpus_per_node=acc.gpus_per_node,
        node_hourly_usd=acc.node_hourly_usd,
        gpu_memory_utilization=pool.gpu_memory_utilization,
        runtime_overhead_gib=pool.runtime_overhead_gib,
        arrival_rps=d.arrival_rps,
        mean_prompt_tokens=d.mean_prompt_tokens,
        mean_output_tokens=d.mean_output_tokens,
        target_utilization=d.target_utilization,
        load_throughput_mib_s=pool.loading.throughput_mib_s,
        engine_init_seconds=pool.loading.engine_init_seconds,
        verify_read_mib_s=verify_read_mib_s(pool),
        theta_o=d.theta_o,
        theta_i=d.theta_i,
        min_replicas=pool.min_replicas,
        max_replicas=pool.max_replicas,
    )


def gke_vllm_inputs(
    rel: ReleaseIdentity,
    pool: GkePool,
    cap: capacity.PoolCapacity,
    shutdown_timeout_seconds: int,
    public_model_name: str,
    max_output_tokens: int,
) -> VllmInputs:
    """GKE: the Run:ai streamer reads ``gs://`` directly; Hyperdisk ML and GCS FUSE mount the release folder at
    ``/weights/<model>/<revision>``, so the model root vLLM reports in ``/v1/models`` names the revision either
    way."""
    streaming = pool.loading.path == "gcs_streaming"
    o = pool.model_server
    return release_vllm_inputs(
        rel,
        pool,
        cap,
        model=rel.weights_uri if streaming else naming.weights_mount_path(rel.weights_prefix),
        streamer_concurrency=pool.loading.streamer_concurrency if streaming else None,
        port=naming.VLLM_PORT,
        public_model_name=public_model_name,
        shutdown_timeout_seconds=shutdown_timeout_seconds,
        max_output_tokens=max_output_tokens,
        speculative=(tuple(sorted(o.speculative.model_dump(exclude_none=True).items())) if o.speculative else None),
    )


def machine_of(cfg: StackConfig, accelerator: str) -> MachineIdentity:
    acc = cfg.accelerators[accelerator]
    return MachineIdentity(acc.machine_type, acc.gpu_type, acc.gpus_per_node)


def gke_pools(cfg: StackConfig) -> list[tuple[str, GkePool]]:
    """The stack's pools of this target (a stack may also have pools of another target)."""
    return [(role, pool) for role, pool in cfg.pools() if isinstance(pool, GkePool)]


def plan_pools(
    cfg: StackConfig, measurements: Mapping[str, Measurement], issues: list[PlanIssue]
) -> tuple[dict[str, GkePoolPlan], dict[str, AcceleratorPlan]]:
    """The ``gke`` pools: capacity, probes, node arithmetic per accelerator, HPA bounds within the reservation."""
    release_ids = {r.release for r in cfg.releases}
    contract = cfg.contract
    stream_bound = contract.stream_bound_seconds
    gke = gke_pools(cfg)
    caps: dict[str, capacity.PoolCapacity] = {}
    probes: dict[str, ProbeTimings] = {}
    for role, pool in gke:
        if pool.release not in release_ids or pool.accelerator not in cfg.accelerators:
            continue
        cap = plan_capacity(
            cfg,
            role,
            pool,
            pool_inputs(cfg, role, pool, measurements.get(role)),
            f"on accelerator {pool.accelerator!r}",
            issues,
        )
        if cap is None:
            continue
        o = pool.model_server
        try:
            probes[role] = plan_probes(
                cold_load_seconds=cap.cold_load_seconds,
                stream_bound_seconds=stream_bound,
                ttft_p95_ms=contract.ttft_p95_ms,
                startup_margin=o.startup_margin,
                startup_period_seconds=o.startup_period_seconds,
                max_startup_seconds=o.max_startup_seconds,
                drain_seconds=o.drain_seconds,
            )
        except ProbeError as exc:
            issues.append(PlanIssue(("serving", role, "model_server", "max_startup_seconds"), str(exc)))
            continue
        try:
            # The picker's flow control needs a queue-wait budget left after the p95 prompt's prefill.
            request_ttl_ms(contract, cap.max_num_batched_tokens)
        except FlowControlError as exc:
            issues.append(PlanIssue(("contract", "ttft_p95_ms"), f"{role} pool: {exc}"))
            continue
        caps[role] = cap

    accelerators: dict[str, AcceleratorPlan] = {}
    pools_on: dict[str, list[str]] = {}
    for role, pool in gke:
        if role in caps:
            pools_on.setdefault(pool.accelerator, []).append(role)
    for name, roles in sorted(pools_on.items()):
        acc = cfg.accelerators[name]
        accelerators[name] = accelerator_plan(
            name, [caps[r] for r in roles], acc.reservation.count if acc.reservation else None
        )

    auto = cfg.observability.autoscaling
    pools: dict[str, GkePoolPlan] = {}
    for role, pool in gke:
        if role not in caps:
            continue
        cap, rel = caps[role], cfg.release(pool.release)
        acc = cfg.accelerators[pool.accelerator]
        others = [r for r in pools_on[pool.accelerator] if r != role]
        cap_replicas = (
            None
            if acc.reservation is None
            else reservation_replica_cap(
                reserved_nodes=acc.reservation.count,
                replicas_per_node=cap.replicas_per_node,
                other_pools_max=sum(caps[r].max_replicas for r in others),
                pools_on_accelerator=len(others) + 1,
            )
        )
        hpa = plan_hpa(
            role=role,
            release=pool.release,
            min_replicas=pool.min_replicas,
            pool_max_replicas=pool.max_replicas,
            cold_load_seconds=cap.cold_load_seconds,
            stream_bound_seconds=stream_bound,
            queue_target_per_pod=auto.queue_target_per_pod,
            kv_cache_target=auto.kv_cache_target,
            reservation_cap=cap_replicas,
        )
        inputs = gke_vllm_inputs(
            rel, pool, cap, probes[role].shutdown_timeout_seconds, cfg.serving.model_name, contract.max_output_tokens
        )
        pools[role] = GkePoolPlan(
            role=role,
            target=pool.target,
            release=release_info(rel),
            weight=pool.weight,
            min_replicas=pool.min_replicas,
            capacity=cap,
            vllm_args=tuple(render_vllm_args(inputs)),
            model_root=inputs.model,
            accelerator=pool.accelerator,
            machine=machine_of(cfg, pool.accelerator),
            probes=probes[role],
            hpa=hpa,
            reservation_cap=cap_replicas,
        )
    return pools, accelerators


def hyperdisk_releases(cfg: StackConfig) -> dict[str, str]:
    """Release id -> zone of its Hyperdisk ML volume, for every release a pool loads via ``hyperdisk_ml``."""
    out: dict[str, str] = {}
    for _, pool in gke_pools(cfg):
        if pool.loading.path == "hyperdisk_ml" and pool.accelerator in cfg.accelerators:
            out.setdefault(pool.release, cfg.accelerators[pool.accelerator].zone)
    return dict(sorted(out.items()))
