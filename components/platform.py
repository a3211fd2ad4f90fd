"""The Google Cloud platform as one component (issue 3): network, GKE cluster with its system pool, one GPU
node pool per accelerator topology, Artifact Registry, weight stores, Workload Identity, and the Kubernetes
provider later components deploy with.

The serving layer consumes only the attributes named in the shared naming contract: ``k8s_provider``,
``serving_namespace`` / ``serving_namespace_resource``, ``model_server_ksa``, ``gpu_node_pools``,
``weights_bucket_name``, ``hyperdisk_claims``, ``proxy_only_cidr``, ``cluster``, ``project_number``,
``workload_pool``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from infra.config import StackConfig
from infra.config.gke import hyperdisk_releases
from infra.planning.sizing import CapacityPlan

from .cluster import Cluster, ClusterArgs
from .gpu_pool import GpuNodePool, GpuNodePoolArgs, NodeBounds, node_bounds
from .identity import WorkloadIdentity, WorkloadIdentityArgs
from .network import LoadBalancerFirewall, LoadBalancerFirewallArgs, Network, NetworkArgs
from .options import child_options, inherited_dependencies
from .registry import Registry, RegistryArgs
from .weights import Weights, WeightsArgs, WeightVolumes, WeightVolumesArgs


@dataclass(frozen=True)
class PlatformArgs:
    cfg: StackConfig
    plan: CapacityPlan


def platform_labels(cfg: StackConfig) -> dict[str, str]:
    return {"app": "llm-serving", "environment": cfg.environment, "managed-by": "pulumi"}


def gpu_pool_bounds(cfg: StackConfig, plan: CapacityPlan) -> dict[str, NodeBounds]:
    """Node autoscaling bounds per accelerator that serves at least one pool (others get no node pool)."""
    out = {}
    for name, acc_plan in sorted(plan.accelerators.items()):
        pools = [plan.pools[role] for role, p in cfg.pools() if p.accelerator == name]
        out[name] = node_bounds(pools, acc_plan)
    return out


class Platform(pulumi.ComponentResource):
    TYPE = "llm-serving:platform:Platform"

    def __init__(self, name: str, args: PlatformArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(self.TYPE, name, None, opts)
        cfg, g = args.cfg, args.cfg.gke
        labels = platform_labels(cfg)
        # The component's depends_on (the project services) reaches every cloud resource: each waits for
        # its API to be enabled.
        after = inherited_dependencies(opts)
        child = child_options(self, opts)

        self.project_number: pulumi.Output[str] = gcp.organizations.get_project_output(
            project_id=cfg.project, opts=pulumi.InvokeOutputOptions(parent=self, depends_on=after)).number

        net_args = NetworkArgs(
            project=cfg.project, region=cfg.region, prefix=g.cluster_name, subnet_cidr=g.ranges.subnet,
            pods_cidr=g.ranges.pods, services_cidr=g.ranges.services, proxy_only_cidr=g.ranges.proxy_only)
        self.network = Network(f"{name}-network", net_args, opts=child)
        self.proxy_only_cidr: str = g.ranges.proxy_only

        self.gke = Cluster(f"{name}-cluster", ClusterArgs(
            project=cfg.project, region=cfg.region, zones=tuple(cfg.zones), gke=g,
            network_id=self.network.vpc.id, subnetwork_id=self.network.subnet.id, labels=labels), opts=child)
        self.cluster: gcp.container.Cluster = self.gke.cluster
        self.workload_pool: str = self.gke.workload_pool

        self.gpu_pools: dict[str, GpuNodePool] = {}
        for acc_name, bounds in gpu_pool_bounds(cfg, args.plan).items():
            self.gpu_pools[acc_name] = GpuNodePool(f"{name}-gpu-{acc_name}", GpuNodePoolArgs(
                project=cfg.project, accelerator=acc_name, topology=cfg.accelerators[acc_name],
                cluster_name=self.cluster.name, cluster_location=self.gke.location, bounds=bounds,
                gpu_driver_version=g.gpu_driver_version, labels=labels, protect=g.protect), opts=child)
        self.gpu_node_pools: dict[str, gcp.container.NodePool] = {k: p.node_pool for k, p in self.gpu_pools.items()}

        self.firewall = LoadBalancerFirewall(f"{name}-lb-firewall", LoadBalancerFirewallArgs(
            network=net_args, network_id=self.network.vpc.id,
            model_server_accounts=tuple(p.identity.email for _, p in sorted(self.gpu_pools.items())),
            epp_accounts=(self.gke.system_identity.email,)), opts=child)

        self.registry = Registry(f"{name}-registry", RegistryArgs(
            project=cfg.project, region=cfg.region, config=g.registry,
            readers=tuple((f"gpu-{k}", p.identity.member) for k, p in sorted(self.gpu_pools.items())),
            labels=labels), opts=child)

        self.weights = Weights(f"{name}-weights", WeightsArgs(
            project=cfg.project, region=cfg.region, config=g.weights, hyperdisk_releases=hyperdisk_releases(cfg),
            labels=labels, protect=g.protect), opts=child)
        self.weights_bucket_name: str = self.weights.bucket_name

        self.k8s_provider = k8s.Provider(f"{name}-k8s", kubeconfig=self.gke.kubeconfig,
                                         opts=child_options(self, opts))

        self.identity = WorkloadIdentity(f"{name}-identity", WorkloadIdentityArgs(
            project=cfg.project, region=cfg.region, project_number=self.project_number,
            weights_bucket=self.weights.bucket.name,
            hub_token_secret_id=g.hub_token.secret_id if g.hub_token else None, labels=labels),
            provider=self.k8s_provider, opts=child)
        self.serving_namespace_resource: k8s.core.v1.Namespace = self.identity.namespace
        self.serving_namespace: str = self.identity.namespace_name
        self.model_server_ksa: str = self.identity.model_server_ksa_name
        self.model_server_principal: pulumi.Output[str] = self.identity.model_server_principal

        self.hyperdisk_claims: dict[str, str] = {}
        if g.weights.hyperdisk_ml is not None and self.weights.disks:
            volumes = WeightVolumes(f"{name}-weight-volumes", WeightVolumesArgs(
                project=cfg.project, namespace=self.identity.namespace.metadata.name,
                size_gib=g.weights.hyperdisk_ml.size_gib,
                provisioned_throughput_mib_s=g.weights.hyperdisk_ml.provisioned_throughput_mib_s),
                weights=self.weights, provider=self.k8s_provider, opts=child)
            self.hyperdisk_claims = dict(volumes.claims)

        self.register_outputs({
            "cluster": self.cluster.name, "kubeconfig_user": "gke-gcloud-auth-plugin",
            "serving_namespace": self.serving_namespace, "model_server_ksa": self.model_server_ksa,
            "gpu_node_pools": {k: p.name for k, p in self.gpu_node_pools.items()},
            "weights_bucket": self.weights_bucket_name, "hyperdisk_claims": self.hyperdisk_claims,
            "registry": self.registry.prefix, "workload_pool": self.workload_pool,
            "project_number": self.project_number,
        })
