"""The measurement records the repository ships (tests/fixtures/bench/, stacks/measurements/): each has the
server's view at every rate and every point measured at its label; and the record docs/capacity.md describes,
replayed through the planner, gives the replicas and cost worked out by hand below."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from infra.config.bench import ARRIVAL_TOLERANCE
from infra.offline import docs
from infra.offline.bench.record import load_measurement

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "bench"
#: Every record in the repository (the contract file beside the fixture is not a record).
SHIPPED = sorted(
    [p for p in FIXTURES.glob("*.json") if p != docs.BENCH_EXAMPLE_CONTRACT]
    + list((REPO / "stacks" / "measurements").glob("*.json"))
)


def test_the_shipped_records_are_found():
    assert docs.BENCH_EXAMPLE in SHIPPED


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_record_has_the_servers_view_and_achieved_its_labels(path: Path):
    rec = load_measurement(path)  # the schema already refuses a point off its label or without gauges
    seeds = [r.seed for p in rec.curve for r in p.runs]
    assert len(seeds) == len(set(seeds)), "a seed was used twice"
    for p in rec.curve:
        assert p.queue_waiting.samples > 0 and p.kv_cache_usage.samples > 0
        assert p.token_itl_ms is not None and p.token_itl_observations > 0
        assert abs(p.achieved_rps / p.offered_rps - 1) <= ARRIVAL_TOLERANCE, (p.offered_rps, p.achieved_rps)


def test_the_docs_record_replayed_through_the_planner_by_hand():
    rec = load_measurement(docs.BENCH_EXAMPLE)
    op = rec.operating_point
    assert op is not None
    # The record's operating point (4 req/s offered, 3.90 achieved): θ_o 73.71, θ_i 380.00 tokens/s.
    assert (op.offered_rps, op.output_tokens_per_s, op.input_tokens_per_s) == pytest.approx((4.0, 73.7100, 379.9981))
    # The dev stack copy (tests/fixtures/bench/dev-copy-contract.json over dev): λ = 0.5 req/s x weight 100 %,
    # E[O] = 20, E[I] = 100, ρ = 0.7; one L4 replica per g2-standard-12 node at $1.00/h.
    #   decode  = ceil(0.5 x 20 / (73.7100 x 0.7))   = ceil(10 / 51.5970)  = ceil(0.194) = 1
    #   prefill = ceil(0.5 x 100 / (379.9981 x 0.7)) = ceil(50 / 265.9987) = ceil(0.188) = 1
    #   required = max(1, 1) + 1 spare = 2
    #   cost = 1.00 x 10^6 / (3600 x 73.7100) = $3.7685 per 1M output tokens
    r = docs.bench_replay()
    assert (r.arrival_rps, r.mean_output_tokens, r.mean_prompt_tokens, r.target_utilization) == (0.5, 20, 100, 0.7)
    assert r.replica_hourly_usd == 1.00
    assert (r.decode_replicas, r.prefill_replicas, r.required_replicas) == (1, 1, 2)
    assert r.cost_per_million_output_tokens_usd == pytest.approx(3.7685, abs=1e-4)
    assert math.ceil(0.5 * 20 / (op.output_tokens_per_s * 0.7)) == 1  # the same by the record's exact θ_o
    page = (REPO / "docs" / "capacity.md").read_text()
    assert "decode 1, prefill 1, required 2 (N+1), $3.77 per 1M output tokens" in page
