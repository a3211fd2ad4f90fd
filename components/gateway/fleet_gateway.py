"""The config cluster's side of a fleet (docs/multiregion.md): the multi-cluster Gateway in front of every region's
pools, built from the pure builders of ``multicluster`` (each cites the GKE page it follows).

The config cluster serves too: its own pools are exported like every other cluster's (:class:`PoolBackend` with
``exported``), and its route sends to the imports, which GKE creates in the config cluster from the exports. The
load-balancer policies (health check, backend timeout, IAP, balancing on the KV-cache gauge) target the imports.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from .. import naming
from ..base import Component
from . import multicluster as mc
from . import objects as o
from .component import (
    SSL_MIN_TLS,
    SSL_PROFILE,
    PoolBackend,
    _cr,
    exported_pool_backends,
    gateway_namespace,
    iap_access,
    objective_crds,
    ssl_policy_name,
)


@dataclass(frozen=True)
class MultiClusterGatewayArgs:
    environment: str
    project: str
    #: The config cluster's region (IAP settings are per region).
    region: str
    gateway: o.GatewaySpec
    #: Every serving region (the config cluster's first): the Gateway takes an address in each.
    regions: tuple[str, ...]
    #: The config cluster's own pools (the other clusters' are :class:`~.component.ExportedPools`).
    pools: tuple[o.PoolRoute, ...]
    priority_classes: tuple[o.PriorityClassSpec, ...]
    #: Backend-service timeout (s): the planner's ceiling of the longest allowed stream.
    backend_timeout_seconds: int

    def __post_init__(self) -> None:
        if self.gateway.gateway_class != mc.MC_GATEWAY_CLASS:
            raise ValueError(
                f"MultiClusterGatewayArgs.gateway.gateway_class: a fleet's gateway is {mc.MC_GATEWAY_CLASS!r}, got "
                f"{self.gateway.gateway_class!r}"
            )
        if len(self.regions) < 2:
            raise ValueError(f"MultiClusterGatewayArgs.regions: a fleet serves from two or more, got {self.regions}")
        if self.gateway.model_armor is not None:
            # About page, Limitations: the multi-cluster gateway does not support the Model Armor integration.
            raise ValueError("MultiClusterGatewayArgs.gateway.model_armor: not supported on a multi-cluster gateway")
        # The route's weights are checked by mc.import_route_object (ImportedPool and _check_pools).
        mc.MultiClusterGatewaySpec(self.regions, tuple(self.gateway.hostnames))


class MultiClusterGateway(Component):
    """Namespace, objective CRDs, the config cluster's exported pools, the cross-regional internal Gateway (HTTPS +
    redirecting HTTP), the route to the imported pools, and per pool the import's health check and backend policy;
    IAP accessors when IAP is on. Pass the config cluster's provider in ``opts``."""

    TYPE = "llm-serving:gateway:MultiClusterGateway"

    def __init__(self, name: str, args: MultiClusterGatewayArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, args, opts)
        gw = args.gateway
        child = self.child_opts()
        self.namespace = gateway_namespace(name, child)
        ns: pulumi.Output[str] = self.namespace.metadata.name
        spec = mc.MultiClusterGatewaySpec(args.regions, tuple(gw.hostnames))

        self.crds = objective_crds(self, name, gw)
        self.pools: dict[str, PoolBackend] = exported_pool_backends(
            self,
            name,
            gw,
            args.pools,
            args.priority_classes,
            args.backend_timeout_seconds,
            self.crds,
            gateway_namespace=ns,
        )

        self.gateway = _cr(f"{name}-gateway", mc.multicluster_gateway_object(spec, ns, o.tls_options(gw)), child)
        # TLS 1.2+ as in one region (the same name: a fleet stack has no regional policy), but a global SSL policy: the cross-region internal load balancer's target HTTPS
        # proxy is a global resource, and a regional policy attaches only to regional proxies (Compute Engine
        # targetHttpsProxies.sslPolicy is a global SslPolicy URL; regionTargetHttpsProxies take regional ones).
        self.ssl_policy = gcp.compute.SSLPolicy(
            f"{name}-ssl-policy",
            name=ssl_policy_name(args.environment),
            project=args.project,
            min_tls_version=SSL_MIN_TLS,
            profile=SSL_PROFILE,
            opts=child,
        )
        self.gateway_policy = _cr(
            f"{name}-gateway-policy",
            o.gateway_policy_object(gw, ns, ssl_policy_name(args.environment)),
            self.child_opts(depends_on=[self.ssl_policy, self.gateway]),
        )
        self.redirect_route = _cr(
            f"{name}-redirect-route", o.redirect_route_object(gw, ns), self.child_opts(depends_on=[self.gateway])
        )
        # The imports live in the pools' namespaces (the exported pool's), which the config cluster has.
        imported = tuple(mc.ImportedPool(p.role, p.weight, naming.pool_namespace(p.role)) for p in args.pools)
        grants = [b.reference_grant for b in self.pools.values() if b.reference_grant is not None]
        self.api_route = _cr(
            f"{name}-api-route",
            mc.import_route_object(spec, ns, imported),
            self.child_opts(depends_on=[self.gateway, *grants]),
        )
        self.import_policies: dict[str, tuple[k8s.apiextensions.CustomResource, k8s.apiextensions.CustomResource]] = {}
        for p in imported:
            pool_ns = self.child_opts(depends_on=[self.pools[p.role].inference_pool])
            self.import_policies[p.role] = (
                _cr(
                    f"{naming.pool_name(p.role)}-import-healthcheck",
                    mc.import_health_check_policy_object(p),
                    pool_ns,
                ),
                _cr(
                    f"{naming.pool_name(p.role)}-import-backendpolicy",
                    mc.import_backend_policy_object(p, gw, args.backend_timeout_seconds),
                    pool_ns,
                ),
            )
        self.iap_members = iap_access(self, name, args.project, args.region, gw)
        self.hostnames = list(gw.hostnames)
        self.register_outputs({"namespace": ns, "hostnames": self.hostnames, "pools": sorted(self.pools)})
