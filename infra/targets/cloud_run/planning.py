"""Planning of one Cloud Run pool (pure): the capacity planner's inputs for a Cloud Run GPU instance, the cold load
through the Cloud Storage volume (optionally staged into memory), the memory rule for that staging, probe timing,
request concurrency and timeout, and the per-second cost.

Cold load, in the order the container runs it (``components/cloud_run/service.py`` renders the same chain):

* streamed from the mount: verify (every byte hashed through gcsfuse at min(volume, hash rate x threads)), then
  vLLM reads the mount (W / volume throughput), then engine init;
* staged: copy the mount into memory (W / volume throughput), verify the copy (W / hash rate x threads: memory is
  faster than hashing), vLLM reads the copy (W / ``capacity.STAGED_READ_MIB_S``), then engine init.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from components import naming
from components.cloud_run.spec import COLLECTOR_CPU, COLLECTOR_MEMORY_MIB, CloudRunProbes
from components.serving.verify_release import MAX_HASH_WORKERS
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
    TargetPlan,
    demand,
    plan_capacity,
    release_geometry,
    release_info,
)
from infra.planning.probes import ProbeError
from infra.planning.vllm_args import VllmInputs, release_vllm_inputs, render_vllm_args

from .config import (
    GPU_SHAPES,
    MAX_GPU_STARTUP_WINDOW_SECONDS,
    MAX_REQUEST_CONCURRENCY,
    MAX_REQUEST_TIMEOUT_SECONDS,
    TARGET,
    CloudRunPool,
)

#: Cloud Run sends SIGKILL 10 s after SIGTERM (Cloud Run container runtime contract, "Instance shutdown"). Cloud Run
#: stops routing to an instance before it shuts it down, so the drain only covers what is still in flight.
SIGTERM_GRACE_SECONDS = 10
#: What vLLM 0.32 needs after ``--shutdown-timeout`` to exit: its process manager waits that long, then stops the
#: engine; measured 2.0 s from the timeout to the whole process group's exit (CPU build, 2 cores, 96 streams in
#: flight). 3 s keeps the exit inside the grace; the drain gets 10 - 3 = 7 s (it finished 96 streams in 7 s).
EXIT_AFTER_DRAIN_SECONDS = 3
#: vLLM's ``--shutdown-timeout`` on Cloud Run: the stream bound, but never past the grace minus the exit time.
MAX_DRAIN_SECONDS = SIGTERM_GRACE_SECONDS - EXIT_AFTER_DRAIN_SECONDS
#: Memory gcsfuse takes inside the instance for the Cloud Storage volume, GiB, stated: the stat cache (32 MB), the
#: type cache (4 MiB) and 1 MiB per open file (Cloud Run "Configure Cloud Storage volume mounts", memory
#: requirements) plus buffered read's read-ahead blocks. Re-measure with the instance's memory utilization metric.
GCSFUSE_MEMORY_GIB = 1
#: ``launchStage`` a service needs to use a Preview feature (run.v2 Service.launchStage).
PREVIEW_LAUNCH_STAGE = "BETA"
GA_LAUNCH_STAGE = "GA"
#: A Cloud Run GPU instance is billed as one "accelerator" key in the capacity plan's tables.
ACCELERATOR_PREFIX = "cloud-run:"


# ---- Cloud Run (HTTP probes: Cloud Run runs no exec probes) -----------------------------------------------------

#: The seed's probe shape for vLLM on Cloud Run GPUs: probe early and often instead of one late probe that kills a
#: slow start. 10 s initial delay: the GPU instance and the container start in ~5 s (Cloud Run GPU page), so
#: nothing can answer earlier.
CLOUD_RUN_STARTUP_INITIAL_DELAY_S = 10
#: 5 s between startup probes: a loaded server is noticed within 5 s, and the failure count stays readable.
CLOUD_RUN_STARTUP_PERIOD_S = 5
#: 4 s per probe: vLLM answers /health from its API process in milliseconds; Cloud Run requires the timeout to be
#: below the period.
CLOUD_RUN_PROBE_TIMEOUT_S = 4
#: Liveness every 10 s, restart after 3 misses: a dead engine (/health 503 for good) is replaced within 30 s while
#: one slow answer of a saturated API server is tolerated. A hung engine that still answers /health is not
#: detected on Cloud Run (no exec probe); the request timeout bounds each request instead.
CLOUD_RUN_LIVENESS_PERIOD_S = 10
CLOUD_RUN_LIVENESS_FAILURE_THRESHOLD = 3


def plan_cloud_run_probes(*, cold_load_seconds: float, startup_margin: float, max_probe_seconds: int) -> CloudRunProbes:
    """The startup failure count whose window covers cold_load x (1 + margin):
    ``initial delay + period x failureThreshold >= required``, i.e. ``failureThreshold = ceil((required - 10) / 5)``.
    Raises ProbeError when ``period x failureThreshold`` would exceed ``max_probe_seconds`` (Cloud Run's 1,800 s for
    GPU services)."""
    required = cold_load_seconds * (1 + startup_margin)
    delay, period = CLOUD_RUN_STARTUP_INITIAL_DELAY_S, CLOUD_RUN_STARTUP_PERIOD_S
    threshold = max(1, math.ceil((required - delay) / period))
    if period * threshold > max_probe_seconds:
        raise ProbeError(
            f"the startup probe cannot cover the cold-load estimate: {cold_load_seconds:.0f} s x (1 + margin "
            f"{startup_margin:g}) = {required:.0f} s needs {delay} s + {threshold} x {period} s, but Cloud Run allows "
            f"failureThreshold x periodSeconds of at most {max_probe_seconds} s for GPU services ({threshold} x "
            f"{period} s = {period * threshold} s); load faster (loading.throughput_mib_s, loading.staging) or "
            f"lower startup_margin knowingly"
        )
    return CloudRunProbes(
        cold_load_seconds=cold_load_seconds,
        startup_margin=startup_margin,
        startup_required_seconds=required,
        startup_initial_delay_seconds=delay,
        startup_period_seconds=period,
        startup_timeout_seconds=CLOUD_RUN_PROBE_TIMEOUT_S,
        startup_failure_threshold=threshold,
        liveness_period_seconds=CLOUD_RUN_LIVENESS_PERIOD_S,
        liveness_timeout_seconds=CLOUD_RUN_PROBE_TIMEOUT_S,
        liveness_failure_threshold=CLOUD_RUN_LIVENESS_FAILURE_THRESHOLD,
    )


@dataclass(frozen=True)
class CloudRunPlan:
    """What the planner derived for one Cloud Run pool, beside its capacity."""

    gpu: str
    gpu_count: int
    cpu: int
    memory_gib: int
    zonal_redundancy_disabled: bool
    launch_stage: str
    min_instances: int
    max_instances: int
    #: ``maxInstanceRequestConcurrency``: the planner's --max-num-seqs, capped at Cloud Run's 1,000.
    concurrency: int
    #: ``template.timeout``: the stream bound rounded up to whole seconds.
    request_timeout_seconds: int
    #: vLLM ``--shutdown-timeout``: the stream bound, at most ``MAX_DRAIN_SECONDS`` (exit inside the SIGTERM grace).
    shutdown_timeout_seconds: int
    probes: CloudRunProbes
    verify_workers: int
    #: Cold-load phases (s): copy into memory (0 when not staged), verification, vLLM's read of the weights,
    #: engine init. They add up to ``cold_load_seconds``.
    copy_seconds: float
    verify_seconds: float
    weights_read_seconds: float
    engine_init_seconds: float
    cold_load_seconds: float
    #: In-memory staging: the volume size and the memory budget it was checked against (None: not staged).
    staging_size_gib: int | None
    process_memory_gib: int | None
    mount_options: tuple[str, ...]
    #: Price of one running instance: GPU + (vLLM + collector) vCPU and memory, per second and per hour.
    instance_second_usd: float
    instance_hourly_usd: float
    #: What one cold start costs before the instance serves its first request (instance-based billing starts with
    #: the instance): cold load x instance price per second.
    cold_start_usd: float

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["probes"] = self.probes.to_dict()
        d["mount_options"] = list(self.mount_options)
        return d


def accelerator_key(pool: CloudRunPool) -> str:
    return f"{ACCELERATOR_PREFIX}{pool.gpu}"


def verify_workers(pool: CloudRunPool) -> int:
    """Hashing threads: one per vCPU of the vLLM container, within the verifier's cap."""
    return max(1, min(MAX_HASH_WORKERS, pool.cpu))


def instance_second_usd(pool: CloudRunPool) -> float:
    """GPU-seconds + vCPU-seconds + GiB-seconds of one instance, the collector sidecar included."""
    p = pool.pricing
    return (
        pool.gpu_count * p.gpu_second_usd
        + (pool.cpu + COLLECTOR_CPU) * p.vcpu_second_usd
        + (pool.memory_gib + COLLECTOR_MEMORY_MIB / 1024) * p.gib_second_usd
    )


def _mount_verify_mib_s(pool: CloudRunPool) -> float:
    """The verifier reads at the slower of the mount and its hashing threads (the same rule as GKE's mounts)."""
    return min(pool.loading.throughput_mib_s, capacity.HASH_MIB_S_PER_WORKER * verify_workers(pool))


def pool_inputs(
    rel: ReleaseIdentity, role: str, pool: CloudRunPool, geometry: capacity.Geometry, d: Demand
) -> capacity.PoolInputs:
    """The capacity planner's inputs for a Cloud Run instance: one GPU of the table's memory, the instance's hourly
    price, and the loading path's phases."""
    staged = pool.loading.staging is not None
    return capacity.PoolInputs(
        role=role,
        release=rel.release,
        accelerator=accelerator_key(pool),
        geometry=geometry,
        tensor_parallel_size=rel.tensor_parallel_size,
        max_model_len=rel.max_model_len,
        gpu_memory_gib=GPU_SHAPES[pool.gpu].gpu_memory_gib,
        gpus_per_node=pool.gpu_count,
        node_hourly_usd=3600 * instance_second_usd(pool),
        gpu_memory_utilization=pool.gpu_memory_utilization,
        runtime_overhead_gib=pool.runtime_overhead_gib,
        arrival_rps=d.arrival_rps,
        mean_prompt_tokens=d.mean_prompt_tokens,
        mean_output_tokens=d.mean_output_tokens,
        target_utilization=d.target_utilization,
        load_throughput_mib_s=pool.loading.throughput_mib_s,
        engine_init_seconds=pool.loading.engine_init_seconds,
        # Staged: the copy is hashed in memory (hash-bound); else the mount is hashed through gcsfuse.
        verify_read_mib_s=(capacity.HASH_MIB_S_PER_WORKER * verify_workers(pool))
        if staged
        else _mount_verify_mib_s(pool),
        theta_o=d.theta_o,
        theta_i=d.theta_i,
        min_replicas=pool.min_instances,
        max_replicas=pool.max_instances,
        staged_read_mib_s=capacity.STAGED_READ_MIB_S if staged else None,
    )


def mount_options(rel: ReleaseIdentity, pool: CloudRunPool) -> tuple[str, ...]:
    """gcsfuse flags of the release volume: the release folder as the mount root (``only-dir``; the bucket's other
    folders are not visible), directories implied by object names (the stage tool writes objects only), buffered
    read when asked, then the pool's own extra options."""
    out = [f"only-dir={rel.weights_prefix}", "implicit-dirs"]
    if pool.loading.buffered_read:
        out.append("enable-buffered-read")
    return tuple(out + list(pool.loading.extra_mount_options))


def model_root(rel: ReleaseIdentity, pool: CloudRunPool) -> str:
    """What vLLM loads: the mounted release folder, or its staged in-memory copy."""
    if pool.loading.staging is not None:
        return naming.staged_weights_path(rel.weights_prefix)
    return naming.weights_mount_path(rel.weights_prefix)


def request_timeout_seconds(stream_bound_seconds: float) -> int:
    """The longest allowed stream rounded up to whole seconds (as the GKE backend timeout); Cloud Run cuts a
    response at ``template.timeout``."""
    return math.ceil(stream_bound_seconds - 1e-9)


def vllm_inputs(
    rel: ReleaseIdentity,
    pool: CloudRunPool,
    cap: capacity.PoolCapacity,
    stream_bound_seconds: float,
    public_model_name: str,
    max_output_tokens: int,
) -> VllmInputs:
    """The same renderer's inputs as GKE's: served names = release id + public name, the output cap, the planner's
    concurrency; the model is the mounted (or staged) release folder, the port Cloud Run's 8080."""
    return release_vllm_inputs(
        rel,
        pool,
        cap,
        model=model_root(rel, pool),
        port=naming.CLOUD_RUN_VLLM_PORT,
        public_model_name=public_model_name,
        shutdown_timeout_seconds=min(math.ceil(stream_bound_seconds), MAX_DRAIN_SECONDS),
        max_output_tokens=max_output_tokens,
    )


def plan_cloud_run(
    rel: ReleaseIdentity,
    pool: CloudRunPool,
    cap: capacity.PoolCapacity,
    weights_bytes: float,
    stream_bound_seconds: float,
) -> CloudRunPlan:
    """Everything beside capacity; raises PoolPlanningError naming the pool key a refusal concerns.
    ``weights_bytes``: W = P x b_w of the release (what ``cap`` was sized from)."""
    w = weights_bytes
    staging = pool.loading.staging
    if staging is not None:
        need = math.ceil(cap.weights_gib)
        if staging.size_gib < need:
            raise PoolPlanningError(
                ("loading", "staging", "size_gib"),
                (
                    f"{staging.size_gib} GiB cannot hold the release's weights ({cap.weights_gib:.1f} GiB = P x b_w, so at "
                    f"least {need} GiB; the staged folder is larger when the checkpoint keeps some tensors at 16 bits)"
                ),
            )
        budget = staging.size_gib + staging.process_memory_gib + GCSFUSE_MEMORY_GIB
        if budget > pool.memory_gib:
            raise PoolPlanningError(
                ("loading", "staging"),
                (
                    f"the staged copy does not fit the instance: {staging.size_gib} GiB copy + {staging.process_memory_gib} "
                    f"GiB server + {GCSFUSE_MEMORY_GIB} GiB gcsfuse = {budget} GiB > memory_gib {pool.memory_gib} GiB; "
                    "read the weights from the volume instead (remove loading.staging) or choose a shape with more memory "
                    f"({', '.join(f'{g}: up to {max(h for _, h in s.cpu_memory_gib.values())} GiB' for g, s in sorted(GPU_SHAPES.items()))})"
                ),
            )
    thr = pool.loading.throughput_mib_s * capacity.MIB
    copy = w / thr if staging is not None else 0.0
    read = w / (capacity.STAGED_READ_MIB_S * capacity.MIB) if staging is not None else w / thr
    probes = plan_cloud_run_probes(
        cold_load_seconds=cap.cold_load_seconds,
        startup_margin=pool.startup_margin,
        max_probe_seconds=MAX_GPU_STARTUP_WINDOW_SECONDS,
    )
    timeout = request_timeout_seconds(stream_bound_seconds)
    if timeout > MAX_REQUEST_TIMEOUT_SECONDS:
        raise PoolPlanningError(
            ("target",),
            (
                f"the longest allowed stream ({stream_bound_seconds:.0f} s = TTFT objective + max_output_tokens x ITL "
                f"objective) exceeds Cloud Run's request timeout of at most {MAX_REQUEST_TIMEOUT_SECONDS} s: Cloud Run "
                "would cut the longest legitimate streams; lower contract.max_output_tokens or serve this pool on gke"
            ),
        )
    second = instance_second_usd(pool)
    return CloudRunPlan(
        gpu=pool.gpu,
        gpu_count=pool.gpu_count,
        cpu=pool.cpu,
        memory_gib=pool.memory_gib,
        zonal_redundancy_disabled=pool.gpu_zonal_redundancy_disabled,
        launch_stage=PREVIEW_LAUNCH_STAGE if GPU_SHAPES[pool.gpu].preview else GA_LAUNCH_STAGE,
        min_instances=pool.min_instances,
        max_instances=pool.max_instances,
        concurrency=min(cap.max_num_seqs, MAX_REQUEST_CONCURRENCY),
        request_timeout_seconds=timeout,
        shutdown_timeout_seconds=min(math.ceil(stream_bound_seconds), MAX_DRAIN_SECONDS),
        probes=probes,
        verify_workers=verify_workers(pool),
        copy_seconds=copy,
        verify_seconds=cap.verify_seconds,
        weights_read_seconds=read,
        engine_init_seconds=float(pool.loading.engine_init_seconds),
        cold_load_seconds=cap.cold_load_seconds,
        staging_size_gib=staging.size_gib if staging else None,
        process_memory_gib=staging.process_memory_gib if staging else None,
        mount_options=mount_options(rel, pool),
        instance_second_usd=second,
        instance_hourly_usd=3600 * second,
        cold_start_usd=cap.cold_load_seconds * second,
    )


@dataclass(frozen=True)
class CloudRunPoolPlan(PoolPlan):
    """A ``cloud_run`` pool: one revision of the stack's Cloud Run service."""

    cloud_run: CloudRunPlan

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "cloud_run": self.cloud_run.to_dict()}


#: What a Cloud Run pool's record names as its machine: Cloud Run has no machine type, only the GPU shape.
CLOUD_RUN_MACHINE = "cloud-run"


def run_pools(cfg: StackConfig) -> list[tuple[str, CloudRunPool]]:
    """The stack's pools of this target."""
    return [(role, pool) for role, pool in cfg.pools() if isinstance(pool, CloudRunPool)]


def plan_pools(cfg: StackConfig, measurements: Mapping[str, Measurement]) -> TargetPlan:
    """The ``cloud_run`` pools: GPU-memory fit and concurrency from the same capacity formulas, the cold load
    through the Cloud Storage volume, probes, timeout, the memory rule of in-memory staging, cost. A pool whose
    release needs more GPUs than Cloud Run attaches is left to the rules (``rules.release_fits_one_gpu``)."""
    release_ids = {r.release for r in cfg.releases}
    contract = cfg.contract
    issues: list[PlanIssue] = []
    pools: dict[str, PoolPlan] = {}
    for role, pool in run_pools(cfg):
        if pool.release not in release_ids:
            continue
        rel = cfg.release(pool.release)
        if rel.tensor_parallel_size != pool.gpu_count:
            continue
        geometry = release_geometry(rel)
        cap = plan_capacity(
            cfg,
            role,
            pool,
            pool_inputs(rel, role, pool, geometry, demand(cfg, pool, measurements.get(role))),
            f"on Cloud Run {pool.gpu}",
            issues,
        )
        if cap is None:
            continue
        try:
            run = plan_cloud_run(rel, pool, cap, capacity.weight_bytes(geometry), contract.stream_bound_seconds)
        except PoolPlanningError as exc:
            issues.append(PlanIssue(("serving", role, *exc.subject), str(exc)))
            continue
        except ProbeError as exc:
            issues.append(PlanIssue(("serving", role, "loading"), str(exc)))
            continue
        inputs = vllm_inputs(
            rel, pool, cap, contract.stream_bound_seconds, cfg.serving.model_name, contract.max_output_tokens
        )
        pools[role] = CloudRunPoolPlan(
            role=role,
            target=pool.target,
            release=release_info(rel),
            weight=pool.weight,
            min_replicas=pool.min_instances,
            capacity=cap,
            vllm_args=tuple(render_vllm_args(inputs)),
            model_root=inputs.model,
            accelerator=None,
            machine=MachineIdentity(CLOUD_RUN_MACHINE, pool.gpu, pool.gpu_count),
            cloud_run=run,
        )
    return TargetPlan(target=TARGET, pools=pools, issues=tuple(issues))
