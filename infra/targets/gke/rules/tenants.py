"""Tenant rules of the GKE target, where the llm-d Router's flow control shares a saturated pool between tenants and
Cloud Armor enforces their request budgets: staging and prod name their tenants, and the weights are ones the
router can honour."""

from __future__ import annotations

from collections.abc import Iterator

from components.gateway.tenants import ROUTER_WEIGHTS_TENANTS
from infra.config.stack import StackConfig
from infra.rules import Finding, rule

from ..config import TARGET


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
