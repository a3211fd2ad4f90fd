"""The ``gke`` target: vLLM Deployments on GPU node pools behind the GKE Inference Gateway.

Maps the validated config and the resolved plan to each component's small typed Args, and wires the siblings
through their attributes (the model server's Deployment-name Output scales the HPA; its pool selector feeds
the InferencePool; the platform's namespace Output places every Kubernetes object).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import pulumi

from components import naming
from components.bench_job import BenchJob, BenchJobArgs, client_peer
from components.cluster import AuthorizedNetwork, MaintenanceWindow, SystemPoolSpec
from components.cohost.component import CoHostServer, CoHostServerArgs
from components.fleet import (
    FLEET_SERVICES,
    FleetMember,
    FleetMemberArgs,
    FleetMembershipSpec,
    FleetRegistration,
    FleetRegistrationArgs,
)
from components.gateway.component import ExportedPools, ExportedPoolsArgs, InferenceGateway, InferenceGatewayArgs
from components.gateway.fleet_gateway import MultiClusterGateway, MultiClusterGatewayArgs
from components.gateway.multicluster import MC_GATEWAY_CLASS
from components.gateway.objects import (
    CertificateSpec,
    EndpointPickerSpec,
    FlowControlSpec,
    GatewaySpec,
    IapSpec,
    ModelArmorSpec,
    ModelRoute,
    PoolRoute,
    PriorityBandSpec,
    PriorityClassSpec,
    SaturationSpec,
)
from components.gateway.tenants import TenantSpec
from components.gpu_pool import AcceleratorSpec, GpuSharingSpec, NodeBounds, ReservationSpec
from components.network import NetworkArgs
from components.observability.component import (
    ClusterAutoscaling,
    ClusterAutoscalingArgs,
    Observability,
    ObservabilityArgs,
    fleet_pool_views,
)
from components.observability.regions import RegionView
from components.observability.tenants import TenantView
from components.observability.views import CoHostedModelView, PoolView
from components.platform import ClusterSpec, GpuPoolSpec, Platform, PlatformArgs, RegistrySpec, WeightsSpec
from components.project import ProjectServices, ProjectServicesArgs
from components.serving.model_server import ModelServer, ModelServerArgs, PodPeer, PodResources
from components.weights import HyperdiskSpec
from infra.config.accelerator import AcceleratorTopology, boot_disk_type
from infra.config.observability import Autoscaling
from infra.config.stack import StackConfig
from infra.planning.capacity import FAILURE_HEADROOM_REPLICAS, ROLLOUT_SURGE_REPLICAS
from infra.planning.plan import StackPlan
from infra.targets.base import ResolvedStack
from infra.targets.common import channel_spec, platform_labels, thresholds

from .config import GatewayConfig, GkeCoHostedGroup, GkeConfig, GkePool, fleet_section, gateway_section, gke_section
from .planning import GkeCoHostedGroupPlan, GkePlan, GkePoolPlan, gke_part, gke_pools, regional_config, verify_workers
from .planning.bench import bench_deadline
from .planning.flow_control import PoolDrain, flow_control_bounds

# ---- config -> component specs ------------------------------------------------------------------------------


def accelerator_spec(key: str, acc: AcceleratorTopology) -> AcceleratorSpec:
    r = acc.reservation
    return AcceleratorSpec(
        key=key,
        machine_type=acc.machine_type,
        gpu_type=acc.gpu_type,
        gpus_per_node=acc.gpus_per_node,
        zone=acc.zone,
        spot=acc.spot,
        boot_disk_type=boot_disk_type(acc.machine_type),
        reservation=ReservationSpec(r.mode, r.name, r.count, r.owner_project) if r else None,
        gpu_sharing=(
            GpuSharingSpec(acc.gpu_sharing.strategy, acc.gpu_sharing.max_shared_clients_per_gpu)
            if acc.gpu_sharing
            else None
        ),
    )


def cluster_spec(cfg: StackConfig, g: GkeConfig) -> ClusterSpec:
    regional = g.location_type == "regional"
    return ClusterSpec(
        # Regional clusters live in the region; zonal ones in the stack's first zone, keeping GKE's default
        # node location (that zone).
        name=g.cluster_name,
        location=cfg.region if regional else cfg.zones[0],
        node_locations=tuple(sorted(cfg.zones)) if regional else None,
        master_cidr=g.ranges.master,
        authorized_networks=tuple(AuthorizedNetwork(n.cidr, n.display_name) for n in g.authorized_networks),
        release_channel=g.release_channel,
        min_version=g.min_version,
        maintenance=MaintenanceWindow(tuple(g.maintenance.days), g.maintenance.start_utc, g.maintenance.duration_hours),
        system_pool=SystemPoolSpec(
            g.system_pool.machine_type,
            g.system_pool.min_nodes_per_zone,
            g.system_pool.max_nodes_per_zone,
            g.system_pool.disk_size_gb,
        ),
        gpu_driver_version=g.gpu_driver_version,
    )


def platform_args(cfg: StackConfig, plan: StackPlan) -> PlatformArgs:
    args = region_platform_args(cfg, gke_part(plan))
    fleet = fleet_section(cfg)
    if fleet is None:
        return args
    # The config region's proxy-only subnet is the cross-regional kind too: "Google Cloud allows only one proxy-only
    # subnet per region in each VPC network. If the target region already contains a proxy-only subnet with
    # purpose=REGIONAL_MANAGED_PROXY setting, creating the GLOBAL_MANAGED_PROXY subnet fails" (setup page, "Create
    # proxy-only subnets"); a fleet's config cluster has no regional Gateway that would need the regional kind.
    return dataclasses.replace(
        args,
        network=dataclasses.replace(args.network, proxy_only_purpose="GLOBAL_MANAGED_PROXY"),
        fleet_proxy_ranges=fleet_proxy_ranges(cfg, cfg.region),
    )


def fleet_proxy_ranges(cfg: StackConfig, region: str) -> tuple[str, ...]:
    """Every fleet region's proxy-only range but ``region``'s own."""
    fleet, g = fleet_section(cfg), gke_section(cfg)
    assert fleet is not None and g is not None
    ranges = {cfg.region: g.ranges.proxy_only, **{r: f.ranges.proxy_only for r, f in fleet.regions.items()}}
    return tuple(sorted(cidr for r, cidr in ranges.items() if r != region))


def region_platform_args(cfg: StackConfig, part: GkePlan) -> PlatformArgs:
    """The platform of one region: the stack's own (``cfg`` and its plan) or a fleet region's (its
    ``regional_config`` and the plan made for its share)."""
    g = gke_section(cfg)
    assert g is not None  # the gke rules require the section for a gke pool
    hd = g.weights.hyperdisk_ml
    return PlatformArgs(
        project=cfg.project,
        region=cfg.region,
        network=NetworkArgs(
            project=cfg.project,
            region=cfg.region,
            prefix=g.cluster_name,
            subnet_cidr=g.ranges.subnet,
            pods_cidr=g.ranges.pods,
            services_cidr=g.ranges.services,
            proxy_only_cidr=g.ranges.proxy_only,
        ),
        cluster=cluster_spec(cfg, g),
        # One node pool per accelerator that serves at least one pool or one co-hosted group.
        gpu_pools=tuple(
            sorted(
                [
                    GpuPoolSpec(accelerator_spec(name, cfg.accelerators[name]), NodeBounds(a.min_nodes, a.max_nodes))
                    for name, a in part.accelerators.items()
                ]
                + [
                    GpuPoolSpec(
                        accelerator_spec(g.accelerator, cfg.accelerators[g.accelerator]),
                        NodeBounds(g.min_nodes, g.max_nodes),
                    )
                    for g in part.gke_groups().values()
                ],
                key=lambda spec: spec.accelerator.key,
            )
        ),
        registry=RegistrySpec(
            g.registry.repository_id, g.registry.keep_recent_versions, g.registry.untagged_retention_days
        ),
        weights=WeightsSpec(
            bucket=g.weights.bucket,
            soft_delete_days=g.weights.soft_delete_days,
            writers=tuple(g.weights.writers),
            hyperdisk=HyperdiskSpec(hd.size_gib, hd.provisioned_throughput_mib_s, dict(hd.snapshots)) if hd else None,
            hyperdisk_releases=dict(part.hyperdisk_releases),
            hyperdisk_pools={r: pool.release for r, pool in gke_pools(cfg) if pool.loading.path == "hyperdisk_ml"},
        ),
        roles=(*(r for r, _ in gke_pools(cfg)), *part.cohosted()),
        hub_token_secret_id=g.hub_token.secret_id if g.hub_token else None,
        labels=platform_labels(cfg),
        protect=g.protect,
    )


#: The picker's own KV-cache saturation threshold (llm-d-router v0.10.0 utilization-detector default
#: ``DefaultKVCacheUtilThreshold``), used when the HPA
#: has no KV-cache target: above 80 % usage new sequences start preempting running ones.
DEFAULT_KV_SATURATION = 0.8


def saturation_spec(auto: Autoscaling) -> SaturationSpec:
    """The picker calls a pool saturated where the HPA starts adding replicas: an average waiting queue of the
    HPA's per-pod target, or the HPA's KV-cache target when one is set (else the picker's own 0.8). From there
    on, sheddable traffic is rejected with 429 while capacity is being added, so it cannot deepen the queue the
    interactive classes wait in."""
    return SaturationSpec(
        queue_depth_threshold=auto.queue_target_per_pod,
        kv_cache_util_threshold=auto.kv_cache_target if auto.kv_cache_target is not None else DEFAULT_KV_SATURATION,
    )


def flow_control_spec(cfg: StackConfig, drain: PoolDrain) -> FlowControlSpec | None:
    """A pool's flow-control bounds (planning/flow_control.py), or None when the stack turns flow control off."""
    gw = gateway_section(cfg)
    if gw is None or not gw.epp.flow_control:
        return None
    b = flow_control_bounds(cfg.contract, drain, cfg.observability.autoscaling.queue_target_per_pod)
    return FlowControlSpec(b.request_ttl_ms, tuple(PriorityBandSpec(x.priority, x.max_requests) for x in b.bands))


def pool_drain(p: GkePoolPlan) -> PoolDrain:
    """A pool at its warm minimum, each replica running the planner's ``--max-num-seqs``."""
    return PoolDrain(p.min_replicas, p.capacity.max_num_seqs, p.capacity.max_num_batched_tokens)


def group_drain(g: GkeCoHostedGroupPlan) -> PoolDrain:
    """A co-hosted group's pool at its warm minimum (one co-host pod per node): a pod runs every instance of every
    model, so its sequences are their sum, and the smallest chunked-prefill budget bounds its prefill."""
    return PoolDrain(
        g.min_nodes,
        sum(m.capacity.max_num_seqs * len(m.instances) for m in g.models),
        min(m.capacity.max_num_batched_tokens for m in g.models),
    )


def gateway_spec(gw: GatewayConfig, auto: Autoscaling) -> GatewaySpec:
    e = gw.epp
    return GatewaySpec(
        gateway_class=gw.gateway_class,
        hostnames=tuple(gw.hostnames),
        certificate=CertificateSpec(gw.certificate.source, tuple(gw.certificate.names)),
        epp=EndpointPickerSpec(
            chart=e.chart,
            version=e.version,
            replicas=e.replicas,
            failure_mode=e.failure_mode,
            kv_cache_metric=e.kv_cache_metric,
            install_objective_crds=e.install_objective_crds,
            saturation=saturation_spec(auto),
            flow_control=e.flow_control,
        ),
        iap=IapSpec(
            gw.iap.enabled,
            tuple(gw.iap.members),
            gw.iap.oauth_client_id,
            gw.iap.oauth_client_secret_name,
            tuple(gw.iap.programmatic_clients),
        ),
        model_armor=(
            ModelArmorSpec(gw.model_armor.template, gw.model_armor.fail_open, gw.model_armor.timeout_ms)
            if gw.model_armor
            else None
        ),
        request_log_sample_rate=gw.request_log_sample_rate,
        allow_global_access=gw.allow_global_access,
    )


def pool_views(cfg: StackConfig, part: GkePlan) -> tuple[PoolView, ...]:
    """The dashboard's and the HPAs' view of one cluster's pools (``part``: its plan)."""
    views = []
    planned = part.gke_pools()
    for role, pool in gke_pools(cfg):
        p = planned[role]
        views.append(
            PoolView(
                role=role,
                release=pool.release,
                weight=pool.weight,
                hpa=p.hpa,
                replica_hourly_usd=p.capacity.replica_hourly_usd,
                planned_cost_per_million_usd=p.capacity.cost_per_million_output_tokens_usd,
                # The record file the pool cites (``serving.<role>.measured``): the dashboard names it.
                measurement_source=pool.measured,
            )
        )
    for role, g in part.cohosted().items():
        views.append(
            PoolView(
                # 100: every request naming one of its models reaches this pool (no weighted split applies to it).
                role=role,
                release=", ".join(r.release for r in g.releases),
                weight=100,
                hpa=g.hpa,
                replica_hourly_usd=g.replica_hourly_usd,
                planned_cost_per_million_usd=None,
                measurement_source=None,
                models=tuple(
                    CoHostedModelView(model_name=m.model_name, release=m.release.release, instances=len(m.instances))
                    for m in g.models
                ),
            )
        )
    return tuple(views)


def bench_job_args(resolved: ResolvedStack, platform: Platform, server: ModelServer) -> BenchJobArgs:
    cfg, plan = resolved.config, resolved.plan
    g = gke_section(cfg)
    assert g is not None and g.bench is not None
    b, p = g.bench, plan.pools[server.role]
    return BenchJobArgs(
        stack=resolved.stack,
        role=server.role,
        release=p.release,
        image=b.image,
        quick=b.quick,
        rates=b.rates,
        duration_seconds=b.duration_seconds,
        active_deadline_seconds=bench_deadline(b).active_deadline_seconds,
        pool_namespace=platform.serving_namespaces[server.role],
        pool_selector=server.pool_selector,
        project=cfg.project,
        region=cfg.region,
        project_number=platform.project_number,
        workload_pool=platform.workload_pool,
        weights_bucket=platform.weights.bucket.name,
        image_repository=platform.registry.repository.repository_id,
        system_node_member=platform.gke.system_identity.member,
    )


# ---- composition ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServingSite:
    """One cluster the model servers run in: the config platform's, or a fleet member's (docs/multiregion.md)."""

    #: Resource-name prefix: none for the config cluster (its names are the single-region ones), ``<region>-`` for
    #: a member (the Kubernetes object names stay the same in every cluster: the pools are exported by name).
    prefix: str
    namespaces: Mapping[str, pulumi.Output[str]]
    namespace_resources: Mapping[str, pulumi.Resource]
    ksas: Mapping[str, pulumi.Output[str]]
    gpu_node_pools: Mapping[str, pulumi.Resource]
    proxy_only_cidr: str
    #: The other fleet regions' proxy-only ranges; empty in a single-region stack.
    fleet_proxy_cidrs: tuple[str, ...] = ()
    hyperdisk_claims: Mapping[str, str] = dataclasses.field(default_factory=dict)


def platform_site(platform: Platform, fleet_proxy_cidrs: tuple[str, ...] = ()) -> ServingSite:
    return ServingSite(
        prefix="",
        namespaces=platform.serving_namespaces,
        namespace_resources=platform.serving_namespace_resources,
        ksas=platform.model_server_ksas,
        gpu_node_pools=platform.gpu_node_pools,
        proxy_only_cidr=platform.proxy_only_cidr,
        fleet_proxy_cidrs=fleet_proxy_cidrs,
        hyperdisk_claims=platform.hyperdisk_claims,
    )


def member_site(region: str, member: FleetMember, fleet_proxy_cidrs: tuple[str, ...]) -> ServingSite:
    return ServingSite(
        prefix=f"{region}-",
        namespaces=member.serving_namespaces,
        namespace_resources=member.identity.namespaces,
        ksas={r: k.metadata.name for r, k in member.identity.model_server_ksas.items()},
        gpu_node_pools=member.gpu_node_pools,
        proxy_only_cidr=member.proxy_only_cidr,
        fleet_proxy_cidrs=fleet_proxy_cidrs,
    )


def _model_server(
    resolved: ResolvedStack,
    site: ServingSite,
    k8s: pulumi.ResourceOptions,
    role: str,
    pool: GkePool,
    p: GkePoolPlan,
    public_model_name: str,
    clients: tuple[PodPeer, ...] = (),
) -> ModelServer:
    """The vLLM model server of one pool (or co-hosted model) in its namespace, on its accelerator's node pool."""
    cfg, plan = resolved.config, resolved.plan
    o = pool.model_server
    return ModelServer(
        f"{site.prefix}{naming.deployment_name(role)}",
        ModelServerArgs(
            role=role,
            release=p.release,
            vllm_args=p.vllm_args,
            probes=p.probes,
            public_model_name=public_model_name,
            model_root=p.model_root,
            verify_workers=verify_workers(pool),
            resources=PodResources(
                cpu=o.cpu, memory_gib=o.memory_gib, shm_gib=o.shm_gib, gpus=p.release.tensor_parallel_size
            ),
            accelerator=pool.accelerator,
            loading_path=pool.loading.path,
            min_replicas=pool.min_replicas,
            max_surge=ROLLOUT_SURGE_REPLICAS,
            rollout_replicas=p.hpa.max_replicas,
            max_unavailable_disruptions=FAILURE_HEADROOM_REPLICAS,
            namespace=site.namespaces[role],
            service_account=site.ksas[role],
            proxy_only_cidr=site.proxy_only_cidr,
            stream_bound_seconds=plan.stream_bound_seconds,
            contract_max_model_len=cfg.contract.max_model_len,
            contract_max_input_tokens=cfg.contract.max_input_tokens,
            contract_max_output_tokens=cfg.contract.max_output_tokens,
            hyperdisk_claim=site.hyperdisk_claims.get(role),
            clients=clients,
            fleet_proxy_cidrs=site.fleet_proxy_cidrs,
        ),
        opts=pulumi.ResourceOptions.merge(
            k8s,
            pulumi.ResourceOptions(depends_on=[site.namespace_resources[role], site.gpu_node_pools[pool.accelerator]]),
        ),
    )


def _cohost_server(
    resolved: ResolvedStack, platform: Platform, k8s: pulumi.ResourceOptions, g: GkeCoHostedGroupPlan
) -> CoHostServer:
    """The co-host server of one group in its namespace, on its node pool: one pod per node owning the node's GPUs."""
    cfg, plan = resolved.config, resolved.plan
    group = cfg.cohosting[g.key]
    assert isinstance(group, GkeCoHostedGroup)
    o = group.model_server
    return CoHostServer(
        naming.deployment_name(g.role),
        CoHostServerArgs(
            role=g.role,
            releases=g.releases,
            image=g.image,
            vllm_version=g.vllm_version,
            config_json=g.server_json,
            watch=g.watch,
            poll_seconds=g.poll_seconds,
            probes=g.probes,
            resources=PodResources(
                cpu=o.cpu, memory_gib=o.memory_gib, shm_gib=o.shm_gib, gpus=g.layout.gpus_per_machine
            ),
            accelerator=g.accelerator,
            min_replicas=g.min_nodes,
            max_surge=ROLLOUT_SURGE_REPLICAS,
            rollout_replicas=g.hpa.max_replicas,
            max_unavailable_disruptions=FAILURE_HEADROOM_REPLICAS,
            namespace=platform.serving_namespaces[g.role],
            service_account=platform.model_server_ksas[g.role],
            proxy_only_cidr=platform.proxy_only_cidr,
            stream_bound_seconds=plan.stream_bound_seconds,
            contract_max_model_len=cfg.contract.max_model_len,
            contract_max_input_tokens=cfg.contract.max_input_tokens,
            contract_max_output_tokens=cfg.contract.max_output_tokens,
        ),
        opts=pulumi.ResourceOptions.merge(
            k8s,
            pulumi.ResourceOptions(
                depends_on=[platform.serving_namespace_resources[g.role], platform.gpu_node_pools[g.accelerator]]
            ),
        ),
    )


def fleet_member_args(cfg: StackConfig, region: str, part: GkePlan, platform: Platform) -> FleetMemberArgs:
    """A fleet region's cluster: the stack in that region (``regional_config``), planned for its share, joined to the
    config platform's VPC, registry and weights bucket. Its proxy-only subnet is the cross-regional kind the
    multi-cluster Gateway class needs (``GLOBAL_MANAGED_PROXY``: GKE "Set up the GKE multi-cluster Inference
    Gateway", "Create proxy-only subnets")."""
    fleet = fleet_section(cfg)
    assert fleet is not None
    rcfg = regional_config(cfg, fleet, region)
    pa = region_platform_args(rcfg, part)
    return FleetMemberArgs(
        project=cfg.project,
        region=region,
        network=dataclasses.replace(pa.network, proxy_only_purpose="GLOBAL_MANAGED_PROXY"),
        vpc_id=platform.network.vpc.id,
        cluster=pa.cluster,
        gpu_pools=pa.gpu_pools,
        registry_repository=platform.registry.repository.repository_id,
        registry_region=cfg.region,
        project_number=platform.project_number,
        roles=pa.roles,
        weights_bucket=platform.weights.bucket.name,
        labels=pa.labels,
        protect=pa.protect,
        fleet_proxy_ranges=fleet_proxy_ranges(cfg, region),
    )


@dataclass
class FleetComposition:
    """What a fleet stack adds to the config cluster's: per other region its member, model servers, exported pools
    and autoscaling; the fleet registration."""

    members: dict[str, FleetMember]
    registration: FleetRegistration
    model_servers: dict[str, dict[str, ModelServer]]
    pools: dict[str, ExportedPools]
    autoscaling: dict[str, ClusterAutoscaling]


def pool_routes(
    cfg: StackConfig, part: GkePlan, selectors: Mapping[str, Mapping[str, str]], namespaces: Mapping[str, object]
) -> tuple[PoolRoute, ...]:
    """The gateway's view of every pool of one cluster (the same in every region but for its plan's drain)."""
    tenants = tenant_specs(cfg)
    planned = part.gke_pools()
    return tuple(
        PoolRoute(
            role=r,
            release=pool.release,
            weight=pool.weight,
            selector=selectors[r],
            namespace=namespaces[r],
            flow_control=flow_control_spec(cfg, pool_drain(planned[r])),
            tenants=tenants,
        )
        for r, pool in gke_pools(cfg)
    )


def tenant_specs(cfg: StackConfig) -> tuple[TenantSpec, ...]:
    return tuple(
        TenantSpec(t.id, t.weight, t.requests_per_minute, t.output_tokens_per_minute) for t in cfg.contract.tenants
    )


def compose_fleet(
    resolved: ResolvedStack, part: GkePlan, platform: Platform, services: ProjectServices
) -> FleetComposition:
    """A fleet stack's other regions (docs/multiregion.md): per region its cluster (``FleetMember``), the model
    servers of every pool sized for the region's share, the pools exported to the config cluster with their pickers,
    and the region's HPAs; the fleet registration."""
    cfg, plan = resolved.config, resolved.plan
    fleet = fleet_section(cfg)
    gw = gateway_section(cfg)
    assert fleet is not None and gw is not None
    fleet_services = ProjectServices(
        "fleet-services",
        ProjectServicesArgs(project=cfg.project, services=FLEET_SERVICES),
        opts=pulumi.ResourceOptions(depends_on=[services]),
    )
    opts = pulumi.ResourceOptions(depends_on=[services, fleet_services])
    members = {
        region: FleetMember(
            naming.fleet_member_name(region), fleet_member_args(cfg, region, rpart, platform), opts=opts
        )
        for region, rpart in sorted(part.regions.items())
    }
    g = gke_section(cfg)
    assert g is not None
    registration = FleetRegistration(
        "fleet",
        FleetRegistrationArgs(
            project=cfg.project,
            memberships=(
                FleetMembershipSpec(g.cluster_name, platform.cluster.id),
                *(FleetMembershipSpec(m.cluster_name, m.cluster.id) for _, m in sorted(members.items())),
            ),
            labels=platform_labels(cfg),
            protect=g.protect,
        ),
        opts=opts,
    )
    model_servers: dict[str, dict[str, ModelServer]] = {}
    pools: dict[str, ExportedPools] = {}
    autoscaling: dict[str, ClusterAutoscaling] = {}
    for region, member in sorted(members.items()):
        rcfg, rpart = regional_config(cfg, fleet, region), part.regions[region]
        k8s = pulumi.ResourceOptions(providers=[member.k8s_provider])
        site = member_site(region, member, fleet_proxy_ranges(cfg, region))
        planned = rpart.gke_pools()
        servers = {
            role: _model_server(resolved, site, k8s, role, pool, planned[role], plan.public_model_name)
            for role, pool in gke_pools(rcfg)
        }
        model_servers[region] = servers
        pools[region] = ExportedPools(
            f"{region}-inference-pools",
            ExportedPoolsArgs(
                gateway=gateway_spec(gw, cfg.observability.autoscaling),
                pools=pool_routes(
                    rcfg, rpart, {r: m.pool_selector for r, m in servers.items()}, member.serving_namespaces
                ),
                priority_classes=priority_class_specs(cfg),
                backend_timeout_seconds=plan.backend_timeout_seconds,
                name_prefix=site.prefix,
            ),
            opts=pulumi.ResourceOptions.merge(k8s, pulumi.ResourceOptions(depends_on=[services])),
        )
        autoscaling[region] = ClusterAutoscaling(
            f"{region}-autoscaling",
            ClusterAutoscalingArgs(
                project=cfg.project,
                project_number=platform.project_number,
                workload_pool=member.workload_pool,
                adapter_image_digest=cfg.observability.adapter_image_digest,
                namespaces=dict(member.serving_namespaces),
                pools=pool_views(rcfg, rpart),
                scale_targets={r: m.deployment_name for r, m in servers.items()},
                scrape_interval_seconds=cfg.observability.scrape_interval_seconds,
                grant_adapter_viewer=False,
            ),
            opts=k8s,
        )
    return FleetComposition(members, registration, model_servers, pools, autoscaling)


def rcfg_of(cfg: StackConfig, region: str) -> StackConfig:
    """The stack as fleet region ``region`` runs it (``regional_config``)."""
    fleet = fleet_section(cfg)
    assert fleet is not None
    return regional_config(cfg, fleet, region)


def priority_class_specs(cfg: StackConfig) -> tuple[PriorityClassSpec, ...]:
    return tuple(
        PriorityClassSpec(c.name, c.priority, c.sheddable, c.description) for c in cfg.contract.priority_classes
    )


def regional_gateway(
    resolved: ResolvedStack,
    platform: Platform,
    k8s: pulumi.ResourceOptions,
    services: ProjectServices,
    model_servers: Mapping[str, ModelServer],
    cohosted: Mapping[str, CoHostServer],
) -> InferenceGateway:
    """The single-region GKE Inference Gateway."""
    cfg, plan = resolved.config, resolved.plan
    gw, g = gateway_section(cfg), gke_section(cfg)
    assert gw is not None
    part = gke_part(plan)
    tenants = tenant_specs(cfg)
    # GKE Inference Gateway: Gateway + address + TLS policy, per pool an InferencePool selecting what its model
    # server serves, its endpoint picker (upstream chart), objectives and GKE policies; the weighted HTTPRoute.
    return InferenceGateway(
        "inference-gateway",
        InferenceGatewayArgs(
            environment=cfg.environment,
            project=cfg.project,
            region=cfg.region,
            gateway=gateway_spec(gw, cfg.observability.autoscaling),
            pools=pool_routes(
                cfg, part, {r: m.pool_selector for r, m in model_servers.items()}, platform.serving_namespaces
            ),
            priority_classes=priority_class_specs(cfg),
            backend_timeout_seconds=plan.backend_timeout_seconds,
            public_model_name=plan.public_model_name,
            tenants=tenants,
            models=tuple(
                ModelRoute(
                    model_name=m.model_name,
                    release=m.release.release,
                    pool=PoolRoute(
                        role=role,
                        release=g.models[0].release.release,
                        weight=100,
                        selector=cohosted[role].pool_selector,
                        namespace=platform.serving_namespaces[role],
                        cohost=True,
                        flow_control=flow_control_spec(cfg, group_drain(g)),
                        tenants=tenants,
                    ),
                )
                for role, g in part.cohosted().items()
                for m in g.models
            ),
            subnetwork=platform.network.subnet.id,
            project_number=platform.project_number,
            protect=g is not None and g.protect,
        ),
        # Every pool's Kubernetes objects take their namespace from the platform's Output (so they wait for the
        # Namespace); the gateway creates its own namespace; the address and SSL policy wait for the Compute API. Nothing here waits for a model server: waiting for
        # the Deployments' rollouts would only serialise the first deploy.
        opts=pulumi.ResourceOptions.merge(k8s, pulumi.ResourceOptions(depends_on=[services])),
    )


def compose(resolved: ResolvedStack, services: ProjectServices) -> dict[str, object]:
    cfg, plan = resolved.config, resolved.plan
    gw, g = gateway_section(cfg), gke_section(cfg)
    assert gw is not None  # the gke rules require the section for a gke pool
    part = gke_part(plan)
    # The Google Cloud platform: network, cluster, GPU node pools on their reservations, registry, weight
    # stores, Workload Identity and the Kubernetes provider the serving components deploy with.
    platform = Platform("platform", platform_args(cfg, plan), opts=pulumi.ResourceOptions(depends_on=[services]))
    k8s = pulumi.ResourceOptions(providers=[platform.k8s_provider])
    fleet = compose_fleet(resolved, part, platform, services) if part.regions else None

    # One vLLM model server per pool, in the pool's namespace: Deployment, probe ConfigMap, PDB, NetworkPolicy.
    bench = g.bench if g is not None else None
    model_servers: dict[str, ModelServer] = {}
    planned = part.gke_pools()
    for role, pool in gke_pools(cfg):
        model_servers[role] = _model_server(
            resolved,
            platform_site(platform, fleet_proxy_ranges(cfg, cfg.region) if fleet else ()),
            k8s,
            role,
            pool,
            planned[role],
            plan.public_model_name,
            # The in-cluster benchmark's pods may reach the pool it measures (gke.bench).
            clients=(client_peer(role),) if bench is not None and bench.pool == role else (),
        )
    # Co-hosted groups: one co-host server pod per node of the group's own node pool, owning the node's GPUs.
    cohosted = {role: _cohost_server(resolved, platform, k8s, g) for role, g in part.cohosted().items()}

    gateway: InferenceGateway | MultiClusterGateway
    if fleet is not None:
        # A fleet: the config cluster's multi-cluster Gateway routes to every region's exported pools.
        gateway = MultiClusterGateway(
            "inference-gateway",
            MultiClusterGatewayArgs(
                environment=cfg.environment,
                project=cfg.project,
                region=cfg.region,
                gateway=gateway_spec(gw, cfg.observability.autoscaling),
                regions=tuple(s.region for s in part.sites),
                pools=pool_routes(
                    cfg, part, {r: m.pool_selector for r, m in model_servers.items()}, platform.serving_namespaces
                ),
                priority_classes=priority_class_specs(cfg),
                backend_timeout_seconds=plan.backend_timeout_seconds,
            ),
            opts=pulumi.ResourceOptions.merge(k8s, pulumi.ResourceOptions(depends_on=[services])),
        )
    else:
        gateway = regional_gateway(resolved, platform, k8s, services, model_servers, cohosted)

    # Autoscaling and observability: custom-metrics adapter, one HPA per pool scaling its model server's
    # Deployment (which ignores spec.replicas: the HPA owns the count), the vLLM PodMonitoring, dashboard, alerts.
    obs = cfg.observability
    observability = Observability(
        "observability",
        ObservabilityArgs(
            project=cfg.project,
            environment=cfg.environment,
            namespaces=dict(platform.serving_namespaces),
            pools=pool_views(cfg, part),
            scale_targets={
                **{r: m.deployment_name for r, m in model_servers.items()},
                **{r: c.deployment_name for r, c in cohosted.items()},
            },
            thresholds=thresholds(cfg),
            scrape_interval_seconds=obs.scrape_interval_seconds,
            notification_channels=tuple(channel_spec(c) for c in obs.alerts.notification_channels),
            adapter_image_digest=obs.adapter_image_digest,
            project_number=platform.project_number,
            workload_pool=platform.workload_pool,
            tenants=tuple(TenantView(t.id, t.output_tokens_per_minute) for t in cfg.contract.tenants),
            regions=tuple(RegionView(s.region, s.cluster_name, s.share) for s in part.sites),
            monitored_pools=(
                fleet_pool_views(
                    [pool_views(cfg, part), *(pool_views(rcfg_of(cfg, r), p) for r, p in sorted(part.regions.items()))]
                )
                if part.regions
                else None
            ),
        ),
        # The dashboard and alert policies need the Monitoring API.
        opts=pulumi.ResourceOptions.merge(k8s, pulumi.ResourceOptions(depends_on=[services])),
    )

    # Optional: the in-cluster benchmark Job of one pool (gke.bench), started once that pool's rollout is done.
    bench_job = None
    if bench is not None:
        server = model_servers[bench.pool]
        bench_job = BenchJob(
            naming.bench_job_name(bench.pool),
            bench_job_args(resolved, platform, server),
            opts=pulumi.ResourceOptions.merge(k8s, pulumi.ResourceOptions(depends_on=[services, server])),
        )

    return {
        **({"bench": {"job": bench_job.job.metadata.name, "record_uri": bench_job.record_uri}} if bench_job else {}),
        **({"fleet": fleet_outputs(fleet)} if fleet else {}),
        **(
            {
                "cohosting": {
                    key: {
                        "deployment": cohosted[grp.role].deployment_name,
                        "pool": naming.pool_name(grp.role),
                        "models": {m.model_name: m.release.release for m in grp.models},
                        "instances": {i.name: {"gpus": list(i.gpus), "port": i.port} for i in grp.server.instances},
                        "update_models": grp.watch,
                        "startup_window_seconds": grp.probes.startup_window_seconds,
                    }
                    for key, grp in part.gke_groups().items()
                }
            }
            if cohosted
            else {}
        ),
        "cluster": {
            "name": platform.cluster.name,
            "location": platform.gke.location,
            "workload_pool": platform.workload_pool,
        },
        "gateway": gateway_outputs(gateway),
        "gpu_node_pools": {k: p.name for k, p in sorted(platform.gpu_node_pools.items())},
        "weights_bucket": platform.weights_bucket_name,
        "image_registry": platform.registry.prefix,
        "model_servers": {
            role: {
                "deployment": m.deployment_name,
                "release": m.release_id,
                "vllm_args": m.vllm_args,
                "startup_window_seconds": m.probes.startup_window_seconds,
                "termination_grace_seconds": m.termination_grace_seconds,
            }
            for role, m in sorted(model_servers.items())
        },
        "autoscaling": {
            p.role: {
                "min_replicas": p.hpa.min_replicas,
                "max_replicas": p.hpa.max_replicas,
                "max_replicas_bound": p.hpa.max_reason,
            }
            for p in observability.pools
        },
    }


def gateway_outputs(gateway: InferenceGateway | MultiClusterGateway) -> dict[str, object]:
    """The regional Gateway's reserved address, or a fleet's regions (the multi-cluster Gateway takes an ephemeral
    address in each: its status lists them)."""
    pools = {role: b.pool_name for role, b in sorted(gateway.pools.items())}
    if isinstance(gateway, MultiClusterGateway):
        return {"class": MC_GATEWAY_CLASS, "hostnames": gateway.hostnames, "pools": pools}
    return {"address": gateway.address_value, "hostnames": gateway.hostnames, "pools": pools}


def fleet_outputs(fleet: FleetComposition) -> dict[str, object]:
    return {
        "config_membership": fleet.registration.ingress.spec.apply(
            lambda spec: spec.multiclusteringress.config_membership if spec and spec.multiclusteringress else None
        ),
        "regions": {
            region: {
                "cluster": m.cluster.name,
                "gpu_node_pools": {k: p.name for k, p in m.gpu_node_pools.items()},
                "model_servers": {r: ms.deployment_name for r, ms in sorted(fleet.model_servers[region].items())},
                "pools": sorted(fleet.pools[region].pools),
                "autoscaling": {r: h.metadata.name for r, h in sorted(fleet.autoscaling[region].hpas.items())},
            }
            for region, m in sorted(fleet.members.items())
        },
    }
