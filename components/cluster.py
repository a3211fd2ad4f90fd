"""The GKE Standard cluster and its system node pool .

The cluster enables: private nodes, authorised networks, Workload Identity, Gateway API, Managed Prometheus with
DCGM, GCS FUSE and PD CSI drivers, Dataplane V2, shielded nodes, a maintenance window and deletion protection.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from . import naming
from .base import Component
from .identity import NodeServiceAccount, NodeServiceAccountArgs, workload_pool
from .network import POD_RANGE_NAME, SERVICE_RANGE_NAME

#: First occurrence of the recurring maintenance window. GKE only uses it as the anchor of the RRULE, so
#: a fixed past Monday keeps the plan deterministic (no "now").
MAINTENANCE_ANCHOR = dt.date(2026, 1, 5)
#: System pool taint-free CPU nodes; OAuth scope cloud-platform so IAM alone decides access.
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
#: Cloud Monitoring packages: DCGM for GPU duty cycle / memory panels, and the kube-state packages the
#: dashboard and alerts query: POD (restart alert), DEPLOYMENT (replica counts), HPA (current vs desired).
MONITORING_COMPONENTS: tuple[str, ...] = ("SYSTEM_COMPONENTS", "DCGM", "POD", "DEPLOYMENT", "HPA")
LOGGING_COMPONENTS: tuple[str, ...] = ("SYSTEM_COMPONENTS", "WORKLOADS")
SYSTEM_POOL_LABEL = {naming.POOL_KIND_LABEL: "system"}
WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")


@dataclass(frozen=True)
class AuthorizedNetwork:
    cidr: str
    display_name: str


@dataclass(frozen=True)
class MaintenanceWindow:
    """Weekly window (UTC): weekdays (MO..SU), ``HH:MM`` start, length in hours."""

    days: tuple[str, ...]
    start_utc: str
    duration_hours: int


@dataclass(frozen=True)
class SystemPoolSpec:
    machine_type: str
    min_nodes_per_zone: int
    max_nodes_per_zone: int
    disk_size_gb: int


@dataclass(frozen=True)
class ClusterArgs:
    project: str
    name: str
    #: The region (regional cluster) or one zone (zonal cluster).
    location: str
    #: Zones of the node pools; None keeps GKE's default (a zonal cluster's own zone).
    node_locations: tuple[str, ...] | None
    network_id: pulumi.Input[str]
    subnetwork_id: pulumi.Input[str]
    #: Control-plane range of the private cluster (a /28).
    master_cidr: str
    authorized_networks: tuple[AuthorizedNetwork, ...]
    release_channel: str
    min_version: str
    maintenance: MaintenanceWindow
    system_pool: SystemPoolSpec
    protect: bool
    labels: dict[str, str]

    def __post_init__(self) -> None:
        if not self.authorized_networks:
            raise ValueError("ClusterArgs.authorized_networks: at least one range must reach the control plane")
        unknown = [d for d in self.maintenance.days if d not in WEEKDAYS]
        if unknown:
            raise ValueError(f"ClusterArgs.maintenance.days: {unknown} are not weekdays {WEEKDAYS}")


def maintenance_window(w: MaintenanceWindow) -> gcp.container.ClusterMaintenancePolicyArgs:
    """Weekly recurring window: RFC 3339 start/end on a fixed anchor date and an RRULE of the days."""
    hour, minute = (int(x) for x in w.start_utc.split(":"))
    start = dt.datetime.combine(MAINTENANCE_ANCHOR, dt.time(hour, minute), tzinfo=dt.UTC)
    end = start + dt.timedelta(hours=w.duration_hours)
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    days = ",".join(d for d in WEEKDAYS if d in w.days)
    return gcp.container.ClusterMaintenancePolicyArgs(
        recurring_window=gcp.container.ClusterMaintenancePolicyRecurringWindowArgs(
            start_time=start.strftime(fmt), end_time=end.strftime(fmt), recurrence=f"FREQ=WEEKLY;BYDAY={days}"
        )
    )


def kubeconfig(name: str, endpoint: str, ca_certificate: str) -> str:
    """A kubeconfig for the cluster that authenticates through ``gke-gcloud-auth-plugin`` (no static
    credentials): the Kubernetes provider of the later components uses it."""
    return (
        "apiVersion: v1\n"
        "kind: Config\n"
        "clusters:\n"
        f"- name: {name}\n"
        "  cluster:\n"
        f"    server: https://{endpoint}\n"
        f"    certificate-authority-data: {ca_certificate}\n"
        "contexts:\n"
        f"- name: {name}\n"
        "  context:\n"
        f"    cluster: {name}\n"
        f"    user: {name}\n"
        f"current-context: {name}\n"
        "users:\n"
        f"- name: {name}\n"
        "  user:\n"
        "    exec:\n"
        "      apiVersion: client.authentication.k8s.io/v1beta1\n"
        "      command: gke-gcloud-auth-plugin\n"
        "      installHint: Install gke-gcloud-auth-plugin (gcloud components install gke-gcloud-auth-plugin)\n"
        "      provideClusterInfo: true\n"
        "      interactiveMode: Never\n"
    )


class Cluster(Component):
    """GKE Standard cluster with the default pool removed, plus the autoscaled system pool."""

    TYPE = "llm-serving:cluster:Cluster"

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, args, opts)
        child = self.child_opts()
        node_locations = list(args.node_locations) if args.node_locations is not None else None
        self.location = args.location
        self.workload_pool = workload_pool(args.project)
        self.system_identity = NodeServiceAccount(
            f"{name}-system-nodes",
            NodeServiceAccountArgs(
                project=args.project,
                account_id=f"{args.name}-system"[:30],
                display_name=f"GKE system nodes of {args.name}",
            ),
            opts=child,
        )
        shielded = gcp.container.ClusterNodeConfigShieldedInstanceConfigArgs(
            enable_secure_boot=True, enable_integrity_monitoring=True
        )
        self.cluster = gcp.container.Cluster(
            f"{name}-gke",
            name=args.name,
            project=args.project,
            location=self.location,
            node_locations=node_locations,
            network=args.network_id,
            subnetwork=args.subnetwork_id,
            networking_mode="VPC_NATIVE",
            ip_allocation_policy=gcp.container.ClusterIpAllocationPolicyArgs(
                cluster_secondary_range_name=POD_RANGE_NAME, services_secondary_range_name=SERVICE_RANGE_NAME
            ),
            # Dataplane V2 (eBPF) enforces NetworkPolicy without the Calico add-on.
            datapath_provider="ADVANCED_DATAPATH",
            private_cluster_config=gcp.container.ClusterPrivateClusterConfigArgs(
                enable_private_nodes=True, enable_private_endpoint=False, master_ipv4_cidr_block=args.master_cidr
            ),
            master_authorized_networks_config=gcp.container.ClusterMasterAuthorizedNetworksConfigArgs(
                cidr_blocks=[
                    gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(
                        cidr_block=n.cidr, display_name=n.display_name
                    )
                    for n in args.authorized_networks
                ],
                gcp_public_cidrs_access_enabled=False,
            ),
            release_channel=gcp.container.ClusterReleaseChannelArgs(channel=args.release_channel),
            min_master_version=args.min_version,
            workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(workload_pool=self.workload_pool),
            gateway_api_config=gcp.container.ClusterGatewayApiConfigArgs(channel="CHANNEL_STANDARD"),
            monitoring_config=gcp.container.ClusterMonitoringConfigArgs(
                enable_components=list(MONITORING_COMPONENTS),
                managed_prometheus=gcp.container.ClusterMonitoringConfigManagedPrometheusArgs(enabled=True),
            ),
            logging_config=gcp.container.ClusterLoggingConfigArgs(enable_components=list(LOGGING_COMPONENTS)),
            addons_config=gcp.container.ClusterAddonsConfigArgs(
                http_load_balancing=gcp.container.ClusterAddonsConfigHttpLoadBalancingArgs(disabled=False),
                horizontal_pod_autoscaling=gcp.container.ClusterAddonsConfigHorizontalPodAutoscalingArgs(
                    disabled=False
                ),
                gcs_fuse_csi_driver_config=gcp.container.ClusterAddonsConfigGcsFuseCsiDriverConfigArgs(enabled=True),
                gce_persistent_disk_csi_driver_config=gcp.container.ClusterAddonsConfigGcePersistentDiskCsiDriverConfigArgs(
                    enabled=True
                ),
            ),
            enable_shielded_nodes=True,
            # The default pool cannot be configured as tightly as a separate pool: remove it at creation.
            remove_default_node_pool=True,
            initial_node_count=1,
            node_config=gcp.container.ClusterNodeConfigArgs(
                service_account=self.system_identity.email,
                oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                shielded_instance_config=shielded,
                workload_metadata_config=gcp.container.ClusterNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
            ),
            maintenance_policy=maintenance_window(args.maintenance),
            deletion_protection=args.protect,
            resource_labels=args.labels,
            opts=self.child_opts(
                protect=args.protect,
                # GKE replaces the removed default pool's config; ignore drift there.
                ignore_changes=["nodeConfig", "initialNodeCount"],
            ),
        )
        sp = args.system_pool
        self.system_pool = gcp.container.NodePool(
            f"{name}-system-pool",
            name="system",
            project=args.project,
            cluster=self.cluster.name,
            location=self.location,
            node_locations=node_locations,
            initial_node_count=sp.min_nodes_per_zone,
            autoscaling=gcp.container.NodePoolAutoscalingArgs(
                min_node_count=sp.min_nodes_per_zone, max_node_count=sp.max_nodes_per_zone
            ),
            management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
            node_config=gcp.container.NodePoolNodeConfigArgs(
                machine_type=sp.machine_type,
                disk_size_gb=sp.disk_size_gb,
                disk_type="pd-balanced",
                image_type="COS_CONTAINERD",
                service_account=self.system_identity.email,
                oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                labels=SYSTEM_POOL_LABEL,
                resource_labels=args.labels,
                shielded_instance_config=gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs(
                    enable_secure_boot=True, enable_integrity_monitoring=True
                ),
                workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(
                    mode="GKE_METADATA"
                ),
            ),
            opts=self.child_opts(ignore_changes=["initialNodeCount"]),
        )
        self.kubeconfig: pulumi.Output[str] = pulumi.Output.all(
            self.cluster.name,
            self.cluster.endpoint,
            self.cluster.master_auth.cluster_ca_certificate,
        ).apply(lambda a: kubeconfig(f"gke_{args.project}_{self.location}_{a[0]}", a[1], a[2]))
        self.register_outputs(
            {
                "name": self.cluster.name,
                "location": self.location,
                "endpoint": self.cluster.endpoint,
                "workload_pool": self.workload_pool,
                "system_pool": self.system_pool.name,
            }
        )
