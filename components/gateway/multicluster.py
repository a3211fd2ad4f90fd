"""Pure builders of the multi-cluster GKE Inference Gateway's Kubernetes objects (docs/multiregion.md).

Page names used below (GKE documentation):

- *setup* = "Set up the GKE multi-cluster Inference Gateway" (kubernetes-engine/docs/how-to/
  setup-multicluster-inference-gateway), sections "Deploy resources to the target clusters", "Deploy resources to
  the config cluster", "Enable custom metrics reporting", "Configure the load balancing policy".
- *scopes* = "Customize backend configurations with GCPBackendPolicy scopes" (how-to/
  customize-backend-multicluster-inference-gateway), section "Target Inference Gateway resources".
- *expose* = "Expose custom metrics for autoscaling" (how-to/expose-custom-metrics-autoscaling).

Two halves: every serving cluster keeps its InferencePool (plus picker and objectives, built by ``objects``), marked
for export (:func:`exported_pool_object`) and with an :func:`autoscaling_metric_object` that exports the KV-cache
gauge. The config cluster holds the Gateway, the HTTPRoute to the ``GCPInferencePoolImport`` of each pool (GKE
creates the import from the exports; nothing here builds it) and the policies that target the import.

Everything is a function of typed inputs returning plain dicts; names come from ``components/naming.py`` and the
single-region constants from ``objects``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from .. import naming
from .objects import (
    API_ROUTE_NAME,
    GATEWAY_API,
    GATEWAY_NAME,
    GKE_POLICY_API,
    HTTP_LISTENER,
    HTTPS_LISTENER,
    OPENAI_PATH_PREFIXES,
    POOL_API,
    GatewaySpec,
    _meta,
    _parent,
    backend_policy_default,
    health_check_default,
)

#: The annotation that marks a serving cluster's InferencePool for import by the config cluster, and its value
#: (setup, "Deploy resources to the target clusters": ``networking.gke.io/export="True"``, a capitalised string).
EXPORT_ANNOTATION = "networking.gke.io/export"
EXPORT_VALUE = "True"

#: The only GatewayClass the setup page shows with imported pools (setup, "Deploy resources to the config cluster").
MC_GATEWAY_CLASS: Final = "gke-l7-cross-regional-internal-managed-mc"
#: Address type of the cross-regional class: one ephemeral internal IPv4 per region, named by the region in both the
#: type suffix and the value (setup, "Deploy resources to the config cluster", the Gateway's ``addresses``).
EPHEMERAL_ADDRESS_TYPE_PREFIX = "networking.gke.io/ephemeral-ipv4-address/"
#: Plain HTTP on port 80: the setup page's only listener for this class; here it only redirects to HTTPS.
MC_HTTP_PORT = 80
#: HTTPS on 443, as the single-region Gateway (``objects.gateway_object``).
MC_HTTPS_PORT = 443

#: API group and kind of the imported pool in the config cluster (setup, HTTPRoute backendRefs; scopes, targetRef).
IMPORT_GROUP = "networking.gke.io"
IMPORT_KIND = "GCPInferencePoolImport"
#: The ReferenceGrant target of a route to an import in the pool's namespace (``objects.reference_grant_object``).
IMPORT_TARGET = (IMPORT_GROUP, IMPORT_KIND)

#: The name the AutoscalingMetric exports vLLM's KV-cache gauge under; the setup page uses ``kv-cache`` for
#: ``vllm:kv_cache_usage_perc`` and the backend policy refers to it as ``gke.named_metrics.kv-cache``.
KV_CACHE_EXPORT_NAME = "kv-cache"
#: Prefix under which the load balancer sees an exported metric (setup, "Configure the load balancing policy").
NAMED_METRICS_PREFIX = "gke.named_metrics."
#: 60 %: the target KV-cache utilisation the setup page says to start with ("Custom metrics": "start with a target
#: utilization of 60%"); above it the load balancer spills to the other clusters.
KV_CACHE_MAX_UTILIZATION_PERCENT = 60
#: ``trafficDuration: LONG``: every inference example of the setup page sets it (LLM streams are long-lived requests).
TRAFFIC_DURATION = "LONG"
AUTOSCALING_METRIC_API = "autoscaling.gke.io/v1beta1"

#: A Google Cloud region as the address type and value carry it: ``europe-west3``, ``us-east4``.
_REGION = re.compile(r"^[a-z]+(?:-[a-z]+)*[0-9]+$")
#: Gateway API backendRef weight bounds (HTTPRoute v1, GWAPI v1.6.1: 0..1,000,000).
_MAX_WEIGHT = 1_000_000


@dataclass(frozen=True)
class ImportedPool:
    """One pool as the config cluster sees it: its role (the InferencePool's name is ``naming.pool_name(role)`` in
    every serving cluster, so the import has that name too), its route weight (stable / canary, as the single-region
    route) and the namespace the pool and therefore its import live in."""

    role: str
    weight: int
    namespace: str

    def __post_init__(self) -> None:
        if not self.role:
            raise ValueError("ImportedPool.role: must be non-empty")
        if not 0 <= self.weight <= _MAX_WEIGHT:
            raise ValueError(f"ImportedPool.weight: must be in 0..{_MAX_WEIGHT}, got {self.weight}")
        if not self.namespace:
            raise ValueError("ImportedPool.namespace: must be non-empty")


@dataclass(frozen=True)
class MultiClusterGatewaySpec:
    """The config cluster's Gateway: the regions it takes an internal address in, and the hostnames it answers."""

    regions: tuple[str, ...]
    hostnames: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.regions:
            raise ValueError("MultiClusterGatewaySpec.regions: at least one region")
        bad = [r for r in self.regions if not _REGION.match(r)]
        if bad:
            raise ValueError(f"MultiClusterGatewaySpec.regions: not region names: {bad}")
        if len(set(self.regions)) != len(self.regions):
            raise ValueError(f"MultiClusterGatewaySpec.regions: duplicates in {list(self.regions)}")


# ---- serving clusters ----------------------------------------------------------------------------------------


def exported_pool_object(pool_object: dict[str, Any]) -> dict[str, Any]:
    """A copy of a serving cluster's InferencePool (``objects.inference_pool_object``) with
    ``networking.gke.io/export: "True"`` added to its annotations. Setup, "Deploy resources to the target clusters":
    the annotation "makes the InferencePool available for import by the config cluster, which is a required step
    for multi-cluster routing". The input is not changed."""
    if pool_object.get("apiVersion") != POOL_API or pool_object.get("kind") != "InferencePool":
        raise ValueError(
            f"pool_object.kind: expected {POOL_API} InferencePool, got "
            f"{pool_object.get('apiVersion')} {pool_object.get('kind')}"
        )
    if not (pool_object.get("metadata") or {}).get("name"):
        raise ValueError("pool_object.metadata.name: required")
    out: dict[str, Any] = _copy_tree(pool_object)
    out["metadata"]["annotations"] = {**(out["metadata"].get("annotations") or {}), EXPORT_ANNOTATION: EXPORT_VALUE}
    return out


def _copy_tree(value: Any) -> Any:
    """A copy of every dict and list in ``value``; other values (strings, numbers, a namespace that is a Pulumi
    Output, which cannot be deep-copied) are shared."""
    if isinstance(value, dict):
        return {k: _copy_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_tree(v) for v in value]
    return value


def autoscaling_metric_object(role: str, namespace: Any, selector: dict[str, str]) -> dict[str, Any]:
    """The serving cluster's ``AutoscalingMetric`` that exports ``vllm:kv_cache_usage_perc`` as ``kv-cache``, the
    load signal the config cluster's backend policy balances on. Field form from setup, "Enable custom metrics
    reporting": ``spec.selector.matchLabels`` (the model-server pods), ``spec.endpoints[].port`` / ``path`` (vLLM's
    serving port and ``/metrics``), ``endpoints[].metrics[].name`` (the Prometheus gauge) and ``exportName``.

    Not confirmed: no CRD schema for ``autoscaling.gke.io`` is vendored, so the fields are the setup page's only.
    The expose page shows a different form of the same kind (``spec.metrics[].pod.selector``,
    ``containers[].endpoint``, ``metrics[].gauge.{name, prometheusMetricName}``) and says nothing of
    ``gke.named_metrics``; which form a given GKE version accepts was not checked. The setup page also exports
    ``vllm:gpu_cache_usage_perc`` as ``kv-cache-old`` for old vLLM; vLLM 0.33 has no such gauge
    (naming.VLLM_KV_CACHE_USAGE_LEGACY), so it is left out."""
    if not selector:
        raise ValueError("selector: the model-server pod labels are required (an empty selector matches every pod)")
    return {
        "apiVersion": AUTOSCALING_METRIC_API,
        "kind": "AutoscalingMetric",
        "metadata": _meta(naming.pool_name(role), namespace, "inference-pool", role),
        "spec": {
            "selector": {"matchLabels": dict(selector)},
            "endpoints": [
                {
                    "port": naming.VLLM_PORT,
                    "path": naming.METRICS_PATH,
                    "metrics": [{"name": naming.VLLM_KV_CACHE_USAGE, "exportName": KV_CACHE_EXPORT_NAME}],
                }
            ],
        },
    }


# ---- config cluster --------------------------------------------------------------------------------------------


def multicluster_gateway_object(
    gw: MultiClusterGatewaySpec, namespace: Any, tls_options: Mapping[str, str]
) -> dict[str, Any]:
    """The config cluster's Gateway. Setup, "Deploy resources to the config cluster": class
    ``gke-l7-cross-regional-internal-managed-mc``, one ``networking.gke.io/ephemeral-ipv4-address/<region>`` address
    per region with the region as value (no reserved regional address, unlike ``objects.gateway_object``).

    Listeners: HTTPS on 443 with the stack's Certificate Manager certificates (``objects.tls_options``), plus the
    plain-HTTP listener on 80 that only redirects (``objects.redirect_route_object``), as in one region. The setup page
    shows an HTTP listener only; a cross-region internal Application Load Balancer takes Certificate Manager
    certificates of scope ``ALL_REGIONS`` (Certificate Manager, "Deploy a cross-region Google-managed certificate with
    DNS authorization"). That GKE's controller accepts ``networking.gke.io/cert-manager-certs`` on this class was not
    confirmed from a GKE page: docs/multiregion.md lists it as a precondition."""
    same_ns = {"namespaces": {"from": "Same"}}
    return {
        "apiVersion": GATEWAY_API,
        "kind": "Gateway",
        "metadata": _meta(GATEWAY_NAME, namespace, "gateway"),
        "spec": {
            "gatewayClassName": MC_GATEWAY_CLASS,
            "addresses": [{"type": f"{EPHEMERAL_ADDRESS_TYPE_PREFIX}{r}", "value": r} for r in gw.regions],
            "listeners": [
                {
                    "name": HTTPS_LISTENER,
                    "protocol": "HTTPS",
                    "port": MC_HTTPS_PORT,
                    "allowedRoutes": same_ns,
                    "tls": {"mode": "Terminate", "options": dict(tls_options)},
                },
                {"name": HTTP_LISTENER, "protocol": "HTTP", "port": MC_HTTP_PORT, "allowedRoutes": same_ns},
            ],
        },
    }


def _import_target(pool: ImportedPool) -> dict[str, str]:
    return {"group": IMPORT_GROUP, "kind": IMPORT_KIND, "name": naming.pool_name(pool.role)}


def _check_pools(pools: tuple[ImportedPool, ...]) -> None:
    if not pools:
        raise ValueError("pools: at least one imported pool")
    names = [(p.namespace, naming.pool_name(p.role)) for p in pools]
    if len(set(names)) != len(names):
        raise ValueError(f"pools: duplicate imported pools {names}")
    if all(p.weight == 0 for p in pools):
        raise ValueError("pools.weight: at least one pool needs a weight above 0 (else nothing is served)")


def import_route_object(gw: MultiClusterGatewaySpec, namespace: Any, pools: tuple[ImportedPool, ...]) -> dict[str, Any]:
    """The config cluster's HTTPRoute: the OpenAI paths (as ``objects.api_route_object``) to the imported pools,
    weighted as the single-region route (a weight-0 canary stays attached, dark). Each backend is
    ``{group: networking.gke.io, kind: GCPInferencePoolImport, name: <pool>}`` (setup, "Deploy resources to the
    config cluster"); no port, as the page shows none (the HTTPRoute CEL rule asks for one only for core Services).

    Not confirmed: the setup page puts Gateway, route and import all in ``default``. That the import appears in the
    exported pool's namespace, and that a route in another namespace may reference it (and what ReferenceGrant
    that needs), is assumed from the single-region layout, not read in a GKE page; the backend names the namespace
    so that the assumption is visible."""
    _check_pools(pools)
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
                    "backendRefs": [{**_import_target(p), "namespace": p.namespace, "weight": p.weight} for p in pools],
                }
            ],
        },
    }


def import_health_check_policy_object(pool: ImportedPool) -> dict[str, Any]:
    """HealthCheckPolicy on the imported pool, in the config cluster. Setup, "Deploy resources to the config
    cluster": ``targetRef {group: networking.gke.io, kind: GCPInferencePoolImport, name}``, ``config.type: HTTP``,
    ``httpHealthCheck {requestPath: /health, port: 8000}`` (vLLM's port). Interval, timeout and thresholds are the
    single-region ones (``objects.HC_*``; the setup page sets none)."""
    return {
        "apiVersion": GKE_POLICY_API,
        "kind": "HealthCheckPolicy",
        "metadata": _meta(naming.pool_name(pool.role), pool.namespace, "inference-pool", pool.role),
        "spec": {
            "targetRef": _import_target(pool),
            "default": health_check_default(),
        },
    }


def kv_cache_metric_name() -> str:
    """``gke.named_metrics.kv-cache``: how the backend policy names the AutoscalingMetric's export (setup,
    "Configure the load balancing policy")."""
    return f"{NAMED_METRICS_PREFIX}{KV_CACHE_EXPORT_NAME}"


def import_backend_policy_object(pool: ImportedPool, gw: GatewaySpec, timeout: int) -> dict[str, Any]:
    """GCPBackendPolicy on the imported pool, in the config cluster: the single-region pool's defaults
    (``objects.backend_policy_default``: stream timeout, draining, sampled logs, IAP) plus balancing between clusters
    on the KV-cache gauge. Setup, "Configure the load balancing policy" ("Configure timeouts" and "Custom metrics"):
    ``targetRef`` the GCPInferencePoolImport (also scopes, "Target Inference Gateway resources"),
    ``balancingMode: CUSTOM_METRICS``, ``trafficDuration: LONG``, ``customMetrics [{name:
    gke.named_metrics.kv-cache, dryRun: false, maxUtilizationPercent: 60}]``, ``timeoutSec`` ("at least twice your
    estimated P99 request latency": the planner's ceiling of the longest allowed stream is the bound every request
    must finish within, so it is used as in one region).

    ``trafficDuration`` is not in the vendored GCPBackendPolicy schema (datree catalogue), which is older than the
    setup page: the tests state that mismatch instead of dropping the field. IAP on an import's policy is not shown
    on the setup page (docs/multiregion.md precondition)."""
    # >= 1 s: the vendored schema's minimum for timeoutSec (no upper bound is checked here).
    if timeout < 1:
        raise ValueError(f"timeout: must be >= 1 second, got {timeout}")
    return {
        "apiVersion": GKE_POLICY_API,
        "kind": "GCPBackendPolicy",
        "metadata": _meta(naming.pool_name(pool.role), pool.namespace, "inference-pool", pool.role),
        "spec": {
            "targetRef": _import_target(pool),
            "default": {
                **backend_policy_default(gw, timeout),
                "balancingMode": "CUSTOM_METRICS",
                "trafficDuration": TRAFFIC_DURATION,
                "customMetrics": [
                    {
                        "name": kv_cache_metric_name(),
                        "dryRun": False,
                        "maxUtilizationPercent": KV_CACHE_MAX_UTILIZATION_PERCENT,
                    }
                ],
            },
        },
    }
