"""The Google Cloud platform of the GKE target as one component: network, GKE cluster with its system pool, one
GPU node pool per accelerator topology, Artifact Registry, weight stores, Workload Identity, and the Kubernetes
provider the serving components deploy with.

Siblings consume it through its attributes (objects and Outputs, never rebuilt names): ``k8s_provider``,
``serving_namespaces`` (role -> Output) / ``serving_namespace_resources``, ``model_server_ksas``,
``gpu_node_pools``, ``weights_bucket_name``, ``hyperdisk_claims`` (role -> claim), ``proxy_only_cidr``, ``cluster``,
``project_number``, ``workload_pool``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from .base import Component
from .cluster import AuthorizedNetwork, Cluster, ClusterArgs, MaintenanceWindow, SystemPoolSpec
from .gpu_pool import AcceleratorSpec, GpuNodePool, GpuNodePoolArgs, NodeBounds
from .identity import WorkloadIdentity, WorkloadIdentityArgs
from .network import LoadBalancerFirewall, LoadBalancerFirewallArgs, Network, NetworkArgs
from .registry import Registry, RegistryArgs
from .weights import HyperdiskSpec, Weights, WeightsArgs, WeightVolumes, WeightVolumesArgs


@dataclass(frozen=True)
class ClusterSpec:
    """The cluster's own settings (the network ids are wired inside the platform)."""

    name: str
    location: str
    node_locations: tuple[str, ...] | None
    master_cidr: str
    authorized_networks: tuple[AuthorizedNetwork, ...]
    release_channel: str
    min_version: str
    maintenance: MaintenanceWindow
    system_pool: SystemPoolSpec
    gpu_driver_version: str


@dataclass(frozen=True)
class GpuPoolSpec:
    accelerator: AcceleratorSpec
    bounds: NodeBounds


@dataclass(frozen=True)
class RegistrySpec:
    repository_id: str
    keep_recent_versions: int
    untagged_retention_days: int


@dataclass(frozen=True)
class WeightsSpec:
    bucket: str
    soft_delete_days: int
    #: The release pipeline's identities (the bucket's only writers).
    writers: tuple[str, ...]
    hyperdisk: HyperdiskSpec | None
    #: Release id -> zone of its Hyperdisk ML volume.
    hyperdisk_releases: dict[str, str]
    #: Role -> release, for every pool that mounts its release from Hyperdisk ML.
    hyperdisk_pools: dict[str, str]


@dataclass(frozen=True)
class PlatformArgs:
    project: str
    region: str
    network: NetworkArgs
    cluster: ClusterSpec
    gpu_pools: tuple[GpuPoolSpec, ...]
    registry: RegistrySpec
    weights: WeightsSpec
    #: The serving pools' roles (each gets a namespace and a model-server identity).
    roles: tuple[str, ...]
    #: Secret Manager secret id of the model-hub token (None: no secret).
    hub_token_secret_id: str | None
    labels: dict[str, str]
    protect: bool
    #: A fleet's other regions' proxy-only ranges, admitted by this region's load-balancer firewall openings.
    fleet_proxy_ranges: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        keys = [p.accelerator.key for p in self.gpu_pools]
        if len(set(keys)) != len(keys):
            raise ValueError(f"PlatformArgs.gpu_pools: accelerator keys must be unique, got {keys}")


def cluster_args(
    project: str,
    spec: ClusterSpec,
    network_id: pulumi.Input[str],
    subnetwork_id: pulumi.Input[str],
    labels: dict[str, str],
    protect: bool,
) -> ClusterArgs:
    """The cluster of one region (the stack's own or a fleet member's) from its spec and network."""
    return ClusterArgs(
        project=project,
        name=spec.name,
        location=spec.location,
        node_locations=spec.node_locations,
        network_id=network_id,
        subnetwork_id=subnetwork_id,
        master_cidr=spec.master_cidr,
        authorized_networks=spec.authorized_networks,
        release_channel=spec.release_channel,
        min_version=spec.min_version,
        maintenance=spec.maintenance,
        system_pool=spec.system_pool,
        protect=protect,
        labels=labels,
    )


def workload_pool_of(cluster: gcp.container.Cluster) -> pulumi.Output[str]:
    """The cluster's Workload Identity pool, from the cluster's output: grants to Workload Identity principals built
    from it wait for the cluster (the pool exists only once the cluster does)."""
    return cluster.workload_identity_config.apply(
        lambda w: w.workload_pool if w is not None and w.workload_pool is not None else ""
    )


def gpu_node_pools(
    name: str,
    project: str,
    specs: tuple[GpuPoolSpec, ...],
    gke: Cluster,
    gpu_driver_version: str,
    labels: dict[str, str],
    protect: bool,
    opts: pulumi.ResourceOptions,
    account_id: Callable[[str], str | None] = lambda key: None,
) -> dict[str, GpuNodePool]:
    """One GPU node pool per accelerator of a cluster, in key order (``account_id(key)``: its node service
    account id, None for the default)."""
    pools: dict[str, GpuNodePool] = {}
    for spec in sorted(specs, key=lambda s: s.accelerator.key):
        key = spec.accelerator.key
        pools[key] = GpuNodePool(
            f"{name}-gpu-{key}",
            GpuNodePoolArgs(
                project=project,
                accelerator=spec.accelerator,
                cluster_name=gke.cluster.name,
                cluster_location=gke.location,
                bounds=spec.bounds,
                gpu_driver_version=gpu_driver_version,
                labels=labels,
                protect=protect,
                account_id=account_id(key),
            ),
            opts=opts,
        )
    return pools


class Platform(Component):
    TYPE = "llm-serving:platform:Platform"

    def __init__(self, name: str, args: PlatformArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, args, opts)
        c = args.cluster
        child = self.child_opts()

        self.project_number: pulumi.Output[str] = gcp.organizations.get_project_output(
            project_id=args.project, opts=pulumi.InvokeOutputOptions(parent=self, depends_on=self._inherited)
        ).number

        self.network = Network(f"{name}-network", args.network, opts=child)
        self.proxy_only_cidr: str = args.network.proxy_only_cidr

        self.gke = Cluster(
            f"{name}-cluster",
            cluster_args(args.project, c, self.network.vpc.id, self.network.subnet.id, args.labels, args.protect),
            opts=child,
        )
        self.cluster: gcp.container.Cluster = self.gke.cluster
        self.workload_pool: pulumi.Output[str] = workload_pool_of(self.cluster)

        self.gpu_pools: dict[str, GpuNodePool] = gpu_node_pools(
            name, args.project, args.gpu_pools, self.gke, c.gpu_driver_version, args.labels, args.protect, child
        )
        self.gpu_node_pools: dict[str, gcp.container.NodePool] = {k: p.node_pool for k, p in self.gpu_pools.items()}

        self.firewall = LoadBalancerFirewall(
            f"{name}-lb-firewall",
            LoadBalancerFirewallArgs(
                network=args.network,
                network_id=self.network.vpc.id,
                model_server_accounts=tuple(p.identity.email for _, p in sorted(self.gpu_pools.items())),
                epp_accounts=(self.gke.system_identity.email,),
                fleet_proxy_ranges=args.fleet_proxy_ranges,
            ),
            opts=child,
        )

        r = args.registry
        self.registry = Registry(
            f"{name}-registry",
            RegistryArgs(
                project=args.project,
                region=args.region,
                repository_id=r.repository_id,
                keep_recent_versions=r.keep_recent_versions,
                untagged_retention_days=r.untagged_retention_days,
                readers=tuple((f"gpu-{k}", p.identity.member) for k, p in sorted(self.gpu_pools.items())),
                labels=args.labels,
                protect=args.protect,
            ),
            opts=child,
        )

        w = args.weights
        self.weights = Weights(
            f"{name}-weights",
            WeightsArgs(
                project=args.project,
                region=args.region,
                bucket=w.bucket,
                soft_delete_days=w.soft_delete_days,
                writers=w.writers,
                hyperdisk=w.hyperdisk,
                hyperdisk_releases=w.hyperdisk_releases,
                labels=args.labels,
                protect=args.protect,
            ),
            opts=child,
        )
        self.weights_bucket_name: str = w.bucket

        self.k8s_provider = k8s.Provider(f"{name}-k8s", kubeconfig=self.gke.kubeconfig, opts=child)
        k8s_child = self.child_opts(providers=[self.k8s_provider])

        self.identity = WorkloadIdentity(
            f"{name}-identity",
            WorkloadIdentityArgs(
                project=args.project,
                region=args.region,
                project_number=self.project_number,
                workload_pool=self.workload_pool,
                weights_bucket=self.weights.bucket.name,
                roles=args.roles,
                hub_token_secret_id=args.hub_token_secret_id,
                labels=args.labels,
                protect=args.protect,
            ),
            opts=k8s_child,
        )
        self.serving_namespace_resources: dict[str, k8s.core.v1.Namespace] = dict(self.identity.namespaces)
        self.serving_namespaces: dict[str, pulumi.Output[str]] = {
            r: n.metadata.name for r, n in self.identity.namespaces.items()
        }
        self.model_server_ksas: dict[str, pulumi.Output[str]] = {
            r: k.metadata.name for r, k in self.identity.model_server_ksas.items()
        }
        self.model_server_principals: dict[str, pulumi.Output[str]] = dict(self.identity.model_server_principals)

        self.hyperdisk_claims: dict[str, str] = {}
        if w.hyperdisk is not None and w.hyperdisk_pools:
            volumes = WeightVolumes(
                f"{name}-weight-volumes",
                WeightVolumesArgs(
                    project=args.project,
                    pools={r: (self.serving_namespaces[r], rel) for r, rel in sorted(w.hyperdisk_pools.items())},
                    size_gib=w.hyperdisk.size_gib,
                    provisioned_throughput_mib_s=w.hyperdisk.provisioned_throughput_mib_s,
                    weights=self.weights,
                ),
                opts=k8s_child,
            )
            self.hyperdisk_claims = dict(volumes.claims)

        self.register_outputs(
            {
                "cluster": self.cluster.name,
                "kubeconfig_user": "gke-gcloud-auth-plugin",
                "serving_namespaces": self.serving_namespaces,
                "model_server_ksa": self.identity.model_server_ksa_name,
                "gpu_node_pools": {k: p.name for k, p in self.gpu_node_pools.items()},
                "weights_bucket": self.weights_bucket_name,
                "hyperdisk_claims": self.hyperdisk_claims,
                "registry": self.registry.prefix,
                "workload_pool": self.workload_pool,
                "project_number": self.project_number,
            }
        )
