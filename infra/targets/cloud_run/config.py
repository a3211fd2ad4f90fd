"""The ``cloud_run`` serving target: vLLM on Cloud Run GPU instances (the design's serverless path, issue 16).

A Cloud Run pool names one GPU shape, its instance bounds (scale to zero allowed outside prod), who may invoke it,
and how the weights arrive: always from the release's own ``gs://<bucket>/<model>/<revision>/`` folder, mounted
read-only as a Cloud Storage volume, never downloaded from a model hub at boot. Stable and canary pools of a stack
are two tagged revisions of one Cloud Run service; that service (its name, the registry its images come from, the
metrics collector image, an optional hub-token secret) is the root section ``cloud_run``.

The GPU shape table below is the one fact source for what Cloud Run allows; it could not be checked against a live
project here. Sources: Cloud Run "GPU support for services" (cloud.google.com/run/docs/configuring/services/gpu:
one GPU per instance, attached to one container; "For L4 GPUs, you must use a minimum of 4 CPU and 16 GiB of
memory", for the NVIDIA RTX PRO 6000 Blackwell (Preview) "a minimum of 20 CPU and 80 GiB"; the supported regions),
"Configure CPU limits for services" (the container CPU values 1, 2, 4, 6, 8 and the memory each allows: 4 vCPU
2-16 GiB, 6 vCPU 4-24 GiB, 8 vCPU 4-32 GiB; below 1 vCPU only with request-based billing, which GPUs cannot use),
"Configure memory limits" (at most 32 GiB without a GPU shape), the run.v2 discovery document
(``ResourceRequirements.limits``: the only ``nvidia.com/gpu`` value is 1) and the issue's seed for RTX PRO 6000
needing GPU zonal redundancy turned off.

**The instance is the sum of its containers** (issue 23): vLLM's ``cpu`` / ``memory_gib`` plus the metrics
collector's 1 vCPU / 0.5 GiB (``components/cloud_run/spec.py``) must lie within the GPU's documented instance shape,
and a config that overflows it is refused naming both totals (the planner checks the sum: this module may not
import the components that own the collector's share). The GPU page states the minimum per GPU type and the
CPU page the 8 vCPU / 32 GiB ceiling of the L4 shape; only the documented RTX PRO 6000 shape (20 vCPU / 80 GiB) is
offered until a larger one is confirmed, so its vLLM container takes 19 vCPU / 79.5 GiB.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, ClassVar, Final, Literal

from pydantic import Field, model_validator

from infra.config.base import Strict, check
from infra.config.documents import quote
from infra.config.pool import PoolCommon
from infra.config.stack import Section, StackConfig, section_of

GpuType = Literal["nvidia-l4", "nvidia-rtx-pro-6000"]
Ingress = Literal["INGRESS_TRAFFIC_ALL", "INGRESS_TRAFFIC_INTERNAL_ONLY", "INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER"]

#: Cloud Run's longest startup-probe window for GPU services: failureThreshold x periodSeconds "can't exceed 600
#: seconds (1800 for GPU)" (Cloud Run "Configure container health checks", probe requirements table).
MAX_GPU_STARTUP_WINDOW_SECONDS = 1800
#: Cloud Run's longest request timeout (``template.timeout``), 60 minutes (Cloud Run "Configure request timeout").
MAX_REQUEST_TIMEOUT_SECONDS = 3600
#: Cloud Run's largest per-instance request concurrency (``maxInstanceRequestConcurrency``), Cloud Run
#: "Maximum concurrent requests per instance".
MAX_REQUEST_CONCURRENCY = 1000
#: 1,000 instances: far beyond the GPU quota any project is granted per region; a larger figure is a slip.
MAX_INSTANCES = 1000


@dataclass(frozen=True)
class GpuShape:
    """What Cloud Run accepts with one GPU of a type: the instance's bounds (the sum of its containers), the vLLM
    container's own CPU / memory choices, where it is offered, and the GPU memory the planner sizes KV cache from."""

    #: Usable memory per GPU (GiB) the capacity planner applies ``gpu_memory_utilization`` to.
    gpu_memory_gib: float
    #: The instance (every container summed): vCPU and GiB, each (min, max).
    instance_cpu: tuple[int, int]
    instance_memory_gib: tuple[float, float]
    #: The GPU-attached vLLM container: vCPU -> (min, max) memory in GiB; None: whatever the instance bounds leave
    #: once the collector's share is taken (no per-container table is documented above 8 vCPU).
    container_cpu_memory_gib: dict[int, tuple[float, float]] | None
    #: Regions Cloud Run offers the GPU in; None: the list could not be confirmed here (docs/cloud-run.md lists it
    #: as a precondition).
    regions: tuple[str, ...] | None
    #: Cloud Run offers the GPU as a Preview feature: the service needs ``launchStage: BETA``.
    preview: bool
    #: The GPU is offered only with GPU zonal redundancy turned off.
    requires_zonal_redundancy_disabled: bool


GPU_SHAPES: dict[str, GpuShape] = {
    # 24 GB L4; 22.5 GiB is what nvidia-smi reports (23,034 MiB), the figure the GKE dev stack uses for the same
    # GPU. Instance: the L4 minimum of 4 vCPU / 16 GiB up to the CPU table's largest 8 vCPU / 32 GiB. vLLM's
    # container: the CPU table's values from the L4 minimum on (4, 6, 8), its memory ranges cut at 16 GiB; with
    # the collector on top, 8 vCPU no longer fits the instance (8 + 1 > 8) and the sum check says so.
    # Regions: "GPU support for services", supported regions (asia-south1 by invitation only).
    "nvidia-l4": GpuShape(
        gpu_memory_gib=22.5,
        instance_cpu=(4, 8),
        instance_memory_gib=(16, 32),
        container_cpu_memory_gib={4: (16, 16), 6: (16, 24), 8: (16, 32)},
        regions=("asia-south1", "asia-southeast1", "europe-west1", "europe-west4", "us-central1", "us-east4"),
        preview=False,
        requires_zonal_redundancy_disabled=False,
    ),
    # 96 GB RTX PRO 6000 Blackwell, taken as 96e9 bytes = 89.4 GiB: the usable figure Cloud Run's driver reports
    # could not be read here, and a lower figure only under-sizes the KV cache. Only the documented minimum shape
    # (20 vCPU, 80 GiB for the whole instance) is offered until a larger one is confirmed. Its regions could not be
    # read here (the page's list was not retrievable): a precondition, not a guess.
    "nvidia-rtx-pro-6000": GpuShape(
        gpu_memory_gib=89.4,
        instance_cpu=(20, 20),
        instance_memory_gib=(80, 80),
        container_cpu_memory_gib=None,
        regions=None,
        preview=True,
        requires_zonal_redundancy_disabled=True,
    ),
}


def span(low: float, high: float, unit: str) -> str:
    """``4-8 vCPU`` or ``20 vCPU`` when the range is one value."""
    return f"{low:g} {unit}" if low == high else f"{low:g}-{high:g} {unit}"


#: Cloud Run's resource names: a letter first, lower-case letters, digits and '-'. 26 characters at most: the
#: serving account id ``<name>-run`` must fit IAM's 30, and ``<tag>---<name>`` of the longest traffic tag
#: (``stable``, ``canary``) Cloud Run's 46-character limit for a tag plus service name.
SERVICE_NAME_PATTERN = r"^[a-z][-a-z0-9]{0,24}[a-z0-9]$"
#: IAM members a Cloud Run invoker may be: named principals only; ``allUsers`` / ``allAuthenticatedUsers`` never match.
#: 300 characters: the longest principal (a workload identity pool subject) is well under it.
INVOKER_MEMBER_PATTERN = r"^(user|group|serviceAccount|domain|principal|principalSet):[!-~]{1,300}\Z"
#: The public principals: a grant to either makes the service callable without (or with any) Google identity.
PUBLIC_MEMBERS = ("allUsers", "allAuthenticatedUsers")
#: One gcsfuse flag without its leading ``--`` (``name`` or ``name=value``), as run.v2 ``GCSVolumeSource.mountOptions``
#: takes them.
MOUNT_OPTION_PATTERN = r"^[a-z][-a-z0-9]{0,62}(=[A-Za-z0-9._:/-]{1,200})?$"
#: gcsfuse options the program always sets (the release folder as the mount root) or owns (buffered read).
OWNED_MOUNT_OPTIONS = frozenset({"only-dir", "implicit-dirs", "enable-buffered-read"})
#: The Managed Prometheus sidecar for Cloud Run, pinned by digest (Cloud Run "Write Prometheus metrics by using the
#: Prometheus sidecar": ``us-docker.pkg.dev/cloud-ops-agents-artifacts/cloud-run-gmp-sidecar/cloud-run-gmp-sidecar``).
COLLECTOR_IMAGE_PATTERN = (
    r"^us-docker\.pkg\.dev/cloud-ops-agents-artifacts/cloud-run-gmp-sidecar/"
    r"cloud-run-gmp-sidecar@sha256:[0-9a-f]{64}$"
)
#: A VPC network or subnetwork name (Compute Engine naming: RFC 1035 label, at most 63 characters).
VPC_NAME_PATTERN = r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$"


class GcsVolumeStaging(Strict):
    """Copy the verified release into an in-memory volume before vLLM loads it (the seed's ``/dev/shm`` staging): the
    Cloud Storage volume is read once, sequentially, and vLLM then loads from memory. Only worth it on shapes whose
    memory holds the weights beside the server (the planner checks it)."""

    # 1,024 GiB: far above any Cloud Run instance's memory; the memory rule bounds it properly.
    size_gib: Annotated[int, Field(ge=1, le=1024)] = Field(
        description=(
            "Size limit of the in-memory volume holding the copy, GiB; at least the release's weight files (the "
            "planner checks it against P x b_w; ``llm-serving release stage`` prints the folder's real size, which "
            "is larger when a quantized checkpoint keeps embeddings at 16 bits). Counted in the instance memory."
        )
    )
    # 1,024 GiB: as above.
    process_memory_gib: Annotated[int, Field(ge=1, le=1024)] = Field(
        description=(
            "Host memory the vLLM server needs outside the staged copy (Python processes, CUDA context, tokenizer, "
            "pinned buffers, the container's in-memory file system writes), GiB; stated, ideally measured."
        )
    )


class CloudStorageVolumeLoading(Strict):
    """The weights as a read-only Cloud Storage volume of the release folder (gcsfuse, managed by Cloud Run)."""

    path: Literal["cloud_storage_volume"] = Field(
        description=(
            "``cloud_storage_volume``: the release's gs://<bucket>/<model>/<revision>/ mounted read-only "
            "(only-dir), verified against its manifest, then loaded by vLLM; never a model-hub download."
        )
    )
    # 100,000 MiB/s: as for GKE, four times the fastest VM network; a figure in KiB/s is caught.
    throughput_mib_s: Annotated[float, Field(gt=0, le=100_000)] = Field(
        description=(
            "Stated sustained read throughput of the mounted release through gcsfuse with these mount options, MiB/s."
        )
    )
    # 1,800 s: the longest startup window Cloud Run allows a GPU service.
    engine_init_seconds: Annotated[int, Field(ge=0, le=MAX_GPU_STARTUP_WINDOW_SECONDS)] = Field(
        description=(
            "Stated start-up time outside weight I/O (process start, KV-cache allocation, CUDA graphs / compile), s."
        )
    )
    buffered_read: bool = Field(
        description=(
            "gcsfuse ``enable-buffered-read``: read ahead in parallel for the large sequential reads of weight files "
            "(the seed's setting); the stated throughput assumes the choice made here."
        )
    )
    # 16 options: gcsfuse has a few dozen flags; more than a handful on one mount is a slip.
    extra_mount_options: Annotated[list[Annotated[str, Field(pattern=MOUNT_OPTION_PATTERN)]], Field(max_length=16)] = (
        Field(
            [],
            description=(
                "Further gcsfuse flags without the leading ``--`` (``name`` or ``name=value``); ``only-dir``, "
                "``implicit-dirs`` and ``enable-buffered-read`` are the program's own."
            ),
        )
    )
    staging: GcsVolumeStaging | None = Field(
        None,
        description=("Optional: copy the release into an in-memory volume and serve from there (large-memory shapes)."),
    )

    @model_validator(mode="after")
    def _owned_options(self) -> CloudStorageVolumeLoading:
        problems = []
        for i, option in enumerate(self.extra_mount_options):
            name = option.split("=", 1)[0]
            if name in OWNED_MOUNT_OPTIONS:
                problems.append(
                    (
                        f"extra_mount_options.{i}",
                        f"{name!r} is set by the program (only-dir = the release "
                        "folder, implicit-dirs, enable-buffered-read from buffered_read); remove it",
                    )
                )
        names = [o.split("=", 1)[0] for o in self.extra_mount_options]
        for i, name in enumerate(names):
            if names.index(name) != i:
                problems.append((f"extra_mount_options.{i}", f"{name!r} is given twice"))
        check(problems)
        return self


class DirectVpcEgress(Strict):
    """Direct VPC egress of the revision (no connector): the instances get IPs in a subnetwork of the VPC."""

    network: Annotated[str, Field(pattern=VPC_NAME_PATTERN)] = Field(
        description="VPC network name (in the stack's project)."
    )
    subnetwork: Annotated[str, Field(pattern=VPC_NAME_PATTERN)] = Field(
        description=("Subnetwork of that network in the stack's region the instances take IPs from.")
    )
    egress: Literal["ALL_TRAFFIC", "PRIVATE_RANGES_ONLY"] = Field(
        description=(
            "``ALL_TRAFFIC``: everything leaves through the VPC (Cloud Storage via Private Google Access, firewall "
            "rules apply); ``PRIVATE_RANGES_ONLY``: only RFC 1918 destinations do."
        )
    )
    # 64 tags: Compute Engine's limit of network tags per resource.
    tags: Annotated[list[Annotated[str, Field(pattern=VPC_NAME_PATTERN)]], Field(max_length=64)] = Field(
        [], description="Network tags the instances carry (for firewall rules)."
    )


class CloudRunPricing(Strict):
    """Cloud Run's per-second prices for this pool's region and zonal-redundancy choice (instance-based billing)."""

    # Bounds: $1 per GPU-second is ~40x today's list price of the largest GPU; per vCPU / GiB second $0.01 is ~400x.
    gpu_second_usd: Annotated[float, Field(gt=0, le=1)] = Field(
        description=("Price of one GPU-second, USD (it differs with and without GPU zonal redundancy).")
    )
    vcpu_second_usd: Annotated[float, Field(gt=0, le=0.01)] = Field(description="Price of one vCPU-second, USD.")
    gib_second_usd: Annotated[float, Field(gt=0, le=0.01)] = Field(
        description="Price of one GiB-second of memory, USD."
    )


#: The ``target`` value of this target's pools.
TARGET: Final = "cloud_run"


class CloudRunPool(PoolCommon):
    """A pool of vLLM instances on Cloud Run GPUs: one tagged revision of the stack's Cloud Run service."""

    TARGET_LABEL: ClassVar[str] = "Cloud Run pool"
    SPLIT_MECHANISM: ClassVar[str] = "one Cloud Run service's revisions"
    WARM_KEY: ClassVar[str] = "min_instances"
    WARM_UNIT: ClassVar[Literal["replicas", "instances"]] = "instances"
    WARM_REASON: ClassVar[str] = "from zero the first request waits a whole cold load"

    target: Literal["cloud_run"] = Field(
        description=(
            "``cloud_run``: one revision of the stack's Cloud Run service on GPU instances (serverless, scale to zero)."
        )
    )
    gpu: GpuType = Field(description="Cloud Run GPU type (``nodeSelector.accelerator``).")
    # One GPU per instance: run.v2 ResourceRequirements.limits, "the only supported 'nvidia.com/gpu' value is '1'".
    gpu_count: Annotated[int, Field(ge=1, le=1)] = Field(
        description=(
            "GPUs per instance; Cloud Run attaches exactly one, so the release's tensor_parallel_size must be 1."
        )
    )
    # 32 vCPU: above the largest documented GPU shape (RTX PRO 6000: 20); the GPU shape table is the real check.
    cpu: Annotated[int, Field(ge=1, le=32)] = Field(
        description=(
            "vCPUs of the vLLM container (nvidia-l4: 4 or 6; nvidia-rtx-pro-6000: 19). The metrics collector's 1 vCPU "
            "comes on top, and the sum must lie within the GPU's instance shape (nvidia-l4: 4-8 vCPU; "
            "nvidia-rtx-pro-6000: 20 vCPU)."
        )
    )
    # 256 GiB: above the largest documented GPU shape (80 GiB); the table is the real check. Half GiB steps: the
    # collector's 0.5 GiB leaves vLLM 79.5 GiB of the RTX PRO 6000's documented 80 GiB instance.
    memory_gib: Annotated[float, Field(ge=1, le=256, multiple_of=0.5)] = Field(
        description=(
            "Memory of the vLLM container, GiB in steps of 0.5, within the range the GPU allows for ``cpu`` "
            "(nvidia-l4: 16 at 4 vCPU, 16-24 at 6); with the collector's 0.5 GiB the sum must lie within the "
            "instance shape (nvidia-l4: 16-32 GiB; nvidia-rtx-pro-6000: 80 GiB, so 79.5 here). It holds gcsfuse's "
            "buffers, the server processes and any in-memory staged copy."
        )
    )
    gpu_zonal_redundancy_disabled: bool = Field(
        description=(
            "Turn GPU zonal redundancy off: a lower GPU-second price and best-effort capacity after a zonal outage "
            "(Cloud Run keeps no reserved GPU capacity in other zones); required for nvidia-rtx-pro-6000."
        )
    )
    # 0 allowed: scale to zero (no idle cost, every first request pays a cold start); prod needs >= 1 (rule).
    min_instances: Annotated[int, Field(ge=0, le=MAX_INSTANCES)] = Field(
        description=(
            "Warm instances kept running (``scaling.minInstanceCount``); 0 = scale to zero outside prod, where the first "
            "request after idle waits a cold start (``capacity`` prints its cost); at least 1 in prod."
        )
    )
    max_instances: Annotated[int, Field(ge=1, le=MAX_INSTANCES)] = Field(
        description=("Instance ceiling (``scaling.maxInstanceCount``), within the project's Cloud Run GPU quota.")
    )
    ingress: Ingress = Field(
        description=(
            "Who can reach the service's URLs at the network level (service-wide: stable and canary must agree)."
        )
    )
    # 100 members: one service's invokers are a few groups or service accounts; more is a slip.
    invoker_members: Annotated[list[str], Field(min_length=1, max_length=100)] = Field(
        description=(
            "Principals granted ``roles/run.invoker`` on the service (service-wide: stable and canary must agree); never "
            "allUsers / allAuthenticatedUsers. At least one: with the invoker check on, nobody else can call it."
        )
    )
    vpc_egress: DirectVpcEgress | None = Field(None, description="Optional Direct VPC egress of this pool's revision.")
    loading: CloudStorageVolumeLoading = Field(
        description=(
            "The release folder as a Cloud Storage volume, its stated throughput and optional in-memory staging."
        )
    )
    pricing: CloudRunPricing = Field(
        description=("Per-second prices (GPU, vCPU, memory) for cost per million tokens and the cost of a cold start.")
    )
    # At least 1: the startup window is at least twice the cold-load estimate (issue 23). The estimate rests on a
    # stated throughput and init time; a bucket at a quarter of the stated speed or a slow first CUDA-graph capture
    # must not kill a start that would have succeeded, and a long window costs nothing on a healthy start (the
    # probe passes as soon as /health answers; seed 002's lesson). 4: beyond 5x the estimate is no longer a margin.
    startup_margin: Annotated[float, Field(ge=1, le=4)] = Field(
        1.0,
        description=(
            "Extra fraction over the cold-load estimate the startup probe waits: window >= cold load x (1 + margin), "
            "at least 2x the estimate, within Cloud Run's 1,800 s for GPU services."
        ),
    )

    @model_validator(mode="after")
    def _shape(self) -> CloudRunPool:
        shape = GPU_SHAPES[self.gpu]
        problems: list[tuple[str, str]] = []
        if self.max_instances < self.min_instances:
            problems.append(
                ("max_instances", f"must be >= min_instances ({self.min_instances}), got {self.max_instances}")
            )
        table = shape.container_cpu_memory_gib
        if table is not None and self.cpu not in table:
            problems.append(
                (
                    "cpu",
                    f"the {self.gpu} vLLM container takes {' or '.join(str(c) for c in sorted(table))} vCPU, "
                    f"got {self.cpu}",
                )
            )
        elif table is not None:
            low, high = table[self.cpu]
            if not low <= self.memory_gib <= high:
                problems.append(
                    (
                        "memory_gib",
                        f"the {self.gpu} vLLM container with {self.cpu} vCPU takes {span(low, high, 'GiB')}, "
                        f"got {self.memory_gib:g}",
                    )
                )
        for i, member in enumerate(self.invoker_members):
            if member in PUBLIC_MEMBERS:
                problems.append(
                    (
                        f"invoker_members.{i}",
                        f"{member} would let anyone call the service and spend its "
                        "GPUs: name principals (user:, group:, serviceAccount:, domain:, principal:, "
                        "principalSet:)",
                    )
                )
            elif not re.match(INVOKER_MEMBER_PATTERN, member):
                problems.append(
                    (
                        f"invoker_members.{i}",
                        f"{quote(member)} is not an IAM member: <type>:<id> with type "
                        "user, group, serviceAccount, domain, principal or principalSet",
                    )
                )
        if shape.requires_zonal_redundancy_disabled and not self.gpu_zonal_redundancy_disabled:
            problems.append(
                (
                    "gpu_zonal_redundancy_disabled",
                    f"{self.gpu} is offered only with GPU zonal redundancy turned off: set it to true",
                )
            )
        check(problems)
        return self


class HubTokenReference(Strict):
    """An existing Secret Manager secret holding a model-hub token; the stack reads it, it never creates or sets it."""

    secret_id: Annotated[str, Field(pattern=r"^[a-zA-Z0-9_-]{1,255}$")] = Field(
        description=(
            "Secret Manager secret id in the stack's project; only the Cloud Run serving account may access it."
        )
    )
    version: Annotated[str, Field(pattern=r"^(latest|[1-9][0-9]{0,9})$")] = Field(
        description=(
            "Secret version exposed as HF_TOKEN: a number pins it (a new version needs a new revision), ``latest`` "
            "follows rotations at each instance start."
        )
    )


class CloudRunConfig(Strict):
    """The Cloud Run service the ``cloud_run`` pools are revisions of."""

    service_name: Annotated[str, Field(pattern=SERVICE_NAME_PATTERN)] = Field(
        description=(
            "Cloud Run service name (2-26 characters: the serving account ``<name>-run`` and tag URLs must fit); also "
            "the prefix of every revision name."
        )
    )
    repository: Annotated[str, Field(pattern=r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")] = Field(
        description=("Artifact Registry repository (in the stack's project and region) the releases' images come from.")
    )
    collector_image: Annotated[str, Field(pattern=COLLECTOR_IMAGE_PATTERN)] = Field(
        description=(
            "Managed Service for Prometheus sidecar image for Cloud Run, by digest: "
            "us-docker.pkg.dev/cloud-ops-agents-artifacts/cloud-run-gmp-sidecar/cloud-run-gmp-sidecar@sha256:<64 hex> "
            "(docs/cloud-run.md: how to read the digest)."
        )
    )
    hub_token: HubTokenReference | None = Field(
        None,
        description=(
            "Optional existing model-hub token secret, exposed as HF_TOKEN (vLLM still runs with HF_HUB_OFFLINE=1)."
        ),
    )
    # 63 characters: Cloud Storage's limit for a bucket name without dots.
    programs_bucket: Annotated[str, Field(pattern=r"^[a-z0-9][-_a-z0-9]{1,61}[a-z0-9]$")] | None = Field(
        None,
        description=(
            "Bucket the stack creates for the programs its revisions run from a read-only volume (the release "
            "verifier and the in-memory stager, at a content-addressed folder); default ``<project>-<service_name>-run``. "
            "Bucket names are global: name another one if that name is taken."
        ),
    )
    protect: bool = Field(
        False,
        description=(
            "Protect the service and the programs bucket from deletion (Pulumi ``protect``; the bucket also keeps "
            "its objects: no ``force_destroy``); required in prod. Off lets a prototype tear down to nothing."
        ),
    )


SECTIONS = (
    Section(
        "cloud_run",
        CloudRunConfig,
        (
            "The Cloud Run service the ``cloud_run`` pools are tagged revisions of: name, image repository, metrics "
            "collector image, optional hub-token secret; required when a pool targets ``cloud_run``."
        ),
    ),
)


def cloud_run_section(cfg: StackConfig) -> CloudRunConfig | None:
    """The stack's ``cloud_run`` section (None when absent)."""
    return section_of(cfg, "cloud_run", CloudRunConfig)
