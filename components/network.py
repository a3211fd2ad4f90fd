"""Network of the GKE platform: custom VPC, node subnet with Pod/Service secondary ranges, the proxy-only
subnet of the regional Gateway, Cloud Router + NAT for private nodes, and the two firewall openings the
load balancer needs (GKE Inference Gateway deploy guide)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pulumi
import pulumi_gcp as gcp

from . import naming
from .base import Component

#: Source ranges of Google Cloud load-balancer health checks (Cloud Load Balancing documentation).
HEALTH_CHECK_RANGES: tuple[str, ...] = ("130.211.0.0/22", "35.191.0.0/16")
#: private.googleapis.com: the VIP range Private Google Access serves every Google API on from inside a VPC
#: (Private Google Access documentation, "Domain options"). Pods reach Google APIs only through it: the model
#: server NetworkPolicy allows egress to exactly this range on 443.
PRIVATE_GOOGLE_APIS_IPS: tuple[str, ...] = ("199.36.153.8", "199.36.153.9", "199.36.153.10", "199.36.153.11")
PRIVATE_GOOGLE_APIS_CIDR = "199.36.153.8/30"
POD_RANGE_NAME = "pods"
SERVICE_RANGE_NAME = "services"


@dataclass(frozen=True)
class NetworkArgs:
    project: str
    region: str
    #: Prefix of every resource name (the cluster name).
    prefix: str
    subnet_cidr: str
    pods_cidr: str
    services_cidr: str
    proxy_only_cidr: str
    #: ``REGIONAL_MANAGED_PROXY`` for the regional Gateway classes; a fleet's cross-regional internal class needs
    #: ``GLOBAL_MANAGED_PROXY`` in every region, and one region cannot hold both (GKE "Set up the GKE multi-cluster
    #: Inference Gateway", "Create proxy-only subnets").
    proxy_only_purpose: Literal["REGIONAL_MANAGED_PROXY", "GLOBAL_MANAGED_PROXY"] = "REGIONAL_MANAGED_PROXY"


@dataclass(frozen=True)
class FirewallOpening:
    """One ingress rule: load-balancer sources -> one TCP port on the nodes of some service accounts."""

    name: str
    description: str
    port: int
    sources: tuple[str, ...]


def firewall_openings(
    args: NetworkArgs, fleet_proxy_ranges: tuple[str, ...] = ()
) -> tuple[FirewallOpening, FirewallOpening]:
    """(model servers, endpoint pickers): proxy-only subnet + health-check ranges, one port each. In a fleet also
    the other regions' proxy-only ranges: a cross-regional internal load balancer's proxies in one region send to
    backends in every region (Cloud Load Balancing "Cross-region internal Application Load Balancer overview")."""
    sources = tuple(sorted({args.proxy_only_cidr, *fleet_proxy_ranges, *HEALTH_CHECK_RANGES}))
    return (
        FirewallOpening(
            f"{args.prefix}-allow-lb-model-server",
            "Regional gateway proxies and Google health checks -> vLLM on GPU nodes",
            naming.VLLM_PORT,
            sources,
        ),
        FirewallOpening(
            f"{args.prefix}-allow-lb-epp",
            "Regional gateway proxies and Google health checks -> endpoint picker ext-proc on system nodes",
            naming.EPP_EXT_PROC_PORT,
            sources,
        ),
    )


@dataclass(frozen=True)
class RegionalSubnets:
    subnet: gcp.compute.Subnetwork
    proxy_only_subnet: gcp.compute.Subnetwork
    router: gcp.compute.Router
    nat: gcp.compute.RouterNat


def regional_subnets(
    name: str, args: NetworkArgs, vpc_id: pulumi.Input[str], child: pulumi.ResourceOptions
) -> RegionalSubnets:
    """One region's part of a VPC: the node subnet with its Pod/Service ranges, the proxy-only subnet of the
    region's load-balancer proxies, and Cloud Router + NAT for the private nodes. Registered with ``child``'s
    parent: :class:`Network` for the stack's own region, :class:`RegionalNetwork` for a fleet's other regions."""
    subnet = gcp.compute.Subnetwork(
        f"{name}-nodes",
        name=f"{args.prefix}-nodes",
        project=args.project,
        region=args.region,
        network=vpc_id,
        ip_cidr_range=args.subnet_cidr,
        private_ip_google_access=True,
        secondary_ip_ranges=[
            gcp.compute.SubnetworkSecondaryIpRangeArgs(range_name=POD_RANGE_NAME, ip_cidr_range=args.pods_cidr),
            gcp.compute.SubnetworkSecondaryIpRangeArgs(range_name=SERVICE_RANGE_NAME, ip_cidr_range=args.services_cidr),
        ],
        log_config=gcp.compute.SubnetworkLogConfigArgs(
            aggregation_interval="INTERVAL_5_MIN", flow_sampling=0.5, metadata="INCLUDE_ALL_METADATA"
        ),
        opts=child,
    )
    proxy_only = gcp.compute.Subnetwork(
        f"{name}-proxy-only",
        name=f"{args.prefix}-proxy-only",
        project=args.project,
        region=args.region,
        network=vpc_id,
        ip_cidr_range=args.proxy_only_cidr,
        purpose=args.proxy_only_purpose,
        role="ACTIVE",
        opts=child,
    )
    router = gcp.compute.Router(
        f"{name}-router",
        name=f"{args.prefix}-router",
        project=args.project,
        region=args.region,
        network=vpc_id,
        opts=child,
    )
    nat = gcp.compute.RouterNat(
        f"{name}-nat",
        name=f"{args.prefix}-nat",
        project=args.project,
        region=args.region,
        router=router.name,
        nat_ip_allocate_option="AUTO_ONLY",
        source_subnetwork_ip_ranges_to_nat="LIST_OF_SUBNETWORKS",
        subnetworks=[gcp.compute.RouterNatSubnetworkArgs(name=subnet.id, source_ip_ranges_to_nats=["ALL_IP_RANGES"])],
        log_config=gcp.compute.RouterNatLogConfigArgs(enable=True, filter="ERRORS_ONLY"),
        opts=child,
    )
    return RegionalSubnets(subnet, proxy_only, router, nat)


class Network(Component):
    """The VPC, its two subnets, and NAT egress for the private nodes (image pulls from outside Google,
    model hubs)."""

    TYPE = "llm-serving:network:Network"

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, args, opts)
        child = self.child_opts()
        self.vpc = gcp.compute.Network(
            f"{name}-vpc",
            name=f"{args.prefix}-vpc",
            project=args.project,
            auto_create_subnetworks=False,
            routing_mode="REGIONAL",
            opts=child,
        )
        regional = regional_subnets(name, args, self.vpc.id, child)
        self.subnet = regional.subnet
        self.proxy_only_subnet = regional.proxy_only_subnet
        self.router = regional.router
        self.nat = regional.nat
        # Private DNS for googleapis.com: without it *.googleapis.com resolves to public addresses, which the
        # model servers' NetworkPolicy does not allow, and gs:// streaming / GCS FUSE loading would fail.
        self.googleapis_zone = gcp.dns.ManagedZone(
            f"{name}-googleapis",
            name=f"{args.prefix}-googleapis",
            project=args.project,
            dns_name="googleapis.com.",
            visibility="private",
            description="Private Google Access: *.googleapis.com -> private.googleapis.com VIPs",
            private_visibility_config=gcp.dns.ManagedZonePrivateVisibilityConfigArgs(
                networks=[gcp.dns.ManagedZonePrivateVisibilityConfigNetworkArgs(network_url=self.vpc.id)]
            ),
            opts=child,
        )
        self.googleapis_a = gcp.dns.RecordSet(
            f"{name}-googleapis-private-a",
            project=args.project,
            managed_zone=self.googleapis_zone.name,
            name="private.googleapis.com.",
            type="A",
            ttl=300,
            rrdatas=list(PRIVATE_GOOGLE_APIS_IPS),
            opts=child,
        )
        self.googleapis_cname = gcp.dns.RecordSet(
            f"{name}-googleapis-wildcard",
            project=args.project,
            managed_zone=self.googleapis_zone.name,
            name="*.googleapis.com.",
            type="CNAME",
            ttl=300,
            rrdatas=["private.googleapis.com."],
            opts=child,
        )
        self.proxy_only_cidr = args.proxy_only_cidr
        self.register_outputs(
            {
                "network": self.vpc.id,
                "subnetwork": self.subnet.id,
                "proxy_only_subnetwork": self.proxy_only_subnet.id,
            }
        )


class RegionalNetwork(Component):
    """A fleet region's part of the config cluster's VPC (:func:`regional_subnets`): every cluster of a fleet must be
    in one VPC network (GKE "Set up the GKE multi-cluster Inference Gateway", Requirements). The VPC's private
    googleapis.com zone is the :class:`Network`'s, which covers the whole VPC."""

    TYPE = "llm-serving:network:RegionalNetwork"

    def __init__(
        self, name: str, args: NetworkArgs, vpc_id: pulumi.Input[str], opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__(name, args, opts)
        regional = regional_subnets(name, args, vpc_id, self.child_opts())
        self.subnet = regional.subnet
        self.proxy_only_subnet = regional.proxy_only_subnet
        self.router = regional.router
        self.nat = regional.nat
        self.proxy_only_cidr = args.proxy_only_cidr
        self.register_outputs({"subnetwork": self.subnet.id, "proxy_only_subnetwork": self.proxy_only_subnet.id})


@dataclass(frozen=True)
class LoadBalancerFirewallArgs:
    network: NetworkArgs
    network_id: pulumi.Input[str]
    #: Service-account e-mails of the GPU nodes (vLLM) and of the system nodes (endpoint pickers).
    model_server_accounts: tuple[pulumi.Input[str], ...]
    epp_accounts: tuple[pulumi.Input[str], ...]
    #: A fleet's other regions' proxy-only ranges (see :func:`firewall_openings`); empty for one region.
    fleet_proxy_ranges: tuple[str, ...] = ()


class LoadBalancerFirewall(Component):
    """Allows the regional proxies and Google health checks to reach vLLM (GPU node SAs) and the endpoint
    pickers (system node SA), one port each and nothing wider. Separate from :class:`Network` because it
    targets node service accounts, which exist only once the node pools do."""

    TYPE = "llm-serving:network:LoadBalancerFirewall"

    def __init__(self, name: str, args: LoadBalancerFirewallArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, args, opts)
        model, epp = firewall_openings(args.network, args.fleet_proxy_ranges)
        self.rules: dict[int, gcp.compute.Firewall] = {}
        for opening, targets in ((model, args.model_server_accounts), (epp, args.epp_accounts)):
            self.rules[opening.port] = gcp.compute.Firewall(
                opening.name,
                name=opening.name,
                project=args.network.project,
                network=args.network_id,
                description=opening.description,
                direction="INGRESS",
                priority=1000,
                source_ranges=list(opening.sources),
                allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=[str(opening.port)])],
                target_service_accounts=list(targets),
                log_config=gcp.compute.FirewallLogConfigArgs(metadata="EXCLUDE_ALL_METADATA"),
                opts=self.child_opts(),
            )
        self.register_outputs({"rules": {str(p): r.name for p, r in self.rules.items()}})
