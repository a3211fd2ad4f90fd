"""Tenants at the gateway: the llm-d Router's fairness between tenants within a priority band, and the Cloud Armor
rate-based rules that hold each tenant to its request budget on the pools' load-balancer backends.

Both key on one request header, the router's fairness id (llm-d-router@v0.10.0 ``pkg/epp/metadata/consts.go``
``FlowFairnessIDKey = "x-llm-d-inference-fairness-id"``, deprecated alias ``x-gateway-inference-fairness-id``).
The director reads it before any request-control plugin (``pkg/epp/requestcontrol/director.go``: an explicit
header wins; without one the id is the ``agent-identity`` plugin's attribute or ``"default-flow"``), so the header a
request arrives with *is* its tenant: it must have been set by something that verified the caller
(``TenantIdentity``, docs/tenants.md).

Pure functions; the gateway component registers what they return.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: The header the router reads the fairness id from (llm-d-router@v0.10.0 pkg/epp/metadata/consts.go).
FAIRNESS_ID_HEADER = "x-llm-d-inference-fairness-id"
#: Its deprecated alias, which the router still reads (same file, ``headerAliases``): a front that re-sets the
#: tenant header must remove this one too, or a client could name a tenant through it.
DEPRECATED_FAIRNESS_ID_HEADER = "x-gateway-inference-fairness-id"
#: The flow a request without a fairness id joins (same file, ``DefaultFairnessID``).
DEFAULT_FAIRNESS_ID = "default-flow"
#: The fairness policy plugin (llm-d-router@v0.10.0 pkg/epp/framework/plugins/flowcontrol/fairness/program-aware/
#: plugin.go ``ProgramAwarePluginType``): least attained service, counting input + 2 x output tokens per tenant
#: (strategy_las.go), so a tenant of few long generations and one of many short ones get equal compute, not equal
#: request counts. The band default, ``global-strict-fairness-policy``, ignores tenants entirely
#: (apix/config/v1alpha1/endpointpickerconfig_types.go ``FairnessPolicyRef``): every band must name this one.
FAIRNESS_PLUGIN_TYPE = "program-aware-fairness"
FAIRNESS_PLUGIN_NAME = "tenant-fairness"
#: Whether the pinned router weighs tenants unequally. v0.10.0's fairness policies (program-aware LAS, round-robin,
#: global-strict) take no per-tenant weight: every active tenant competes on equal footing.
ROUTER_WEIGHTS_TENANTS = False
#: Wall-clock half-life of an idle tenant's attained service, s. 60: the plugin README's example; a tenant idle for a
#: few minutes returns on near-equal footing, while a tenant that just ran a burst yields for about a minute. Longer
#: punishes yesterday's batch job; 0 switches to per-pick decay, whose half-life moves with the request rate.
LAS_HALF_LIFE_SECONDS = 60
#: A tenant with no completion for this long is dropped from the plugin's state (and its metric series), s: the
#: plugin's default, 3600. Tenant ids here are a short fixed list, so churn is not a concern.
EVICTION_TTL_SECONDS = 3600


@dataclass(frozen=True)
class TenantSpec:
    id: str
    weight: float
    #: Hard request budget per minute across the stack (None: not bounded by Cloud Armor).
    requests_per_minute: int | None
    #: Output-token budget per minute (None: none); watched by an alert, not enforced per request.
    output_tokens_per_minute: int | None


@dataclass(frozen=True)
class TenantFairness:
    """What the picker's EndpointPickerConfig needs for tenants (the merger wires it into the picker's values)."""

    #: Request header the router reads the tenant from.
    header: str
    #: Entry to append to ``plugins``.
    plugin: Mapping[str, Any]
    #: Name every priority band's ``fairnessPolicyRef`` must carry.
    fairness_policy_ref: str
    #: Each tenant's weight as configured (informational at v0.10.0: the router weighs tenants equally).
    weights: Mapping[str, float]


def tenant_fairness(tenants: tuple[TenantSpec, ...]) -> TenantFairness | None:
    """The router's tenant fairness, or None without tenants (the band default then stays)."""
    if not tenants:
        return None
    return TenantFairness(
        header=FAIRNESS_ID_HEADER,
        plugin={
            "type": FAIRNESS_PLUGIN_TYPE,
            "name": FAIRNESS_PLUGIN_NAME,
            "parameters": {
                "strategy": "las",
                "lasHalfLifeSeconds": LAS_HALF_LIFE_SECONDS,
                "evictionTtlSeconds": EVICTION_TTL_SECONDS,
            },
        },
        fairness_policy_ref=FAIRNESS_PLUGIN_NAME,
        weights={t.id: t.weight for t in tenants},
    )


def with_fairness(flow_control: Mapping[str, Any], fairness: TenantFairness) -> dict[str, Any]:
    """``flowControl`` with every band (``defaultPriorityBand``, ``defaultNegativePriorityBand``, each of
    ``priorityBands``) naming the tenant fairness policy; a copy, the input is not changed."""
    out = copy.deepcopy(dict(flow_control))
    for key in ("defaultPriorityBand", "defaultNegativePriorityBand"):
        out[key] = {**out.get(key, {}), "fairnessPolicyRef": fairness.fairness_policy_ref}
    out["priorityBands"] = [
        {**band, "fairnessPolicyRef": fairness.fairness_policy_ref} for band in out.get("priorityBands", [])
    ]
    if not out["priorityBands"]:
        del out["priorityBands"]
    return out


# ---- Cloud Armor ---------------------------------------------------------------------------------------------

#: Throttle interval, s: budgets are per minute and 60 is one of Cloud Armor's accepted intervals (10, 30, 60, 120,
#: 180, 240, 300, 600, 900, 1200, 1800, 2700, 3600 s; Cloud Armor docs "Rate limiting overview").
THROTTLE_INTERVAL_SECONDS = 60
#: Status of a request over its tenant's budget: 429 Too Many Requests, one of deny's allowed codes (403, 404, 429,
#: 502; compute v1 discovery ``SecurityPolicyRuleRateLimitOptions.exceedAction``), the one clients retry with backoff.
EXCEED_ACTION = "deny(429)"
#: Status of a request naming no known tenant: 403, refused outright (no budget exists for it).
UNKNOWN_TENANT_ACTION = "deny(403)"
#: First tenant rule's priority; one per tenant after it, in config order (lower is evaluated first). 1000 leaves
#: room below for rules other teams add (an IP allowlist) without renumbering.
FIRST_RULE_PRIORITY = 1000
#: The default rule's priority: the lowest there is, which every security policy must have (compute v1 discovery
#: ``SecurityPolicyRule.priority``: 0 is evaluated first, 2147483647 last; Cloud Armor docs "Security policy overview":
#: every policy has a default rule matching `*`).
DEFAULT_RULE_PRIORITY = 2147483647


@dataclass(frozen=True)
class ArmorRule:
    """One rule of a pool's regional security policy, in the pulumi-gcp argument shape."""

    priority: int
    action: str
    description: str
    expression: str | None
    #: (count, interval s) of a throttle rule; None for allow/deny.
    threshold: tuple[int, int] | None = None

    def args(self) -> dict[str, Any]:
        """``gcp.compute.RegionSecurityPolicyRulesArgs`` keyword arguments (snake_case, pulumi-gcp 10.2.0)."""
        out: dict[str, Any] = {
            "priority": self.priority,
            "action": self.action,
            "description": self.description,
            "match": (
                {"expr": {"expression": self.expression}}
                if self.expression is not None
                else {"versioned_expr": "SRC_IPS_V1", "config": {"src_ip_ranges": ["*"]}}
            ),
        }
        if self.threshold is not None:
            count, interval = self.threshold
            out["rate_limit_options"] = {
                "conform_action": "allow",
                "exceed_action": EXCEED_ACTION,
                # One key per header value; the match already selects one tenant, so one bucket per tenant.
                "enforce_on_key": "HTTP_HEADER",
                "enforce_on_key_name": FAIRNESS_ID_HEADER,
                "rate_limit_threshold": {"count": count, "interval_sec": interval},
            }
        return out


def pool_share(budget_per_minute: int, weight: int) -> int:
    """A pool's part of a stack-wide budget. Cloud Armor counts per backend service ("Rate limiting overview": the
    threshold applies to each associated backend), and the route sends a pool ``weight`` percent of the traffic,
    so each pool's policy gets ceil(budget x weight / 100) per minute, at least 1 (a count must be >= 1)."""
    return max(1, math.ceil(budget_per_minute * weight / 100))


def armor_rules(tenants: tuple[TenantSpec, ...], weight: int) -> list[ArmorRule]:
    """The rules of one pool's policy: per tenant with a budget a throttle, per tenant without one an allow, and a
    default rule refusing requests that name no tenant of the contract."""
    rules = []
    for i, t in enumerate(tenants):
        # Tenant ids are DNS labels (config pattern), so the literal needs no escaping.
        expr = f"request.headers['{FAIRNESS_ID_HEADER}'] == '{t.id}'"
        if t.requests_per_minute is None:
            rules.append(ArmorRule(FIRST_RULE_PRIORITY + i, "allow", "tenant without a request budget", expr))
            continue
        count = pool_share(t.requests_per_minute, weight)
        rules.append(
            ArmorRule(
                FIRST_RULE_PRIORITY + i,
                "throttle",
                # The expression names the tenant; the description (at most 64 characters, Cloud Armor docs "Best
                # practices": "The description field is limited to 64 characters") states the arithmetic.
                f"budget {t.requests_per_minute}/min x {weight}% = {count}/{THROTTLE_INTERVAL_SECONDS}s",
                expr,
                (count, THROTTLE_INTERVAL_SECONDS),
            )
        )
    rules.append(ArmorRule(DEFAULT_RULE_PRIORITY, UNKNOWN_TENANT_ACTION, "no known tenant: refused", None))
    return rules


def security_policy_name(environment: str, role: str) -> str:
    return f"llm-{environment}-{role}-tenants"


def with_security_policy(backend_policy: Mapping[str, Any], policy_name: str) -> dict[str, Any]:
    """A GCPBackendPolicy object with ``spec.default.securityPolicy`` naming the pool's Cloud Armor policy (the
    field is a policy name, GKE "Configure Gateway resources using Policies"; schema: networking.gke.io/v1
    GCPBackendPolicy); a copy, the input is not changed."""
    # Copies the dicts on the path only: the metadata holds Pulumi Outputs (the namespace), which cannot be copied.
    spec = dict(backend_policy["spec"])
    spec["default"] = {**spec["default"], "securityPolicy": policy_name}
    return {**backend_policy, "spec": spec}
