"""Tenant rules every stack obeys, whatever its target: in staging and prod the tenant header comes from a verified
caller identity; the tenants' budgets fit the capacity the plan provisions at the measured operating points."""

from __future__ import annotations

from collections.abc import Iterator

from ..config.stack import StackConfig
from ..planning.plan import StackPlan, tenant_fit
from ..planning.tenants import largest_budget_index
from . import Finding, rule


@rule(needs={"contract", "environment"})
def tenant_header_is_verified(cfg: StackConfig) -> Iterator[Finding]:
    """A client-chosen tenant header lets any caller spend another tenant's budget or claim its share."""
    ident = cfg.contract.tenant_identity
    if cfg.environment in ("staging", "prod") and ident is not None and ident.source == "client_header":
        yield (
            ("contract", "tenant_identity", "source"),
            f"{cfg.environment} sets the tenant header from a verified caller identity: client_header lets any "
            "client name any tenant; use api_key_proxy (an API front that verifies the key and re-sets the header)",
        )


@rule(needs={"contract", "serving"}, plan=True)
def tenant_budgets_fit_capacity(cfg: StackConfig, plan: StackPlan) -> Iterator[Finding]:
    """Budgets above what the pools serve at their operating point promise throughput the fleet cannot deliver
    within the latency objectives. Unmeasured pools cannot be checked: the plan says "unmeasured"."""
    if not cfg.contract.tenants:
        return
    fit = tenant_fit(cfg, plan.pools, plan.measurements)
    assert fit is not None  # the contract names tenants
    tenants = cfg.contract.tenants
    if fit.requests_fit is False:
        i = largest_budget_index([t.requests_per_minute for t in tenants])
        assert i is not None  # a positive sum has a largest budget
        yield (
            ("contract", "tenants", i, "requests_per_minute"),
            f"tenant budgets sum to {fit.budget_requests_per_s:.3g} req/s, above the {fit.capacity_requests_per_s:.3g} "
            f"req/s the pools serve at their measured operating points (first to saturate: {fit.limiting_pool}, "
            "at max_replicas less one failure); lower the budgets or raise max_replicas",
        )
    if fit.output_tokens_fit is False:
        i = largest_budget_index([t.output_tokens_per_minute for t in tenants])
        assert i is not None
        yield (
            ("contract", "tenants", i, "output_tokens_per_minute"),
            f"tenant output-token budgets sum to {fit.budget_output_tokens_per_s:.4g} tokens/s, above the "
            f"{fit.capacity_output_tokens_per_s:.4g} tokens/s the pools decode at their measured operating points "
            f"(first to saturate: {fit.limiting_pool}); lower the budgets or raise max_replicas",
        )


@rule(needs={"contract"})
def tenant_budgets_within_sized_peak(cfg: StackConfig) -> Iterator[Finding]:
    """The pools are sized for the contract's peak arrival rate; request budgets summing above it admit load the
    plan never provisioned for (checked whether or not the pools are measured)."""
    c = cfg.contract
    rpm = [t.requests_per_minute for t in c.tenants]
    total = sum(r or 0 for r in rpm) / 60
    if total > c.peak_arrival_rate_rps + 1e-9:
        i = largest_budget_index(rpm)
        assert i is not None
        yield (
            ("contract", "tenants", i, "requests_per_minute"),
            f"tenant budgets sum to {total:.4g} req/s, above peak_arrival_rate_rps {c.peak_arrival_rate_rps:g} the "
            "pools are sized for: lower the budgets or raise the peak (which resizes the pools)",
        )
