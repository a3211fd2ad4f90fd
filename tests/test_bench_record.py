"""The measurement record: built from a sweep, written once, read back identical, bad records rejected with
exact messages, and identity differences named field by field."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from infra.config.measurement import Measurement, MeasurementError, args_sha256, identity_differences
from infra.offline.bench.analysis import Quantiles, RatePoint, Slo, operating_point
from infra.offline.bench.record import build_measurement, load_measurement, write_measurement
from infra.offline.bench.runner import SweepConfig
from infra.offline.bench.scrape import GaugeSummary
from infra.offline.bench.target import BenchTarget, TargetError
from infra.offline.bench.workload import parse_priority_mix, plan_workload

#: As the renderer writes them: the release id first among the served names (vLLM's metrics label), then the public
#: name requests carry.
ARGS = (
    "--model", "/models/qwen3-32b",
    "--served-model-name", "qwen3-32b-fp8-2026-08-23.1", "qwen3-32b",
    "--tensor-parallel-size", "2",
    "--max-model-len", "16384",
)  # fmt: skip
WHEN = datetime(2026, 8, 24, 9, 30, 15, tzinfo=UTC)


def target(**over) -> BenchTarget:
    fields: dict[str, Any] = dict(
        base_url="http://127.0.0.1:8000",
        served_model_name="qwen3-32b",
        release="qwen3-32b-fp8-2026-08-23.1",
        image_digest="sha256:" + "ab" * 32,
        vllm_version="0.32.0",
        machine_type="a3-highgpu-2g",
        gpu_type="nvidia-h100-80gb",
        gpus_per_node=2,
        tensor_parallel_size=2,
        vllm_args=ARGS,
        vllm_args_sha256=args_sha256(ARGS),
        ttft_p95_ms=1500,
        itl_p95_ms=50,
        max_input_tokens=12000,
        max_output_tokens=4096,
        prompt_mean_tokens=1800,
        prompt_p95_tokens=8000,
        output_mean_tokens=350,
        output_p95_tokens=1500,
        priority_classes=(("interactive", 100), ("batch", 0)),
        tokenizer_path="/models/qwen3-32b",
    )
    fields.update(over)
    return BenchTarget(**fields)


def rp(rate: float, ttft_p95: float, goodput: float, arrivals: int | None = None) -> RatePoint:
    """A point measured over a 108 s window (a 120 s run less 12 s of warm-up) with ``rate x 108`` arrivals (achieved
    = offered) unless ``arrivals`` says otherwise."""
    failures = tuple(f for f, bad in (("TTFT", ttft_p95 > 1500), ("goodput", goodput < 0.95)) if bad)
    n = int(rate * 108) if arrivals is None else arrivals
    return RatePoint(
        offered_rps=rate,
        window_start=0.0,
        window_end=108.0,
        arrivals=n,
        successful=n,
        errored=0,
        cut_off_late=0,
        cut_off_undetermined=0,
        ttft_ms=Quantiles(ttft_p95 / 3, ttft_p95, ttft_p95 * 1.2),
        request_itl_ms=Quantiles(22, 41, 48),
        token_itl_ms=Quantiles(20, 35, 40),
        output_tokens_per_s=350 * rate,
        input_tokens_per_s=1800 * rate,
        error_rate=0.0,
        goodput_share=goodput,
        goodput_output_tokens_per_s=350 * rate * goodput,
        dispatch_delay_mean_s=0.004,
        dispatch_delay_p95_s=0.01,
        queue_waiting=GaugeSummary(rate / 2, rate, 200),
        kv_cache_usage=GaugeSummary(0.1 * rate, 0.12 * rate, 200),
        failures=failures,
        token_itl_observations=int(rate * 108 * 349),
        warmup_s=12.0,
        runs=(("interactive", 1000 + int(rate), rate * 0.8, 120.0), ("batch", 2000 + int(rate), rate * 0.2, 120.0)),
        prompt_tokens_sent=(1900, 2000, 8100),
        output_tokens_sent=(300, 360, 1490),
    )


def record(points: list[RatePoint], t: BenchTarget | None = None) -> Measurement:
    t = t or target()
    plan = plan_workload(
        prompt_mean=t.prompt_mean_tokens,
        prompt_p95=t.prompt_p95_tokens,
        max_input=t.max_input_tokens,
        output_mean=t.output_mean_tokens,
        output_p95=t.output_p95_tokens,
        max_output=t.max_output_tokens,
        prefix_ratio=0.25,
        mix=parse_priority_mix("interactive=0.8,batch=0.2", t.priority_classes),
    )
    found, reason = operating_point(points)
    cfg = SweepConfig(
        rates=None, start_rps=1, growth=2, max_rates=10, refine_steps=2, duration_s=120, warmup_fraction=0.1
    )
    return build_measurement(
        target=t,
        plan=plan,
        slo=Slo(1500, 50),
        sweep_cfg=cfg,
        points=points,
        found=found,
        no_point_reason=reason,
        guidellm_version="0.8.1",
        measured_at=WHEN,
        metrics_period_s=0.5,
    )


CURVE = [rp(1, 400, 1.0), rp(2, 700, 0.99), rp(4, 1400, 0.96), rp(8, 4000, 0.5)]


def test_record_round_trip(tmp_path: Path):
    rec = record(CURVE)
    path = tmp_path / "m.json"
    write_measurement(rec, path)
    assert load_measurement(path) == rec
    doc = json.loads(path.read_text())
    assert doc["measured_at"] == "2026-08-24T09:30:15Z"
    assert doc["operating_point"] == {
        "offered_rps": 4.0,
        "achieved_rps": 4.0,  # 432 arrivals in 108 s
        "output_tokens_per_s": 1400.0,
        "input_tokens_per_s": 7200.0,
        "ttft_p95_ms": 1400.0,
        "token_itl_p95_ms": 35.0,
        "goodput_share": 0.96,
        "limit": "slo",
    }
    assert doc["server_metrics"] == {
        "model_name": "qwen3-32b-fp8-2026-08-23.1",  # the first --served-model-name of ARGS, not the request's name
        "itl_histogram": "vllm:inter_token_latency_seconds",
        "period_seconds": 0.5,
    }
    assert doc["curve"][0]["runs"] == [
        {"priority_class": "interactive", "seed": 1001, "rate_rps": 0.8, "duration_seconds": 120.0},
        {"priority_class": "batch", "seed": 2001, "rate_rps": 0.2, "duration_seconds": 120.0},
    ]
    assert doc["no_operating_point_reason"] is None
    w = doc["workload"]
    assert (w["shared_prefix_tokens"], w["priority_header"]) == (450, "x-llm-d-inference-objective")
    # Whole-prompt numbers include the 450-token prefix; mu/sigma describe the rest of the prompt.
    assert (w["prompt"]["contract_mean"], w["prompt"]["contract_p95"], w["prompt"]["upper"]) == (1800, 8000, 11550)
    assert (w["prompt"]["realised_mean"], w["prompt"]["realised_p95"]) == pytest.approx((4000.0, 8100.0))
    assert [p["share"] for p in w["priority_mix"]] == [0.8, 0.2]
    # Deterministic bytes: the same record serialises identically.
    again = tmp_path / "again.json"
    write_measurement(load_measurement(path), again)
    assert again.read_bytes() == path.read_bytes()


def test_no_operating_point_is_recorded_with_its_reason(tmp_path: Path):
    rec = record([rp(1, 2000, 0.9), rp(2, 3000, 0.6)])
    assert rec.operating_point is None
    assert rec.no_operating_point_reason == (
        "no offered rate met the SLO: the lowest, 1 req/s (1 achieved), failed (TTFT; goodput)"
    )
    path = tmp_path / "none.json"
    write_measurement(rec, path)
    assert load_measurement(path).operating_point is None


def test_a_record_is_written_once(tmp_path: Path):
    path = tmp_path / "m.json"
    write_measurement(record(CURVE), path)
    with pytest.raises(MeasurementError) as err:
        write_measurement(record(CURVE), path)
    assert str(err.value) == f"{path}: already exists; a measurement record is written once"


def _bad(tmp_path: Path, mutate) -> str:
    doc = record(CURVE).model_dump(mode="json")
    mutate(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(MeasurementError) as err:
        load_measurement(path)
    return str(err.value).removeprefix(f"{path}: ")


def test_rejects_an_invented_operating_point(tmp_path: Path):
    def mutate(d):
        d["operating_point"]["offered_rps"] = 8.0

    assert _bad(tmp_path, mutate) == (
        "1 problem(s): operating_point.offered_rps: the curve point at 8.0 does not meet the SLO"
    )


def test_rejects_a_point_not_measured_at_its_label(tmp_path: Path):
    # 1 req/s offered; 10 % off is the limit (1.1 passes), 1.11 req/s is refused, and so is 0.89.
    def at(achieved: float):
        def mutate(d):
            d["curve"][0]["achieved_rps"] = achieved

        return mutate

    assert _bad(tmp_path, at(1.11)) == (
        "1 problem(s): curve.0.achieved_rps: 1.11 req/s is more than 10% from the offered 1 req/s: the point was not "
        "measured at its label"
    )
    assert _bad(tmp_path, at(0.89)).startswith("1 problem(s): curve.0.achieved_rps: 0.89 req/s is more than 10%")
    doc = record(CURVE).model_dump(mode="json")
    doc["curve"][0]["achieved_rps"] = 1.1
    Measurement.model_validate(doc)


def test_rejects_a_point_without_the_servers_gauges(tmp_path: Path):
    def mutate(d):
        d["curve"][1]["queue_waiting"] = None
        d["curve"][2]["kv_cache_usage"] = None

    assert _bad(tmp_path, mutate) == (
        "2 problem(s): curve.1.queue_waiting: Input should be an object; curve.2.kv_cache_usage: Input should be an object"
    )


def test_a_point_without_gauges_is_no_record():
    blind = dataclasses.replace(rp(1, 400, 1.0), queue_waiting=None)
    with pytest.raises(MeasurementError) as err:
        record([blind])
    assert str(err.value) == (
        "1 req/s: no vllm:num_requests_waiting from the server's /metrics; a record needs it at every rate"
    )


def test_the_operating_point_is_judged_in_achieved_order(tmp_path: Path):
    # Offered 4 achieved 4.36 passes, offered 4.5 achieved 4.10 fails: 4.5 was the lower load, so 4 is no capacity.
    def mutate(d):
        d["curve"][2]["achieved_rps"] = 4.36
        d["curve"].insert(3, {**d["curve"][3], "offered_rps": 4.5, "achieved_rps": 4.1})
        d["curve"].pop()  # drop 8 req/s

    assert (
        _bad(tmp_path, mutate) == "1 problem(s): operating_point.offered_rps: a lower rate of the curve fails the SLO"
    )


def test_rejects_non_finite_and_out_of_range_numbers(tmp_path: Path):
    def mutate(d):
        d["curve"][0]["output_tokens_per_s"] = -1
        d["curve"][1]["goodput_share"] = 1.5

    assert _bad(tmp_path, mutate) == (
        "2 problem(s): curve.0.output_tokens_per_s: Input should be greater than or equal to 0; "
        "curve.1.goodput_share: Input should be less than or equal to 1"
    )


def test_rejects_unknown_fields_and_wrong_types(tmp_path: Path):
    def mutate(d):
        d["theta"] = 1
        d["accelerator"]["tensor_parallel_size"] = "2"

    assert _bad(tmp_path, mutate) == (
        "2 problem(s): accelerator.tensor_parallel_size: Input should be a valid "
        "integer; theta: Extra inputs are not permitted"
    )


def test_rejects_both_or_neither_operating_point_and_reason(tmp_path: Path):
    def mutate(d):
        d["no_operating_point_reason"] = "because"

    assert _bad(tmp_path, mutate) == (
        "1 problem(s): operating_point: exactly one of operating_point and no_operating_point_reason is set"
    )


def test_load_errors_name_the_file(tmp_path: Path):
    missing = tmp_path / "missing.json"
    with pytest.raises(MeasurementError) as err:
        load_measurement(missing)
    assert str(err.value) == f"{missing}: no such measurement record"
    broken = tmp_path / "broken.json"
    broken.write_text('{\n  "release": ,\n}')
    with pytest.raises(MeasurementError) as err:
        load_measurement(broken)
    assert str(err.value) == f"{broken}:2:14: not valid JSON: Expecting value"  # the shared JSON loader's form


def test_identity_differences_empty_for_the_same_pool():
    assert identity_differences(record(CURVE), target()) == []


def test_identity_differences_name_each_field_with_both_values():
    other_args = (*ARGS[:-1], "8192")
    expected = target(
        release="qwen3-32b-fp8-2026-09-01.1",
        machine_type="a3-highgpu-4g",
        gpus_per_node=4,
        vllm_args=other_args,
        vllm_args_sha256=args_sha256(other_args),
    )
    assert identity_differences(record(CURVE), expected) == [
        "release: record 'qwen3-32b-fp8-2026-08-23.1', expected 'qwen3-32b-fp8-2026-09-01.1'",
        "accelerator.machine_type: record 'a3-highgpu-2g', expected 'a3-highgpu-4g'",
        "accelerator.gpus_per_node: record 2, expected 4",
        f"engine_args.rendered_sha256: record {args_sha256(ARGS)}, expected {args_sha256(other_args)} "
        "(first difference at argument 8: record '16384', expected '8192')",
    ]


def test_identity_differences_flag_a_server_that_ran_other_args():
    served = (*ARGS[:2], "--device", "cpu")
    t = target(served_args=served, served_args_reason="CPU build: no GPU flags")
    rec = record(CURVE, t)
    assert rec.engine_args.served_sha256 == args_sha256(served)
    assert identity_differences(rec, target()) == [
        "engine_args.served: the measured server ran other arguments than the rendered ones (CPU build: no GPU flags)"
    ]


def test_target_checks_its_own_facts():
    with pytest.raises(TargetError) as err:
        target(vllm_args_sha256="0" * 64, image_digest="latest")
    assert str(err.value) == (
        "image_digest: must be sha256:<64 hex>, got 'latest'; vllm_args_sha256: "
        f"{'0' * 64} is not the SHA-256 of vllm_args ({args_sha256(ARGS)})"
    )
    with pytest.raises(TargetError, match="served_args_reason: must be given exactly when served_args is"):
        target(served_args=("--x",))


def test_args_sha256_separates_arguments():
    assert args_sha256(["--a b"]) != args_sha256(["--a", "b"])
    # The hash is of the compact JSON array; pinned, because a change would orphan every stored record.
    assert args_sha256(["--a", "b"]) == hashlib.sha256(b'["--a","b"]').hexdigest()
    assert args_sha256(["--a", "b"]) == "21d6bc26bab6af27a8908becb04c6f03d18e31f43f3d886dab8eb4bb3ff7a27b"


def test_targets_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        target().release = "x"  # type: ignore[misc]
