"""Planning of one Cloud Run pool (pure): the capacity planner's inputs for a Cloud Run GPU instance, the instance
shape (every container summed) against the GPU's, the cold load through the Cloud Storage volume (optionally staged
into memory), the memory rule for that staging, probe timing, request concurrency and the request timeout that
covers a cold start, the Cloud Run quota the pools need, and the per-second cost.

Cold load, in the order the container runs it (``components/cloud_run/service.py`` renders the same chain):

* streamed from the mount: verify (a metadata check: the release's object listing against the manifest, sizes and
  CRC32C, ``capacity.METADATA_VERIFY_SECONDS``; the weights are not read for it), then vLLM reads the mount
  (W / volume throughput), then engine init;
* staged: verify (the same metadata check), copy the mount into memory on the stager's parallel threads
  (W / volume throughput: the stated throughput is what the mount delivers to parallel readers), vLLM reads the
  copy (W / ``capacity.STAGED_READ_MIB_S``), then engine init.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any, ClassVar

from components import naming
from components.cloud_run.spec import COLLECTOR_CPU, COLLECTOR_MEMORY_MIB, CloudRunProbes
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
    span,
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
#: Copy threads of the in-memory stager: the seed's 16 ("16 parallel threads copy weights from GCS into /dev/shm",
#: the RTX PRO 6000 row of its GPU table). gcsfuse serves each open file over its own connections, so parallel
#: copies of several shards are how the mount reaches its stated throughput; change it with a measured copy rate
#: (the stager logs MiB/s) and the mount's ``max-conns-per-host``.
STAGE_COPY_WORKERS = 16


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
    """The startup failure count whose window covers cold_load x (1 + margin), the margin at least 1 (config): the
    window is at least twice the estimate, because the estimate rests on a stated throughput and init time and a
    start the probe kills is lost whole, while a longer window costs nothing on a healthy start (the probe passes
    at the first /health that answers):
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
            f"lower startup_margin knowingly (at least 1: the window keeps twice the estimate)"
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
    #: The vLLM container's limits, and the instance's (every container summed: what the GPU shape bounds).
    cpu: int
    memory_gib: float
    instance_cpu: int
    instance_memory_gib: float
    zonal_redundancy_disabled: bool
    launch_stage: str
    min_instances: int
    max_instances: int
    #: ``maxInstanceRequestConcurrency``: the planner's --max-num-seqs, capped at Cloud Run's 1,000.
    concurrency: int
    #: Whether a request can meet a starting instance: scale to zero (the first request after idle, every request to
    #: an idle 0 % canary) or room to scale out (requests queued for a new instance).
    cold_path: bool
    #: ``template.timeout``: the stream bound, plus the startup window when ``cold_path`` (Cloud Run's deadline
    #: includes the instance's start), rounded up to whole seconds.
    request_timeout_seconds: int
    #: vLLM ``--shutdown-timeout``: the stream bound, at most ``MAX_DRAIN_SECONDS`` (exit inside the SIGTERM grace).
    shutdown_timeout_seconds: int
    probes: CloudRunProbes
    #: Copy threads of the in-memory stager.
    stage_workers: int
    #: Cold-load phases (s), in the container's order: verification (metadata), copy into memory (0 when not
    #: staged), vLLM's read of the weights, engine init. They add up to ``cold_load_seconds``.
    verify_seconds: float
    copy_seconds: float
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
    #: Guidance the pool departs from (not an error): e.g. max_instances below Google's starting point outside dev.
    advice: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["probes"] = self.probes.to_dict()
        d["mount_options"] = list(self.mount_options)
        d["advice"] = list(self.advice)
        return d


def accelerator_key(pool: CloudRunPool) -> str:
    return f"{ACCELERATOR_PREFIX}{pool.gpu}"


def instance_shape(pool: CloudRunPool) -> tuple[int, float]:
    """(vCPU, GiB) of one instance: the vLLM container's and the collector sidecar's limits summed."""
    return pool.cpu + COLLECTOR_CPU, pool.memory_gib + COLLECTOR_MEMORY_MIB / 1024


def instance_second_usd(pool: CloudRunPool) -> float:
    """GPU-seconds + vCPU-seconds + GiB-seconds of one instance, the collector sidecar included."""
    p = pool.pricing
    cpu, memory = instance_shape(pool)
    return pool.gpu_count * p.gpu_second_usd + cpu * p.vcpu_second_usd + memory * p.gib_second_usd


def shape_problem(pool: CloudRunPool) -> PoolPlanningError | None:
    """The instance (every container summed) outside the GPU's instance shape, naming both: the sum and the bounds."""
    shape = GPU_SHAPES[pool.gpu]
    cpu, memory = instance_shape(pool)
    (cpu_lo, cpu_hi), (mem_lo, mem_hi) = shape.instance_cpu, shape.instance_memory_gib
    if cpu_lo <= cpu <= cpu_hi and mem_lo <= memory <= mem_hi:
        return None
    key = "cpu" if not cpu_lo <= cpu <= cpu_hi else "memory_gib"
    return PoolPlanningError(
        (key,),
        (
            f"the instance's containers total {cpu} vCPU / {memory:g} GiB (vllm {pool.cpu} vCPU / {pool.memory_gib:g} "
            f"GiB + collector {COLLECTOR_CPU} vCPU / {COLLECTOR_MEMORY_MIB / 1024:g} GiB), but a {pool.gpu} instance "
            f"takes {span(cpu_lo, cpu_hi, 'vCPU')} and {span(mem_lo, mem_hi, 'GiB')}: lower cpu / memory_gib so the "
            "sum fits"
        ),
    )


def pool_inputs(
    rel: ReleaseIdentity, role: str, pool: CloudRunPool, geometry: capacity.Geometry, d: Demand
) -> capacity.PoolInputs:
    """The capacity planner's inputs for a Cloud Run instance: one GPU of the table's memory, the instance's hourly
    price, and the loading path's phases (verification by metadata: ``verify_read_mib_s`` None)."""
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
        # The verifier compares the object listing with the manifest (sizes, CRC32C): no byte is read for it.
        verify_read_mib_s=None,
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


def can_be_cold(pool: CloudRunPool) -> bool:
    """Whether a request can wait for an instance's start: with no warm instance (scale to zero: the first request
    after idle; a 0 % canary's tagged requests) or with room to scale out (Cloud Run holds a request for a new
    instance when the running ones are at their concurrency). Only a fixed, warm pool (min = max >= 1) has none."""
    return pool.min_instances == 0 or pool.max_instances > pool.min_instances


def request_timeout_seconds(stream_bound_seconds: float, startup_window_seconds: int, cold: bool) -> int:
    """``template.timeout``: Cloud Run's request deadline includes the instance's start ("the container must send a
    response within the time specified in the request timeout setting after it receives the request, including the
    container startup time", Cloud Run container runtime contract, Responses), so where an instance can be cold the
    timeout is the longest start the startup probe accepts (its window, >= 2x the cold-load estimate) plus the
    longest allowed stream; else the stream bound. Rounded up to whole seconds."""
    longest = stream_bound_seconds + (startup_window_seconds if cold else 0)
    return math.ceil(longest - 1e-9)


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
    shape = shape_problem(pool)
    if shape is not None:
        raise shape
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
            most = ", ".join(
                f"{g}: up to {s.instance_memory_gib[1] - COLLECTOR_MEMORY_MIB / 1024:g} GiB"
                for g, s in sorted(GPU_SHAPES.items())
            )
            raise PoolPlanningError(
                ("loading", "staging"),
                (
                    f"the staged copy does not fit the instance: {staging.size_gib} GiB copy + {staging.process_memory_gib} "
                    f"GiB server + {GCSFUSE_MEMORY_GIB} GiB gcsfuse = {budget} GiB > memory_gib {pool.memory_gib:g} GiB; "
                    "read the weights from the volume instead (remove loading.staging) or choose a shape with more memory "
                    f"for vLLM ({most})"
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
    if stream_bound_seconds > MAX_REQUEST_TIMEOUT_SECONDS:
        raise PoolPlanningError(
            ("target",),
            (
                f"the longest allowed stream ({stream_bound_seconds:.0f} s = TTFT objective + max_output_tokens x ITL "
                f"objective) exceeds Cloud Run's request timeout of at most {MAX_REQUEST_TIMEOUT_SECONDS} s: Cloud Run "
                "would cut the longest legitimate streams; lower contract.max_output_tokens or serve this pool on gke"
            ),
        )
    cold = can_be_cold(pool)
    window = probes.startup_window_seconds
    timeout = request_timeout_seconds(stream_bound_seconds, window, cold)
    if timeout > MAX_REQUEST_TIMEOUT_SECONDS:
        why = "scales to zero" if pool.min_instances == 0 else f"scales out from {pool.min_instances} instance(s)"
        raise PoolPlanningError(
            ("min_instances",),
            (
                f"the pool {why}, so a request can wait for an instance's start: up to its startup window ({window} s, "
                f"the cold load {cap.cold_load_seconds:.0f} s x (1 + margin {pool.startup_margin:g})) plus the longest "
                f"stream ({stream_bound_seconds:.0f} s) = {timeout} s, beyond Cloud Run's request timeout of at most "
                f"{MAX_REQUEST_TIMEOUT_SECONDS} s; keep instances warm (min_instances = max_instances), load faster or "
                "lower contract.max_output_tokens"
            ),
        )
    cpu, memory = instance_shape(pool)
    second = instance_second_usd(pool)
    return CloudRunPlan(
        gpu=pool.gpu,
        gpu_count=pool.gpu_count,
        cpu=pool.cpu,
        memory_gib=pool.memory_gib,
        instance_cpu=cpu,
        instance_memory_gib=memory,
        zonal_redundancy_disabled=pool.gpu_zonal_redundancy_disabled,
        launch_stage=PREVIEW_LAUNCH_STAGE if GPU_SHAPES[pool.gpu].preview else GA_LAUNCH_STAGE,
        min_instances=pool.min_instances,
        max_instances=pool.max_instances,
        concurrency=min(cap.max_num_seqs, MAX_REQUEST_CONCURRENCY),
        cold_path=cold,
        request_timeout_seconds=timeout,
        shutdown_timeout_seconds=min(math.ceil(stream_bound_seconds), MAX_DRAIN_SECONDS),
        probes=probes,
        stage_workers=STAGE_COPY_WORKERS,
        verify_seconds=cap.verify_seconds,
        copy_seconds=copy,
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
    MIN_KEY: ClassVar[str] = "min_instances"
    MAX_KEY: ClassVar[str] = "max_instances"

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "cloud_run": self.cloud_run.to_dict()}


@dataclass(frozen=True)
class QuotaDemand:
    """What the stack's Cloud Run pools can hold at once in one region: every pool at its max_instances (stable and
    canary both count: each is its own revision). Cloud Run accounts each per region and project ("About maximum
    instances": the regional CPU, memory and GPU quotas, with or without zonal redundancy, divided by the
    configuration; "a sum of all in-use resources in the region")."""

    #: (GPU type, zonal redundancy disabled) -> GPUs = sum of max_instances.
    gpus: tuple[tuple[str, bool, int], ...]
    vcpu: int
    memory_gib: float


def quota_demand(pools: Mapping[str, CloudRunPlan]) -> QuotaDemand:
    gpus: dict[tuple[str, bool], int] = {}
    for p in pools.values():
        key = (p.gpu, p.zonal_redundancy_disabled)
        gpus[key] = gpus.get(key, 0) + p.max_instances * p.gpu_count
    return QuotaDemand(
        gpus=tuple((g, z, n) for (g, z), n in sorted(gpus.items())),
        vcpu=sum(p.max_instances * p.instance_cpu for p in pools.values()),
        memory_gib=sum(p.max_instances * p.instance_memory_gib for p in pools.values()),
    )


#: Google's starting point for max_instances ("About maximum instances", best practices: "a good rule of thumb is
#: to start with a maximum of 3 instances and monitor for invocation failures"): below it, one lost or starting
#: instance leaves the pool with little to queue on. Advice outside dev (a dev stack may hold one GPU).
ADVISED_MAX_INSTANCES = 3


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
        if cfg.environment != "dev" and pool.max_instances < ADVISED_MAX_INSTANCES:
            run = replace(
                run,
                advice=(
                    f"max_instances {pool.max_instances} < {ADVISED_MAX_INSTANCES}: Google's starting point outside "
                    "dev (About maximum instances); one starting or lost instance leaves little room",
                ),
            )
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
