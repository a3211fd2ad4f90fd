"""Do the tenants' budgets fit the capacity the plan provisions? Pure arithmetic, no Pulumi.

A pool's capacity at its measured operating point inverts the planner's own replica formulas
(``capacity.decode_replicas`` / ``prefill_replicas``, R = ceil(lambda * E / (theta * rho))):

    per replica, requests/s      c = min(theta_o * rho / E[O], theta_i * rho / E[I])
    pool, requests/s             C = (max_replicas - FAILURE_HEADROOM_REPLICAS) * c      (survives one replica loss)
    pool, output tokens/s        T = (max_replicas - FAILURE_HEADROOM_REPLICAS) * theta_o * rho

The stack's gateway splits traffic by pool weight, so the whole stack saturates when its first pool does:
``min over pools with weight w > 0 of C * 100 / w`` (and the same for T). The tenants fit when
``sum(requests_per_minute) / 60 <= C_stack`` and ``sum(output_tokens_per_minute) / 60 <= T_stack``.

A pool without a measurement record has no theta: the fit is then "unmeasured", never a pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from .capacity import FAILURE_HEADROOM_REPLICAS


@dataclass(frozen=True)
class TenantBudget:
    tenant: str
    requests_per_minute: int | None
    output_tokens_per_minute: int | None


@dataclass(frozen=True)
class PoolThroughput:
    """One pool's share of the traffic and what it can serve (theta at its operating point; None: unmeasured)."""

    role: str
    weight: int
    max_replicas: int
    theta_o: float | None
    theta_i: float | None


@dataclass(frozen=True)
class TenantFit:
    status: Literal["measured", "unmeasured"]
    #: Sum of the tenants' request budgets, requests/s.
    budget_requests_per_s: float
    #: Sum of the tenants' output-token budgets, tokens/s.
    budget_output_tokens_per_s: float
    #: The stack's request capacity at the operating points (None: unmeasured).
    capacity_requests_per_s: float | None
    capacity_output_tokens_per_s: float | None
    #: The pool that saturates first (None: unmeasured).
    limiting_pool: str | None
    #: Pools carrying traffic without a measurement record.
    unmeasured_pools: tuple[str, ...]

    @property
    def requests_fit(self) -> bool | None:
        if self.capacity_requests_per_s is None:
            return None
        return self.budget_requests_per_s <= self.capacity_requests_per_s + 1e-9

    @property
    def output_tokens_fit(self) -> bool | None:
        if self.capacity_output_tokens_per_s is None:
            return None
        return self.budget_output_tokens_per_s <= self.capacity_output_tokens_per_s + 1e-9

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["unmeasured_pools"] = list(self.unmeasured_pools)
        d["requests_fit"] = self.requests_fit
        d["output_tokens_fit"] = self.output_tokens_fit
        return d


def serving_replicas(max_replicas: int) -> int:
    """Replicas whose capacity the budgets may count on: the pool at its bound, less the one failure it absorbs."""
    return max(0, max_replicas - FAILURE_HEADROOM_REPLICAS)


def pool_request_capacity(
    p: PoolThroughput, mean_prompt_tokens: float, mean_output_tokens: float, rho: float
) -> float | None:
    """C = serving replicas * min(theta_o * rho / E[O], theta_i * rho / E[I]), requests/s."""
    if p.theta_o is None or p.theta_i is None:
        return None
    per_replica = min(p.theta_o * rho / mean_output_tokens, p.theta_i * rho / mean_prompt_tokens)
    return serving_replicas(p.max_replicas) * per_replica


def pool_output_token_capacity(p: PoolThroughput, rho: float) -> float | None:
    """T = serving replicas * theta_o * rho, output tokens/s."""
    if p.theta_o is None:
        return None
    return serving_replicas(p.max_replicas) * p.theta_o * rho


def tenant_fit(
    budgets: Sequence[TenantBudget],
    pools: Sequence[PoolThroughput],
    mean_prompt_tokens: float,
    mean_output_tokens: float,
    rho: float,
) -> TenantFit:
    """The tenants' summed budgets against the stack's capacity (the first pool to saturate, scaled by its weight)."""
    rps = sum(b.requests_per_minute or 0 for b in budgets) / 60
    tps = sum(b.output_tokens_per_minute or 0 for b in budgets) / 60
    carrying = [p for p in pools if p.weight > 0]
    unmeasured = tuple(p.role for p in carrying if p.theta_o is None or p.theta_i is None)
    if unmeasured or not carrying:
        return TenantFit("unmeasured", rps, tps, None, None, None, unmeasured)
    cap_r: list[tuple[float, str]] = []
    cap_t: list[float] = []
    for p in carrying:
        c = pool_request_capacity(p, mean_prompt_tokens, mean_output_tokens, rho)
        t = pool_output_token_capacity(p, rho)
        assert c is not None and t is not None  # measured: both theta are set
        cap_r.append((c * 100 / p.weight, p.role))
        cap_t.append(t * 100 / p.weight)
    stack_r, limiting = min(cap_r)
    return TenantFit("measured", rps, tps, stack_r, min(cap_t), limiting, ())


def largest_budget_index(budgets: Sequence[int | None]) -> int | None:
    """Index of the largest budget (the first on a tie): the one whose cut helps most; None when none is set."""
    best: int | None = None
    for i, b in enumerate(budgets):
        if b is not None and (best is None or b > (budgets[best] or 0)):
            best = i
    return best
