"""A pool sized from a measurement record: the record must have measured exactly this pool, and the planner's
replicas, N+1 spare and cost come from the record's operating point (hand-written arithmetic below)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from infra.config import ConfigError
from infra.config.measurement import args_sha256
from infra.offline import cli
from infra.offline.bench.record import write_measurement
from infra.offline.capacity_table import render_table
from infra.offline.stackfile import ROOT, read_stack_file
from infra.resolve import resolve_stack

from .test_bench_record import CURVE, record, rp

RECORD = "stacks/measurements/prod-stable-h100-tp2.json"


def prod_target(**over: Any):
    """What ``llm-serving bench --stack prod --pool stable`` measures: the pool's identity from its plan."""
    ns = argparse.Namespace(
        stack="prod",
        stacks_dir=None,
        pool="stable",
        url="http://127.0.0.1:8000",
        tokenizer="/models/qwen3-32b",
        served_args=None,
        served_args_reason=None,
    )
    t = cli.bench_target(ns)
    return dataclasses.replace(t, **over) if over else t


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    """A project root with the shipped release files and a measurements folder."""
    shutil.copytree(ROOT / "stacks" / "releases", tmp_path / "stacks" / "releases")
    (tmp_path / "stacks" / "measurements").mkdir()
    return tmp_path


def _values(**stable: Any) -> dict[str, Any]:
    v = json.loads(json.dumps(read_stack_file("prod").values))
    v["llm-serving:serving"]["stable"].update(measured=RECORD, **stable)
    return v


def _resolve(root: Path, values: dict[str, Any]):
    return resolve_stack(values, "prod", root)


def _errors(root: Path, values: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ConfigError) as exc:
        _resolve(root, values)
    return {i.path: i.message for i in exc.value.issues}


def test_replicas_spare_and_cost_come_from_the_records_operating_point(root: Path):
    write_measurement(record(CURVE, prod_target()), root / RECORD)  # operating point: 4 req/s, θ_o 1400, θ_i 7200
    # prod: λ = 8 req/s, all on stable (weight 100), E[O] = 350, E[I] = 1800, ρ = 0.7
    #   decode  = ceil(8 x 350 / (1400 x 0.7)) = ceil(2800 / 980)  = ceil(2.86) = 3
    #   prefill = ceil(8 x 1800 / (7200 x 0.7)) = ceil(14400 / 5040) = ceil(2.86) = 3
    #   required = max(3, 3) + 1 spare = 4 > the shipped warm minimum of 2
    e = _errors(root, _values())
    assert e == {
        "llm-serving:serving.stable.min_replicas": (
            "2 is below the measured need of 4 replicas (decode 3, prefill 3, + 1 for a replica failure) at this pool's "
            "peak share of the contract's arrival rate: raise it to 4, or lower the peak rate or weight if the contract "
            "changed"
        )
    }
    # Raised to the need (the reservation holds 4 + canary 2 + 2 surge = 8 nodes):
    plan = _resolve(root, _values(min_replicas=4)).plan
    cap = plan.pools["stable"].capacity
    assert (cap.decode_replicas, cap.prefill_replicas, cap.required_replicas) == (3, 3, 4)
    # $ per 1M output tokens = C_h x 10^6 / (3600 x θ_o) = 22.06 x 10^6 / (3600 x 1400) = 4.377
    assert cap.cost_per_million_output_tokens_usd == pytest.approx(22.06e6 / (3600 * 1400))
    assert round(cap.cost_per_million_output_tokens_usd, 3) == 4.377
    assert cap.cost_per_million_input_tokens_usd is None  # prefill does not dominate
    assert plan.measurements["stable"].operating_point.output_tokens_per_s == 1400
    table = render_table(plan)
    assert "1400 / 7200 at 4 req/s" in table and "$4.38" in table


def test_prefill_bound_pools_also_show_the_input_token_cost(root: Path):
    # θ_i 1800 tokens/s at the operating point: prefill = ceil(8 x 1800 / (1800 x 0.7)) = ceil(11.43) = 12 replicas
    # against decode 3: prefill dominates, so $ per 1M input tokens = 22.06e6 / (3600 x 1800) = 3.404 is shown too.
    slow_prefill = [dataclasses.replace(p, input_tokens_per_s=450 * p.offered_rps) for p in CURVE]
    write_measurement(record(slow_prefill, prod_target()), root / RECORD)
    e = _errors(root, _values())
    assert e["llm-serving:serving.stable.min_replicas"].startswith(
        "2 is below the measured need of 13 replicas (decode 3, prefill 12, + 1 for a replica failure)"
    )
    assert e["llm-serving:serving.stable.max_replicas"].startswith("4 cannot reach the measured need of 13 replicas")


@pytest.mark.parametrize(
    "over,difference",
    [
        (
            dict(release="qwen3-32b-fp8-2026-11-20.1"),
            "release: record 'qwen3-32b-fp8-2026-11-20.1', expected 'qwen3-32b-fp8-2026-08-23.1'",
        ),
        (
            dict(machine_type="a3-highgpu-8g", gpus_per_node=8),
            "accelerator.machine_type: record 'a3-highgpu-8g', expected 'a3-highgpu-2g'",
        ),
        (dict(image_digest="sha256:" + "0" * 64), "image_digest: record 'sha256:" + "0" * 64 + "'"),
    ],
)
def test_a_record_of_another_release_or_topology_is_rejected(root: Path, over, difference):
    write_measurement(record(CURVE, prod_target(**over)), root / RECORD)
    msg = _errors(root, _values(min_replicas=4))["llm-serving:serving.stable.measured"]
    assert msg.startswith(f"{RECORD} measured another configuration: {difference}")


def test_a_refused_record_sizes_nothing(root: Path):
    """A record of another release would need 4 replicas (as above), but it measured something else: only the
    mismatch is reported, not a warm minimum derived from numbers that do not describe this pool."""
    write_measurement(record(CURVE, prod_target(release="qwen3-32b-fp8-2026-11-20.1")), root / RECORD)
    assert set(_errors(root, _values())) == {"llm-serving:serving.stable.measured"}  # shipped min_replicas: 2


def test_a_record_of_other_engine_args_is_rejected(root: Path):
    t = prod_target()
    args = (*t.vllm_args[:-1], "999")
    write_measurement(record(CURVE, prod_target(vllm_args=args, vllm_args_sha256=args_sha256(args))), root / RECORD)
    msg = _errors(root, _values(min_replicas=4))["llm-serving:serving.stable.measured"]
    assert msg.startswith(f"{RECORD} measured another configuration: engine_args.rendered_sha256: record ")
    assert f"first difference at argument {len(args) - 1}: record '999', expected" in msg


def test_a_cpu_adapted_record_sizes_dev_only(root: Path):
    t = prod_target()
    served = tuple(a for a in t.vllm_args if a != "--enable-prefix-caching")
    write_measurement(
        record(CURVE, prod_target(served_args=served, served_args_reason="CPU build, no FP8")), root / RECORD
    )
    e = _errors(root, _values(min_replicas=4))
    assert e == {
        "llm-serving:serving.stable.measured": (
            f"{RECORD} measured another configuration: engine_args.served: the measured server ran other arguments "
            "than the rendered ones (CPU build, no FP8)"
        )
    }
    e = _errors(root, _values(min_replicas=4, measured_with_adapted_args="integration run on the CPU build"))
    assert e == {
        "llm-serving:serving.stable.measured_with_adapted_args": (
            "not in prod: a record of another server configuration may only size a dev stack"
        )
    }


def test_a_missing_or_broken_record_names_the_key(root: Path):
    assert _errors(root, _values())["llm-serving:serving.stable.measured"] == f"{RECORD}: file not found"
    (root / RECORD).write_text('{"schema_version": 2}')
    msg = _errors(root, _values())["llm-serving:serving.stable.measured"]
    assert msg.startswith(f"{RECORD}: 14 problem(s): release: Field required")


def test_a_record_without_operating_point_sizes_nothing(root: Path):
    write_measurement(record([rp(1, 4000, 0.5)], prod_target()), root / RECORD)
    msg = _errors(root, _values())["llm-serving:serving.stable.measured"]
    assert msg.startswith(f"{RECORD} has no operating point (")
    assert msg.endswith("): nothing to size the pool from")


def test_shipped_stacks_stay_unmeasured():
    """No record is invented for hardware nobody measured."""
    for stack in ("dev", "staging", "prod"):
        for role, pool in resolve_stack(read_stack_file(stack).values, stack, ROOT).config.pools():
            assert pool.measured is None, (stack, role)
    assert not (ROOT / "stacks" / "measurements").exists() or not list((ROOT / "stacks" / "measurements").iterdir())
