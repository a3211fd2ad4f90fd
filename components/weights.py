"""Weight stores : the versioned weights bucket with the immutable path convention
``gs://<bucket>/<model>/<revision>/``, one read-only Hyperdisk ML volume per release that loads via
``hyperdisk_ml`` (Terraform google provider docs), and the StorageClass / PersistentVolume / PersistentVolumeClaim that mount it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from . import naming
from .base import Component

SECONDS_PER_DAY = 86400
CSI_DRIVER = "pd.csi.storage.gke.io"
STORAGE_CLASS = "hyperdisk-ml"
#: The API enum is READ_ONLY_MANY; the SDK docstring's "READ_ONLY_SINGLE" is a misprint (Terraform google provider docs).
HYPERDISK_ML_ACCESS_MODE = "READ_ONLY_MANY"
#: Larger kernel read-ahead for the sequential multi-GB safetensors reads (GKE Hyperdisk ML sample).
READ_AHEAD_MOUNT_OPTION = "read_ahead_kb=4096"
ZONE_TOPOLOGY_KEY = "topology.gke.io/zone"


def weights_disk_name(release_id: str) -> str:
    """Disk / PV / PVC name of a release's volume: ``weights-<release>`` with dots made dashes."""
    return "weights-" + re.sub(r"[^a-z0-9-]", "-", release_id.lower())


def bucket_location(region: str) -> str:
    """Region-matched bucket: weights are read where the GPUs are, with no inter-region egress."""
    return region.upper()


@dataclass(frozen=True)
class HyperdiskSpec:
    """Read-only Hyperdisk ML volumes, one per release, each created from a hydrated snapshot."""

    size_gib: int
    provisioned_throughput_mib_s: int
    #: Release id -> source snapshot.
    snapshots: dict[str, str]


#: The release pipeline writes with this role only: ``storage.objects.create`` without ``storage.objects.delete``,
#: so an existing object can be neither replaced nor removed by it (Cloud Storage IAM roles).
WRITER_ROLE = "roles/storage.objectCreator"


@dataclass(frozen=True)
class WeightsArgs:
    project: str
    region: str
    bucket: str
    #: Days a deleted or overwritten object stays recoverable (0 = off).
    soft_delete_days: int
    #: The release pipeline's identities: the only writers (``WRITER_ROLE``).
    writers: tuple[str, ...]
    hyperdisk: HyperdiskSpec | None
    #: Release id -> zone, for every release loading via hyperdisk_ml (its accelerator's reservation zone).
    hyperdisk_releases: dict[str, str]
    labels: dict[str, str]
    protect: bool

    def __post_init__(self) -> None:
        if self.hyperdisk_releases and self.hyperdisk is None:
            raise ValueError("WeightsArgs.hyperdisk: releases load via Hyperdisk ML but no volume spec was given")
        missing = sorted(set(self.hyperdisk_releases) - set(self.hyperdisk.snapshots if self.hyperdisk else {}))
        if missing:
            raise ValueError(f"WeightsArgs.hyperdisk.snapshots: no source snapshot for release(s) {missing}")


class Weights(Component):
    """The weights bucket and the Hyperdisk ML disks (cloud side).

    Never overwriting a release folder is enforced three ways: the stage tool writes create-only
    (``ifGenerationMatch=0``); the pipeline may only create objects (``WRITER_ROLE``); and the bucket puts an
    **event-based hold** on every new object (``default_event_based_hold``), so nobody — an administrator
    included — can replace or delete a staged file until someone explicitly releases its hold. Chosen over a
    retention policy because a release's lifetime is not a fixed period: holds cost nothing until a release is
    retired, and retiring one is two deliberate, audited steps
    (``gcloud storage objects update --no-event-based-hold gs://<bucket>/<model>/<revision>/**``, then
    ``gcloud storage rm``), whereas a locked retention policy could never be shortened and an unlocked one can be
    removed by anyone who can edit the bucket."""

    TYPE = "llm-serving:weights:Weights"

    def __init__(self, name: str, args: WeightsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, args, opts)
        protected = self.child_opts(protect=args.protect)
        self.bucket = gcp.storage.Bucket(
            f"{name}-bucket",
            name=args.bucket,
            project=args.project,
            location=bucket_location(args.region),
            storage_class="STANDARD",
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            versioning=gcp.storage.BucketVersioningArgs(enabled=True),
            # Every new object is held: see the class docstring.
            default_event_based_hold=True,
            soft_delete_policy=gcp.storage.BucketSoftDeletePolicyArgs(
                retention_duration_seconds=args.soft_delete_days * SECONDS_PER_DAY
            ),
            force_destroy=False,
            labels=args.labels,
            opts=protected,
        )
        self.bucket_name: str = args.bucket
        # Keyed by member (naming.member_key), aliased to the name by position earlier versions gave it.
        self.writers = [
            gcp.storage.BucketIAMMember(
                f"{name}-writer-{naming.member_key(m)}",
                bucket=self.bucket.name,
                role=WRITER_ROLE,
                member=m,
                opts=self.child_opts(aliases=[pulumi.Alias(name=f"{name}-writer-{i}")]),
            )
            for i, m in enumerate(args.writers)
        ]
        self.disks: dict[str, gcp.compute.Disk] = {}
        self.disk_zones: dict[str, str] = {}
        hd = args.hyperdisk
        if hd is not None:
            for release_id, zone in sorted(args.hyperdisk_releases.items()):
                disk_name = weights_disk_name(release_id)
                self.disks[release_id] = gcp.compute.Disk(
                    f"{name}-{disk_name}",
                    name=disk_name,
                    project=args.project,
                    zone=zone,
                    type="hyperdisk-ml",
                    size=hd.size_gib,
                    provisioned_throughput=hd.provisioned_throughput_mib_s,
                    access_mode=HYPERDISK_ML_ACCESS_MODE,
                    snapshot=hd.snapshots[release_id],
                    labels={**args.labels, "llm-serving-io-release": disk_name.removeprefix("weights-")},
                    opts=protected,
                )
                self.disk_zones[release_id] = zone
        self.register_outputs({"bucket": self.bucket.name, "disks": {r: d.name for r, d in self.disks.items()}})


@dataclass(frozen=True)
class WeightVolumesArgs:
    project: str
    #: Role -> (its namespace, the release it mounts), for every pool that loads via Hyperdisk ML.
    pools: dict[str, tuple[pulumi.Input[str], str]]
    size_gib: int
    provisioned_throughput_mib_s: int
    #: The sibling that owns the disks (passed as the object, not rebuilt from names).
    weights: Weights


def volume_handle(project: str, zone: str, disk: str) -> str:
    return f"projects/{project}/zones/{zone}/disks/{disk}"


class WeightVolumes(Component):
    """Kubernetes side of the Hyperdisk ML volumes: one StorageClass, and per release a static
    ``ReadOnlyMany`` PersistentVolume bound to its disk plus the claim pods mount. Pass the cluster's
    Kubernetes provider in ``opts.providers``."""

    TYPE = "llm-serving:weights:WeightVolumes"

    def __init__(self, name: str, args: WeightVolumesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, args, opts)
        child = self.child_opts()
        weights = args.weights
        labels = {naming.PART_OF_LABEL: naming.PART_OF, naming.COMPONENT_LABEL: "weights"}
        size = f"{args.size_gib}Gi"
        self.storage_class = k8s.storage.v1.StorageClass(
            f"{name}-sc",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=STORAGE_CLASS, labels=labels),
            provisioner=CSI_DRIVER,
            parameters={
                "type": "hyperdisk-ml",
                "provisioned-throughput-on-create": f"{args.provisioned_throughput_mib_s}Mi",
            },
            # Bind where the consuming pod is scheduled: the disk is zonal.
            volume_binding_mode="WaitForFirstConsumer",
            reclaim_policy="Retain",
            allow_volume_expansion=False,
            mount_options=[READ_AHEAD_MOUNT_OPTION],
            opts=child,
        )
        #: Role -> the claim its pods mount (same name in every pool namespace: the release's disk name).
        self.claims: dict[str, str] = {}
        self.volumes: dict[str, k8s.core.v1.PersistentVolume] = {}
        for role, (namespace, release_id) in sorted(args.pools.items()):
            if release_id not in weights.disks:
                raise ValueError(
                    f"WeightVolumesArgs.pools: pool {role!r} mounts release {release_id!r}, which has no "
                    "Hyperdisk ML disk"
                )
            disk, zone = weights.disks[release_id], weights.disk_zones[release_id]
            claim = weights_disk_name(release_id)
            # A PersistentVolume binds exactly one claim, so each pool namespace gets its own read-only PV of the
            # same disk (ReadOnlyMany: any number of readers).
            pv_name = f"{claim}-{role}"
            handle = disk.name.apply(partial(volume_handle, args.project, zone))
            self.volumes[role] = k8s.core.v1.PersistentVolume(
                f"{name}-pv-{pv_name}",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=pv_name, labels=labels),
                spec=k8s.core.v1.PersistentVolumeSpecArgs(
                    storage_class_name=STORAGE_CLASS,
                    capacity={"storage": size},
                    access_modes=["ReadOnlyMany"],
                    # Pulumi owns the disk (protected in prod); deleting the claim must not delete it.
                    persistent_volume_reclaim_policy="Retain",
                    mount_options=[READ_AHEAD_MOUNT_OPTION],
                    # Reserved for this pool's claim: no other claim of the class can bind it first.
                    claim_ref=k8s.core.v1.ObjectReferenceArgs(
                        kind="PersistentVolumeClaim", name=claim, namespace=namespace
                    ),
                    csi=k8s.core.v1.CSIPersistentVolumeSourceArgs(
                        driver=CSI_DRIVER, volume_handle=handle, fs_type="ext4", read_only=True
                    ),
                    node_affinity=k8s.core.v1.VolumeNodeAffinityArgs(
                        required=k8s.core.v1.NodeSelectorArgs(
                            node_selector_terms=[
                                k8s.core.v1.NodeSelectorTermArgs(
                                    match_expressions=[
                                        k8s.core.v1.NodeSelectorRequirementArgs(
                                            key=ZONE_TOPOLOGY_KEY, operator="In", values=[zone]
                                        )
                                    ]
                                )
                            ]
                        )
                    ),
                ),
                opts=self.child_opts(depends_on=[self.storage_class]),
            )
            k8s.core.v1.PersistentVolumeClaim(
                f"{name}-pvc-{role}-{claim}",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=claim, namespace=namespace, labels=labels),
                spec=k8s.core.v1.PersistentVolumeClaimSpecArgs(
                    storage_class_name=STORAGE_CLASS,
                    access_modes=["ReadOnlyMany"],
                    volume_name=pv_name,
                    resources=k8s.core.v1.VolumeResourceRequirementsArgs(requests={"storage": size}),
                ),
                opts=self.child_opts(depends_on=[self.volumes[role]]),
            )
            self.claims[role] = claim
        self.register_outputs({"claims": self.claims})
