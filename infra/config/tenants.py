"""Tenants of the workload contract: who shares the service, in what proportion, and within what budget.

A tenant is what the llm-d Router's flow control calls a *flow* (its fairness id, read from the
``x-llm-d-inference-fairness-id`` request header, llm-d-router@v0.10.0 ``pkg/epp/metadata/consts.go``): within one
priority band the router picks which tenant's queue dispatches next (``components/gateway/tenants.py``). Hard
limits are Cloud Armor rate-based rules keyed by the same header on the pools' load-balancer backends.

The header is trusted only when something verified the caller before setting it (:class:`TenantIdentity`): a
header the client chose itself would let any client spend any tenant's budget or claim any tenant's share.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from .base import Strict

#: A tenant id is a fairness-id header value, a Cloud Armor match literal and a label value in metrics: a DNS
#: label keeps it safe in all three (no quote to escape in the rule expression, no label cardinality surprise).
TENANT_ID_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
#: Cloud Armor throttle rules accept a rate_limit_threshold count of 1 to 1,000,000 per interval (Cloud Armor docs,
#: "Rate limiting overview"); per minute that bounds a budget.
MAX_REQUESTS_PER_MINUTE = 1_000_000
#: A million output tokens per second is far beyond any fleet this program sizes: a larger budget is a unit slip.
MAX_OUTPUT_TOKENS_PER_MINUTE = 60_000_000

IdentitySource = Literal["api_key_proxy", "client_header"]


class TenantIdentity(Strict):
    """How the tenant (fairness id) header on a request comes to name the tenant that sent it."""

    source: IdentitySource = Field(
        description=(
            "api_key_proxy: an authenticating API front before the Gateway (Apigee's API-key verification is "
            "Google's documented option) verifies the caller's API key, removes any fairness-id header the "
            "client sent and sets it to that key's tenant id. client_header: the client names its tenant itself "
            "(dev only: an unverified string)."
        )
    )


class Tenant(Strict):
    """One tenant: its share of a contended pool and its hard budgets."""

    id: Annotated[str, Field(pattern=TENANT_ID_PATTERN)] = Field(
        description="The fairness id: the value of the tenant header the verified identity sets (a DNS label)."
    )
    weight: Annotated[float, Field(gt=0, le=1000)] = Field(
        description=(
            "Share of a saturated pool relative to the other tenants' weights. The llm-d Router v0.10.0 weighs "
            "every tenant equally (program-aware least-attained-service fairness has no per-tenant weight), so "
            "on GKE the weights must be equal; unequal shares are expressed by the budgets."
        )
    )
    requests_per_minute: Annotated[int, Field(ge=1, le=MAX_REQUESTS_PER_MINUTE)] | None = Field(
        default=None,
        description=(
            "Hard request budget: a Cloud Armor throttle rule answers 429 above it. Required in prod (every tenant "
            "bounded)."
        ),
    )
    output_tokens_per_minute: Annotated[int, Field(ge=1, le=MAX_OUTPUT_TOKENS_PER_MINUTE)] | None = Field(
        default=None,
        description=(
            "Output-token budget. Cloud Armor counts requests, not tokens: it is checked against planned capacity "
            "and watched by an alert on the router's per-tenant token metric, not enforced per request."
        ),
    )
