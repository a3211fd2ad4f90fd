"""serving-requires-authentication: nothing reaches a model server from outside the VPC unauthenticated.

A request is authenticated when the gateway is internal-only (a ``*-rilb`` / internal class: reachable from the VPC
alone), when IAP guards the pool's backend (GCPBackendPolicy ``default.iap.enabled``), or when vLLM itself requires
an API key (``--api-key`` or ``VLLM_API_KEY`` from a Secret).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import PolicyConfigSchema, Severity, StackValidationPolicy

from ._common import (
    DEPLOYMENT,
    GATEWAY,
    GCP_BACKEND_POLICY,
    INFERENCE_POOL,
    POOL_LABEL,
    UNKNOWN,
    Res,
    argv,
    env_value,
    flag_value,
    get,
    is_serving_deployment,
    of_type,
    pod_labels,
    selector_matches,
    serving_container,
    stack_validator,
)

NAME = "serving-requires-authentication"
SEVERITY = Severity.CRITICAL
FRAMEWORK = None
REMEDIATION = (
    "Use an internal gateway class, enable IAP on the pool's GCPBackendPolicy (default.iap.enabled: true) "
    "or require an API key (VLLM_API_KEY from a Secret)."
)


def internal(gw: Res) -> bool | None:
    cls = get(gw.props, "spec", "gatewayClassName")
    if cls is UNKNOWN:
        return None
    return isinstance(cls, str) and ("rilb" in cls or "internal" in cls)


def api_key_required(dep: Res) -> bool | None:
    c = serving_container(dep)
    args = argv(c)
    if args is UNKNOWN:
        return None
    if flag_value(args, "--api-key") not in (None, True):
        return True
    env = env_value(c, "VLLM_API_KEY")
    return isinstance(env, dict) and "secretKeyRef" in (env.get("valueFrom") or {})


def iap_pools(resources: list[Res]) -> set[str]:
    out = set()
    for p in of_type(resources, GCP_BACKEND_POLICY):
        ref = get(p.props, "spec", "targetRef", default={})
        # An IAP switch unknown at preview counts as on: only known values may produce a finding.
        if get(p.props, "spec", "default", "iap", "enabled") in (True, UNKNOWN) and isinstance(ref, dict):
            name = ref.get("name")
            if isinstance(name, str):  # a policy without a target name guards no pool
                out.add(name)
    return out


def pool_of(dep: Res, resources: list[Res]) -> set[str]:
    """Names of InferencePools whose selector picks this Deployment's pods."""
    names = set()
    for ip in of_type(resources, INFERENCE_POOL):
        sel = get(ip.props, "spec", "selector", default={})
        if selector_matches(sel, pod_labels(dep)):
            names.add(ip.k8s_name)
    return names


def check(resources: list[Res], cfg: dict[str, Any]) -> Iterator[tuple[str, str]]:
    if cfg.get("allowUnauthenticated", False):
        return
    external = [g for g in of_type(resources, GATEWAY) if internal(g) is False]
    if not external:
        return
    guarded = iap_pools(resources)
    for dep in sorted((r for r in resources if is_serving_deployment(r)), key=lambda d: d.k8s_name):
        key = api_key_required(dep)
        if key is None or key:
            continue
        pools = pool_of(dep, resources)
        if pools and pools <= guarded:
            continue
        gw = external[0]
        yield (
            dep.urn,
            (
                f"external Gateway {gw.k8s_name} (class {get(gw.props, 'spec', 'gatewayClassName')}) reaches "
                f"Deployment {dep.k8s_name} (pool {pod_labels(dep).get(POOL_LABEL)}) without authentication: "
                "enable IAP on its InferencePool's GCPBackendPolicy or require an API key (VLLM_API_KEY from a "
                "Secret)"
            ),
        )


POLICY = StackValidationPolicy(
    name=NAME,
    description="Model servers behind an external gateway require authentication.",
    validate=stack_validator(check, (DEPLOYMENT, GATEWAY, GCP_BACKEND_POLICY, INFERENCE_POOL)),
    config_schema=PolicyConfigSchema(
        properties={
            "allowUnauthenticated": {
                "type": "boolean",
                "default": False,
                "description": "Allow unauthenticated external access (never in prod).",
            },
        }
    ),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["authentication"],
)
