"""Per-tenant panels and alerts on the GKE target: what the llm-d Router's flow control admitted, shed and holds
queued for each tenant, and each tenant's output tokens against its budget. Pure.

The series are the router's, labelled by tenant as ``fairness_id`` (llm-d-router@v0.10.0
``pkg/epp/metrics/llm_d_router_metrics.go``: ``llm_d_epp_flow_control_request_queue_duration_seconds`` with
``fairness_id, priority, outcome, inference_pool``; ``llm_d_epp_flow_control_queue_size`` with ``fairness_id,
priority, inference_pool``; ``llm_d_epp_request_output_tokens`` with ``fairness_id, priority``). The fairness label is
capped at 1,000 distinct values, beyond which it reads ``other`` (``pkg/epp/metrics/cardinality.go``): far above a
contract's tenant list. The flow-control series exist only while flow control is on.

Outcomes (``pkg/epp/flowcontrol/types/outcomes.go`` ``QueueOutcome.String``): ``Dispatched`` = admitted;
``RejectedCapacity`` = shed at a full queue (HTTP 429); ``EvictedTTL`` = waited past its queue TTL. What Cloud Armor
refused (over budget, 429) never reaches the router: those requests are in the load balancer's request logs (the
GCPBackendPolicy samples them), by the rule that matched.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..monitoring import metrics as m
from ..monitoring.alerts import AlertSpec
from ..monitoring.dashboard import Panel
from . import metrics as gke
from .views import PoolView

FC_QUEUE_DURATION = m.Histogram("llm_d_epp_flow_control_request_queue_duration_seconds")
FC_QUEUE_SIZE = m.Gauge("llm_d_epp_flow_control_queue_size")
EPP_OUTPUT_TOKENS = m.Histogram("llm_d_epp_request_output_tokens")
TENANT_LABEL = "fairness_id"
ADMITTED, SHED, EXPIRED = "Dispatched", "RejectedCapacity", "EvictedTTL"
#: Window the token-budget alert averages over, s. 10 min: budgets are per minute, and a tenant bursting for a
#: minute or two inside its Cloud Armor request budget is normal; ten minutes above the token budget is a trend.
TOKEN_BUDGET_WINDOW_SECONDS = 600
TOKEN_BUDGET_ALERT = "TenantOverOutputTokenBudget"


@dataclass(frozen=True)
class TenantView:
    id: str
    output_tokens_per_minute: int | None


def _outcome_rate(role: str, outcome: str, w: str) -> str:
    sel = m.matchers(**gke.namespace_of(role), job=gke.epp_scrape_job(role), outcome=outcome)
    return f"sum by ({TENANT_LABEL}) (rate({FC_QUEUE_DURATION.count}{sel}[{w}]))"


def panels(pools: list[PoolView], w: str) -> list[Panel]:
    """Per pool, one line per tenant and outcome: admitted, shed and expired requests/s, and requests queued."""
    out = []
    for p in pools:
        queued = f"sum by ({TENANT_LABEL}) ({FC_QUEUE_SIZE.series}{gke.epp_job(p.role)})"
        out.append(
            Panel(
                f"Tenants: admitted / shed / queued — {p.role} ({p.release})",
                (
                    ("admitted req/s", _outcome_rate(p.role, ADMITTED, w)),
                    ("shed (429) req/s", _outcome_rate(p.role, SHED, w)),
                    ("queue TTL expired req/s", _outcome_rate(p.role, EXPIRED, w)),
                    ("queued requests", queued),
                ),
                split=(TENANT_LABEL,),
            )
        )
    return out


def output_tokens_per_s(pools: list[PoolView], tenant: str, window: str) -> str:
    """A tenant's output tokens/s over every pool's router; 0 (not empty) while it sends nothing."""
    terms = [
        f"sum(rate({EPP_OUTPUT_TOKENS.sum}"
        f"{m.matchers(**gke.namespace_of(p.role), job=gke.epp_scrape_job(p.role), fairness_id=tenant)}[{window}]))"
        for p in pools
    ]
    return f"({' + '.join(f'({t} or on() vector(0))' for t in terms)})"


def alert_specs(pools: list[PoolView], tenants: list[TenantView]) -> list[AlertSpec]:
    """Per tenant with an output-token budget: its tokens/s above budget / 60 for the whole window. Cloud Armor counts
    requests, so this alert (not a 429) is how a token budget is held."""
    window = f"{TOKEN_BUDGET_WINDOW_SECONDS // 60}m"
    return [
        AlertSpec(
            TOKEN_BUDGET_ALERT,
            f"tenant-{t.id}",
            f"Tenant {t.id} generated more than its {t.output_tokens_per_minute} output tokens/min for "
            f"{TOKEN_BUDGET_WINDOW_SECONDS // 60} min",
            output_tokens_per_s(pools, t.id, window),
            ">",
            t.output_tokens_per_minute / 60,
            TOKEN_BUDGET_WINDOW_SECONDS,
            "WARNING",
        )
        for t in tenants
        if t.output_tokens_per_minute is not None and pools
    ]
