"""The Google Cloud platform the GKE target runs on: network, cluster, system pool, Artifact Registry, weight
stores and the optional model-hub token (the design's "Weight Loading", "Security").

GPU node pools are not configured here: each accelerator topology (``accelerators``) becomes one GPU node
pool, sized by the capacity planner and pinned to its zonal reservation.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Literal

from pydantic import Field, model_validator

from infra.config.base import MAX_NODES, Strict, check
from infra.config.bench import BenchConfig

#: Oldest GKE version this program supports. GKE installs the InferencePool CRD itself from
#: ``1.34.0-gke.1626000`` (GAIE releases and the llm-d GKE guide, llm-d guides/prereq/gateways/gke.md), and the program never creates
#: the Gateway API / Inference Extension CRDs, so an older control plane would have no InferencePool kind.
#: It also satisfies the Inference Gateway deploy page's floor of 1.32.3 (GKE Inference Gateway deploy guide).
INFERENCE_GATEWAY_MIN_GKE = "1.34.0-gke.1626000"

GKE_VERSION_RE = re.compile(r"^(?P<major>[0-9]+)\.(?P<minor>[0-9]+)\.(?P<patch>[0-9]+)-gke\.(?P<build>[0-9]+)\Z")
#: A minor version (``1.34``): GKE resolves it to a patch the cluster's release channel currently offers.
GKE_MINOR_RE = re.compile(r"^(?P<major>[0-9]+)\.(?P<minor>[0-9]+)\Z")
#: GKE's private control-plane range must be exactly a /28.
MASTER_PREFIX_LEN = 28
#: GKE maintenance policy: each recurring window lasts at least 4 hours, and the windows must add up to at
#: least 48 hours in any 32-day period (GKE maintenance windows documentation).
MIN_MAINTENANCE_WINDOW_HOURS = 4
MIN_MAINTENANCE_HOURS_PER_32_DAYS = 48
WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
#: Hyperdisk ML provisioned-throughput floor (MiB/s) and size range (GiB) accepted by Compute Engine.
HYPERDISK_ML_MIN_THROUGHPUT_MIB_S = 400
#: Hyperdisk ML's provisioned-throughput ceiling per volume (Compute Engine Hyperdisk ML limits).
HYPERDISK_ML_MAX_THROUGHPUT_MIB_S = 1_200_000
HYPERDISK_ML_MIN_GIB = 4
HYPERDISK_ML_MAX_GIB = 65536

#: Cluster name: <= 23 characters so the derived node service account id `<name>-system` stays within 30.
Name = Annotated[str, Field(pattern=r"^[a-z]([-a-z0-9]{0,21}[a-z0-9])?$")]


def parse_gke_version(version: str) -> tuple[int, int, int, int] | None:
    """``1.34.0-gke.1626000`` -> (1, 34, 0, 1626000); None when the text is not a GKE version."""
    m = GKE_VERSION_RE.match(version)
    return tuple(int(m.group(g)) for g in ("major", "minor", "patch", "build")) if m else None  # type: ignore[return-value]


def _network(value: str) -> ipaddress.IPv4Network | None:
    try:
        return ipaddress.IPv4Network(value, strict=True)
    except ValueError:
        return None


class NetworkRanges(Strict):
    """IPv4 ranges of the VPC. All are private, disjoint, and fixed at creation (changing one replaces the
    subnet or the cluster)."""

    subnet: str = Field(description="Primary range of the node subnet.")
    pods: str = Field(
        description=("Secondary range for Pod IPs (VPC-native); a /14 gives the default 110 Pods on up to 1024 nodes.")
    )
    services: str = Field(description="Secondary range for ClusterIP Services.")
    proxy_only: str = Field(
        description=(
            "Proxy-only subnet for the Gateway's Envoy proxies: ``REGIONAL_MANAGED_PROXY`` for the regional Gateway "
            "(GKE Inference Gateway deploy guide), ``GLOBAL_MANAGED_PROXY`` in every region of a fleet (the "
            "multi-cluster Gateway's cross-regional proxies); Google recommends a /23."
        )
    )
    master: str = Field(
        description=(
            "Control-plane range of the private cluster (a /28, Terraform google provider docs Cluster ``private_cluster_config``)."
        )
    )

    @model_validator(mode="after")
    def _disjoint(self) -> NetworkRanges:
        problems = []
        nets: dict[str, ipaddress.IPv4Network] = {}
        for field in ("subnet", "pods", "services", "proxy_only", "master"):
            net = _network(getattr(self, field))
            if net is None:
                problems.append(
                    (field, f"not an IPv4 network in CIDR form (host bits clear): {getattr(self, field)!r}")
                )
            elif not net.is_private:
                problems.append((field, f"{net} is not a private range"))
            else:
                nets[field] = net
        if "master" in nets and nets["master"].prefixlen != MASTER_PREFIX_LEN:
            problems.append(
                ("master", f"the GKE control-plane range must be a /{MASTER_PREFIX_LEN}, got {nets['master']}")
            )
        names = list(nets)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                if nets[a].overlaps(nets[b]):
                    problems.append((b, f"{nets[b]} overlaps {a} ({nets[a]})"))
        check(problems)
        return self


class AuthorizedNetwork(Strict):
    """A range allowed to reach the cluster's public control-plane endpoint."""

    cidr: str = Field(description=("IPv4 range in CIDR form allowed to reach the control plane (never 0.0.0.0/0)."))
    display_name: Annotated[str, Field(min_length=1, max_length=64)] = Field(
        description=("Label shown in the cluster's authorised-networks list.")
    )

    @model_validator(mode="after")
    def _cidr(self) -> AuthorizedNetwork:
        net = _network(self.cidr)
        if net is None:
            check([("cidr", f"not an IPv4 network in CIDR form (host bits clear): {self.cidr!r}")])
        elif net.prefixlen == 0:
            check([("cidr", "0.0.0.0/0 would open the control plane to the internet")])
        return self


class MaintenanceWindow(Strict):
    """Weekly window (UTC) in which GKE may upgrade the control plane and nodes."""

    days: Annotated[list[Literal["MO", "TU", "WE", "TH", "FR", "SA", "SU"]], Field(min_length=1)] = Field(
        description=("Weekdays the window opens (MO..SU), each at most once.")
    )
    start_utc: Annotated[str, Field(pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$")] = Field(
        description="Window start, ``HH:MM`` UTC."
    )
    duration_hours: Annotated[int, Field(ge=1, le=24)] = Field(
        description=("Window length in hours: >= 4, and >= 48 h in total per 32 days.")
    )

    @model_validator(mode="after")
    def _long_enough(self) -> MaintenanceWindow:
        problems = []
        if len(set(self.days)) != len(self.days):
            problems.append(("days", f"days must be unique, got {self.days}"))
        if self.duration_hours < MIN_MAINTENANCE_WINDOW_HOURS:
            problems.append(
                (
                    "duration_hours",
                    f"GKE requires windows of at least {MIN_MAINTENANCE_WINDOW_HOURS} h, got {self.duration_hours}",
                )
            )
        # 32 days hold at least 4 of each weekday.
        per_32_days = 4 * len(set(self.days)) * self.duration_hours
        if per_32_days < MIN_MAINTENANCE_HOURS_PER_32_DAYS:
            problems.append(
                (
                    "duration_hours",
                    f"{len(set(self.days))} day(s) x {self.duration_hours} h gives "
                    f"{per_32_days} h per 32 days; GKE requires at least {MIN_MAINTENANCE_HOURS_PER_32_DAYS} h",
                )
            )
        check(problems)
        return self


class SystemPool(Strict):
    """The small autoscaled CPU pool for cluster add-ons, endpoint pickers and controllers."""

    machine_type: Annotated[str, Field(pattern=r"^[a-z0-9]+-[a-z]+-[0-9]+$")] = Field(
        description=("Compute Engine machine type of the system nodes (CPU only).")
    )
    min_nodes_per_zone: Annotated[int, Field(ge=1, le=MAX_NODES)] = Field(
        description=("Autoscaler floor per zone of the cluster's node locations.")
    )
    max_nodes_per_zone: Annotated[int, Field(ge=1, le=MAX_NODES)] = Field(description="Autoscaler ceiling per zone.")
    # 65,536 GB: Compute Engine's largest persistent disk.
    disk_size_gb: Annotated[int, Field(ge=20, le=65_536)] = Field(
        100, description=("Boot disk of each node in GB; 100 GB holds the system images with room for logs.")
    )

    @model_validator(mode="after")
    def _bounds(self) -> SystemPool:
        check(
            [
                (
                    "max_nodes_per_zone",
                    f"must be >= min_nodes_per_zone ({self.min_nodes_per_zone}), got {self.max_nodes_per_zone}",
                )
            ]
            if self.max_nodes_per_zone < self.min_nodes_per_zone
            else []
        )
        return self


class ArtifactRegistry(Strict):
    """The Docker repository serving images are pulled from (by digest)."""

    repository_id: Annotated[str, Field(pattern=r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")] = Field(
        description=("Repository id; release images must be ``<region>-docker.pkg.dev/<project>/<repository_id>/...``.")
    )
    keep_recent_versions: Annotated[int, Field(ge=1, le=10_000)] = Field(
        description=("Versions per image kept by the cleanup policy regardless of age (and so never deleted).")
    )
    untagged_retention_days: Annotated[int, Field(ge=1, le=3650)] = Field(
        description="Untagged versions older than this are deleted."
    )


class HyperdiskMl(Strict):
    """A read-only Hyperdisk ML volume per release loading via ``hyperdisk_ml`` (Terraform google provider docs).

    Each disk is created ``READ_ONLY_MANY`` from a snapshot of a disk the release pipeline hydrated with the
    release's immutable ``gs://<bucket>/<model>/<revision>/`` folder and verified against its manifest: an
    empty read-only disk would be useless, and nothing in the serving path ever writes to it.
    """

    size_gib: Annotated[int, Field(ge=HYPERDISK_ML_MIN_GIB, le=HYPERDISK_ML_MAX_GIB)] = Field(
        description=("Size of each volume in GiB; must hold the release's weights.")
    )
    provisioned_throughput_mib_s: Annotated[
        int, Field(ge=HYPERDISK_ML_MIN_THROUGHPUT_MIB_S, le=HYPERDISK_ML_MAX_THROUGHPUT_MIB_S)
    ] = Field(
        description=(
            "Provisioned read throughput of each volume (MiB/s), shared by every replica loading from it; a pool "
            "loading via hyperdisk_ml may not state more than this as its ``loading.throughput_mib_s``."
        )
    )
    snapshots: dict[
        str,
        Annotated[
            str,
            Field(
                pattern=r"^(projects/[a-z][-a-z0-9]{4,28}[a-z0-9]/global/snapshots/)?[a-z]([-a-z0-9]{0,61}[a-z0-9])?$"
            ),
        ],
    ] = Field(
        {},
        description=(
            "Release id -> source snapshot (``projects/<p>/global/snapshots/<name>`` or a name in this project)."
        ),
    )


#: A release pipeline identity: a service account or a group (never a user or a public member).
WRITER_MEMBER = r"^(serviceAccount:[a-z][-a-z0-9]{4,28}[a-z0-9]@[a-z][-a-z0-9]{4,28}[a-z0-9]\.iam\.gserviceaccount\.com|group:[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,})$"


class WeightStores(Strict):
    """The weights bucket (``gs://<bucket>/<model>/<revision>/``) and the optional Hyperdisk ML volumes."""

    bucket: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]{1,61}[a-z0-9]$")] = Field(
        description=("Weights bucket name; every release's ``weight_manifest`` must be in it.")
    )
    soft_delete_days: Annotated[int, Field(ge=0, le=90)] = Field(
        description=("Days a deleted or overwritten object stays recoverable (0 disables soft delete; else 7-90 days).")
    )
    writers: Annotated[list[Annotated[str, Field(pattern=WRITER_MEMBER)]], Field(min_length=1, max_length=10)] = Field(
        description=(
            "The release pipeline's identities (``serviceAccount:`` or ``group:``): the only principals this stack lets "
            "write to the bucket, with ``roles/storage.objectCreator`` — create only: replacing or deleting an object "
            "needs ``storage.objects.delete``, which they do not hold."
        )
    )
    hyperdisk_ml: HyperdiskMl | None = None

    @model_validator(mode="after")
    def _soft_delete(self) -> WeightStores:
        check(
            [("soft_delete_days", f"Cloud Storage soft delete is 0 (off) or 7-90 days, got {self.soft_delete_days}")]
            if 0 < self.soft_delete_days < 7
            else []
        )
        return self


class HubTokenSecret(Strict):
    """A Secret Manager secret holding a model-hub token; its value is added out of band, never in config."""

    secret_id: Annotated[str, Field(pattern=r"^[a-zA-Z0-9_-]{1,255}$")] = Field(
        description=("Secret Manager secret id; only the model-server KSA may access it.")
    )


class GkeConfig(Strict):
    cluster_name: Name = Field(
        description=("GKE cluster name (<= 23 characters); also the prefix of network resource names.")
    )
    location_type: Literal["zonal", "regional"] = Field(
        description=(
            "``zonal`` (control plane in the first stack zone; cheaper, dev) or ``regional`` (three replicas of the "
            "control plane, required in prod)."
        )
    )
    ranges: NetworkRanges = Field(
        description=("IPv4 ranges of the VPC, Pods, Services, proxy-only subnet and control plane.")
    )
    authorized_networks: Annotated[list[AuthorizedNetwork], Field(min_length=1)] = Field(
        description=("Ranges allowed to reach the public control-plane endpoint.")
    )
    release_channel: Literal["RAPID", "REGULAR", "STABLE"] = Field(
        description=("GKE release channel the cluster and node pools auto-upgrade on.")
    )
    min_version: str = Field(
        description=(
            "Minimum control-plane version (``min_master_version``): a minor version such as ``1.34`` (GKE picks a "
            "patch the release channel offers; an exact patch can disappear from a channel and then fails cluster "
            "creation) or an exact ``1.34.1-gke.3899000``; at least 1.34.0-gke.1626000, the first GKE version that "
            "installs the InferencePool CRD."
        )
    )
    maintenance: MaintenanceWindow = Field(description="Weekly maintenance window (UTC).")
    system_pool: SystemPool = Field(description="The CPU system node pool.")
    registry: ArtifactRegistry = Field(description="Artifact Registry repository of the serving images.")
    weights: WeightStores = Field(description="Weights bucket and optional Hyperdisk ML volumes.")
    hub_token: HubTokenSecret | None = Field(
        None, description=("Optional Secret Manager secret for a model-hub token (None: no secret).")
    )
    gpu_driver_version: Literal["DEFAULT", "LATEST"] = Field(
        "LATEST",
        description=(
            "NVIDIA driver GKE installs on GPU nodes: ``LATEST`` follows the newest driver of the node version, which "
            "recent vLLM CUDA builds need; ``DEFAULT`` pins the version's default."
        ),
    )
    protect: bool = Field(
        False,
        description=(
            "Protect stateful resources (cluster, reservations, weights bucket, Hyperdisk ML disks) from deletion: "
            "Pulumi ``protect`` plus the cluster's deletion protection. Required in prod."
        ),
    )
    bench: BenchConfig | None = Field(
        None,
        description=(
            "Optional in-cluster benchmark Job of one pool (``llm-serving bench`` from inside the cluster, its record "
            "written create-only to ``gs://<weights bucket>/measurements/``); absent = no Job."
        ),
    )

    @model_validator(mode="after")
    def _version(self) -> GkeConfig:
        floor = parse_gke_version(INFERENCE_GATEWAY_MIN_GKE)
        assert floor is not None
        exact, minor = parse_gke_version(self.min_version), GKE_MINOR_RE.match(self.min_version)
        if exact is None and minor is None:
            check(
                [
                    (
                        "min_version",
                        f"not a GKE minor version like 1.34 or a version like {INFERENCE_GATEWAY_MIN_GKE}: "
                        f"{self.min_version!r}",
                    )
                ]
            )
        elif exact is not None and exact < floor:
            check(
                [
                    (
                        "min_version",
                        f"{self.min_version} is older than {INFERENCE_GATEWAY_MIN_GKE}, the first GKE "
                        "version that installs the InferencePool CRD (Inference Gateway)",
                    )
                ]
            )
        elif minor is not None and (int(minor["major"]), int(minor["minor"])) < floor[:2]:
            check(
                [
                    (
                        "min_version",
                        f"{self.min_version} is older than {floor[0]}.{floor[1]}, the first minor version "
                        f"with a release that installs the InferencePool CRD ({INFERENCE_GATEWAY_MIN_GKE})",
                    )
                ]
            )
        return self

    @property
    def minor_version(self) -> str:
        """``1.34`` of ``1.34`` or ``1.34.1-gke.3899000``: the Kubernetes API version manifests are validated
        against."""
        v = parse_gke_version(self.min_version)
        if v is None:
            m = GKE_MINOR_RE.match(self.min_version)
            assert m is not None
            return f"{m['major']}.{m['minor']}"
        return f"{v[0]}.{v[1]}"
