"""The measurement record: one replica's latency/throughput curve and its operating point, with provenance.

Written once by ``llm-serving bench`` (infra/offline/bench) and kept under ``stacks/measurements/``; a pool cites
it (``measured: <file>``) so that θ_o and θ_i in the capacity plan come from a named, checkable measurement of
the same release, image, engine arguments and accelerator topology. Every number is finite and bounded, so a
corrupted or hand-edited file fails validation instead of sizing a fleet.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Protocol

from pydantic import Field, ValidationError, model_validator

from .base import FieldErrors, Strict, check
from .bench import ARRIVAL_TOLERANCE
from .documents import DocumentError, load_json_file

#: Bump on any change a reader of older records must know about. 2: the server's gauges are required, the ITL is
#: reported twice (vLLM's per-token histogram, which the SLO is judged on, and guidellm's per-request mean), every
#: run's seed is recorded, and the achieved arrival rate must be within ARRIVAL_TOLERANCE of the offered one.
SCHEMA_VERSION: Final = 2

#: Largest count or rate the schema accepts: far above any single replica (1e9 tokens/s, 1e9 requests), low
#: enough that an overflowed or garbage number is rejected.
_BIG = 1e9


def _num(description: str, *, lo: float = 0.0, hi: float = _BIG) -> Any:
    return Field(ge=lo, le=hi, allow_inf_nan=False, description=description)


Share = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
Sha256Hex = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class Quantiles(Strict):
    """Nearest-rank percentiles of one latency, ms."""

    p50: float = _num("50th percentile, ms.")
    p95: float = _num("95th percentile, ms (the contract's objectives are p95 targets).")
    p99: float = _num("99th percentile, ms.")


class Gauge(Strict):
    """A /metrics gauge sampled during one rate's measurement window."""

    mean: float = _num("Mean of the samples.")
    max: float = _num("Largest sample.")
    samples: int = Field(ge=1, le=10**7, description="Number of samples taken in the window.")


class Run(Strict):
    """One guidellm run of a rate: one priority class's Poisson stream."""

    priority_class: str = Field(min_length=1, description="The class the run sent (InferenceObjective).")
    seed: int = Field(
        ge=0, le=2**32 - 1, description="The run's scenario seed: its Poisson schedule and its synthetic prompts."
    )
    rate_rps: float = _num("The class stream's offered rate (its share of the rate), requests/s.", lo=1e-9)
    duration_seconds: float = _num("guidellm max_duration of the run, s.", lo=1e-9)


class RejectedAttempt(Strict):
    """An earlier measurement of the rate whose achieved arrival rate missed the tolerance (measured again)."""

    achieved_rps: float = _num("Its achieved arrival rate, requests/s.")
    window_seconds: float = _num("Its measurement window, s.")
    seeds: list[int] = Field(min_length=1, description="Its runs' seeds, in class order.")


class CurvePoint(Strict):
    """Everything measured at one offered rate (definitions: infra/offline/bench/analysis.py)."""

    offered_rps: float = _num("Offered Poisson arrival rate, all classes together, requests/s (the label).", lo=1e-9)
    achieved_rps: float = _num(
        "Arrivals in the measurement window divided by its length, requests/s: the load the point was measured and is "
        f"judged at; within {ARRIVAL_TOLERANCE:.0%} of offered_rps."
    )
    window_seconds: float = _num(
        "Length of the measurement window (all class streams active, after warm-up), s.", lo=1e-9
    )
    warmup_seconds: float = _num("Seconds of each run excluded before the window.")
    runs: list[Run] = Field(min_length=1, description="The rate's guidellm runs, one per priority class.")
    rejected_attempts: list[RejectedAttempt] = Field(
        description="Earlier measurements of this rate whose achieved rate missed the tolerance."
    )
    arrivals: int = Field(ge=0, le=10**9, description="Requests scheduled to arrive in the window.")
    successful: int = Field(ge=0, le=10**9, description="Arrivals that completed.")
    errored: int = Field(ge=0, le=10**9, description="Arrivals that failed.")
    cut_off_late: int = Field(
        ge=0,
        le=10**9,
        description=(
            "Arrivals still waiting for a first token at the end of the run after more than the TTFT objective: "
            "counted as violations."
        ),
    )
    cut_off_undetermined: int = Field(
        ge=0,
        le=10**9,
        description=("Arrivals cut off by the end of the run before breaching an objective: excluded from goodput."),
    )
    ttft_ms: Quantiles | None = Field(description="Time to first token percentiles; null when no sample.")
    token_itl_ms: Quantiles | None = Field(
        description=(
            "Inter-token latency from vLLM's per-token histogram vllm:inter_token_latency_seconds over the window "
            "(histogram_quantile of its bucket increase): the ITL the alerts and dashboards use, and the one the SLO "
            "is judged on; null when the server generated no token gap in the window."
        )
    )
    token_itl_observations: int = Field(ge=0, le=10**12, description="Token gaps the histogram observed in the window.")
    request_itl_ms: Quantiles | None = Field(
        description=(
            "guidellm's per-request mean inter-token latency (client side), percentiles weighted by each request's "
            "token gaps; what goodput judges each request on; null when no sample."
        )
    )
    output_tokens_per_s: float = _num("Output tokens produced in the window per second.")
    input_tokens_per_s: float = _num("Prompt tokens prefilled in the window per second.")
    error_rate: Share | None = Field(description="errored / (successful + errored); null without either.")
    goodput_share: Share | None = Field(
        description=(
            "Share of determined arrivals meeting both the TTFT and the ITL objective; null when none is determined."
        )
    )
    goodput_output_tokens_per_s: float = _num("Output tokens of conforming arrivals per second of window.")
    dispatch_delay_mean_s: float | None = Field(
        ge=0,
        le=_BIG,
        allow_inf_nan=False,
        description=(
            "Mean of scheduled arrival -> request sent (the load generator's own lag), s; null without samples."
        ),
    )
    dispatch_delay_p95_s: float | None = Field(
        ge=0, le=_BIG, allow_inf_nan=False, description=("p95 of the same, s; null without samples.")
    )
    queue_waiting: Gauge = Field(description="vllm:num_requests_waiting during the window (summed over engines).")
    kv_cache_usage: Gauge = Field(
        description="vllm:kv_cache_usage_perc (a 0-1 fraction) during the window (the fullest engine)."
    )
    meets_slo: bool = Field(description="True when failures is empty.")
    failures: list[str] = Field(description="Why this rate does not meet the SLO (empty when it does).")
    error_examples: list[str] = Field(
        max_length=3,
        description=("Up to three distinct error messages of errored arrivals (truncated to 300 characters)."),
    )

    @model_validator(mode="after")
    def _consistent(self) -> CurvePoint:
        problems = []
        if self.meets_slo != (not self.failures):
            problems.append(("meets_slo", f"is {self.meets_slo} but failures has {len(self.failures)} entries"))
        if self.successful + self.errored + self.cut_off_late + self.cut_off_undetermined != self.arrivals:
            problems.append(("arrivals", "must equal successful + errored + cut_off_late + cut_off_undetermined"))
        if self.kv_cache_usage.max > 1:
            problems.append(("kv_cache_usage.max", f"is a fraction and must be <= 1, got {self.kv_cache_usage.max}"))
        if abs(self.achieved_rps / self.offered_rps - 1) > ARRIVAL_TOLERANCE + 1e-12:
            problems.append(
                (
                    "achieved_rps",
                    f"{self.achieved_rps:.4g} req/s is more than {ARRIVAL_TOLERANCE:.0%} from the offered "
                    f"{self.offered_rps:g} req/s: the point was not measured at its label",
                )
            )
        check(problems)
        return self


class OperatingPoint(Strict):
    """The highest achieved rate meeting the SLO with every lower rate meeting it too."""

    offered_rps: float = _num("Offered rate of the operating point, requests/s (one of the curve's rates).", lo=1e-9)
    achieved_rps: float = _num("Its achieved arrival rate, requests/s: the load θ was measured at.", lo=1e-9)
    output_tokens_per_s: float = _num("θ_o: output tokens/s of one replica at the SLO.", lo=1e-9)
    input_tokens_per_s: float = _num("θ_i: prompt tokens/s of one replica at the SLO.", lo=1e-9)
    ttft_p95_ms: float = _num("TTFT p95 at this rate, ms.")
    token_itl_p95_ms: float = _num("ITL p95 at this rate from vLLM's per-token histogram, ms.")
    goodput_share: Share = Field(description="Goodput at this rate.")
    limit: Literal["slo", "sweep_end"] = Field(
        description=(
            "slo: a higher measured rate failed the SLO (this is the knee); sweep_end: no higher rate was measured, "
            "so θ is a lower bound."
        )
    )


#: Goodput share an operating point must reach: what the planner's sizing assumes of a measured rate (the bench's
#: analysis judges every rate by it, infra/offline/bench/analysis.py).
MIN_GOODPUT_SHARE = 0.95


class Slo(Strict):
    """The objectives the curve is judged against (from the contract)."""

    ttft_p95_ms: float = _num("TTFT objective at p95, ms.", lo=1e-9)
    itl_p95_ms: float = _num("ITL objective at p95, ms.", lo=1e-9)
    min_goodput_share: Share = Field(description="Goodput the operating point must reach (0.95).")


class Accelerator(Strict):
    """The topology the replica ran on."""

    machine_type: str = Field(min_length=1, description="Machine type (a3-highgpu-2g; `cpu` for a CPU build).")
    gpu_type: str = Field(min_length=1, description="Accelerator type (nvidia-h100-80gb; `none` on CPU).")
    gpus_per_node: int = Field(ge=0, le=64, description="GPUs per node.")
    tensor_parallel_size: int = Field(ge=1, le=64, description="Tensor-parallel size of the replica.")


class EngineArgs(Strict):
    """The vLLM arguments: as the stack renders them, and as the measured server ran if that differed."""

    rendered: list[str] = Field(description="Arguments after `vllm serve` the pool renders.")
    rendered_sha256: Sha256Hex = Field(description="SHA-256 of `rendered` as a compact JSON array.")
    served: list[str] | None = Field(description="Arguments the measured server ran with, when not `rendered`.")
    served_sha256: Sha256Hex | None = Field(description="SHA-256 of `served`; null with it.")
    served_reason: str | None = Field(description="Why `served` differs from `rendered`; null with it.")

    @model_validator(mode="after")
    def _served_together(self) -> EngineArgs:
        set_ = [x is not None for x in (self.served, self.served_sha256, self.served_reason)]
        check(
            [("served", "served, served_sha256 and served_reason are set together or not at all")]
            if any(set_) and not all(set_)
            else []
        )
        return self


class Tool(Strict):
    """The load generator."""

    name: Literal["guidellm"] = Field(description="Load generator.")
    version: str = Field(pattern=r"^[0-9]+\.[0-9]+\.[0-9]+[!-~]*$", description="Its installed package version.")
    request_format: str = Field(description="OpenAI route the requests used (/v1/completions).")


class LengthWorkload(Strict):
    """One length distribution: the contract's numbers, the fit guidellm received, and what was sent.

    Contract, fitted and realised numbers are whole lengths (a prompt's shared prefix included); ``mu``,
    ``sigma``, ``lower`` and ``upper`` are guidellm's parameters for the part after the prefix."""

    contract_mean: float = _num("Contract mean, tokens.", lo=1e-9)
    contract_p95: int = Field(ge=1, le=10**8, description="Contract p95, tokens.")
    distribution: Literal["censored_normal", "constant"] = Field(
        description=("round(clip(N(mu, sigma), lower, upper)) as guidellm draws it, or a constant.")
    )
    mu: int = Field(ge=1, le=10**8, description="guidellm *_tokens.")
    sigma: int = Field(ge=0, le=10**8, description="guidellm *_tokens_stdev (0 for a constant).")
    lower: int = Field(ge=1, le=10**8, description="Lower clip, tokens.")
    upper: int = Field(ge=1, le=10**8, description="Upper clip (the contract maximum, less any prefix), tokens.")
    fitted_mean: float = _num("Mean the fitted parameters imply, tokens.")
    fitted_p95: float = _num("p95 the fitted parameters imply, tokens.")
    exact: bool = Field(description="Fitted mean within one token of the contract mean.")
    lower_clip_share: Share = Field(description="Share of requests at the lower clip.")
    realised_mean: float | None = Field(
        ge=0,
        le=_BIG,
        allow_inf_nan=False,
        description=("Mean of what the server counted over all measured successful requests; null if none."),
    )
    realised_p95: float | None = Field(
        ge=0, le=_BIG, allow_inf_nan=False, description=("Nearest-rank p95 of the same; null if none.")
    )
    realised_count: int = Field(ge=0, le=10**9, description="Requests the realised numbers are over.")


class PriorityShare(Strict):
    """One priority class's share of the offered load."""

    name: str = Field(min_length=1, description="Class name (InferenceObjective).")
    priority: int = Field(description="Its priority in the contract.")
    share: Share = Field(description="Fraction of the offered rate sent as this class.")


class ServerMetrics(Strict):
    """How the server's /metrics were read."""

    model_name: str = Field(
        min_length=1, description="The model_name label scraped: vLLM's first --served-model-name of the server."
    )
    itl_histogram: Literal["vllm:inter_token_latency_seconds"] = Field(
        description="The histogram token_itl_ms is read from (components/monitoring/metrics.py ITL)."
    )
    period_seconds: float = _num("Scrape period, s.", lo=1e-3, hi=60)


class Workload(Strict):
    """What was offered."""

    arrival_process: Literal["poisson"] = Field(description="Open-loop Poisson arrivals (one stream per class).")
    prompt: LengthWorkload = Field(description="Prompt length (guidellm parameters for the part after the prefix).")
    output: LengthWorkload = Field(description="Output length (pinned per request with ignore_eos).")
    shared_prefix_ratio: Share = Field(description="Shared prefix tokens / mean prompt tokens.")
    shared_prefix_tokens: int = Field(
        ge=0, le=10**8, description="Tokens of the prefix shared by each class's requests."
    )
    priority_mix: list[PriorityShare] = Field(min_length=1, description="Classes and shares.")
    priority_header: str | None = Field(description="Header naming the class on each request; null if not sent.")
    duration_floor_seconds: float = _num(
        "Shortest run per rate, s (a rate runs longer until its window expects min_window_arrivals).", lo=1e-9
    )
    warmup_fraction: Share = Field(description="Share of each run excluded at the start of its window.")
    min_window_arrivals: int = Field(ge=1, le=10**9, description="Arrivals each rate's window was sized to expect.")

    @model_validator(mode="after")
    def _shares(self) -> Workload:
        total = sum(p.share for p in self.priority_mix)
        check([("priority_mix", f"shares must sum to 1, got {total:g}")] if abs(total - 1) > 1e-6 else [])
        return self


class Measurement(Strict):
    """One replica's measured curve and operating point, and exactly what was measured."""

    schema_version: Literal[2] = Field(description="Record schema version.")
    release: str = Field(min_length=1, description="Release id of the served model.")
    image_digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$", description="Serving image digest.")
    vllm_version: str = Field(min_length=1, description="vLLM version of the serving image.")
    served_model_name: str = Field(min_length=1, description="--served-model-name of the server.")
    accelerator: Accelerator = Field(description="Accelerator topology of the replica.")
    engine_args: EngineArgs = Field(description="vLLM arguments, rendered and served.")
    tool: Tool = Field(description="Load generator and version.")
    workload: Workload = Field(description="The offered workload.")
    server_metrics: ServerMetrics = Field(description="How the server's /metrics were read.")
    slo: Slo = Field(description="Objectives the curve is judged against.")
    measured_at: str = Field(
        pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$",
        description="When the measurement finished, UTC (YYYY-MM-DDTHH:MM:SSZ).",
    )
    curve: list[CurvePoint] = Field(min_length=1, description="One point per offered rate, ascending.")
    operating_point: OperatingPoint | None = Field(description="The operating point; null when no rate met the SLO.")
    no_operating_point_reason: str | None = Field(description="Why there is none; null when there is one.")

    @model_validator(mode="after")
    def _consistent(self) -> Measurement:
        problems = []
        rates = [p.offered_rps for p in self.curve]
        if rates != sorted(rates) or len(set(rates)) != len(rates):
            problems.append(("curve", "offered rates must be distinct and ascending"))
        if (self.operating_point is None) == (self.no_operating_point_reason is None):
            problems.append(("operating_point", "exactly one of operating_point and no_operating_point_reason is set"))
        op = self.operating_point
        if op is not None:
            match = [p for p in self.curve if p.offered_rps == op.offered_rps]
            if not match:
                problems.append(("operating_point.offered_rps", f"{op.offered_rps} is not a rate of the curve"))
            elif not match[0].meets_slo:
                problems.append(
                    ("operating_point.offered_rps", f"the curve point at {op.offered_rps} does not meet the SLO")
                )
            elif any(not p.meets_slo for p in self.curve if p.achieved_rps < match[0].achieved_rps):
                problems.append(("operating_point.offered_rps", "a lower rate of the curve fails the SLO"))
            elif op.achieved_rps != match[0].achieved_rps:
                problems.append(
                    (
                        "operating_point.achieved_rps",
                        f"is not the achieved rate of its curve point, {match[0].achieved_rps}",
                    )
                )
        check(problems)
        return self


# ---- identity: did a record measure what a pool serves? ---------------------------------------------------------


def args_sha256(args: Sequence[str]) -> str:
    """SHA-256 (hex) of an argument list, hashed as its compact JSON array.

    JSON keeps the hash unambiguous: ``["--a b"]`` and ``["--a", "b"]`` hash differently, which joining with a
    separator character could not guarantee for arbitrary argument text.
    """
    text = json.dumps(list(args), separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class IdentityFacts(Protocol):
    """What a pool expects of a record it cites (the bench's target and the planner's pool both provide it).
    Read-only: the providers are frozen (the bench's target is a frozen dataclass)."""

    @property
    def release(self) -> str: ...

    @property
    def image_digest(self) -> str: ...

    @property
    def vllm_version(self) -> str: ...

    @property
    def machine_type(self) -> str: ...

    @property
    def gpu_type(self) -> str: ...

    @property
    def gpus_per_node(self) -> int: ...

    @property
    def tensor_parallel_size(self) -> int: ...

    @property
    def vllm_args(self) -> tuple[str, ...]: ...

    @property
    def vllm_args_sha256(self) -> str: ...


def _first_arg_difference(a: Sequence[str], b: Sequence[str]) -> str:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"first difference at argument {i}: record {x!r}, expected {y!r}"
    return f"record has {len(a)} arguments, expected {len(b)}"


def identity_differences(record: Measurement, expected: IdentityFacts, accept_served: bool = False) -> list[str]:
    """Every identity fact of ``record`` that differs from ``expected``, as ``field: record X, expected Y``.

    An empty list means the record measured what the pool serves. A record whose server ran other arguments
    than the rendered ones (``engine_args.served``, e.g. a CPU-adapted run) is reported too unless
    ``accept_served``: it did not measure the pool's configuration even when the rendered arguments match.
    """
    pairs = [
        ("release", record.release, expected.release),
        ("image_digest", record.image_digest, expected.image_digest),
        ("vllm_version", record.vllm_version, expected.vllm_version),
        ("accelerator.machine_type", record.accelerator.machine_type, expected.machine_type),
        ("accelerator.gpu_type", record.accelerator.gpu_type, expected.gpu_type),
        ("accelerator.gpus_per_node", record.accelerator.gpus_per_node, expected.gpus_per_node),
        ("accelerator.tensor_parallel_size", record.accelerator.tensor_parallel_size, expected.tensor_parallel_size),
    ]
    out = [f"{name}: record {have!r}, expected {want!r}" for name, have, want in pairs if have != want]
    if record.engine_args.rendered_sha256 != expected.vllm_args_sha256:
        out.append(
            f"engine_args.rendered_sha256: record {record.engine_args.rendered_sha256}, expected "
            f"{expected.vllm_args_sha256} ({_first_arg_difference(record.engine_args.rendered, expected.vllm_args)})"
        )
    if record.engine_args.served is not None and not accept_served:
        out.append(
            f"engine_args.served: the measured server ran other arguments than the rendered ones "
            f"({record.engine_args.served_reason})"
        )
    return out


# ---- reading a record ---------------------------------------------------------------------------------------------

#: Where a stack's measurement records live, relative to the project root.
MEASUREMENTS_DIR = "stacks/measurements"


class MeasurementError(ValueError):
    """A record that cannot be read or does not validate; the message names the file and each problem."""


def validation_problems(err: ValidationError) -> list[str]:
    """``curve.0.arrivals: ...`` for each problem of a record that failed the schema."""
    problems = []
    for e in err.errors():
        loc = [str(x) for x in e["loc"]]
        cause = (e.get("ctx") or {}).get("error")
        if isinstance(cause, FieldErrors):  # a cross-field check: each problem names its own field
            problems += [".".join([*loc, field]) + f": {msg}" for field, msg in cause.problems]
        else:
            problems.append(f"{'.'.join(loc) or '(record)'}: {e['msg']}")
    return problems


def load_measurement_file(relpath: str, root: Path) -> Measurement:
    """A record cited by a pool: ``stacks/measurements/<name>.json`` under the project ``root``, read by the hardened
    JSON loader and validated; raises :class:`MeasurementError` with one line."""
    try:
        doc = load_json_file(relpath, root, directory=MEASUREMENTS_DIR)
    except DocumentError as err:
        raise MeasurementError(str(err)) from None
    try:
        return Measurement.model_validate(doc, strict=False)
    except ValidationError as err:
        problems = validation_problems(err)
        raise MeasurementError(f"{relpath}: {len(problems)} problem(s): " + "; ".join(problems[:5])) from None
