"""A fleet's other regions and its registration: per region a cluster in the config cluster's VPC with its GPU node
pools on that region's reservations; per cluster a GKE Hub membership; the multi-cluster Ingress feature naming the
config cluster (the GKE multi-cluster Inference Gateway's prerequisites, GKE "Set up the GKE multi-cluster
Inference Gateway").

What the member does not create, and why: the registry and the weights bucket are the config platform's (one copy
of each release, read across regions); so are the Workload Identity grants, because every cluster of a project
shares the pool ``<project>.svc.id.goog`` and a pool's Kubernetes service account is therefore one principal in every
region (Workload Identity Federation for GKE docs, "Identity sameness").
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from . import naming
from .base import Component
from .cluster import Cluster
from .gpu_pool import GpuNodePool, member_node_account_id
from .identity import WorkloadIdentity, WorkloadIdentityArgs
from .network import LoadBalancerFirewall, LoadBalancerFirewallArgs, NetworkArgs, RegionalNetwork
from .platform import ClusterSpec, GpuPoolSpec, cluster_args, gpu_node_pools, workload_pool_of
from .registry import READER_ROLE

#: GKE Hub memberships and fleet features are global resources (gcloud ``container fleet memberships register``
#: registers GKE clusters in ``global``; Terraform google_gke_hub_feature multiclusteringress example).
FLEET_LOCATION = "global"
#: The fleet feature behind multi-cluster Gateways (gcloud ``container fleet ingress enable --config-membership``).
MULTICLUSTER_INGRESS_FEATURE = "multiclusteringress"
#: APIs a fleet needs beyond the platform's: GKE Hub and Autoscaling (GKE "Set up the GKE multi-cluster Inference
#: Gateway", "Before you begin"), and those of multi-cluster Gateways: Multi Cluster Ingress, Multi-cluster Service
#: Discovery, Traffic Director (GKE "Enable multi-cluster Gateways").
FLEET_SERVICES: tuple[str, ...] = (
    "autoscaling.googleapis.com",
    "gkehub.googleapis.com",
    "multiclusteringress.googleapis.com",
    "multiclusterservicediscovery.googleapis.com",
    "trafficdirector.googleapis.com",
)


def membership_resource_link(cluster_id: str) -> str:
    """``endpoint.gkeCluster.resourceLink`` of a membership: the cluster's full resource name
    (``//container.googleapis.com/`` + the cluster's id; Terraform google_gke_hub_membership examples)."""
    return f"//container.googleapis.com/{cluster_id}"


@dataclass(frozen=True)
class FleetMemberArgs:
    project: str
    region: str
    #: This region's ranges and names (prefix = its cluster name); its subnets join ``vpc_id``.
    network: NetworkArgs
    vpc_id: pulumi.Input[str]
    cluster: ClusterSpec
    gpu_pools: tuple[GpuPoolSpec, ...]
    #: The config platform's Artifact Registry repository (id and region): this region's GPU nodes pull from it.
    registry_repository: pulumi.Input[str]
    registry_region: str
    project_number: pulumi.Input[str]
    #: The serving roles (each gets its namespace and model-server KSA, as in the config cluster).
    roles: tuple[str, ...]
    weights_bucket: pulumi.Input[str]
    labels: dict[str, str]
    protect: bool
    #: The other regions' proxy-only ranges (the config region's and every other member's): the cross-regional
    #: load balancer's proxies anywhere in the fleet may send to this region's backends.
    fleet_proxy_ranges: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.network.region != self.region:
            raise ValueError(f"FleetMemberArgs.network.region: {self.network.region!r} is not {self.region!r}")
        keys = [p.accelerator.key for p in self.gpu_pools]
        if len(set(keys)) != len(keys):
            raise ValueError(f"FleetMemberArgs.gpu_pools: accelerator keys must be unique, got {keys}")


class FleetMember(Component):
    """One more region of a fleet: its subnets in the config VPC, its cluster, its GPU node pools (node service
    accounts named after the cluster: ids are project-wide), the load-balancer firewall openings of its proxy-only
    range, image-pull grants on the config registry, its Kubernetes provider, and the serving namespaces and KSAs
    (no grants: see the module docstring)."""

    TYPE = "llm-serving:fleet:FleetMember"

    def __init__(self, name: str, args: FleetMemberArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, args, opts)
        c = args.cluster
        child = self.child_opts()
        self.cluster_name: str = c.name
        self.network = RegionalNetwork(f"{name}-network", args.network, args.vpc_id, opts=child)
        self.proxy_only_cidr: str = args.network.proxy_only_cidr
        self.gke = Cluster(
            f"{name}-cluster",
            cluster_args(args.project, c, args.vpc_id, self.network.subnet.id, args.labels, args.protect),
            opts=child,
        )
        self.cluster: gcp.container.Cluster = self.gke.cluster
        self.workload_pool: pulumi.Output[str] = workload_pool_of(self.cluster)
        self.gpu_pools: dict[str, GpuNodePool] = gpu_node_pools(
            name,
            args.project,
            args.gpu_pools,
            self.gke,
            c.gpu_driver_version,
            args.labels,
            args.protect,
            child,
            # Service-account ids are project-wide: the member's are named after its cluster.
            account_id=lambda key: member_node_account_id(c.name, key),
        )
        self.gpu_node_pools: dict[str, gcp.container.NodePool] = {k: p.node_pool for k, p in self.gpu_pools.items()}
        self.firewall = LoadBalancerFirewall(
            f"{name}-lb-firewall",
            LoadBalancerFirewallArgs(
                network=args.network,
                network_id=args.vpc_id,
                model_server_accounts=tuple(p.identity.email for _, p in sorted(self.gpu_pools.items())),
                epp_accounts=(self.gke.system_identity.email,),
                fleet_proxy_ranges=args.fleet_proxy_ranges,
            ),
            opts=child,
        )
        self.registry_readers = [
            gcp.artifactregistry.RepositoryIamMember(
                f"{name}-registry-reader-gpu-{key}",
                project=args.project,
                location=args.registry_region,
                repository=args.registry_repository,
                role=READER_ROLE,
                member=pool.identity.member,
                opts=child,
            )
            for key, pool in sorted(self.gpu_pools.items())
        ]
        self.k8s_provider = k8s.Provider(
            f"{name}{naming.K8S_PROVIDER_SUFFIX}", kubeconfig=self.gke.kubeconfig, opts=child
        )
        self.identity = WorkloadIdentity(
            f"{name}-identity",
            WorkloadIdentityArgs(
                project=args.project,
                region=args.region,
                project_number=args.project_number,
                workload_pool=self.workload_pool,
                weights_bucket=args.weights_bucket,
                roles=args.roles,
                labels=args.labels,
                grant_access=False,
            ),
            opts=self.child_opts(providers=[self.k8s_provider]),
        )
        self.serving_namespaces: dict[str, pulumi.Output[str]] = {
            r: n.metadata.name for r, n in self.identity.namespaces.items()
        }
        self.register_outputs(
            {
                "cluster": self.cluster.name,
                "region": args.region,
                "gpu_node_pools": {k: p.name for k, p in self.gpu_node_pools.items()},
                "serving_namespaces": self.serving_namespaces,
            }
        )


@dataclass(frozen=True)
class FleetMembershipSpec:
    #: The membership id: the cluster's name (unique in the fleet by the fleet rules).
    cluster_name: str
    cluster_id: pulumi.Input[str]


@dataclass(frozen=True)
class FleetRegistrationArgs:
    project: str
    #: The config cluster first: its membership is the multi-cluster Ingress feature's ``configMembership``.
    memberships: tuple[FleetMembershipSpec, ...]
    labels: dict[str, str]
    protect: bool

    def __post_init__(self) -> None:
        names = [m.cluster_name for m in self.memberships]
        if len(names) < 2 or len(set(names)) != len(names):
            raise ValueError(f"FleetRegistrationArgs.memberships: two or more distinct clusters, got {names}")


class FleetRegistration(Component):
    """A GKE Hub membership per cluster and the ``multiclusteringress`` feature with the config cluster as its
    config membership: the multi-cluster Gateway controller reads Gateways and routes from that cluster only."""

    TYPE = "llm-serving:fleet:FleetRegistration"

    def __init__(self, name: str, args: FleetRegistrationArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, args, opts)
        self.memberships: dict[str, gcp.gkehub.Membership] = {}
        for m in args.memberships:
            self.memberships[m.cluster_name] = gcp.gkehub.Membership(
                f"{name}-{m.cluster_name}",
                project=args.project,
                membership_id=m.cluster_name,
                location=FLEET_LOCATION,
                endpoint=gcp.gkehub.MembershipEndpointArgs(
                    gke_cluster=gcp.gkehub.MembershipEndpointGkeClusterArgs(
                        resource_link=pulumi.Output.from_input(m.cluster_id).apply(membership_resource_link)
                    )
                ),
                labels=args.labels,
                # Unregistering the config cluster takes down every multi-cluster Gateway the fleet serves.
                opts=self.child_opts(protect=args.protect),
            )
        config = self.memberships[args.memberships[0].cluster_name]
        self.ingress = gcp.gkehub.Feature(
            f"{name}-{MULTICLUSTER_INGRESS_FEATURE}",
            project=args.project,
            name=MULTICLUSTER_INGRESS_FEATURE,
            location=FLEET_LOCATION,
            spec=gcp.gkehub.FeatureSpecArgs(
                multiclusteringress=gcp.gkehub.FeatureSpecMulticlusteringressArgs(config_membership=config.id)
            ),
            labels=args.labels,
            opts=self.child_opts(protect=args.protect),
        )
        self.register_outputs(
            {"memberships": {k: v.id for k, v in self.memberships.items()}, "config_membership": config.id}
        )
