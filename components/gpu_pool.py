"""One GPU node pool per accelerator topology, owning what makes its nodes specific: the zonal
reservation it consumes (created when ``mode: create``), reservation affinity, GPU config, taint, labels
and its own node service account (issue 3 §4; FACTS §8)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from infra.planning import capacity
from infra.config.accelerator import AcceleratorTopology, machine_family

from .cluster import CLOUD_PLATFORM_SCOPE
from .identity import NodeServiceAccount, NodeServiceAccountArgs
from .options import child_options

#: Shared naming contract: node label and taint of every GPU node.
ACCELERATOR_LABEL = "llm-serving.io/accelerator"
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "present"
RESERVATION_NAME_KEY = "compute.googleapis.com/reservation-name"
#: Machine families whose boot disk must be Hyperdisk (A3 Ultra, A4 support no Persistent Disk).
HYPERDISK_BOOT_FAMILIES = frozenset({"a3-ultragpu", "a4-highgpu"})
#: GPU boot disk (GB): the vLLM image is ~10 GB compressed and image streaming caches layers on it.
GPU_BOOT_DISK_GB = 200


def node_pool_name(accelerator: str) -> str:
    return f"gpu-{accelerator}"


def node_account_id(accelerator: str) -> str:
    return f"gke-gpu-{accelerator}"


def reservation_affinity_value(project: str, acc: AcceleratorTopology) -> str:
    """The reservation name a node pool targets: a bare name in this project, or
    ``projects/<owner>/reservations/<name>`` for a reservation shared from another project."""
    assert acc.reservation is not None
    owner = acc.reservation.owner_project
    if owner is not None and owner != project:
        return f"projects/{owner}/reservations/{acc.reservation.name}"
    return acc.reservation.name


@dataclass(frozen=True)
class NodeBounds:
    min_nodes: int
    max_nodes: int


def node_bounds(pools: list[capacity.PoolPlan], acc_plan: capacity.AcceleratorPlan) -> NodeBounds:
    """Autoscaling bounds of the pool's nodes: enough for every pool's warm replicas at the minimum, and
    max replicas + one rollout surge replica per pool at the maximum ("maxSurge: 1 cannot manufacture a
    GPU"). Config validation has proven the maximum fits in the reservation."""
    per_node = acc_plan.replicas_per_node
    return NodeBounds(min_nodes=capacity.nodes_for(sum(p.min_replicas for p in pools), per_node),
                      max_nodes=acc_plan.nodes_for_max_plus_surge)


def boot_disk_type(machine_type: str) -> str:
    return "hyperdisk-balanced" if machine_family(machine_type) in HYPERDISK_BOOT_FAMILIES else "pd-balanced"


@dataclass(frozen=True)
class GpuNodePoolArgs:
    project: str
    accelerator: str
    topology: AcceleratorTopology
    cluster_name: pulumi.Input[str]
    cluster_location: str
    bounds: NodeBounds
    gpu_driver_version: str
    labels: dict[str, str]
    protect: bool


def guest_accelerator(args: GpuNodePoolArgs) -> gcp.container.NodePoolNodeConfigGuestAcceleratorArgs:
    acc = args.topology
    sharing = None
    if acc.gpu_sharing is not None:
        sharing = gcp.container.NodePoolNodeConfigGuestAcceleratorGpuSharingConfigArgs(
            gpu_sharing_strategy=acc.gpu_sharing.strategy,
            max_shared_clients_per_gpu=acc.gpu_sharing.max_shared_clients_per_gpu)
    return gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
        type=acc.gpu_type, count=acc.gpus_per_node, gpu_sharing_config=sharing,
        gpu_driver_installation_config=gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
            gpu_driver_version=args.gpu_driver_version))


class GpuNodePool(pulumi.ComponentResource):
    TYPE = "llm-serving:gpu:GpuNodePool"

    def __init__(self, name: str, args: GpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(self.TYPE, name, None, opts)
        acc = args.topology
        child = child_options(self, opts)
        self.identity = NodeServiceAccount(
            f"{name}-nodes",
            NodeServiceAccountArgs(project=args.project, account_id=node_account_id(args.accelerator),
                                   display_name=f"GKE GPU nodes ({args.accelerator})"),
            opts=child)

        self.reservation: gcp.compute.Reservation | None = None
        affinity = gcp.container.NodePoolNodeConfigReservationAffinityArgs(consume_reservation_type="NO_RESERVATION")
        if acc.reservation is not None:
            value: pulumi.Input[str] = reservation_affinity_value(args.project, acc)
            if acc.reservation.mode == "create":
                self.reservation = gcp.compute.Reservation(
                    f"{name}-reservation", name=acc.reservation.name, project=args.project, zone=acc.zone,
                    # Only VMs naming this reservation consume it: nothing else in the project can eat the GPUs.
                    specific_reservation_required=True,
                    specific_reservation=gcp.compute.ReservationSpecificReservationArgs(
                        count=acc.reservation.count,
                        instance_properties=gcp.compute.ReservationSpecificReservationInstancePropertiesArgs(
                            machine_type=acc.machine_type,
                            guest_accelerators=[gcp.compute.ReservationSpecificReservationInstancePropertiesGuestAcceleratorArgs(
                                accelerator_type=acc.gpu_type, accelerator_count=acc.gpus_per_node)])),
                    opts=child_options(self, opts, protect=args.protect))
                value = self.reservation.name
            affinity = gcp.container.NodePoolNodeConfigReservationAffinityArgs(
                consume_reservation_type="SPECIFIC_RESERVATION", key=RESERVATION_NAME_KEY, values=[value])

        self.node_pool = gcp.container.NodePool(
            f"{name}-pool",
            name=node_pool_name(args.accelerator), project=args.project, cluster=args.cluster_name,
            location=args.cluster_location,
            # The reservation is zonal: the nodes can only be where it is.
            node_locations=[acc.zone],
            initial_node_count=args.bounds.min_nodes,
            autoscaling=gcp.container.NodePoolAutoscalingArgs(
                total_min_node_count=args.bounds.min_nodes, total_max_node_count=args.bounds.max_nodes,
                location_policy="ANY"),
            management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
            # Node upgrades surge one node (from the reservation's rollout headroom) and never take a serving
            # node away first; they run inside the maintenance window, not during a model rollout.
            upgrade_settings=gcp.container.NodePoolUpgradeSettingsArgs(max_surge=1, max_unavailable=0),
            node_config=gcp.container.NodePoolNodeConfigArgs(
                machine_type=acc.machine_type, spot=acc.spot,
                guest_accelerators=[guest_accelerator(args)],
                reservation_affinity=affinity,
                labels={ACCELERATOR_LABEL: args.accelerator},
                taints=[gcp.container.NodePoolNodeConfigTaintArgs(
                    key=GPU_TAINT_KEY, value=GPU_TAINT_VALUE, effect="NO_SCHEDULE")],
                service_account=self.identity.email, oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
                shielded_instance_config=gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs(
                    enable_secure_boot=True, enable_integrity_monitoring=True),
                image_type="COS_CONTAINERD", disk_type=boot_disk_type(acc.machine_type), disk_size_gb=GPU_BOOT_DISK_GB,
                # Image streaming: the multi-GB vLLM image starts before it is fully pulled (cold start).
                gcfs_config=gcp.container.NodePoolNodeConfigGcfsConfigArgs(enabled=True),
                gvnic=gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True),
                resource_labels=args.labels),
            opts=child_options(self, opts, ignore_changes=["initialNodeCount"]),
        )
        self.register_outputs({
            "node_pool": self.node_pool.name, "service_account": self.identity.email,
            "reservation": self.reservation.name if self.reservation else (acc.reservation.name if acc.reservation else ""),
        })
