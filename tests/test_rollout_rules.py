"""rules/rollout.py: every unmeasured pool of the split can scale to its share of the peak the stack sizes.

prod's numbers: stable is bounded at 4 replicas (it carries 100 % outside a rollout), the canary at 2. At stage 100
the canary carries 100 % and needs ceil(4 x 100 / 100) = 4; at stage 50, ceil(4 x 50 / 100) = 2, which it has.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infra.config import ConfigError
from infra.offline.stackfile import read_stack_file

from .conftest import resolve_values

KEY = "llm-serving:serving"


def prod(**pools: dict[str, Any]) -> dict[str, Any]:
    values = copy.deepcopy(read_stack_file("prod").values)
    for role, fields in pools.items():
        values[KEY][role].update(fields)
    return values


def problems(values: dict[str, Any]) -> list[str]:
    try:
        resolve_values(values, "prod")
    except ConfigError as err:
        return [str(i) for i in err.issues]
    return []


def test_stage_100_needs_the_canary_bound_at_stables() -> None:
    found = problems(prod(stable={"weight": 0}, canary={"weight": 100}))
    assert found == [
        "llm-serving:serving.canary.max_replicas: pool canary carries 100 % of the traffic but can scale to 2 "
        "replica(s), and the split's peak is sized at 4 (pool stable's bound, unmeasured): it needs ceil(4 x 100 / "
        "100) = 4. Raise serving.canary.max_replicas to 4 (and lower another pool's bound if the reservation cannot "
        "hold both; docs/rollout.md, stage 100)"
    ]


def test_the_runbooks_swapped_bounds_pass_and_settle_must_swap_them_back() -> None:
    # Stage 100 as docs/rollout.md states it: the reservation's 8 nodes hold 4 + 2 + one surge each.
    assert problems(prod(stable={"weight": 0, "max_replicas": 2}, canary={"weight": 100, "max_replicas": 4})) == []
    # Settle (or a rollback) that forgets the bounds: stable takes 100 % with 2 of the 4 the peak needs.
    found = problems(prod(stable={"weight": 100, "max_replicas": 2}, canary={"weight": 0, "max_replicas": 4}))
    assert len(found) == 1 and found[0].startswith("llm-serving:serving.stable.max_replicas: pool stable carries 100 %")
    assert "needs ceil(4 x 100 / 100) = 4" in found[0]


@pytest.mark.parametrize(("stable", "canary"), [(100, 0), (95, 5), (75, 25), (50, 50)])
def test_the_other_stages_fit_the_shipped_bounds(stable: int, canary: int) -> None:
    assert problems(prod(stable={"weight": stable}, canary={"weight": canary})) == []


def test_raising_the_canary_alone_overfills_the_reservation() -> None:
    """Why the runbook swaps the bounds instead of raising the canary's: 4 + 4 replicas + one surge each = 10 nodes,
    and prod reserves 8."""
    found = problems(prod(stable={"weight": 0}, canary={"weight": 100, "max_replicas": 4}))
    assert found == [
        "llm-serving:accelerators.h100-tp2.reservation.count: 8 reserved node(s) cannot hold max replicas 8 + rollout "
        "surge 2 at 1 replica(s)/node = 10 node(s)"
    ]
