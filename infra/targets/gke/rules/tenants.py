"""Tenant rules of the GKE target, where the llm-d Router's flow control shares a saturated pool between tenants and
Cloud Armor enforces their request budgets: staging and prod name their tenants, and the weights are ones the
router can honour."""

from __future__ import annotations

from collections.abc import Iterator

from components.gateway.tenants import ROUTER_WEIGHTS_TENANTS
from infra.config.stack import StackConfig
from infra.rules import Finding, rule

from ..config import TARGET, gateway_section


@rule(target=TARGET, needs={"contract", "environment"})
def shared_environments_name_tenants(cfg: StackConfig) -> Iterator[Finding]:
    """Without tenants every request is the router's one default flow: one client's burst takes the whole queue and
    nothing bounds anyone's request rate."""
    if cfg.environment in ("staging", "prod") and not cfg.contract.tenants:
        yield (
            ("contract", "tenants"),
            f"{cfg.environment} names its tenants (at least one, each with a request budget in prod): without them "
            "one client can take the whole pool's queue",
        )


@rule(target=TARGET, needs={"contract"})
def tenant_weights_are_ones_the_router_honours(cfg: StackConfig) -> Iterator[Finding]:
    """llm-d-router@v0.10.0's fairness policies (``program-aware-fairness``: least attained service;
    ``round-robin-fairness-policy``) have no per-tenant weight: every active tenant gets an equal turn. An unequal
    weight would be a share nobody enforces."""
    if ROUTER_WEIGHTS_TENANTS:
        return
    tenants = cfg.contract.tenants
    if not tenants:
        return
    first = tenants[0].weight
    for i, t in enumerate(tenants):
        if t.weight != first:
            yield (
                ("contract", "tenants", i, "weight"),
                f"{t.weight:g} differs from tenants[0]'s {first:g}: the llm-d Router v0.10.0 gives every tenant an "
                "equal share of a saturated band (no per-tenant weight in its fairness policies); use equal weights "
                "and express unequal shares as requests_per_minute budgets",
            )


@rule(target=TARGET, needs={"contract", "environment", "gateway"})
def only_the_api_front_reaches_the_tenant_pools(cfg: StackConfig) -> Iterator[Finding]:
    """With ``tenant_identity: api_key_proxy`` the tenant header is trusted because the API front verified the
    caller's key, removed any header the client sent and set it again. A caller IAP admits directly (a user, group,
    domain or workforce principal) skips the front and names its own tenant, claiming another tenant's share and
    budget. In prod IAP therefore admits service accounts only: the API front's identities."""
    gw = gateway_section(cfg)
    ident = cfg.contract.tenant_identity
    if cfg.environment != "prod" or gw is None or not gw.iap.enabled or not cfg.contract.tenants:
        return
    if ident is None or ident.source != "api_key_proxy":
        return
    for i, member in enumerate(gw.iap.members):
        if not member.startswith("serviceAccount:"):
            yield (
                ("gateway", "iap", "members", i),
                f"{member!r} would reach the tenants' pools without the API front and could send any "
                "x-llm-d-inference-fairness-id: in prod with tenant_identity api_key_proxy, IAP admits only the API "
                "front's service accounts",
            )
