"""Rules about a rollout stage: every pool of the traffic split can scale to its share of the peak.

Unmeasured pools have no throughput to derive their need from (docs/capacity.md): their autoscaling bounds are the
stack's own statement of what the traffic needs. The largest bound of the split's pools is what the stack sizes the
whole peak at (stable's at the start of a rollout: it carries 100 %); a pool that carries ``w`` % must be able to
reach ``w`` % of it. So stage 100 of the runbook, where the canary takes all traffic, cannot keep a canary bound below
stable's (docs/rollout.md swaps the bounds there). Measured pools are judged by their measurement
(``measurement.warm_minimum_covers_the_measured_need``) and left out here.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from ..config.stack import StackConfig
from ..planning.plan import StackPlan
from . import Finding, rule


@rule(needs={"serving"}, plan=True)
def pools_reach_their_share_of_the_peak(cfg: StackConfig, plan: StackPlan) -> Iterator[Finding]:
    """max_replicas (as planned: the reservation may cap it) >= ceil(weight / 100 x the split's largest bound), for
    unmeasured pools on the same machine shape (replicas of different shapes are not comparable)."""
    unmeasured = {
        role: p
        for role, p in plan.pools.items()
        if p.capacity.throughput == "unmeasured" and role not in plan.measurements
    }
    by_shape: dict[tuple[object, ...], list[str]] = {}
    for role, p in sorted(unmeasured.items()):
        shape = (p.target, p.machine, p.capacity.gpus_per_replica)
        by_shape.setdefault(shape, []).append(role)
    for roles in by_shape.values():
        if len(roles) < 2:
            continue
        peak_role = max(roles, key=lambda r: (unmeasured[r].capacity.max_replicas, r == "stable", r))
        peak = unmeasured[peak_role].capacity.max_replicas
        for role in roles:
            p = unmeasured[role]
            need = math.ceil(peak * p.weight / 100)
            if p.capacity.max_replicas < need:
                yield (
                    ("serving", role, p.MAX_KEY),
                    f"pool {role} carries {p.weight} % of the traffic but can scale to {p.capacity.max_replicas} "
                    f"replica(s), and the split's peak is sized at {peak} (pool {peak_role}'s bound, unmeasured): it "
                    f"needs ceil({peak} x {p.weight} / 100) = {need}. Raise serving.{role}.{p.MAX_KEY} to {need} "
                    f"(and lower another pool's bound if the reservation cannot hold both; docs/rollout.md, stage 100)",
                )
