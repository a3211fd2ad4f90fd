"""Build, write, read and compare measurement records (schema: infra/config/measurement.py).

- ``build_measurement``: from the target, the workload, the sweep and the operating point; the date is passed in
  so that one run writes one record with one timestamp (and tests can fix it).
- ``write_measurement``: refuses to overwrite: a record is written once, a new measurement is a new file.
- ``load_measurement``: one ``MeasurementError`` whose message names the file and every problem with its path.
- ``identity_differences``: which identity facts of a record differ from what a pool expects, with both values,
  for the config rule that rejects a record measured on another release, accelerator or argument list.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from ...config.bench import MIN_WINDOW_ARRIVALS
from ...config.measurement import (  # noqa: F401
    SCHEMA_VERSION,
    Accelerator,
    CurvePoint,
    EngineArgs,
    Gauge,
    IdentityFacts,
    LengthWorkload,
    Measurement,
    MeasurementError,
    OperatingPoint,
    PriorityShare,
    Quantiles,
    RejectedAttempt,
    Run,
    ServerMetrics,
    Slo,
    Tool,
    Workload,
    identity_differences,
    validation_problems,
)
from .analysis import OperatingPoint as FoundOperatingPoint
from .analysis import Quantiles as FoundQuantiles
from .analysis import RatePoint
from .analysis import Slo as SloSpec
from .runner import REQUEST_FORMAT, SweepConfig
from .scrape import ITL_HISTOGRAM, KV_USAGE, WAITING, GaugeSummary
from .stats import nearest_rank
from .target import BenchTarget
from .workload import PRIORITY_HEADER, LengthFit, WorkloadPlan


def utc_timestamp(when: datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SSZ`` of an aware datetime (the record's ``measured_at`` format)."""
    if when.tzinfo is None:
        raise ValueError("measured_at must be timezone-aware")
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _quantiles(q: FoundQuantiles | None) -> Quantiles | None:
    return None if q is None else Quantiles(p50=q.p50, p95=q.p95, p99=q.p99)


def _gauge(g: GaugeSummary | None, what: str, rate: float) -> Gauge:
    if g is None:
        raise MeasurementError(f"{rate:g} req/s: no {what} from the server's /metrics; a record needs it at every rate")
    return Gauge(mean=g.mean, max=g.max, samples=g.samples)


def _runs(p: RatePoint) -> list[Run]:
    out = []
    for name, seed, rate, duration in p.runs:
        if seed is None or duration is None:
            raise MeasurementError(f"{p.offered_rps:g} req/s: run {name} has no recorded seed or duration")
        out.append(Run(priority_class=name, seed=seed, rate_rps=rate, duration_seconds=duration))
    return out


def curve_point(p: RatePoint) -> CurvePoint:
    return CurvePoint(
        offered_rps=p.offered_rps,
        achieved_rps=p.achieved_rps,
        window_seconds=p.window_seconds,
        warmup_seconds=p.warmup_s,
        runs=_runs(p),
        rejected_attempts=[
            RejectedAttempt(achieved_rps=a, window_seconds=w, seeds=[s for s in seeds if s is not None])
            for a, w, seeds in p.rejected
        ],
        arrivals=p.arrivals,
        successful=p.successful,
        errored=p.errored,
        cut_off_late=p.cut_off_late,
        cut_off_undetermined=p.cut_off_undetermined,
        ttft_ms=_quantiles(p.ttft_ms),
        token_itl_ms=_quantiles(p.token_itl_ms),
        token_itl_observations=p.token_itl_observations,
        request_itl_ms=_quantiles(p.request_itl_ms),
        output_tokens_per_s=p.output_tokens_per_s,
        input_tokens_per_s=p.input_tokens_per_s,
        error_rate=p.error_rate,
        goodput_share=p.goodput_share,
        goodput_output_tokens_per_s=p.goodput_output_tokens_per_s,
        dispatch_delay_mean_s=p.dispatch_delay_mean_s,
        dispatch_delay_p95_s=p.dispatch_delay_p95_s,
        queue_waiting=_gauge(p.queue_waiting, WAITING, p.offered_rps),
        kv_cache_usage=_gauge(p.kv_cache_usage, KV_USAGE, p.offered_rps),
        meets_slo=p.meets_slo,
        failures=list(p.failures),
        error_examples=list(p.error_examples),
    )


def _length(fit: LengthFit, sent: Sequence[int], prefix_tokens: int = 0) -> LengthWorkload:
    """The record's view of one length: contract, fitted and realised numbers are whole lengths (prefix
    included); mu, sigma, lower and upper are guidellm's parameters for the part after the prefix."""
    return LengthWorkload(
        contract_mean=fit.contract_mean + prefix_tokens,
        contract_p95=fit.contract_p95 + prefix_tokens,
        distribution=fit.distribution,  # type: ignore[arg-type]
        mu=fit.mu,
        sigma=fit.sigma,
        lower=fit.lower,
        upper=fit.upper,
        fitted_mean=fit.fitted_mean + prefix_tokens,
        fitted_p95=fit.fitted_p95 + prefix_tokens,
        exact=fit.exact,
        lower_clip_share=fit.lower_clip_share,
        realised_mean=(sum(sent) / len(sent)) if sent else None,
        realised_p95=float(nearest_rank(sent, 0.95)) if sent else None,
        realised_count=len(sent),
    )


def build_measurement(
    *,
    target: BenchTarget,
    plan: WorkloadPlan,
    slo: SloSpec,
    sweep_cfg: SweepConfig,
    points: Sequence[RatePoint],
    found: FoundOperatingPoint | None,
    no_point_reason: str | None,
    guidellm_version: str,
    measured_at: datetime,
    metrics_period_s: float,
) -> Measurement:
    """The record of one bench run. ``found``/``no_point_reason`` come from ``analysis.operating_point``;
    ``metrics_period_s`` is the scrape period of the server's /metrics (whose label is the target's)."""
    ordered = sorted(points, key=lambda p: p.offered_rps)
    prompts = [n for p in ordered for n in p.prompt_tokens_sent]
    outputs = [n for p in ordered for n in p.output_tokens_sent]
    op = None
    if found is not None:
        p = found.point
        assert p.ttft_ms is not None and p.token_itl_ms is not None and p.goodput_share is not None  # meets_slo
        op = OperatingPoint(
            offered_rps=p.offered_rps,
            achieved_rps=p.achieved_rps,
            output_tokens_per_s=p.output_tokens_per_s,
            input_tokens_per_s=p.input_tokens_per_s,
            ttft_p95_ms=p.ttft_ms.p95,
            token_itl_p95_ms=p.token_itl_ms.p95,
            goodput_share=p.goodput_share,
            limit=found.limit,
        )
    served = list(target.served_args) if target.served_args is not None else None
    return Measurement(
        schema_version=SCHEMA_VERSION,
        release=target.release,
        image_digest=target.image_digest,
        vllm_version=target.vllm_version,
        served_model_name=target.served_model_name,
        accelerator=Accelerator(
            machine_type=target.machine_type,
            gpu_type=target.gpu_type,
            gpus_per_node=target.gpus_per_node,
            tensor_parallel_size=target.tensor_parallel_size,
        ),
        engine_args=EngineArgs(
            rendered=list(target.vllm_args),
            rendered_sha256=target.vllm_args_sha256,
            served=served,
            served_sha256=target.served_args_sha256,
            served_reason=target.served_args_reason,
        ),
        tool=Tool(name="guidellm", version=guidellm_version, request_format=REQUEST_FORMAT),
        workload=Workload(
            arrival_process="poisson",
            prompt=_length(plan.prompt, prompts, plan.prefix_tokens),
            output=_length(plan.output, outputs),
            shared_prefix_ratio=plan.prefix_ratio,
            shared_prefix_tokens=plan.prefix_tokens,
            priority_mix=[PriorityShare(name=s.name, priority=s.priority, share=s.share) for s in plan.mix],
            priority_header=PRIORITY_HEADER if plan.send_priority_header else None,
            duration_floor_seconds=sweep_cfg.duration_s,
            warmup_fraction=sweep_cfg.warmup_fraction,
            min_window_arrivals=MIN_WINDOW_ARRIVALS,
        ),
        server_metrics=ServerMetrics(
            model_name=target.metrics_model_name,
            itl_histogram=ITL_HISTOGRAM,  # type: ignore[arg-type]  # the Literal of the schema
            period_seconds=metrics_period_s,
        ),
        slo=Slo(ttft_p95_ms=slo.ttft_ms, itl_p95_ms=slo.itl_ms, min_goodput_share=slo.min_goodput_share),
        measured_at=utc_timestamp(measured_at),
        curve=[curve_point(p) for p in ordered],
        operating_point=op,
        no_operating_point_reason=no_point_reason if op is None else None,
    )


def write_measurement(record: Measurement, path: Path) -> None:
    """Write ``record`` as JSON (sorted keys, 2-space indent, trailing newline); never overwrite."""
    text = json.dumps(record.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(path, "x", encoding="utf-8") as f:
            f.write(text)
    except FileExistsError:
        raise MeasurementError(f"{path}: already exists; a measurement record is written once") from None


def load_measurement(path: Path | str) -> Measurement:
    """Read and validate a record; MeasurementError names the file and each problem (``curve.0.arrivals: ...``)."""
    from ...config.documents import MAX_JSON_BYTES, DocumentError, load_json_document, read_regular_file

    path = Path(path)
    if not os.path.lexists(path):
        raise MeasurementError(f"{path}: no such measurement record")
    try:
        # Bounded, non-blocking, regular files only, and the stack loader's JSON rules (duplicate keys, NaN).
        data = read_regular_file(path, source=str(path), max_bytes=MAX_JSON_BYTES, limit_name="MAX_JSON_BYTES")
        load_json_document(data, str(path))
    except DocumentError as err:
        raise MeasurementError(str(err)) from None
    text = data.decode("utf-8")
    try:
        return Measurement.model_validate_json(text)
    except ValidationError as err:
        problems = validation_problems(err)
        raise MeasurementError(f"{path}: {len(problems)} problem(s): " + "; ".join(problems)) from None
