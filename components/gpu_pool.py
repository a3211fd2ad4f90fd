"""One GPU node pool per accelerator topology, owning what makes its nodes specific: the zonal
reservation it consumes (created when the stack owns it), reservation affinity, GPU config, taint, labels
and its own node service account."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pulumi
import pulumi_gcp as gcp

from . import naming
from .base import Component
from .cluster import CLOUD_PLATFORM_SCOPE
from .identity import NodeServiceAccount, NodeServiceAccountArgs

#: GPU boot disk (GB): the vLLM image is ~10 GB compressed and image streaming caches layers on it.
GPU_BOOT_DISK_GB = 200


def node_pool_name(accelerator: str) -> str:
    return f"gpu-{accelerator}"


def node_account_id(accelerator: str) -> str:
    return f"gke-gpu-{accelerator}"


def member_node_account_id(cluster_name: str, accelerator: str) -> str:
    """Node service account of a fleet member's GPU pool: ``<cluster>-<accelerator>`` (the fleet rules keep it a
    valid id of at most 30 characters, and cluster names are unique in the fleet)."""
    return f"{cluster_name}-{accelerator}"


@dataclass(frozen=True)
class ReservationSpec:
    """A zonal reservation the pool consumes by name: ``create`` = the stack owns it; ``existing`` = consume
    one by name, optionally shared from ``owner_project``."""

    mode: Literal["create", "existing"]
    name: str
    count: int
    owner_project: str | None = None


@dataclass(frozen=True)
class GpuSharingSpec:
    strategy: Literal["MPS", "TIME_SHARING"]
    max_shared_clients_per_gpu: int


@dataclass(frozen=True)
class AcceleratorSpec:
    """The GPU machine shape of one node pool."""

    key: str
    machine_type: str
    gpu_type: str
    gpus_per_node: int
    zone: str
    spot: bool
    boot_disk_type: str
    reservation: ReservationSpec | None = None
    gpu_sharing: GpuSharingSpec | None = None

    def __post_init__(self) -> None:
        if self.spot and self.reservation is not None:
            raise ValueError(f"AcceleratorSpec {self.key!r}: Spot VMs cannot consume a reservation")


@dataclass(frozen=True)
class NodeBounds:
    min_nodes: int
    max_nodes: int

    def __post_init__(self) -> None:
        if not 0 <= self.min_nodes <= self.max_nodes:
            raise ValueError(f"NodeBounds: need 0 <= min_nodes ({self.min_nodes}) <= max_nodes ({self.max_nodes})")


def reservation_affinity_value(project: str, r: ReservationSpec) -> str:
    """The reservation name a node pool targets: a bare name in this project, or
    ``projects/<owner>/reservations/<name>`` for a reservation shared from another project."""
    if r.owner_project is not None and r.owner_project != project:
        return f"projects/{r.owner_project}/reservations/{r.name}"
    return r.name


@dataclass(frozen=True)
class GpuNodePoolArgs:
    project: str
    accelerator: AcceleratorSpec
    cluster_name: pulumi.Input[str]
    cluster_location: str
    bounds: NodeBounds
    gpu_driver_version: str
    labels: dict[str, str]
    protect: bool
    #: The node service account id; None: ``node_account_id`` (the stack's own cluster). Service-account ids are
    #: project-wide, so a fleet's other clusters name theirs after the cluster (``member_node_account_id``).
    account_id: str | None = None


def upgrade_settings(acc: AcceleratorSpec) -> gcp.container.NodePoolUpgradeSettingsArgs:
    """How GKE replaces nodes during an upgrade. On a specific reservation every reserved VM may be in use (max
    replicas + rollout surge fill it exactly), so a surge node could not be created and the upgrade would stall:
    drain one node first instead (the N+1 headroom and the PodDisruptionBudget absorb one replica). Without a
    reservation a surge node comes from on-demand/Spot capacity, so surge one and never take a serving node away
    first. Either way upgrades run inside the maintenance window."""
    if acc.reservation is not None:
        return gcp.container.NodePoolUpgradeSettingsArgs(max_surge=0, max_unavailable=1)
    return gcp.container.NodePoolUpgradeSettingsArgs(max_surge=1, max_unavailable=0)


def guest_accelerator(args: GpuNodePoolArgs) -> gcp.container.NodePoolNodeConfigGuestAcceleratorArgs:
    acc = args.accelerator
    sharing = None
    if acc.gpu_sharing is not None:
        sharing = gcp.container.NodePoolNodeConfigGuestAcceleratorGpuSharingConfigArgs(
            gpu_sharing_strategy=acc.gpu_sharing.strategy,
            max_shared_clients_per_gpu=acc.gpu_sharing.max_shared_clients_per_gpu,
        )
    return gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
        type=acc.gpu_type,
        count=acc.gpus_per_node,
        gpu_sharing_config=sharing,
        gpu_driver_installation_config=gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
            gpu_driver_version=args.gpu_driver_version
        ),
    )


class GpuNodePool(Component):
    TYPE = "llm-serving:gpu:GpuNodePool"

    def __init__(self, name: str, args: GpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, args, opts)
        acc = args.accelerator
        child = self.child_opts()
        self.identity = NodeServiceAccount(
            f"{name}-nodes",
            NodeServiceAccountArgs(
                project=args.project,
                account_id=args.account_id or node_account_id(acc.key),
                display_name=f"GKE GPU nodes ({acc.key})",
            ),
            opts=child,
        )

        self.reservation: gcp.compute.Reservation | None = None
        affinity = gcp.container.NodePoolNodeConfigReservationAffinityArgs(consume_reservation_type="NO_RESERVATION")
        if acc.reservation is not None:
            value: pulumi.Input[str] = reservation_affinity_value(args.project, acc.reservation)
            if acc.reservation.mode == "create":
                self.reservation = gcp.compute.Reservation(
                    f"{name}-reservation",
                    name=acc.reservation.name,
                    project=args.project,
                    zone=acc.zone,
                    # Only VMs naming this reservation consume it: nothing else in the project can eat the GPUs.
                    specific_reservation_required=True,
                    specific_reservation=gcp.compute.ReservationSpecificReservationArgs(
                        count=acc.reservation.count,
                        instance_properties=gcp.compute.ReservationSpecificReservationInstancePropertiesArgs(
                            machine_type=acc.machine_type,
                            guest_accelerators=[
                                gcp.compute.ReservationSpecificReservationInstancePropertiesGuestAcceleratorArgs(
                                    accelerator_type=acc.gpu_type, accelerator_count=acc.gpus_per_node
                                )
                            ],
                        ),
                    ),
                    # a3 machine types come with local SSDs the API reports in the reservation's instance
                    # properties whether asked for or not (and their count differs per shape); declaring them here
                    # would hard-code a machine fact, leaving them unset would show a diff on every update.
                    opts=self.child_opts(
                        protect=args.protect, ignore_changes=["specificReservation.instanceProperties.localSsds"]
                    ),
                )
                value = self.reservation.name
            affinity = gcp.container.NodePoolNodeConfigReservationAffinityArgs(
                consume_reservation_type="SPECIFIC_RESERVATION", key=naming.RESERVATION_NAME_KEY, values=[value]
            )

        self.node_pool = gcp.container.NodePool(
            f"{name}-pool",
            name=node_pool_name(acc.key),
            project=args.project,
            cluster=args.cluster_name,
            location=args.cluster_location,
            # The reservation is zonal: the nodes can only be where it is.
            node_locations=[acc.zone],
            initial_node_count=args.bounds.min_nodes,
            autoscaling=gcp.container.NodePoolAutoscalingArgs(
                total_min_node_count=args.bounds.min_nodes,
                total_max_node_count=args.bounds.max_nodes,
                location_policy="ANY",
            ),
            management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
            upgrade_settings=upgrade_settings(acc),
            node_config=gcp.container.NodePoolNodeConfigArgs(
                machine_type=acc.machine_type,
                spot=acc.spot,
                guest_accelerators=[guest_accelerator(args)],
                reservation_affinity=affinity,
                labels={naming.ACCELERATOR_LABEL: acc.key},
                taints=[
                    gcp.container.NodePoolNodeConfigTaintArgs(
                        key=naming.GPU_TAINT_KEY, value=naming.GPU_TAINT_VALUE, effect="NO_SCHEDULE"
                    )
                ],
                service_account=self.identity.email,
                oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(
                    mode="GKE_METADATA"
                ),
                shielded_instance_config=gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs(
                    enable_secure_boot=True, enable_integrity_monitoring=True
                ),
                image_type="COS_CONTAINERD",
                disk_type=acc.boot_disk_type,
                disk_size_gb=GPU_BOOT_DISK_GB,
                # Image streaming: the multi-GB vLLM image starts before it is fully pulled (cold start).
                gcfs_config=gcp.container.NodePoolNodeConfigGcfsConfigArgs(enabled=True),
                gvnic=gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True),
                resource_labels=args.labels,
            ),
            opts=self.child_opts(protect=args.protect, ignore_changes=["initialNodeCount"]),
        )
        self.register_outputs(
            {
                "node_pool": self.node_pool.name,
                "service_account": self.identity.email,
                "reservation": self.reservation.name
                if self.reservation
                else (acc.reservation.name if acc.reservation else ""),
            }
        )
