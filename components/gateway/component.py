"""GKE Inference Gateway components: the shared Gateway front (address, TLS, routes, policies, IAP, Model
Armor) and one :class:`PoolBackend` per serving pool (InferencePool, endpoint picker, objectives, policies).

Object contents come from :mod:`components.gateway.objects`; this module only registers them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from .. import naming
from ..base import Component
from ..traffic import split_problem
from . import multicluster as mc
from . import objects as o
from . import tenants as t
from .charts import crd_urls

#: Kinds the picker chart renders that this program owns (see chart_filter.py).
CHART_DROPPED_KINDS: tuple[str, ...] = (
    "InferencePool",
    "HealthCheckPolicy",
    "GCPBackendPolicy",
    "InferenceObjective",
    "HTTPRoute",
)
#: The post-renderer's source file. Its text is passed inline (``python3 -c <source>``) so the command does
#: not depend on the working directory the Kubernetes provider runs Helm in, and the plan stays
#: machine-independent (no absolute path).
CHART_FILTER_SCRIPT = Path(__file__).with_name("chart_filter.py")
#: Minimum TLS version on the gateway's HTTPS listener ; MODERN drops the legacy CBC/3DES suites.
SSL_MIN_TLS = "TLS_1_2"
SSL_PROFILE = "MODERN"
#: The API whose service agent (``service-<number>@gcp-sa-dep.iam.gserviceaccount.com``) runs Service Extensions
#: callouts such as Model Armor; see docs/deploying.md for how to check the agent it creates.
SERVICE_EXTENSIONS_API = "networkservices.googleapis.com"
#: Roles the Google-managed Service Extensions agent needs to call Model Armor from the load balancer.
MODEL_ARMOR_AGENT_ROLES = (
    "roles/modelarmor.calloutUser",
    "roles/modelarmor.user",
    "roles/serviceusage.serviceUsageConsumer",
)


def post_renderer(annotations: tuple[tuple[str, str, str, str], ...] = ()) -> k8s.helm.v4.PostRendererArgs:
    """The chart's post-renderer command: drop :data:`CHART_DROPPED_KINDS`, add each ``(kind, name, key, value)``."""
    args = ["-c", CHART_FILTER_SCRIPT.read_text(encoding="utf-8")]
    for kind in CHART_DROPPED_KINDS:
        args += ["--drop-kind", kind]
    for annotation in annotations:
        args += ["--annotate", *annotation]
    return k8s.helm.v4.PostRendererArgs(command="python3", args=args)


def _cr(name: str, obj: dict[str, Any], opts: pulumi.ResourceOptions) -> k8s.apiextensions.CustomResource:
    meta = obj["metadata"]
    return k8s.apiextensions.CustomResource(
        name,
        api_version=obj["apiVersion"],
        kind=obj["kind"],
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=meta["name"],
            namespace=meta["namespace"],
            labels=meta.get("labels"),
            annotations=meta.get("annotations"),
        ),
        spec=obj["spec"],
        opts=opts,
    )


# ---- one pool ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolBackendArgs:
    pool: o.PoolRoute
    gateway: o.GatewaySpec
    #: Backend-service timeout (s): the planner's ceiling of the longest allowed stream.
    backend_timeout_seconds: int
    priority_classes: tuple[o.PriorityClassSpec, ...]
    #: Where the API route lives (the ReferenceGrant admits routes from there only); None in a fleet's serving-only
    #: cluster, which holds no route.
    gateway_namespace: pulumi.Input[str] | None
    #: The pool's Cloud Armor tenant policy and its name (the GCPBackendPolicy names it), or None without tenants.
    security_policy: gcp.compute.RegionSecurityPolicy | None = None
    security_policy_name: str = ""
    #: A fleet's pool (docs/multiregion.md): the InferencePool is exported to the config cluster, which balances on
    #: it through its import, so the load-balancer policies target the import there (``multicluster``) and this
    #: cluster adds the AutoscalingMetric that exports the KV-cache gauge instead.
    exported: bool = False
    #: Prefix of the children's resource names: none in the config cluster, ``<region>-`` in a fleet's other
    #: clusters (the Kubernetes object names are the same in every cluster; Pulumi's must differ).
    name_prefix: str = ""


class PoolBackend(Component):
    """InferencePool ``vllm-<role>`` + its endpoint picker (llm-d Router chart, Helm release ``vllm-<role>-router``
    so the picker Service is ``vllm-<role>-router-epp``; it watches this pool) + the patch pointing the pool at the
    picker once it is ready + objectives + GKE policies + the ReferenceGrant admitting the API route, all in the
    pool's namespace. Pass the Kubernetes provider in ``opts.providers``."""

    TYPE = "llm-serving:gateway:PoolBackend"

    def __init__(self, name: str, args: PoolBackendArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, args, opts)
        pool, ns, gw = args.pool, args.pool.namespace, args.gateway
        role = pool.role
        k8s_opts = self.child_opts()

        self.pool_object = o.inference_pool_object(pool, gw.epp.failure_mode)
        if args.exported:
            self.pool_object = mc.exported_pool_object(self.pool_object)
        # The pool is created pointing at its picker, and afterwards only the patch below moves that pointer (which
        # then owns the field: pulumi-kubernetes leaves an ignored field another field manager owns out of its
        # server-side apply, provider/pkg/await/await.go handleSSAIgnoreFields). So on a stack that ran an
        # earlier picker, updating the pool never points it at a picker that is not running yet.
        self.inference_pool = _cr(
            f"{args.name_prefix}{naming.pool_name(role)}-pool",
            self.pool_object,
            self.child_opts(ignore_changes=["spec.endpointPickerRef"]),
        )

        # The objectives (llm-d.ai) exist before the picker that reads them starts: the v0.10.0 EPP picks the
        # objective API group once, at start-up, by discovery (pkg/epp/server/controller_config.go
        # populateWithDiscovery), and the CRDs come first (this component's opts wait for them).
        self.objectives = [
            _cr(f"{args.name_prefix}{naming.pool_name(role)}-objective-{obj['metadata']['name']}", obj, k8s_opts)
            for obj in o.objective_objects(pool, args.priority_classes)
        ]

        self.chart_values = o.epp_values(pool, gw)
        # A release name of its own (naming.epp_release_name): on a stack that ran an earlier picker every chart
        # object is new, so the new picker starts beside the old one; the chart is done when its leader is ready
        # (o.picker_await_annotations), which needs the pool to exist (the picker is not ready before it has read
        # its pool: llm-d-router v0.10.0 cmd/epp/runner/health.go, datastore PoolHasSynced), hence the dependency.
        self.epp = k8s.helm.v4.Chart(
            f"{args.name_prefix}{naming.epp_name(role)}",
            k8s.helm.v4.ChartArgs(
                chart=gw.epp.chart,
                version=gw.epp.version,
                name=naming.epp_release_name(role),
                namespace=ns,
                values=self.chart_values,
                # Awaited on what a leader-elected picker can reach (o.picker_await_annotations).
                post_renderer=post_renderer(o.picker_await_annotations(role, gw.epp.replicas)),
                skip_crds=True,
            ),
            opts=self.child_opts(depends_on=[self.inference_pool, *self.objectives]),
        )
        # Then the pool is pointed at the ready picker: a no-op on a new stack, the move on one that ran an earlier
        # picker; the old release is deleted after it (Pulumi deletes what the program dropped last). Retained on
        # delete: deleting a patch gives up the fields it owns, and endpointPickerRef is required by the
        # InferencePool CRD up to GAIE v1.5.0, so the provider refuses that delete ("this Patch resource is currently
        # managing a required field ... set the retainOnDelete resource option", pulumi-kubernetes
        # provider/pkg/provider/provider.go Delete); retained, the pointer stays until the pool itself goes.
        patch = o.endpoint_picker_patch_object(pool, gw.epp.failure_mode)
        self.picker_ref = k8s.apiextensions.CustomResourcePatch(
            f"{args.name_prefix}{naming.pool_name(role)}-picker-ref",
            api_version=patch["apiVersion"],
            kind=patch["kind"],
            metadata=k8s.meta.v1.ObjectMetaArgs(**patch["metadata"]),
            spec=patch["spec"],
            opts=self.child_opts(depends_on=[self.epp, self.inference_pool], retain_on_delete=True),
        )

        # No PodDisruptionBudget for the picker. With more than one replica the chart turns on leader election
        # and points the readiness probe at the gRPC health service "readiness", which only the leader passes
        # (llm-d-router v0.10.0 routerlib/templates/_deployment.yaml): a PDB counts the standby as unavailable, so no
        # budget could ever allow evicting the leader and every node drain on the leader's node would stall. What
        # keeps a picker alive through a drain is the chart values' pod anti-affinity (one picker per node) plus
        # leader hand-over to the standby; with FailOpen the pool keeps serving during the hand-over.

        self.health_check: k8s.apiextensions.CustomResource | None = None
        self.backend_policy: k8s.apiextensions.CustomResource | None = None
        self.autoscaling_metric: k8s.apiextensions.CustomResource | None = None
        if args.exported:
            self.autoscaling_metric = _cr(
                f"{args.name_prefix}{naming.pool_name(role)}-autoscaling-metric",
                mc.autoscaling_metric_object(role, ns, dict(pool.selector)),
                k8s_opts,
            )
        else:
            self.health_check = _cr(
                f"{args.name_prefix}{naming.pool_name(role)}-healthcheck", o.health_check_policy_object(pool), k8s_opts
            )
            backend_policy = o.backend_policy_object(pool, gw, args.backend_timeout_seconds)
            backend_opts = k8s_opts
            if args.security_policy is not None:
                backend_policy = t.with_security_policy(backend_policy, args.security_policy_name)
                # The GKE controller resolves the policy by name: it must exist before the backend policy names it.
                backend_opts = self.child_opts(depends_on=[args.security_policy])
            self.backend_policy = _cr(
                f"{args.name_prefix}{naming.pool_name(role)}-backendpolicy", backend_policy, backend_opts
            )
        self.reference_grant: k8s.apiextensions.CustomResource | None = None
        if args.gateway_namespace is not None:
            self.reference_grant = _cr(
                f"{args.name_prefix}{naming.pool_name(role)}-reference-grant",
                o.reference_grant_object(
                    pool, args.gateway_namespace, mc.IMPORT_TARGET if args.exported else o.POOL_TARGET
                ),
                k8s_opts,
            )

        self.pool_name = naming.pool_name(role)
        self.register_outputs({"pool_name": self.pool_name, "epp_service": naming.epp_name(role)})


# ---- body-based routing ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BodyRouterArgs:
    #: The gateway's namespace (an Output: the router waits for the Namespace); the extension must live beside
    #: the Gateway it targets.
    namespace: pulumi.Input[str]
    #: GAIE release of the router image (o.BODY_ROUTER_VERSION).
    version: str
    replicas: int
    fail_open: bool


class BodyRouter(Component):
    """GAIE's body-based router in the gateway's namespace: copies each request body's ``model`` into
    ``naming.MODEL_NAME_HEADER`` before the Gateway picks a route, so the API route can send a co-hosted model's
    requests to its own InferencePool. Rendered here rather than from the upstream chart: the gateway namespace
    enforces the ``restricted`` Pod Security profile, which the chart's pod (no security context) would fail."""

    TYPE = "llm-serving:gateway:BodyRouter"

    def __init__(self, name: str, args: BodyRouterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, args, opts)
        child = self.child_opts()
        labels = {**o.labels("body-router"), naming.NAME_LABEL: naming.BODY_ROUTER_NAME}
        selector = {naming.NAME_LABEL: naming.BODY_ROUTER_NAME}
        meta = k8s.meta.v1.ObjectMetaArgs(name=naming.BODY_ROUTER_NAME, namespace=args.namespace, labels=labels)
        # Other pods never use this account: only the router's pod mounts its token (pod spec below).
        self.service_account = k8s.core.v1.ServiceAccount(
            f"{name}-ksa", metadata=meta, automount_service_account_token=False, opts=child
        )
        core = k8s.core.v1
        self.deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata=meta,
            spec=k8s.apps.v1.DeploymentSpecArgs(
                replicas=args.replicas,
                selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector),
                template=core.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels=labels),
                    spec=core.PodSpecArgs(
                        # Redundant routers on different nodes where the system pool allows it: a node drain then
                        # never takes every router at once.
                        affinity=core.AffinityArgs(
                            pod_anti_affinity=core.PodAntiAffinityArgs(
                                preferred_during_scheduling_ignored_during_execution=[
                                    core.WeightedPodAffinityTermArgs(
                                        weight=100,
                                        pod_affinity_term=core.PodAffinityTermArgs(
                                            topology_key="kubernetes.io/hostname",
                                            label_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector),
                                        ),
                                    )
                                ]
                            )
                        )
                        if args.replicas > 1
                        else None,
                        service_account_name=naming.BODY_ROUTER_NAME,
                        # The router always builds a controller-runtime manager from in-cluster config (GAIE v1.5.0
                        # cmd/bbr/runner/runner.go: ctrl.GetConfig() then ctrl.NewManager; controller-runtime
                        # v0.23.3 pkg/client/config loadConfig -> rest.InClusterConfig, which reads this token and
                        # CA): without them it exits. Its one plugin watches nothing, so no Role is bound
                        # (o.BODY_ROUTER_PLUGIN_WATCHES); the manager's cache stays in this namespace (NAMESPACE).
                        automount_service_account_token=True,
                        security_context=core.PodSecurityContextArgs(
                            run_as_non_root=True,
                            run_as_user=o.BODY_ROUTER_UID,
                            run_as_group=o.BODY_ROUTER_UID,
                            seccomp_profile=core.SeccompProfileArgs(type="RuntimeDefault"),
                        ),
                        containers=[
                            core.ContainerArgs(
                                name="bbr",
                                image=f"{o.BODY_ROUTER_IMAGE}:{args.version}",
                                args=o.body_router_args(),
                                # As the upstream chart (templates/bbr.yaml, single namespace): the runner limits its
                                # cache to this namespace when NAMESPACE is set.
                                env=[
                                    core.EnvVarArgs(
                                        name="NAMESPACE",
                                        value_from=core.EnvVarSourceArgs(
                                            field_ref=core.ObjectFieldSelectorArgs(field_path="metadata.namespace")
                                        ),
                                    )
                                ],
                                ports=[
                                    core.ContainerPortArgs(name="grpc", container_port=naming.BODY_ROUTER_PORT),
                                    core.ContainerPortArgs(
                                        name="grpc-health", container_port=naming.BODY_ROUTER_HEALTH_PORT
                                    ),
                                ],
                                readiness_probe=core.ProbeArgs(
                                    grpc=core.GRPCActionArgs(port=naming.BODY_ROUTER_HEALTH_PORT)
                                ),
                                security_context=core.SecurityContextArgs(
                                    allow_privilege_escalation=False,
                                    read_only_root_filesystem=True,
                                    capabilities=core.CapabilitiesArgs(drop=["ALL"]),
                                ),
                            )
                        ],
                    ),
                ),
            ),
            opts=self.child_opts(depends_on=[self.service_account]),
        )
        self.service = core.Service(
            f"{name}-service",
            metadata=meta,
            spec=core.ServiceSpecArgs(
                selector=selector,
                type="ClusterIP",
                ports=[
                    core.ServicePortArgs(
                        name="grpc",
                        protocol="TCP",
                        port=naming.BODY_ROUTER_PORT,
                        target_port=naming.BODY_ROUTER_PORT,
                        # The load balancer speaks HTTP/2 (gRPC ext_proc) to the router (chart templates/bbr.yaml).
                        app_protocol="HTTP2",
                    )
                ],
            ),
            opts=child,
        )
        # A Role for whatever the rendered plugins read (o.BODY_ROUTER_PLUGIN_WATCHES); none for the model extractor.
        self.role = self.role_binding = None
        rules = o.body_router_rbac_rules()
        if rules:
            rbac = k8s.rbac.v1
            self.role = rbac.Role(
                f"{name}-role",
                metadata=meta,
                rules=[rbac.PolicyRuleArgs(api_groups=[g], resources=[r], verbs=list(v)) for g, r, v in rules],
                opts=child,
            )
            self.role_binding = rbac.RoleBinding(
                f"{name}-rolebinding",
                metadata=meta,
                role_ref=rbac.RoleRefArgs(
                    api_group="rbac.authorization.k8s.io", kind="Role", name=naming.BODY_ROUTER_NAME
                ),
                subjects=[
                    rbac.SubjectArgs(kind="ServiceAccount", name=naming.BODY_ROUTER_NAME, namespace=args.namespace)
                ],
                opts=child,
            )
        self.pdb = None
        if args.replicas > 1:
            # Unlike the pickers (leader election: the standby is never Ready), every router serves: a voluntary
            # disruption may take one at a time.
            self.pdb = k8s.policy.v1.PodDisruptionBudget(
                f"{name}-pdb",
                metadata=meta,
                spec=k8s.policy.v1.PodDisruptionBudgetSpecArgs(
                    max_unavailable=1, selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector)
                ),
                opts=child,
            )
        k8s_opts = self.child_opts()
        self.health_check = _cr(
            f"{name}-healthcheck",
            o.body_router_health_check_object(args.namespace),
            pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=[self.service])),
        )
        self.extension = _cr(
            f"{name}-extension",
            o.body_router_extension_object(args.namespace, args.fail_open),
            pulumi.ResourceOptions.merge(
                k8s_opts, pulumi.ResourceOptions(depends_on=[self.service, self.health_check])
            ),
        )
        self.register_outputs({"service": naming.BODY_ROUTER_NAME})


def gateway_namespace(name: str, opts: pulumi.ResourceOptions) -> k8s.core.v1.Namespace:
    """The gateway's own namespace (``naming.GATEWAY_NAMESPACE``): Gateway, routes and gateway policies."""
    return k8s.core.v1.Namespace(
        f"{name}-ns-{naming.GATEWAY_NAMESPACE}",
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=naming.GATEWAY_NAMESPACE,
            labels={
                naming.PART_OF_LABEL: naming.PART_OF,
                naming.COMPONENT_LABEL: "gateway",
                # No pods run here (the load balancer is Google's): the strictest profile costs nothing.
                "pod-security.kubernetes.io/enforce": "restricted",
            },
        ),
        opts=opts,
    )


def iap_access(owner: Component, name: str, project: str, region: str, gw: o.GatewaySpec) -> list[gcp.iap.WebIamMember]:
    """With IAP on: the IAP API, one accessor binding per member and the programmatic clients' settings."""
    if not gw.iap.enabled:
        return []
    iap_api = gcp.projects.Service(
        f"{name}-iap-api",
        project=project,
        service="iap.googleapis.com",
        disable_on_destroy=False,
        opts=owner.child_opts(),
    )
    # Keyed by member (naming.member_key): removing one accessor never shifts another onto its resource. The
    # alias is the name by position earlier versions gave it, so existing stacks keep their bindings.
    members = [
        gcp.iap.WebIamMember(
            f"{name}-iap-accessor-{naming.member_key(m)}",
            project=project,
            role="roles/iap.httpsResourceAccessor",
            member=m,
            opts=owner.child_opts(depends_on=[iap_api], aliases=[pulumi.Alias(name=f"{name}-iap-accessor-{i}")]),
        )
        for i, m in enumerate(gw.iap.members)
    ]
    if gw.iap.programmatic_clients:
        # API clients (not browsers) authenticate with an OAuth client of their own: IAP accepts their ID
        # tokens only when the client is listed here. Service accounts can instead send a self-signed JWT
        # (docs/deploying.md), which needs no listing.
        gcp.iap.Settings(
            f"{name}-iap-settings",
            name=f"projects/{project}/iap_web/compute-{region}",
            access_settings=gcp.iap.SettingsAccessSettingsArgs(
                oauth_settings=gcp.iap.SettingsAccessSettingsOauthSettingsArgs(
                    programmatic_clients=list(gw.iap.programmatic_clients)
                )
            ),
            opts=owner.child_opts(depends_on=[iap_api]),
        )
    return members


def objective_crds(owner: Component, name: str, gw: o.GatewaySpec) -> k8s.yaml.v2.ConfigGroup | None:
    """The objective CRDs the picker reads, when the stack installs them. GKE installs only the GA CRDs (GAIE releases
    and the llm-d GKE guide); the objective API the picker reads is installed here, from the same upstream commit as
    the pinned picker."""
    if not gw.epp.install_objective_crds:
        return None
    return k8s.yaml.v2.ConfigGroup(f"{name}-objective-crds", files=list(crd_urls()), opts=owner.child_opts())


def exported_pool_backends(
    owner: Component,
    name: str,
    gw: o.GatewaySpec,
    pools: tuple[o.PoolRoute, ...],
    priority_classes: tuple[o.PriorityClassSpec, ...],
    backend_timeout_seconds: int,
    crds: k8s.yaml.v2.ConfigGroup | None,
    gateway_namespace: pulumi.Input[str] | None = None,
    name_prefix: str = "",
) -> dict[str, PoolBackend]:
    """A fleet cluster's pools, each a :class:`PoolBackend` exported to the config cluster (after the CRDs)."""
    pool_opts = owner.child_opts(depends_on=[crds] if crds is not None else [])
    return {
        p.role: PoolBackend(
            f"{name}-{p.role}",
            PoolBackendArgs(
                pool=p,
                gateway=gw,
                backend_timeout_seconds=backend_timeout_seconds,
                priority_classes=priority_classes,
                gateway_namespace=gateway_namespace,
                exported=True,
                name_prefix=name_prefix,
            ),
            opts=pool_opts,
        )
        for p in pools
    }


# ---- a fleet's serving-only cluster ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportedPoolsArgs:
    """The pools one serving-only cluster of a fleet runs (docs/multiregion.md)."""

    gateway: o.GatewaySpec
    pools: tuple[o.PoolRoute, ...]
    priority_classes: tuple[o.PriorityClassSpec, ...]
    backend_timeout_seconds: int
    #: Prefix of every child's resource name (``<region>-``): see ``PoolBackendArgs.name_prefix``.
    name_prefix: str = ""

    def __post_init__(self) -> None:
        roles = [p.role for p in self.pools]
        if not roles or len(set(roles)) != len(roles):
            raise ValueError(f"ExportedPoolsArgs.pools: one or more distinct pools, got {roles}")
        cohosted = [p.role for p in self.pools if p.cohost]
        if cohosted:
            raise ValueError(f"ExportedPoolsArgs.pools: co-hosted pools are not served by a fleet, got {cohosted}")


class ExportedPools(Component):
    """A fleet's serving-only cluster: the objective CRDs (as the config cluster's gateway installs them) and per
    pool a :class:`PoolBackend` whose InferencePool is exported to the config cluster. No Gateway, route or
    load-balancer policy: those are the config cluster's, on the imports. Pass the cluster's provider in ``opts``."""

    TYPE = "llm-serving:gateway:ExportedPools"

    def __init__(self, name: str, args: ExportedPoolsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, args, opts)
        gw = args.gateway
        self.crds = objective_crds(self, name, gw)
        self.pools: dict[str, PoolBackend] = exported_pool_backends(
            self,
            name,
            gw,
            args.pools,
            args.priority_classes,
            args.backend_timeout_seconds,
            self.crds,
            name_prefix=args.name_prefix,
        )
        self.register_outputs({"pools": sorted(self.pools)})


# ---- the gateway ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InferenceGatewayArgs:
    environment: str
    project: str
    region: str
    gateway: o.GatewaySpec
    pools: tuple[o.PoolRoute, ...]
    priority_classes: tuple[o.PriorityClassSpec, ...]
    #: Backend-service timeout (s): the planner's ceiling of the longest allowed stream.
    backend_timeout_seconds: int
    #: What clients send as ``model`` (every pool serves it); Model Armor screens it.
    public_model_name: str
    #: Co-hosted models reached by model name (body-based routing), each with its group's pool (the models of one
    #: group share it); none for a stack without GKE co-hosting.
    models: tuple[o.ModelRoute, ...] = ()
    #: Node subnet (self link or id); the internal class reserves its VIP there.
    subnetwork: pulumi.Input[str] | None = None
    #: Project number (for the Model Armor service agent); needed only when Model Armor is configured.
    project_number: pulumi.Input[str] | None = None
    #: Pulumi ``protect`` on the reserved address: clients and DNS point at it, and a new one gets another IP.
    protect: bool = False
    #: The contract's tenants: each pool's backend gets a Cloud Armor policy holding them to their request budgets.
    tenants: tuple[t.TenantSpec, ...] = ()

    def __post_init__(self) -> None:
        if not self.pools:
            raise ValueError("InferenceGatewayArgs.pools: the gateway needs at least one pool to route to")
        split = split_problem({p.role: p.weight for p in self.pools})
        if split is not None:
            raise ValueError(f"InferenceGatewayArgs.pools: {split}")
        if self.gateway.gateway_class == "gke-l7-rilb" and self.subnetwork is None:
            raise ValueError("InferenceGatewayArgs.subnetwork: the internal gateway class reserves its address there")
        if self.gateway.model_armor is not None and self.project_number is None:
            raise ValueError(
                "InferenceGatewayArgs.project_number: Model Armor needs it for the Service Extensions agent"
            )


def address_name(environment: str) -> str:
    return f"llm-gateway-{environment}"


def ssl_policy_name(environment: str) -> str:
    return f"llm-gateway-{environment}-tls12"


class InferenceGateway(Component):
    """The regional GKE Gateway in front of the serving pools, in its own namespace (``naming.GATEWAY_NAMESPACE``),
    with one :class:`PoolBackend` per pool in that pool's namespace. Pass the Kubernetes provider in ``opts``."""

    TYPE = "llm-serving:gateway:InferenceGateway"

    def __init__(self, name: str, args: InferenceGatewayArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, args, opts)
        gw = args.gateway
        child = self.child_opts()
        self.namespace = gateway_namespace(name, child)
        #: The gateway namespace as an Output: every gateway object waits for the Namespace through it.
        ns: pulumi.Output[str] = self.namespace.metadata.name
        k8s_opts = self.child_opts()

        internal = gw.gateway_class == "gke-l7-rilb"
        # External: Standard tier is what regional external Application Load Balancers accept in every region.
        # Internal: SHARED_LOADBALANCER_VIP because the HTTP and HTTPS listeners become two forwarding rules
        # on the same VIP.
        self.address = gcp.compute.Address(
            f"{name}-address",
            name=address_name(args.environment),
            project=args.project,
            region=args.region,
            address_type="INTERNAL" if internal else "EXTERNAL",
            network_tier=None if internal else "STANDARD",
            purpose="SHARED_LOADBALANCER_VIP" if internal else None,
            subnetwork=args.subnetwork if internal else None,
            description="GKE Inference Gateway VIP (llm-serving)",
            opts=self.child_opts(protect=args.protect),
        )
        self.ssl_policy = gcp.compute.RegionSslPolicy(
            f"{name}-ssl-policy",
            name=ssl_policy_name(args.environment),
            project=args.project,
            region=args.region,
            min_tls_version=SSL_MIN_TLS,
            profile=SSL_PROFILE,
            opts=child,
        )

        self.crds = objective_crds(self, name, gw)

        self.gateway = _cr(
            f"{name}-gateway",
            o.gateway_object(gw, ns, address_name(args.environment)),
            pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=[self.address])),
        )
        self.gateway_policy = _cr(
            f"{name}-gateway-policy",
            o.gateway_policy_object(gw, ns, ssl_policy_name(args.environment)),
            pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=[self.ssl_policy, self.gateway])),
        )

        pool_opts = self.child_opts(depends_on=[self.crds] if self.crds is not None else [])
        self.security_policies: dict[str, gcp.compute.RegionSecurityPolicy] = {}
        for p in (*args.pools, *(m.pool for m in args.models)):
            if args.tenants and p.role not in self.security_policies:
                self.security_policies[p.role] = self._tenant_policy(name, args, p)
        self.pools: dict[str, PoolBackend] = {}
        for p in args.pools:
            self.pools[p.role] = PoolBackend(
                f"{name}-{p.role}",
                PoolBackendArgs(
                    pool=p,
                    gateway=gw,
                    backend_timeout_seconds=args.backend_timeout_seconds,
                    priority_classes=args.priority_classes,
                    gateway_namespace=ns,
                    security_policy=self.security_policies.get(p.role),
                    security_policy_name=t.security_policy_name(args.environment, p.role),
                ),
                opts=pool_opts,
            )

        self.model_pools: dict[str, PoolBackend] = {}
        for m in args.models:
            if m.pool.role in self.model_pools:
                continue  # a co-hosted group's models share its one pool
            self.model_pools[m.pool.role] = PoolBackend(
                f"{name}-{m.pool.role}",
                PoolBackendArgs(
                    pool=m.pool,
                    gateway=gw,
                    backend_timeout_seconds=args.backend_timeout_seconds,
                    priority_classes=args.priority_classes,
                    gateway_namespace=ns,
                    security_policy=self.security_policies.get(m.pool.role),
                    security_policy_name=t.security_policy_name(args.environment, m.pool.role),
                ),
                opts=pool_opts,
            )
        self.body_router = None
        if args.models:
            self.body_router = BodyRouter(
                f"{name}-body-router",
                BodyRouterArgs(
                    namespace=ns,
                    version=o.BODY_ROUTER_VERSION,
                    replicas=gw.epp.replicas,
                    fail_open=gw.epp.failure_mode == "FailOpen",
                ),
                opts=self.child_opts(depends_on=[self.gateway]),
            )

        backends = [
            x
            for b in (*self.pools.values(), *self.model_pools.values())
            for x in (b.inference_pool, b.reference_grant)
            if x is not None
        ]
        self.api_route = _cr(
            f"{name}-api-route",
            o.api_route_object(gw, ns, args.pools, args.models),
            pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=[self.gateway, *backends])),
        )
        self.redirect_route = _cr(
            f"{name}-redirect-route",
            o.redirect_route_object(gw, ns),
            pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=[self.gateway])),
        )

        self.iap_members = iap_access(self, name, args.project, args.region, gw)

        self.model_armor = None
        if gw.model_armor is not None:
            assert args.project_number is not None  # checked by InferenceGatewayArgs
            armor_api = gcp.projects.Service(
                f"{name}-modelarmor-api",
                project=args.project,
                service="modelarmor.googleapis.com",
                disable_on_destroy=False,
                opts=child,
            )
            # The Service Extensions agent (service-<number>@gcp-sa-dep) calls Model Armor from the load balancer.
            # A service agent exists only once something creates it; granting roles to it first fails, so the
            # stack creates it and grants to its ``member`` output.
            self.extensions_agent = gcp.projects.ServiceIdentity(
                f"{name}-service-extensions-agent",
                project=args.project,
                service=SERVICE_EXTENSIONS_API,
                opts=self.child_opts(depends_on=[armor_api]),
            )
            grants = [
                gcp.projects.IAMMember(
                    f"{name}-modelarmor-{role.split('/')[1].replace('.', '-')}",
                    project=args.project,
                    role=role,
                    member=self.extensions_agent.member,
                    opts=self.child_opts(depends_on=[armor_api]),
                )
                for role in MODEL_ARMOR_AGENT_ROLES
            ]
            self.model_armor = _cr(
                f"{name}-model-armor",
                o.model_armor_object(
                    gw,
                    ns,
                    args.region,
                    (args.public_model_name, *(m.model_name for m in args.models)),
                    tuple(p.release for p in args.pools) + tuple(m.release for m in args.models),
                ),
                pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=[self.gateway, *grants])),
            )

        self.address_value = self.address.address
        self.hostnames = list(gw.hostnames)
        self.register_outputs(
            {
                "address": self.address_value,
                "hostnames": self.hostnames,
                "namespace": ns,
                "pools": sorted(self.pools),
                **({"model_pools": sorted(self.model_pools)} if self.model_pools else {}),
            }
        )

    def _tenant_policy(
        self, name: str, args: InferenceGatewayArgs, pool: o.PoolRoute
    ) -> gcp.compute.RegionSecurityPolicy:
        """The pool's regional Cloud Armor policy: a throttle per budgeted tenant keyed by the fairness-id header, a
        default rule refusing requests that name no tenant (``components/gateway/tenants.py``). Regional, because
        the Gateway's classes are regional Application Load Balancers, whose backend services take regional
        policies only (precondition listed in docs/tenants.md)."""
        return gcp.compute.RegionSecurityPolicy(
            f"{name}-{pool.role}-tenants",
            name=t.security_policy_name(args.environment, pool.role),
            project=args.project,
            region=args.region,
            type="CLOUD_ARMOR",
            description=f"Tenant request budgets of pool {pool.role} (llm-serving)",
            rules=[
                gcp.compute.RegionSecurityPolicyRuleArgs(**r.args()) for r in t.armor_rules(args.tenants, pool.weight)
            ],
            opts=self.child_opts(),
        )
