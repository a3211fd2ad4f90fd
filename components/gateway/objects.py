"""Pure builders of the Inference Gateway's Kubernetes objects and the endpoint-picker chart values.

Everything here is a function of typed inputs (no Pulumi), so tests call it directly and the component only
registers what these return. Names, ports and labels come from the naming contract (``components/naming.py``):
InferencePool = the pool's Deployment name, picker Service ``<pool>-epp`` on the ext-proc port, vLLM's serving
port with ``/health``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .. import naming
from .charts import ROUTER
from .tenants import TenantSpec, tenant_fairness, with_fairness

GATEWAY_API = "gateway.networking.k8s.io/v1"
GATEWAY_GROUP = "gateway.networking.k8s.io"
POOL_API = "inference.networking.k8s.io/v1"
POOL_GROUP = "inference.networking.k8s.io"
GKE_POLICY_API = "networking.gke.io/v1"

GATEWAY_NAME = "llm-gateway"
API_ROUTE_NAME = "llm-api"
REDIRECT_ROUTE_NAME = "llm-gateway-http-redirect"
MODEL_ARMOR_EXTENSION_NAME = "llm-model-armor"
HTTPS_LISTENER = "https"
HTTP_LISTENER = "http"


#: OpenAI-compatible paths served through the pools. Anything else (``/metrics``, ``/health``, vLLM admin
#: endpoints such as ``/reset_prefix_cache``) is not routed, so it is reachable only inside the cluster.
OPENAI_PATH_PREFIXES: tuple[str, ...] = ("/v1/chat/completions", "/v1/completions", "/v1/models")

# ---- health checks of the pools' backend services (HealthCheckPolicy) ------------------------------------
#: How often each load-balancer prober calls /health. A dead engine (503) leaves the backend after
#: HC_UNHEALTHY_THRESHOLD x 5 s = 10 s; change together with the model server's readiness period so the load
#: balancer and the kubelet notice a failed engine within the same ~10 s.
HC_INTERVAL_SECONDS = 5
#: /health is answered in-process without touching the GPU; 2 s only trips on a stalled server. Must be
#: <= HC_INTERVAL_SECONDS.
HC_TIMEOUT_SECONDS = 2
#: A pod joins the NEG only after its readiness probe proved the model loaded and generated a token, so one
#: load-balancer success is enough to send it traffic.
HC_HEALTHY_THRESHOLD = 1
#: Two consecutive failures: one dropped probe on a saturated pod must not eject it (and shed its streams).
HC_UNHEALTHY_THRESHOLD = 2

#: Picker metrics scrape interval (the chart's default): one sample per 10 s resolves the picker's decision
#: latency and pool gauges for 5-minute alert windows; change with observability's scrape interval.
EPP_MONITORING_INTERVAL = "10s"


#: Endpoint-picker pod resources (see epp_values for the arithmetic against the system machine type).
EPP_CPU_REQUEST = "500m"
EPP_MEMORY_REQUEST = "1Gi"
#: 2 GiB: twice the request for the picker's caches under a burst; four pickers at their limit still fit one
#: e2-standard-4 (4 x 2 GiB + adapter + system pods < 13.3 GiB allocatable).
EPP_MEMORY_LIMIT = "2Gi"


#: pulumi-kubernetes' await overrides (provider/pkg/metadata/annotations.go ``AnnotationWaitFor`` /
#: ``AnnotationSkipAwait``): either one makes ``metadata.ReadyCondition`` return ``custom``, and the provider then
#: skips the kind's built-in await (provider/pkg/await/await.go ``Creation`` / ``Update``: ``!custom``).
PULUMI_WAIT_FOR = "pulumi.com/waitFor"
PULUMI_SKIP_AWAIT = "pulumi.com/skipAwait"
PULUMI_PATCH_FORCE = "pulumi.com/patchForce"

# ---- typed inputs -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CertificateSpec:
    """Regional certificates of the HTTPS listener, created outside the program and referenced by name."""

    source: Literal["certificate-manager", "pre-shared"]
    names: tuple[str, ...]


@dataclass(frozen=True)
class SaturationSpec:
    """When the picker calls its pool saturated (llm-d-router v0.10.0 ``utilization-detector``,
    pkg/epp/framework/plugins/flowcontrol/saturationdetector/utilization): per endpoint
    ``max(waiting / queue_depth_threshold, kv_cache_usage / kv_cache_util_threshold)``, averaged over the pool. With
    flow control on, at >= 1.0 the dispatch cycle holds every band's queue (highest priority dispatched first as
    capacity frees); with it off, a sheddable request (priority < 0) is answered 429 at once
    (pkg/epp/requestcontrol/admission.go ``rejectIfSheddableAndSaturated``)."""

    queue_depth_threshold: int
    kv_cache_util_threshold: float

    def __post_init__(self) -> None:
        if self.queue_depth_threshold < 1:
            raise ValueError(f"SaturationSpec.queue_depth_threshold: must be >= 1, got {self.queue_depth_threshold}")
        if not 0 < self.kv_cache_util_threshold <= 1:
            raise ValueError(
                f"SaturationSpec.kv_cache_util_threshold: must be in (0, 1], got {self.kv_cache_util_threshold}"
            )


@dataclass(frozen=True)
class PriorityBandSpec:
    """One flow-control band: a priority and how many requests it may hold queued (``maxRequests``)."""

    priority: int
    max_requests: int

    def __post_init__(self) -> None:
        # 0 is not "no queue": the router reads 0 as unset and applies its default of 5000
        # (endpointpickerconfig_types.go PriorityBandConfig.MaxRequests).
        if self.max_requests < 1:
            raise ValueError(f"PriorityBandSpec.max_requests: must be >= 1, got {self.max_requests}")


@dataclass(frozen=True)
class FlowControlSpec:
    """A pool's flow-control bounds (derived by infra/targets/gke/planning/flow_control.py): the queue-wait TTL and
    one band per priority class. Fairness between flows of one band (the ``x-llm-d-inference-fairness-id`` header)
    and per-tenant settings belong here when tenants are added; :func:`flow_control_config` renders it all."""

    request_ttl_ms: int
    bands: tuple[PriorityBandSpec, ...]

    def __post_init__(self) -> None:
        if self.request_ttl_ms < 1:
            raise ValueError(f"FlowControlSpec.request_ttl_ms: must be >= 1, got {self.request_ttl_ms}")
        priorities = [b.priority for b in self.bands]
        if not priorities or len(set(priorities)) != len(priorities):
            raise ValueError(f"FlowControlSpec.bands: one band per priority, got {priorities}")


@dataclass(frozen=True)
class EndpointPickerSpec:
    chart: str
    version: str
    replicas: int
    failure_mode: Literal["FailOpen", "FailClose"]
    kv_cache_metric: str
    install_objective_crds: bool
    saturation: SaturationSpec
    #: Whether the pickers run flow control (each pool's bounds are its PoolRoute.flow_control).
    flow_control: bool = True

    def __post_init__(self) -> None:
        if (self.chart, self.version) != (ROUTER.chart, ROUTER.version):
            raise ValueError(
                f"EndpointPickerSpec.version: unsupported chart {self.chart}@{self.version}; "
                f"supported: {ROUTER.chart}@{ROUTER.version}"
            )


@dataclass(frozen=True)
class IapSpec:
    enabled: bool
    members: tuple[str, ...] = ()
    oauth_client_id: str | None = None
    oauth_client_secret_name: str | None = None
    #: OAuth client ids allowed to call the API programmatically (IAP settings ``programmatic_clients``).
    programmatic_clients: tuple[str, ...] = ()


@dataclass(frozen=True)
class ModelArmorSpec:
    template: str
    fail_open: bool
    timeout_ms: int


@dataclass(frozen=True)
class GatewaySpec:
    gateway_class: Literal[
        "gke-l7-regional-external-managed", "gke-l7-rilb", "gke-l7-cross-regional-internal-managed-mc"
    ]
    hostnames: tuple[str, ...]
    certificate: CertificateSpec
    epp: EndpointPickerSpec
    iap: IapSpec
    model_armor: ModelArmorSpec | None
    request_log_sample_rate: float
    allow_global_access: bool


@dataclass(frozen=True)
class PoolRoute:
    """One serving pool as the gateway sees it."""

    role: str
    release: str
    weight: int
    #: Pod labels the InferencePool and its picker select: the model server hands them over
    #: (``ModelServer.pool_selector``).
    selector: Mapping[str, str]
    #: The pool's own namespace (the platform's Output): its InferencePool, picker, objectives and policies live
    #: there, beside its model servers.
    namespace: Any
    #: A co-hosted group's pool: its pods run the co-host server (several vLLM instances each), so its picker reads
    #: the server's pod-level aggregates (:func:`cohost_engine_config`) instead of one instance's vLLM series.
    cohost: bool = False
    #: The pool's flow-control bounds; None = flow control off for this pool's picker.
    flow_control: FlowControlSpec | None = None
    #: The contract's tenants: with flow control on, every band shares its queue between them by the router's
    #: fairness policy (keyed by the fairness-id header the API front sets: components/gateway/tenants.py).
    tenants: tuple[TenantSpec, ...] = ()


@dataclass(frozen=True)
class PriorityClassSpec:
    name: str
    priority: int
    #: Shed under saturation; the picker sheds exactly priority < 0, so the two must agree.
    sheddable: bool
    description: str

    def __post_init__(self) -> None:
        if self.sheddable != (self.priority < 0):
            raise ValueError(
                f"PriorityClassSpec.priority: class {self.name!r} has sheddable={self.sheddable} but "
                f"priority {self.priority} (the picker sheds exactly priority < 0)"
            )


def epp_pod_selector(role: str) -> dict[str, str]:
    """The chart's picker pod selector label (``llm-d-router-gateway: <release>-epp``, routerlib _helpers.tpl)."""
    return {naming.EPP_POD_LABEL: naming.epp_name(role)}


def labels(component: str, role: str | None = None) -> dict[str, str]:
    out = {
        naming.PART_OF_LABEL: naming.PART_OF,
        naming.COMPONENT_LABEL: component,
        "app.kubernetes.io/managed-by": "pulumi",
    }
    if role is not None:
        out[naming.POOL_LABEL] = role
    return out


def _meta(name: str, namespace: Any, component: str, role: str | None = None) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "labels": labels(component, role)}


# ---- Gateway ----------------------------------------------------------------------------------------------


def tls_options(gw: GatewaySpec) -> dict[str, str]:
    key = (
        "networking.gke.io/cert-manager-certs"
        if gw.certificate.source == "certificate-manager"
        else "networking.gke.io/pre-shared-certs"
    )
    return {key: ",".join(gw.certificate.names)}


def gateway_object(gw: GatewaySpec, namespace: Any, address_name: str) -> dict[str, Any]:
    same_ns = {"namespaces": {"from": "Same"}}
    return {
        "apiVersion": GATEWAY_API,
        "kind": "Gateway",
        "metadata": _meta(GATEWAY_NAME, namespace, "gateway"),
        "spec": {
            "gatewayClassName": gw.gateway_class,
            "addresses": [{"type": "NamedAddress", "value": address_name}],
            "listeners": [
                {
                    "name": HTTPS_LISTENER,
                    "protocol": "HTTPS",
                    "port": 443,
                    "allowedRoutes": same_ns,
                    "tls": {"mode": "Terminate", "options": tls_options(gw)},
                },
                # Plain HTTP exists only to answer with a redirect (see redirect_route_object).
                {"name": HTTP_LISTENER, "protocol": "HTTP", "port": 80, "allowedRoutes": same_ns},
            ],
        },
    }


def gateway_policy_object(gw: GatewaySpec, namespace: Any, ssl_policy_name: str) -> dict[str, Any]:
    default: dict[str, Any] = {"sslPolicy": ssl_policy_name}
    if gw.gateway_class == "gke-l7-rilb":
        default["allowGlobalAccess"] = gw.allow_global_access
    return {
        "apiVersion": GKE_POLICY_API,
        "kind": "GCPGatewayPolicy",
        "metadata": _meta(GATEWAY_NAME, namespace, "gateway"),
        "spec": {"targetRef": {"group": GATEWAY_GROUP, "kind": "Gateway", "name": GATEWAY_NAME}, "default": default},
    }


def _parent(section: str) -> dict[str, str]:
    return {"group": GATEWAY_GROUP, "kind": "Gateway", "name": GATEWAY_NAME, "sectionName": section}


def redirect_route_object(gw: GatewaySpec, namespace: Any) -> dict[str, Any]:
    return {
        "apiVersion": GATEWAY_API,
        "kind": "HTTPRoute",
        "metadata": _meta(REDIRECT_ROUTE_NAME, namespace, "gateway"),
        "spec": {
            "parentRefs": [_parent(HTTP_LISTENER)],
            "hostnames": list(gw.hostnames),
            "rules": [
                {"filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https", "statusCode": 301}}]}
            ],
        },
    }


@dataclass(frozen=True)
class ModelRoute:
    """A co-hosted model the gateway reaches by the ``model`` a request names: its public name, the release that
    answers under it (responses name it) and its group's pool."""

    model_name: str
    release: str
    pool: PoolRoute


#: Paths whose JSON body names a model: the body-based router reads ``model`` there. ``/v1/models`` (a GET
#: without a body) always reaches the weighted pools.
MODEL_ROUTED_PATH_PREFIXES: tuple[str, ...] = OPENAI_PATH_PREFIXES[:2]


def model_rule(route: ModelRoute) -> dict[str, Any]:
    """The same path prefixes as the weighted rule plus an exact match on the header the body-based router sets:
    among rules matching a request, the one with more header matches wins (Gateway API HTTPRoute rule
    precedence), so a request naming a co-hosted model reaches only that model's pool and every other request the
    weighted split."""
    p = route.pool
    return {
        "matches": [
            {
                "path": {"type": "PathPrefix", "value": prefix},
                "headers": [{"type": "Exact", "name": naming.MODEL_NAME_HEADER, "value": route.model_name}],
            }
            for prefix in MODEL_ROUTED_PATH_PREFIXES
        ],
        "backendRefs": [
            {
                "group": POOL_GROUP,
                "kind": "InferencePool",
                "name": naming.pool_name(p.role),
                "namespace": p.namespace,
                "weight": 1,
            }
        ],
    }


def api_route_object(
    gw: GatewaySpec, namespace: Any, pools: tuple[PoolRoute, ...], models: tuple[ModelRoute, ...] = ()
) -> dict[str, Any]:
    """OpenAI paths -> weighted InferencePools. Weighted routing picks a pool first; cache-aware endpoint
    choice then happens inside that (cache-compatible) pool. A weight-0 backend stays attached: a dark canary
    is warm and scraped but gets no user requests. Each pool lives in its own namespace, so every backend names
    it, and the pool's :func:`reference_grant_object` admits the reference. Co-hosted models add one rule each
    (:func:`model_rule`), after the weighted one."""
    return {
        "apiVersion": GATEWAY_API,
        "kind": "HTTPRoute",
        "metadata": _meta(API_ROUTE_NAME, namespace, "gateway"),
        "spec": {
            "parentRefs": [_parent(HTTPS_LISTENER)],
            "hostnames": list(gw.hostnames),
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": p}} for p in OPENAI_PATH_PREFIXES],
                    "backendRefs": [
                        {
                            "group": POOL_GROUP,
                            "kind": "InferencePool",
                            "name": naming.pool_name(p.role),
                            "namespace": p.namespace,
                            "weight": p.weight,
                        }
                        for p in pools
                    ],
                },
                *(model_rule(m) for m in models),
            ],
        },
    }


# ---- per pool -----------------------------------------------------------------------------------------------

REFERENCE_GRANT_API = "gateway.networking.k8s.io/v1beta1"


#: What a ReferenceGrant admits the API route to: the pool's InferencePool (group, kind).
POOL_TARGET = (POOL_GROUP, "InferencePool")


def reference_grant_object(
    pool: PoolRoute, gateway_namespace: Any, target: tuple[str, str] = POOL_TARGET
) -> dict[str, Any]:
    """Lets the API route (in the gateway's namespace) send traffic to this pool's InferencePool (or, in a fleet's
    config cluster, to its ``GCPInferencePoolImport``: ``multicluster.IMPORT_TARGET``), and to nothing else in the
    pool's namespace. v1beta1: the version every Gateway API bundle since v0.6 serves."""
    return {
        "apiVersion": REFERENCE_GRANT_API,
        "kind": "ReferenceGrant",
        "metadata": _meta(
            f"{API_ROUTE_NAME}-to-{naming.pool_name(pool.role)}", pool.namespace, "inference-pool", pool.role
        ),
        "spec": {
            "from": [{"group": GATEWAY_GROUP, "kind": "HTTPRoute", "namespace": gateway_namespace}],
            "to": [{"group": target[0], "kind": target[1], "name": naming.pool_name(pool.role)}],
        },
    }


def inference_pool_object(pool: PoolRoute, failure_mode: str) -> dict[str, Any]:
    return {
        "apiVersion": POOL_API,
        "kind": "InferencePool",
        "metadata": _meta(naming.pool_name(pool.role), pool.namespace, "inference-pool", pool.role),
        "spec": {
            "selector": {"matchLabels": dict(pool.selector)},
            "targetPorts": [{"number": naming.VLLM_PORT}],
            "endpointPickerRef": endpoint_picker_ref(pool.role, failure_mode),
        },
    }


def endpoint_picker_ref(role: str, failure_mode: str) -> dict[str, Any]:
    """The pool's ``spec.endpointPickerRef``: the Service the picker chart creates, on its ext-proc port."""
    return {
        "group": "",
        "kind": "Service",
        "name": naming.epp_name(role),
        "port": {"number": naming.EPP_EXT_PROC_PORT},
        # Stated, not defaulted (the CRD default is FailClose): the reason is config's gateway.epp.failure_mode_reason.
        "failureMode": failure_mode,
    }


def endpoint_picker_patch_object(pool: PoolRoute, failure_mode: str) -> dict[str, Any]:
    """Server-side apply patch that points the pool at its picker once the picker is ready (docs/gke.md "Moving an
    existing stack to the llm-d Router"). ``pulumi.com/patchForce`` takes the field over from the manager that
    created the pool (pulumi-kubernetes provider/pkg/metadata/annotations.go ``AnnotationPatchForce``: a conflict
    with another field manager is overridden instead of failing the update)."""
    return {
        "apiVersion": POOL_API,
        "kind": "InferencePool",
        "metadata": {
            "name": naming.pool_name(pool.role),
            "namespace": pool.namespace,
            "annotations": {PULUMI_PATCH_FORCE: "true"},
        },
        "spec": {"endpointPickerRef": endpoint_picker_ref(pool.role, failure_mode)},
    }


def _target(pool: PoolRoute) -> dict[str, str]:
    return {"group": POOL_GROUP, "kind": "InferencePool", "name": naming.pool_name(pool.role)}


def health_check_default() -> dict[str, Any]:
    """The load balancer's health check of vLLM endpoints (``HealthCheckPolicy.spec.default``), the same for a
    regional pool and an imported one: HTTP ``/health`` on vLLM's port at the ``HC_*`` timing."""
    return {
        "checkIntervalSec": HC_INTERVAL_SECONDS,
        "timeoutSec": HC_TIMEOUT_SECONDS,
        "healthyThreshold": HC_HEALTHY_THRESHOLD,
        "unhealthyThreshold": HC_UNHEALTHY_THRESHOLD,
        "config": {"type": "HTTP", "httpHealthCheck": {"requestPath": naming.HEALTH_PATH, "port": naming.VLLM_PORT}},
    }


def health_check_policy_object(pool: PoolRoute) -> dict[str, Any]:
    return {
        "apiVersion": GKE_POLICY_API,
        "kind": "HealthCheckPolicy",
        "metadata": _meta(naming.pool_name(pool.role), pool.namespace, "inference-pool", pool.role),
        "spec": {"targetRef": _target(pool), "default": health_check_default()},
    }


def log_sample_rate(rate: float) -> int:
    """GCPBackendPolicy ``logging.sampleRate`` is parts per million."""
    return round(rate * 1_000_000)


def backend_policy_object(pool: PoolRoute, gw: GatewaySpec, timeout: int) -> dict[str, Any]:
    """``timeout``: the backend-service timeout, the planner's ceiling of the longest allowed stream."""
    return {
        "apiVersion": GKE_POLICY_API,
        "kind": "GCPBackendPolicy",
        "metadata": _meta(naming.pool_name(pool.role), pool.namespace, "inference-pool", pool.role),
        "spec": {"targetRef": _target(pool), "default": backend_policy_default(gw, timeout)},
    }


def backend_policy_default(gw: GatewaySpec, timeout: int) -> dict[str, Any]:
    """A pool's GCPBackendPolicy ``default``: stream timeout, draining, sampled logs and IAP (the same on a fleet's
    imported pool, ``multicluster.import_backend_policy_object``)."""
    default: dict[str, Any] = {
        # The longest allowed stream must finish: LB timeout = ceil(TTFT objective + max output x ITL objective).
        "timeoutSec": timeout,
        # An endpoint leaving the pool (scale-down, rollout) keeps its in-flight streams for the same bound;
        # the model server's terminationGracePeriodSeconds must be >= this.
        "connectionDraining": {"drainingTimeoutSec": timeout},
        # Sampled request logs; LB logs never contain request or response bodies (no prompts/completions).
        "logging": {"enabled": True, "sampleRate": log_sample_rate(gw.request_log_sample_rate)},
    }
    if gw.iap.enabled:
        iap: dict[str, Any] = {"enabled": True}
        if gw.iap.oauth_client_id is not None:
            iap["clientID"] = gw.iap.oauth_client_id
            iap["oauth2ClientSecret"] = {"name": gw.iap.oauth_client_secret_name}
        default["iap"] = iap
    return default


def objective_objects(pool: PoolRoute, classes: tuple[PriorityClassSpec, ...]) -> list[dict[str, Any]]:
    """One InferenceObjective per class, named as the class, in the pool's namespace: the picker looks the class a
    request names up by object name in its own namespace and keeps only objectives whose ``poolRef`` is its pool,
    so each pool needs its own copy under the bare name (hence a namespace per pool)."""
    return [
        {
            "apiVersion": ROUTER.objective_api_version,
            "kind": "InferenceObjective",
            "metadata": {
                **_meta(c.name, pool.namespace, "inference-objective", pool.role),
                "annotations": {
                    "llm-serving.io/description": c.description,
                    naming.SHEDDABLE_ANNOTATION: "true" if c.sheddable else "false",
                },
            },
            "spec": {
                "priority": c.priority,
                "poolRef": {"group": POOL_GROUP, "kind": "InferencePool", "name": naming.pool_name(pool.role)},
            },
        }
        for c in classes
    ]


#: Name of the EndpointPickerConfig file this program writes into the picker's ConfigMap
#: (``router.epp.pluginsCustomConfig``) and points the picker at (``router.epp.pluginsConfigFile``).
PICKER_CONFIG_FILE = "llm-serving-plugins.yaml"
#: API version of the picker's config file (apix/config/v1alpha1, group llm-d.ai; the chart's own default
#: config, routerlib/templates/_config.yaml, declares the same).
PICKER_CONFIG_API = "llm-d.ai/v1alpha1"
#: The utilization detector's metrics staleness bound (its v0.10.0 default, stated): an endpoint whose metrics
#: are older counts as saturated. The picker refreshes endpoint metrics every 50 ms, so 200 ms is four misses.
SATURATION_METRICS_STALENESS = "200ms"
#: Feature gate that turns flow control on (pkg/epp/flowcontrol/config.go ``FeatureGate``; registered off by
#: default, cmd/epp/runner/runner.go ``RegisterFeatureGate(flowcontrol.FeatureGate, false)``).
FLOW_CONTROL_GATE = "flowControl"
#: Bytes every queued request body may hold together, over all bands (``flowControl.maxBytes``): a quarter of the
#: picker's 2 GiB memory limit (EPP_MEMORY_LIMIT), so a full queue can never push the picker out of memory; the rest
#: is its endpoint and prefix caches. Change with EPP_MEMORY_LIMIT.
FLOW_CONTROL_MAX_BYTES = "512Mi"
#: The core-metrics extractor picks a pod's metric mapping by this pod label (its ``engineLabelKey``). v0.10.0's
#: default key is ``llm-d.ai/engine-type`` (pkg/epp/framework/plugins/datalayer/extractor/metrics/
#: mapping_registry.go ``DefaultEngineTypeLabelKey``); the model-server and co-host pods carry
#: naming.ENGINE_TYPE_LABEL, so the key is stated (relabelling the pods would roll every model server).
ENGINE_LABEL_KEY = naming.ENGINE_TYPE_LABEL
#: The engine the extractor assumes for a pod without the label (its ``defaultEngine``; v0.10.0 default ``vllm``).
DEFAULT_ENGINE = "vllm"


def vllm_engine_config() -> dict[str, str]:
    """vLLM's metric mapping, stated rather than defaulted (factories.go ``defaultEngineConfigs`` has the same queue,
    running, KV-cache and LoRA names): the gauges vLLM 0.32 exports. The built-in entry also reads
    ``vllm:cache_config_info``, which vLLM 0.33's metric list (vllm/v1/metrics/loggers.py) does not have: the
    cache-info spec is left empty (the extractor then skips it, as for sglang) rather than pointing at a series that
    never appears."""
    return {
        "name": DEFAULT_ENGINE,
        "queuedRequestsSpec": naming.VLLM_NUM_REQUESTS_WAITING,
        "runningRequestsSpec": naming.VLLM_NUM_REQUESTS_RUNNING,
        "kvUsageSpec": naming.VLLM_KV_CACHE_USAGE,
        "loraSpec": naming.VLLM_LORA_REQUESTS_INFO,
        "cacheInfoSpec": "",
    }


def cohost_engine_config() -> dict[str, str]:
    """The picker's metric mapping for co-host pods (``core-metrics-extractor`` ``engineConfigs``, selected by the
    pod label :data:`ENGINE_LABEL_KEY`, llm-d-router v0.10.0 pkg/epp/framework/plugins/datalayer/extractor/metrics/
    factories.go). A co-host pod exposes one vLLM series per instance, and the extractor keeps one series per metric
    (the newest): it would see one instance's queue and KV cache. The server's ``cohost:*`` aggregates are one
    series per pod (waiting and running summed over the instances, the fullest instance's KV cache). No LoRA or
    cache-info series: empty specs (as the extractor's built-in sglang / trtllm-serve mappings have)."""
    return {
        "name": naming.COHOST_ENGINE_TYPE,
        "queuedRequestsSpec": naming.COHOST_NUM_REQUESTS_WAITING,
        "runningRequestsSpec": naming.COHOST_NUM_REQUESTS_RUNNING,
        "kvUsageSpec": naming.COHOST_KV_CACHE_USAGE,
        "loraSpec": "",
        "cacheInfoSpec": "",
    }


def flow_control_config(fc: FlowControlSpec) -> dict[str, Any]:
    """The EndpointPickerConfig ``flowControl`` block (apix/config/v1alpha1 ``FlowControlConfig``) of one pool: the
    queue-wait TTL, a global byte bound, and one band per priority with its ``maxRequests``; the total request bound
    is the bands' sum. Bands keep the router's default policies (``global-strict-fairness-policy`` between flows,
    ``fcfs-ordering-policy`` inside one, registry/config.go). The saturation detector is named here, where v0.10.0
    reads it (the top-level ``saturationDetector`` is deprecated). This is the one place flow control is rendered:
    a fairness policy per band and tenant settings are added to :class:`FlowControlSpec` and here."""
    return {
        "maxBytes": FLOW_CONTROL_MAX_BYTES,
        "maxRequests": str(sum(b.max_requests for b in fc.bands)),
        "defaultRequestTTL": f"{fc.request_ttl_ms}ms",
        "priorityBands": [{"priority": b.priority, "maxRequests": str(b.max_requests)} for b in fc.bands],
        "saturationDetector": {"pluginRef": "utilization-detector"},
    }


def picker_config(saturation: SaturationSpec, pool: PoolRoute) -> dict[str, Any]:
    """The pool's EndpointPickerConfig, stated in full: chart v0.10.0's default scheduling profile (queue 2, KV
    cache 2, prefix cache 3: routerlib/templates/_config.yaml ``default-plugins.yaml``), the data layer (the metrics
    source scraping vLLM's /metrics and the extractor with vLLM's metric names, plus the co-host mapping on a
    co-hosted group's pool), the saturation detector from the HPA targets, and flow control when the pool has bounds.

    With flow control off the legacy admission path answers a sheddable request 429 at saturation >= 1.0 and
    schedules everything else (pkg/epp/requestcontrol/admission.go ``LegacyAdmissionController``)."""
    engines = [vllm_engine_config(), *([cohost_engine_config()] if pool.cohost else [])]
    config: dict[str, Any] = {
        "apiVersion": PICKER_CONFIG_API,
        "kind": "EndpointPickerConfig",
        "plugins": [
            {"type": "queue-scorer"},
            {"type": "kv-cache-utilization-scorer"},
            {"type": "prefix-cache-scorer"},
            {
                "type": "metrics-data-source",
                "parameters": {"scheme": "http", "path": naming.METRICS_PATH, "insecureSkipVerify": True},
            },
            {
                "type": "core-metrics-extractor",
                "parameters": {
                    "engineLabelKey": ENGINE_LABEL_KEY,
                    "defaultEngine": DEFAULT_ENGINE,
                    "engineConfigs": engines,
                },
            },
            {
                "type": "utilization-detector",
                "parameters": {
                    "queueDepthThreshold": saturation.queue_depth_threshold,
                    "kvCacheUtilThreshold": saturation.kv_cache_util_threshold,
                    "metricsStalenessThreshold": SATURATION_METRICS_STALENESS,
                    "headroom": 0.0,
                },
            },
        ],
        "schedulingProfiles": [
            {
                "name": "default",
                "plugins": [
                    {"pluginRef": "queue-scorer", "weight": 2},
                    {"pluginRef": "kv-cache-utilization-scorer", "weight": 2},
                    {"pluginRef": "prefix-cache-scorer", "weight": 3},
                ],
            }
        ],
        # The metrics source feeds the extractor; injectDefaults off so no second, default-configured source
        # scrapes the same pods (DataLayerConfig.InjectDefaults, endpointpickerconfig_types.go).
        "dataLayer": {
            "injectDefaults": False,
            "sources": [{"pluginRef": "metrics-data-source", "extractors": [{"pluginRef": "core-metrics-extractor"}]}],
        },
    }
    if pool.flow_control is not None:
        config["featureGates"] = [FLOW_CONTROL_GATE]
        config["flowControl"] = flow_control_config(pool.flow_control)
        fairness = tenant_fairness(pool.tenants)
        if fairness is not None:
            # A band naming no fairness policy uses global-strict-fairness-policy, which ignores flows: every band
            # must name the tenant policy (apix/config/v1alpha1 endpointpickerconfig_types.go, v0.10.0).
            config["plugins"].append(fairness.plugin)
            config["flowControl"] = with_fairness(config["flowControl"], fairness)
    else:
        config["saturationDetector"] = {"pluginRef": "utilization-detector"}
    return config


def epp_values(pool: PoolRoute, gw: GatewaySpec) -> dict[str, Any]:
    """Helm values of one pool's picker release (chart ``llm-d-router-gateway`` at the pinned version). Everything
    sits under ``router`` (the chart fails on the old top-level ``inferenceExtension`` / ``inferencePool`` keys,
    routerlib _helpers.tpl ``llm-d-router.validations.deprecations``)."""
    epp: dict[str, Any] = {
        "replicas": gw.epp.replicas,
        # The release's own image, stated: the vendored chart defaults the tag to the moving ``main``.
        # IfNotPresent because the tag is immutable upstream and a registry hiccup must not block a picker restart.
        "image": {
            "registry": ROUTER.image_registry,
            "repository": ROUTER.image_repository,
            "tag": ROUTER.image_tag,
            "pullPolicy": "IfNotPresent",
        },
        "extProcPort": naming.EPP_EXT_PROC_PORT,
        # pool-name: the picker watches the pool, not a pool named after its release (the chart's own
        # ``--pool-name {{ .Release.Name }}`` comes first; the last value of a repeated flag wins).
        "flags": {"v": 1, "pool-name": naming.pool_name(pool.role)},
        "affinity": {
            # Replicas on different nodes, so one node drain or loss never takes the leader and its standby.
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": epp_pod_selector(pool.role)},
                        },
                    }
                ]
            },
            # On the CPU system pool (GPU nodes are tainted, and a picker must never hold a GPU node's memory).
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": naming.POOL_KIND_LABEL, "operator": "In", "values": ["system"]}]}
                    ]
                }
            },
        },
        # The chart's default (8 CPU / 8 GiB requests) exceeds an e2-standard-4's allocatable 3920m CPU: the pickers
        # would stay Pending. 500m / 1 GiB lets the adapter (250m / 400Mi), GKE's system pods and four pickers (two
        # pools x leader + standby) share one e2-standard-4; the standby idles and the leader's work per request
        # is scoring a few endpoints. Both requests are set because Helm merges maps (a lone cpu would keep the
        # chart's 8Gi). No CPU limit: a throttled picker adds latency to every request it routes.
        "resources": {
            "requests": {"cpu": EPP_CPU_REQUEST, "memory": EPP_MEMORY_REQUEST},
            "limits": {"memory": EPP_MEMORY_LIMIT},
        },
        "pluginsConfigFile": PICKER_CONFIG_FILE,
        "pluginsCustomConfig": {
            PICKER_CONFIG_FILE: json.dumps(picker_config(gw.epp.saturation, pool), indent=2, sort_keys=True)
        },
    }
    return {
        "provider": {"name": "gke"},
        "router": {
            "epp": epp,
            # GMP PodMonitoring named after the release, bearer-token auth against the picker's protected /metrics
            # (routerlib templates/_gke.yaml, monitoring provider ``gmp``).
            "monitoring": {
                "interval": EPP_MONITORING_INTERVAL,
                "provider": {"name": "gmp"},
                "prometheus": {"enabled": True, "auth": {"enabled": True}},
            },
            "inferencePool": {"create": True, "failureMode": gw.epp.failure_mode},
            "modelServers": {
                "type": "vllm",
                "protocol": "http",
                "targetPorts": [{"number": naming.VLLM_PORT}],
                "matchLabels": dict(pool.selector),
            },
        },
    }


def picker_await_annotations(role: str, replicas: int) -> tuple[tuple[str, str, str, str], ...]:
    """``(kind, name, annotation, value)`` the post-renderer adds to the picker's Deployment and Service so that
    ``pulumi up`` waits for what a leader-elected picker can reach.

    With more than one replica only the leader passes readiness (llm-d-router v0.10.0 cmd/epp/runner/health.go
    ``Check``: ``readiness`` needs ``isLeader``), so the built-in awaits never finish: the Deployment's wants
    ``readyReplicas >= spec.replicas`` (provider/pkg/await/deployment.go) and the Service's wants no not-ready
    address (service.go). Instead the Deployment is done when every replica runs the new template
    (``updatedReplicas`` = replicas) and exactly one of them is ready (the leader). ``updatedReplicas`` is what makes
    the check about the new pods: under ``Recreate`` (the chart's strategy) the controller creates the new
    ReplicaSet only after the old one is at zero (kubernetes pkg/controller/deployment/recreate.go
    ``rolloutRecreate``), and the status it writes meanwhile counts no updated replica; the provider's JSONPath
    condition also waits for ``status.observedGeneration`` to reach ``metadata.generation``
    (provider/pkg/await/condition/jsonpath.go ``Satisfied``). Each expression is the strict
    ``jsonpath={.path}=value`` form the provider parses (provider/pkg/jsonpath/jsonpath.go ``Parse``). The Service
    is not awaited: the Deployment's condition already proves a ready endpoint behind it. Change with the chart's
    readiness probe or its update strategy."""
    name = naming.epp_name(role)
    wait_for = [f"jsonpath={{.status.updatedReplicas}}={replicas}", "jsonpath={.status.readyReplicas}=1"]
    return (
        ("Deployment", name, PULUMI_WAIT_FOR, json.dumps(wait_for)),
        ("Service", name, PULUMI_SKIP_AWAIT, "true"),
    )


# ---- Model Armor ----------------------------------------------------------------------------------------------

MODEL_ARMOR_EVENTS = (
    "RequestHeaders",
    "RequestBody",
    "RequestTrailers",
    "ResponseHeaders",
    "ResponseBody",
    "ResponseTrailers",
)


def model_armor_service(region: str) -> str:
    return f"modelarmor.{region}.rep.googleapis.com"


def model_armor_object(
    gw: GatewaySpec, namespace: Any, region: str, public_model_names: tuple[str, ...], releases: tuple[str, ...]
) -> dict[str, Any]:
    """Screens prompts and responses of every served name: requests carry a public model name, responses name
    the release that served them (``--served-model-name <release id> <public name>``)."""
    assert gw.model_armor is not None
    tmpl = gw.model_armor.template
    settings = [
        {"model": m, "user_prompt_template_id": tmpl, "model_response_template_id": tmpl}
        for m in sorted({*public_model_names, *releases})
    ]
    return {
        "apiVersion": GKE_POLICY_API,
        "kind": "GCPTrafficExtension",
        "metadata": _meta(MODEL_ARMOR_EXTENSION_NAME, namespace, "gateway"),
        "spec": {
            "targetRefs": [{"group": GATEWAY_GROUP, "kind": "Gateway", "name": GATEWAY_NAME}],
            "extensionChains": [
                {
                    "name": "model-armor",
                    "matchCondition": {
                        "celExpressions": [
                            {"celMatcher": f'request.path.startsWith("{p}")'} for p in OPENAI_PATH_PREFIXES[:2]
                        ]
                    },
                    "extensions": [
                        {
                            "name": "model-armor",
                            "googleAPIServiceName": model_armor_service(region),
                            "supportedEvents": list(MODEL_ARMOR_EVENTS),
                            "timeout": f"{gw.model_armor.timeout_ms}ms",
                            "failOpen": gw.model_armor.fail_open,
                            "metadata": {"model_armor_settings": json.dumps(settings, separators=(",", ":"))},
                        }
                    ],
                }
            ],
        },
    }


# ---- body-based routing (co-hosted models) ---------------------------------------------------------------------
#: The router's image: GAIE's BBR. llm-d-router v0.10.0 ships no body-based router (its ``cmd/`` holds only
#: ``epp``, ``coordinator`` and ``pd-sidecar``, and no chart renders one), and GAIE v1.6.0 removed BBR from its
#: repository, so GAIE v1.5.0 — the last release with BBR, and the first whose router takes ``--plugin`` — stays.
BODY_ROUTER_IMAGE = "registry.k8s.io/gateway-api-inference-extension/bbr"
#: The body-based router's pinned release (see BODY_ROUTER_IMAGE): a release tag, never ``main``.
BODY_ROUTER_VERSION = "v1.5.0"
#: The distroless ``nonroot`` user the image runs as (GAIE v1.5.0 bbr.Dockerfile base image).
BODY_ROUTER_UID = 65532
#: The router parses each request body once; 1 s is the GAIE v1.5.0 chart's callout timeout.
BODY_ROUTER_TIMEOUT = "1s"


#: What each GAIE v1.5.0 router plugin reads from the Kubernetes API through the manager it is given
#: (apiGroup, resource, verbs): ``body-field-to-header``'s factory ignores its handle
#: (pkg/bbr/plugins/bodyfieldtoheader/body_field_to_header.go); ``base-model-to-header`` reconciles ConfigMaps of
#: LoRA adapters (pkg/bbr/plugins/basemodelextractor/configmap_reconciler.go; the chart's templates/rbac.yaml grants
#: exactly get/list/watch on configmaps). A plugin rendered here needs a Role for what it lists.
BODY_ROUTER_PLUGIN_WATCHES: dict[str, tuple[tuple[str, str, tuple[str, ...]], ...]] = {
    "body-field-to-header": (),
    "base-model-to-header": (("", "configmaps", ("get", "list", "watch")),),
}
#: The plugins this program renders: the model name is all the API route matches on (no adapters are served).
BODY_ROUTER_PLUGINS = ("body-field-to-header",)


def body_router_rbac_rules() -> list[tuple[str, str, tuple[str, ...]]]:
    """What the rendered plugins read: the Role the router needs in its namespace (none for the model extractor)."""
    return [w for p in BODY_ROUTER_PLUGINS for w in BODY_ROUTER_PLUGIN_WATCHES[p]]


def body_router_args() -> list[str]:
    """``--streaming`` because the extension sends the body FullDuplexStreamed (the chart's args); one plugin copying
    the body's ``model`` into :data:`naming.MODEL_NAME_HEADER` (the chart's second, ``base-model-to-header``, maps
    LoRA adapters to base models from ConfigMaps: no adapters are served here). The router still needs its API
    token: it builds a controller-runtime manager whatever its plugins (see the BodyRouter pod)."""
    plugin = json.dumps({"fieldName": "model", "headerName": naming.MODEL_NAME_HEADER}, separators=(",", ":"))
    assert BODY_ROUTER_PLUGINS == ("body-field-to-header",)
    return [
        "--streaming",
        "--grpc-port",
        str(naming.BODY_ROUTER_PORT),
        "--grpc-health-port",
        str(naming.BODY_ROUTER_HEALTH_PORT),
        "--plugin",
        f"body-field-to-header:model-extractor:{plugin}",
        "--tracing=false",
    ]


def body_router_extension_object(namespace: Any, fail_open: bool) -> dict[str, Any]:
    """Calls the router on every request to the Gateway before the route is chosen (a GCPRoutingExtension runs
    ahead of routing, a traffic extension after it), with the request body streamed to it (GAIE v1.5.0
    body-based-routing chart, templates/gke.yaml). ``fail_open``: the pickers' failure mode: open = a request the
    router cannot see reaches the weighted pools (a co-hosted model's request then gets vLLM's 404 "model does
    not exist"), closed = it fails."""
    return {
        "apiVersion": GKE_POLICY_API,
        "kind": "GCPRoutingExtension",
        "metadata": _meta(naming.BODY_ROUTER_NAME, namespace, "gateway"),
        "spec": {
            "targetRefs": [{"group": GATEWAY_GROUP, "kind": "Gateway", "name": GATEWAY_NAME}],
            "extensionChains": [
                {
                    "name": "body-based-routing",
                    "matchCondition": {
                        "celExpressions": [
                            {"celMatcher": f'request.path.startsWith("{p}")'} for p in MODEL_ROUTED_PATH_PREFIXES
                        ]
                    },
                    "extensions": [
                        {
                            "name": "model-name-to-header",
                            "authority": f"{naming.BODY_ROUTER_NAME}.{GATEWAY_NAME}.internal",
                            "timeout": BODY_ROUTER_TIMEOUT,
                            "supportedEvents": ["RequestHeaders", "RequestBody", "RequestTrailers"],
                            "requestBodySendMode": "FullDuplexStreamed",
                            "failOpen": fail_open,
                            "backendRef": {
                                "group": "",
                                "kind": "Service",
                                "name": naming.BODY_ROUTER_NAME,
                                "port": naming.BODY_ROUTER_PORT,
                            },
                        }
                    ],
                }
            ],
        },
    }


def body_router_health_check_object(namespace: Any) -> dict[str, Any]:
    """The load balancer health-checks the router's Service on its gRPC health port (chart templates/gke.yaml)."""
    return {
        "apiVersion": GKE_POLICY_API,
        "kind": "HealthCheckPolicy",
        "metadata": _meta(naming.BODY_ROUTER_NAME, namespace, "gateway"),
        "spec": {
            "default": {
                "config": {
                    "type": "GRPC",
                    "grpcHealthCheck": {"portSpecification": "USE_FIXED_PORT", "port": naming.BODY_ROUTER_HEALTH_PORT},
                }
            },
            "targetRef": {"group": "", "kind": "Service", "name": naming.BODY_ROUTER_NAME},
        },
    }
