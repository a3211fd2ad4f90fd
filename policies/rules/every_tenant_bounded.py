"""every-tenant-bounded: in prod every tenant is held to a request budget that Cloud Armor enforces.

Each InferencePool's (or a fleet's imported pool's) GCPBackendPolicy names a regional Cloud Armor policy of the stack; in that policy every rule
matching the tenant header is a rate-based rule (throttle or rate-based ban) whose excess is denied, and the default
rule denies (a request naming no tenant has no budget, so it must not pass). With the contract's tenant list as a
fact (``tenants``), each listed tenant must have such a rule in every pool's policy.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pulumi_policy import PolicyConfigSchema, Severity, StackValidationPolicy

from ._common import GCP_BACKEND_POLICY, UNKNOWN, Res, get, of_type, stack_validator

NAME = "every-tenant-bounded"
SEVERITY = Severity.HIGH
FRAMEWORK = None
REGION_SECURITY_POLICY = "gcp:compute/regionSecurityPolicy:RegionSecurityPolicy"
#: The llm-d Router's fairness-id header (llm-d-router@v0.10.0 pkg/epp/metadata/consts.go), the tenant key.
TENANT_HEADER = "x-llm-d-inference-fairness-id"
#: Cloud Armor's default rule (compute v1 discovery ``SecurityPolicyRule.priority``: 2147483647 is evaluated last).
DEFAULT_PRIORITY = 2147483647
RATE_BASED = ("throttle", "rate_based_ban")
#: Backends a budget guards: a pool, or a fleet's imported pool (``GCPInferencePoolImport``, networking.gke.io).
BUDGETED_TARGETS = ("InferencePool", "GCPInferencePoolImport")
_TENANT_RE = re.compile(r"==\s*'([^']*)'")
REMEDIATION = (
    "Give every tenant in contract.tenants a requests_per_minute budget: the program renders a Cloud Armor throttle "
    "rule per tenant (exceed action deny(429)) and a default rule that denies, and names the policy in each "
    "InferencePool's GCPBackendPolicy."
)


def _rule_tenant(rule: dict[str, Any]) -> str | None:
    expr = get(rule, "match", "expr", "expression")
    if not isinstance(expr, str) or TENANT_HEADER not in expr:
        return None
    m = _TENANT_RE.search(expr)
    return m.group(1) if m else ""


def policy_findings(policy: Res, tenants: list[str] | None) -> Iterator[str]:
    rules = get(policy.props, "rules", default=[])
    if rules is UNKNOWN or not isinstance(rules, list):
        return
    bounded: set[str] = set()
    unknowable = False
    for rule in rules:
        if not isinstance(rule, dict):
            unknowable = unknowable or rule is UNKNOWN
            continue
        if get(rule, "match", "expr", "expression") is UNKNOWN:
            unknowable = True  # which tenant it matches is known only at apply
            continue
        action = rule.get("action")
        if rule.get("priority") == DEFAULT_PRIORITY:
            if isinstance(action, str) and not action.startswith("deny"):
                yield (
                    f"{policy.label}: the default rule's action is {action!r}: requests naming no tenant pass "
                    "without any budget; deny them"
                )
            continue
        tenant = _rule_tenant(rule)
        if tenant is None or action is UNKNOWN:
            continue
        exceed = get(rule, "rateLimitOptions", "exceedAction")
        count = get(rule, "rateLimitOptions", "rateLimitThreshold", "count")
        if UNKNOWN in (exceed, count) or get(rule, "rateLimitOptions") is UNKNOWN:
            # Not known until apply: neither a violation nor a proof, so the tenant is not reported as missing.
            bounded.add(tenant)
            continue
        if action in RATE_BASED and isinstance(exceed, str) and exceed.startswith("deny") and count:
            bounded.add(tenant)
        else:
            yield f"{policy.label}: tenant {tenant!r} is matched by a {action!r} rule with no enforced request budget"
    for t in [] if unknowable else tenants or []:
        if t not in bounded:
            yield f"{policy.label}: tenant {t!r} of the contract has no rate-based rule"


def check(resources: list[Res], cfg: dict[str, Any]) -> Iterator[tuple[str, str]]:
    if not cfg.get("required", True):
        return
    tenants = cfg.get("tenants")
    policies = {get(p.props, "name"): p for p in of_type(resources, REGION_SECURITY_POLICY)}
    for bp in of_type(resources, GCP_BACKEND_POLICY):
        # A fleet's pools are balanced through their imports (GKE multi-cluster Inference Gateway): the import's
        # policy is the one on the load balancer's backend service, so it must name the budget policy too.
        if get(bp.props, "spec", "targetRef", "kind") not in BUDGETED_TARGETS:
            continue
        name = get(bp.props, "spec", "default", "securityPolicy")
        if name is UNKNOWN:
            continue
        if name is None:
            yield bp.urn, f"{bp.label} names no Cloud Armor policy: its pool serves every tenant without a budget"
            continue
        policy = policies.get(name)
        if policy is None:
            yield bp.urn, f"{bp.label} names Cloud Armor policy {name!r}, which this stack does not define"
            continue
        for msg in policy_findings(policy, tenants if isinstance(tenants, list) else None):
            yield policy.urn, msg


POLICY = StackValidationPolicy(
    name=NAME,
    description="Every tenant is held to a request budget a Cloud Armor rate-based rule enforces (prod).",
    validate=stack_validator(check, (GCP_BACKEND_POLICY, REGION_SECURITY_POLICY)),
    config_schema=PolicyConfigSchema(
        properties={
            "required": {"type": "boolean", "default": True, "description": "Whether tenants must be bounded."},
            "tenants": {
                "type": "array",
                "items": {"type": "string"},
                "description": "The contract's tenant ids (a fact the plan provides).",
            },
        }
    ),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["tenancy", "availability"],
)
