"""Typed inputs of the Cloud Run serving target, built by the planner and rendered by the component.

Standard library only (no Pulumi): ``infra/planning`` imports this module, and the planning maths must stay pure.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..serving.spec import ReleaseInfo

#: The Managed Prometheus collector sidecar's limits: 1 vCPU and 512 MiB, the limits Cloud Run gives a container
#: that states none (its own sample service, run-gmp-sidecar run-service.yaml, states none). Not less: a container
#: below 1 vCPU needs request-based billing, and GPU services must use instance-based billing (Cloud Run
#: "Configure CPU limits for services"; "GPU support for services"). Part of every instance: the planner adds
#: them to the instance shape it checks against the GPU's (infra/targets/cloud_run/planning.py) and to its price.
COLLECTOR_CPU = 1
COLLECTOR_MEMORY_MIB = 512
#: The collector's own health endpoint and the probe timing of Google's sample service (run-gmp-sidecar
#: run-service.yaml: ``/liveness`` on 13133, 30 s period and timeout).
COLLECTOR_HEALTH_PORT = 13133
COLLECTOR_HEALTH_PATH = "/liveness"
COLLECTOR_PROBE_SECONDS = 30


@dataclass(frozen=True)
class CloudRunProbes:
    """Startup and liveness probes of the vLLM container (HTTP ``/health``: Cloud Run has no exec probes), with the
    planner inputs that produced them."""

    cold_load_seconds: float
    startup_margin: float
    #: cold load x (1 + margin): what the startup window must cover.
    startup_required_seconds: float
    startup_initial_delay_seconds: int
    startup_period_seconds: int
    startup_timeout_seconds: int
    startup_failure_threshold: int
    liveness_period_seconds: int
    liveness_timeout_seconds: int
    liveness_failure_threshold: int

    @property
    def startup_probe_seconds(self) -> int:
        """failureThreshold x periodSeconds: what Cloud Run bounds (1,800 s for GPU services)."""
        return self.startup_period_seconds * self.startup_failure_threshold

    @property
    def startup_window_seconds(self) -> int:
        """How long after the container starts it may take to pass: initial delay + period x failureThreshold."""
        return self.startup_initial_delay_seconds + self.startup_probe_seconds

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["startup_window_seconds"] = self.startup_window_seconds
        return d


@dataclass(frozen=True)
class InstanceShape:
    """One Cloud Run GPU instance: the GPU and the vLLM container's CPU and memory (the collector's share comes on
    top: :attr:`instance_cpu`, :attr:`instance_memory_gib`)."""

    gpu: str
    gpu_count: int
    cpu: int
    memory_gib: float
    zonal_redundancy_disabled: bool

    @property
    def instance_cpu(self) -> int:
        """Every container's vCPU summed: what the GPU's instance shape bounds and what is billed."""
        return self.cpu + COLLECTOR_CPU

    @property
    def instance_memory_gib(self) -> float:
        return self.memory_gib + COLLECTOR_MEMORY_MIB / 1024


@dataclass(frozen=True)
class VpcEgress:
    """Direct VPC egress of a revision."""

    network: str
    subnetwork: str
    egress: str
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class HubToken:
    """An existing Secret Manager secret exposed to vLLM as ``HF_TOKEN``."""

    secret_id: str
    version: str


@dataclass(frozen=True)
class ProgramsVolume:
    """The programs a revision runs besides vLLM (the release verifier and the in-memory stager), uploaded by the
    program to a content-addressed folder of a stack-owned bucket and mounted read-only (``only-dir``): no program
    text is inside the revision, and the folder's name changes exactly when the bytes do."""

    bucket: str
    #: ``programs/<16 hex>``: the first 16 hex digits of the SHA-256 over every file's name and SHA-256.
    folder: str
    #: File name -> its text, as uploaded.
    files: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class RevisionSpec:
    """Everything one pool's revision is rendered from: identity, arguments, loading path, shape, probes, scaling and
    the planner facts the policies check it against."""

    role: str
    release: ReleaseInfo
    public_model_name: str
    #: The planner's ``vllm serve`` arguments (``infra/planning/vllm_args.py``), port 8080.
    vllm_args: tuple[str, ...]
    #: What vLLM loads (``--model``): the mounted release folder, or its in-memory copy when staged.
    model_root: str
    #: Where the Cloud Storage volume (the release folder, ``only-dir``) is mounted.
    mount_path: str
    mount_options: tuple[str, ...]
    #: In-memory staging: the volume's size limit (GiB) and where the copy appears; None = vLLM reads the mount.
    staging_size_gib: int | None
    staged_path: str | None
    #: Copy threads of the in-memory stager (the seed's 16).
    stage_workers: int
    shape: InstanceShape
    probes: CloudRunProbes
    min_instances: int
    max_instances: int
    #: ``maxInstanceRequestConcurrency``: the planner's --max-num-seqs, within Cloud Run's 1,000.
    concurrency: int
    #: ``template.timeout``: the stream bound, plus the startup window where an instance can be cold (Cloud Run's
    #: request deadline includes the instance's start), within Cloud Run's 3,600 s.
    timeout_seconds: int
    vpc_egress: VpcEgress | None
    stream_bound_seconds: float
    contract_max_model_len: int
    contract_max_input_tokens: int
    contract_max_output_tokens: int

    def __post_init__(self) -> None:
        if (self.staging_size_gib is None) != (self.staged_path is None):
            raise ValueError(
                f"RevisionSpec.staged_path: give it exactly when staging_size_gib is set (pool {self.role!r})"
            )
        if self.shape.gpu_count != self.release.tensor_parallel_size:
            raise ValueError(
                f"RevisionSpec.shape.gpu_count: {self.shape.gpu_count} GPU(s) for tensor_parallel_size "
                f"{self.release.tensor_parallel_size} (pool {self.role!r})"
            )
        if not self.min_instances <= self.max_instances:
            raise ValueError(f"RevisionSpec.max_instances: {self.max_instances} < min_instances {self.min_instances}")
        if self.stage_workers < 1:
            raise ValueError(f"RevisionSpec.stage_workers: at least 1, got {self.stage_workers}")
