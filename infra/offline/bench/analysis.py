"""From guidellm's JSON to one curve point per offered rate, and from the curve to the operating point.

Inputs are guidellm 0.8.1 report files (``GenerativeBenchmarksReport``, report schema ``metadata.version == 2``):
one file per guidellm run, one benchmark per file, every request kept with its timings
(``requests.successful / errored / incomplete``, each a ``GenerativeRequestStats`` whose computed fields
``time_to_first_token_ms``, ``inter_token_latency_ms``, ``prompt_tokens``, ``output_tokens`` and
``request_dispatch_delay`` are serialised, and ``info.timings`` carries the raw timestamps). Nothing is
re-measured here: the per-request numbers are guidellm's, and only their aggregation across the concurrent runs
of one rate (one run per priority class) is done here, because percentiles of a merged population cannot be
computed from per-run percentiles.

Definitions (per offered rate)
------------------------------
- Window: from the latest measurement start of the rate's runs plus the warm-up, to the earliest measurement
  end: the interval in which every class stream was sending, after the empty-system start of an open loop.
- Arrivals: requests whose scheduled (Poisson) arrival time falls in the window.
- TTFT: guidellm's time to first token of successful arrivals (the request latency, an upper bound, for a
  completion whose text guidellm saw no first chunk of), plus, as a lower bound, the wait of arrivals cut
  off at the end of the run after already waiting longer than the TTFT objective without a first token (a
  saturated queue would otherwise disappear from the percentiles). Percentiles by nearest rank (``stats``).
- Token ITL (``token_itl_ms``, the ITL the SLO is judged on): vLLM's own per-token histogram
  ``vllm:inter_token_latency_seconds`` over the window, ``histogram_quantile`` of the increase of its buckets
  (scrape.py): every gap between two tokens of a request, as the engine timed it — the same series and the same
  quantile the alerts and dashboards use (components/monitoring/metrics.py ``ITL``), so a rate that meets the
  objective here is one the ``ItlP95OverObjective`` alert would not fire on.
- Request ITL (``request_itl_ms``, reported beside it): each successful request's *mean* inter-token latency as
  guidellm times it at the client, weighted by its number of inter-token gaps (output tokens - 1). A request's
  mean hides its slow gaps (a stall behind another request's prefill is averaged over the request), so its p95 is
  not the token p95: on the CPU tiny model (the docs' record, tests/fixtures/bench/, measured on 2 loaded cores)
  47 / 9 / 88 ms request p95 against 59 / 10 / 111 ms token p95 at 1 / 2 / 4 req/s; the run issue 27 reported had
  90 / 52 / 27 ms against ~39 ms. Goodput still judges each request on its own mean: it is the only per-request ITL there is.
- Goodput: share of *determined* arrivals that met both objectives (TTFT <= objective and ITL <= objective; a
  one-token completion has no ITL and is judged on TTFT). Determined = successful + errored (an error met no
  objective) + cut-off arrivals already past the TTFT objective. Arrivals cut off by the end of the run before
  they could breach anything are undetermined and excluded, as guidellm excludes them. Goodput tokens/s = output
  tokens of the conforming arrivals divided by the window length.
- Throughput: output tokens produced inside the window per second (each request's tokens spread evenly between
  its first and last token, the approximation guidellm's own token-rate distribution makes), and prompt tokens
  per second counted when their prefill finished (the first token).
- Error rate: errored / (successful + errored) arrivals.
- Achieved rate: arrivals / window length, the load the point was measured at. The offered rate is the label the
  sweep asked for; the point is judged and plotted at the achieved rate, and a record refuses any point whose
  achieved rate is more than ARRIVAL_TOLERANCE from its label (infra/config/bench.py; the runner measures such a
  rate again with fresh seeds).

Operating point
---------------
The highest achieved rate at which p95 TTFT <= the TTFT objective, token p95 ITL <= the ITL objective and goodput
>= 95 % — and every lower rate met them too: a pass above a failing rate is noise, not capacity. θ_o and θ_i are that
rate's output and prompt tokens per second. No rate meeting the SLO means no operating point, never an
extrapolated one.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ...config.bench import ARRIVAL_TOLERANCE
from ...config.measurement import MIN_GOODPUT_SHARE as CONTRACT_MIN_GOODPUT_SHARE
from .scrape import GaugeSummary, ServerWindow
from .stats import Quantiles, nearest_rank, weighted_nearest_rank

__all__ = [
    "AnalysisError",
    "OperatingPoint",
    "Quantiles",
    "RatePoint",
    "RequestObs",
    "RunReport",
    "Slo",
    "measurement_window",
    "operating_point",
    "rate_point",
    "read_guidellm_report",
]

#: guidellm report schema this parser reads (``GenerativeBenchmarkMetadata.version`` in guidellm 0.8.1).
GUIDELLM_REPORT_VERSION = 2
#: Goodput the SLO requires: the design's "goodput >= 95 %" (the p95 objectives allow 5 % of requests over).
MIN_GOODPUT_SHARE = CONTRACT_MIN_GOODPUT_SHARE
#: A rate whose mean dispatch delay (scheduled arrival -> request sent) exceeds this was not the offered open loop:
#: the load generator fell behind. 0.2 s is guidellm's own threshold for its late-dispatch warning. The mean, not
#: a tail percentile: TTFT is timed from the send, so an occasional late send (a CPU hiccup of the client,
#: measured up to 0.8 s on 2 shared cores) only jitters one arrival, while a generator that cannot keep up lags
#: more and more and moves the mean.
MAX_DISPATCH_DELAY_MEAN_S = 0.2
#: Shortest measurement window a rate counts as measured with, as a share of what each run measured after the
#: warm-up: the class runs of one rate start as separate processes, and when they start far apart their common
#: window is a sliver. Half keeps the documented --quick window (>= 4 s of the 9 s after warm-up); measured below
#: it on 2 loaded cores: a 0.37 s window of 5 arrivals at 4 req/s gave θ_o 405 tokens/s against 54 at 2 req/s.
MIN_WINDOW_SHARE = 0.5

#: Distinct error messages kept per rate: enough to tell one failure mode from several, short enough to read.
MAX_ERROR_EXAMPLES = 3
#: Characters kept of each error message (guidellm's messages include a repr of the request columns).
ERROR_EXAMPLE_CHARS = 300

Status = Literal["successful", "errored", "incomplete"]


class AnalysisError(ValueError):
    """A guidellm report this module cannot read, or runs that cannot form a curve point."""


@dataclass(frozen=True)
class RequestObs:
    """The fields of one guidellm ``GenerativeRequestStats`` the analysis uses."""

    status: Status
    arrival: float | None  # scheduled (targeted) start, unix s
    start: float | None  # request sent, unix s
    first_token: float | None
    last_token: float | None
    end: float | None
    ttft_ms: float | None
    itl_ms: float | None
    prompt_tokens: int | None
    output_tokens: int | None
    dispatch_delay_s: float | None
    error: str | None = None


@dataclass(frozen=True)
class RunReport:
    """One guidellm run: one priority class at one offered rate."""

    path: str
    priority_class: str
    rate_rps: float
    measure_start: float
    measure_end: float
    requests: tuple[RequestObs, ...]
    warnings: tuple[str, ...]
    guidellm_version: str
    #: The seed of this run's scenario (its Poisson schedule and its synthetic prompts); set by the runner.
    seed: int | None = None
    #: guidellm's ``max_duration`` of this run, s; set by the runner.
    duration_s: float | None = None


def _obs(raw: dict[str, Any], status: Status) -> RequestObs:
    t = raw["info"]["timings"]
    return RequestObs(
        status=status,
        arrival=t.get("targeted_start"),
        start=t.get("request_start"),
        first_token=t.get("first_token_iteration"),
        last_token=t.get("last_token_iteration"),
        end=t.get("request_end") if t.get("request_end") is not None else t.get("resolve_end"),
        ttft_ms=raw.get("time_to_first_token_ms"),
        itl_ms=raw.get("inter_token_latency_ms"),
        prompt_tokens=raw.get("prompt_tokens"),
        output_tokens=raw.get("output_tokens"),
        dispatch_delay_s=raw.get("request_dispatch_delay"),
        error=raw["info"].get("error"),
    )


def read_guidellm_report(path: Path, priority_class: str) -> RunReport:
    """Parse one guidellm report file written by one ``guidellm run`` with a single poisson rate."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AnalysisError(f"{path}: guidellm wrote no report") from None
    except json.JSONDecodeError as err:
        raise AnalysisError(f"{path}: not JSON ({err})") from None
    try:
        version = doc["metadata"]["version"]
        if version != GUIDELLM_REPORT_VERSION:
            raise AnalysisError(
                f"{path}: guidellm report schema version {version}, this bench reads {GUIDELLM_REPORT_VERSION}"
            )
        benchmarks = doc["benchmarks"]
        if len(benchmarks) != 1:
            raise AnalysisError(f"{path}: expected one benchmark per run, found {len(benchmarks)}")
        bench = benchmarks[0]
        strategy = bench["config"]["strategy"]
        if strategy.get("type_") != "poisson":
            raise AnalysisError(f"{path}: strategy {strategy.get('type_')!r}, expected 'poisson'")
        sm = bench["scheduler_metrics"]
        requests = tuple(
            _obs(r, status)
            for status in ("successful", "errored", "incomplete")
            for r in (bench["requests"].get(status) or ())
        )
        return RunReport(
            path=str(path),
            priority_class=priority_class,
            rate_rps=float(strategy["rate"]),
            measure_start=float(sm["measure_start_time"]),
            measure_end=float(sm["measure_end_time"]),
            requests=requests,
            warnings=tuple(str(w.get("message", w)) for w in bench.get("warnings") or ()),
            guidellm_version=str(doc["metadata"].get("guidellm_version", "unknown")),
        )
    except (KeyError, TypeError) as err:
        raise AnalysisError(f"{path}: not a guidellm {GUIDELLM_REPORT_VERSION} report (missing {err})") from None


@dataclass(frozen=True)
class Slo:
    ttft_ms: float
    itl_ms: float
    min_goodput_share: float = MIN_GOODPUT_SHARE


@dataclass(frozen=True)
class RatePoint:
    """Everything measured at one offered rate (see the module docstring for each definition)."""

    offered_rps: float
    window_start: float
    window_end: float
    arrivals: int
    successful: int
    errored: int
    cut_off_late: int
    cut_off_undetermined: int
    ttft_ms: Quantiles | None
    request_itl_ms: Quantiles | None
    token_itl_ms: Quantiles | None
    output_tokens_per_s: float
    input_tokens_per_s: float
    error_rate: float | None
    goodput_share: float | None
    goodput_output_tokens_per_s: float
    dispatch_delay_mean_s: float | None
    dispatch_delay_p95_s: float | None
    queue_waiting: GaugeSummary | None
    kv_cache_usage: GaugeSummary | None
    failures: tuple[str, ...]
    #: The runs shared too short a window (``MIN_WINDOW_SHARE``): the rate was not measured, whatever it shows.
    window_too_short: bool = False
    #: Up to MAX_ERROR_EXAMPLES distinct error messages of errored arrivals, so a record says what failed.
    error_examples: tuple[str, ...] = ()
    #: Token gaps vLLM's ITL histogram observed in the window.
    token_itl_observations: int = 0
    #: Seconds excluded at the start of the window.
    warmup_s: float = 0.0
    #: The class runs: (class, seed, class rate req/s, duration s).
    runs: tuple[tuple[str, int | None, float, float | None], ...] = ()
    #: Earlier measurements of this rate whose achieved rate missed the tolerance: (achieved req/s, window s, seeds).
    rejected: tuple[tuple[float, float, tuple[int | None, ...]], ...] = ()
    prompt_tokens_sent: tuple[int, ...] = field(repr=False, default=())
    output_tokens_sent: tuple[int, ...] = field(repr=False, default=())

    @property
    def window_seconds(self) -> float:
        return self.window_end - self.window_start

    @property
    def achieved_rps(self) -> float:
        return self.arrivals / self.window_seconds

    @property
    def arrivals_on_label(self) -> bool:
        """Whether the achieved rate is within ARRIVAL_TOLERANCE of the offered rate (the point's label)."""
        return achieved_on_label(self.achieved_rps, self.offered_rps)

    @property
    def meets_slo(self) -> bool:
        return not self.failures


def _tokens_in_window(r: RequestObs, start: float, end: float) -> float:
    """Output tokens of ``r`` produced in [start, end], spread evenly over its first..last token interval."""
    n = r.output_tokens or 0
    # A completion guidellm saw no text chunk of (see _successful_ttft_ms) produced its tokens by its end.
    first = r.first_token if r.first_token is not None else (r.end if r.status == "successful" else None)
    if n <= 0 or first is None:
        return 0.0
    last = r.last_token if r.last_token is not None else first
    if last <= first:
        return float(n) if start <= first <= end else 0.0
    overlap = max(0.0, min(end, last) - max(start, first))
    return n * overlap / (last - first)


def _quantiles(values: Sequence[float]) -> Quantiles | None:
    return Quantiles(*(nearest_rank(values, q) for q in (0.50, 0.95, 0.99))) if values else None


def _weighted_quantiles(pairs: Sequence[tuple[float, float]]) -> Quantiles | None:
    if not any(w > 0 for _, w in pairs):
        return None
    return Quantiles(*(weighted_nearest_rank(pairs, q) for q in (0.50, 0.95, 0.99)))


def achieved_on_label(achieved_rps: float, offered_rps: float) -> bool:
    """|achieved / offered - 1| <= ARRIVAL_TOLERANCE (with a hair of float slack at the boundary)."""
    return abs(achieved_rps / offered_rps - 1) <= ARRIVAL_TOLERANCE + 1e-12


def rate_point(
    offered_rps: float,
    runs: Sequence[RunReport],
    slo: Slo,
    warmup_s: float,
    server: ServerWindow | None = None,
) -> RatePoint:
    """Aggregate the concurrent runs of one offered rate (one per priority class) into one curve point.

    ``server`` is what the server's /metrics said over this point's window (queue, KV usage, the token ITL
    histogram); use ``measurement_window`` to get that window first. Without it the point has no token ITL and
    cannot meet the SLO.
    """
    w0, w1 = measurement_window(runs, warmup_s)
    ttft: list[float] = []
    itl: list[tuple[float, float]] = []
    dispatch: list[float] = []
    arrivals = successful = errored = late = undetermined = conforming = 0
    goodput_tokens = 0.0
    prompt_sent: list[int] = []
    output_sent: list[int] = []
    errors: list[str] = []
    output_tokens = input_tokens = 0.0
    for run in runs:
        for r in run.requests:
            output_tokens += _tokens_in_window(r, w0, w1)
            if r.first_token is not None and w0 <= r.first_token <= w1 and r.prompt_tokens:
                input_tokens += r.prompt_tokens
            arrival = r.arrival if r.arrival is not None else r.start
            if arrival is None or not (w0 <= arrival < w1):
                continue
            arrivals += 1
            if r.dispatch_delay_s is not None:
                # guidellm may send a request a few microseconds before its target; that is no lag, not negative lag.
                dispatch.append(max(0.0, r.dispatch_delay_s))
            if r.status == "successful":
                successful += 1
                ttft_ms = _successful_ttft_ms(r)
                if ttft_ms is not None:
                    ttft.append(ttft_ms)
                if r.itl_ms is not None and (r.output_tokens or 0) > 1:
                    itl.append((r.itl_ms, (r.output_tokens or 1) - 1))
                if r.prompt_tokens is not None:
                    prompt_sent.append(r.prompt_tokens)
                if r.output_tokens is not None:
                    output_sent.append(r.output_tokens)
                ok_ttft = ttft_ms is not None and ttft_ms <= slo.ttft_ms
                ok_itl = r.itl_ms is None or r.itl_ms <= slo.itl_ms
                if ok_ttft and ok_itl:
                    conforming += 1
                    goodput_tokens += r.output_tokens or 0
            elif r.status == "errored":
                errored += 1
                message = (r.error or "no error message")[:ERROR_EXAMPLE_CHARS]
                if message not in errors and len(errors) < MAX_ERROR_EXAMPLES:
                    errors.append(message)
            else:
                waited_ms = _cut_off_wait_ms(r)
                if waited_ms is not None and waited_ms > slo.ttft_ms:
                    late += 1
                    ttft.append(waited_ms)
                else:
                    undetermined += 1
    seconds = w1 - w0
    determined = successful + errored + late
    ttft_q = _quantiles(ttft)
    itl_q = _weighted_quantiles(itl)
    token_itl = server.token_itl.quantiles_ms if server is not None else None
    goodput = conforming / determined if determined else None
    error_rate = errored / (successful + errored) if successful + errored else None
    dispatch_p95 = nearest_rank(dispatch, 0.95) if dispatch else None
    dispatch_mean = sum(dispatch) / len(dispatch) if dispatch else None
    failures: list[str] = []
    if ttft_q is None:
        failures.append("no request arrived and finished in the measurement window")
    elif ttft_q.p95 > slo.ttft_ms:
        failures.append(f"TTFT p95 {ttft_q.p95:.0f} ms > objective {slo.ttft_ms:.0f} ms")
    if token_itl is None:
        failures.append(
            "no inter-token latency in vLLM's histogram for the window (no token after a first one was generated)"
        )
    elif token_itl.p95 > slo.itl_ms:
        failures.append(f"ITL p95 (vLLM per-token histogram) {token_itl.p95:.1f} ms > objective {slo.itl_ms:.0f} ms")
    if goodput is not None and goodput < slo.min_goodput_share:
        failures.append(f"goodput {goodput:.1%} < {slo.min_goodput_share:.0%}")
    if dispatch_mean is not None and dispatch_mean > MAX_DISPATCH_DELAY_MEAN_S:
        failures.append(
            f"load generator fell behind: mean dispatch delay {dispatch_mean:.3f} s > "
            f"{MAX_DISPATCH_DELAY_MEAN_S} s (not the offered open loop)"
        )
    planned = min(r.measure_end - r.measure_start for r in runs) - warmup_s
    short = seconds < MIN_WINDOW_SHARE * planned
    if short:
        failures.append(
            f"not measured: the class runs measured together for {seconds:.1f} s, under "
            f"{MIN_WINDOW_SHARE:.0%} of the {planned:.1f} s each measured after warm-up (they started too "
            "far apart); use a longer --duration-seconds or an idle load generator"
        )
    return RatePoint(
        offered_rps=offered_rps,
        window_start=w0,
        window_end=w1,
        arrivals=arrivals,
        successful=successful,
        errored=errored,
        cut_off_late=late,
        cut_off_undetermined=undetermined,
        ttft_ms=ttft_q,
        request_itl_ms=itl_q,
        token_itl_ms=token_itl,
        output_tokens_per_s=output_tokens / seconds,
        input_tokens_per_s=input_tokens / seconds,
        error_rate=error_rate,
        goodput_share=goodput,
        goodput_output_tokens_per_s=goodput_tokens / seconds,
        dispatch_delay_mean_s=dispatch_mean,
        dispatch_delay_p95_s=dispatch_p95,
        queue_waiting=server.queue_waiting if server is not None else None,
        kv_cache_usage=server.kv_cache_usage if server is not None else None,
        failures=tuple(failures),
        window_too_short=short,
        error_examples=tuple(errors),
        token_itl_observations=server.token_itl.observations if server is not None else 0,
        warmup_s=warmup_s,
        runs=tuple((r.priority_class, r.seed, r.rate_rps, r.duration_s) for r in runs),
        prompt_tokens_sent=tuple(prompt_sent),
        output_tokens_sent=tuple(output_sent),
    )


def _successful_ttft_ms(r: RequestObs) -> float | None:
    """guidellm's TTFT, or for a completed request it has none for, the request's latency as an upper bound.

    guidellm times the first token at the first streamed chunk with text; a completion whose tokens all decode
    to empty text (a special token, or the tiny test model's noise) has no such chunk, so guidellm reports no
    TTFT although the request succeeded (measured: a 1-token completion, 44 ms end to end). Its first token
    arrived by the end of the request at the latest, so the latency bounds the TTFT from above: conservative for
    the SLO check, and it keeps the request in the population instead of silently dropping it.
    """
    if r.ttft_ms is not None:
        return r.ttft_ms
    if r.start is None or r.end is None:
        return None
    return 1000.0 * (r.end - r.start)


def _cut_off_wait_ms(r: RequestObs) -> float | None:
    """How long a request cut off at the end of a run had waited for its first token (None if unknown)."""
    if r.first_token is not None:
        return r.ttft_ms
    begin = r.start if r.start is not None else r.arrival
    if begin is None or r.end is None:
        return None
    return 1000.0 * (r.end - begin)


def measurement_window(runs: Sequence[RunReport], warmup_s: float) -> tuple[float, float]:
    """The interval in which every run of one rate was measuring, after ``warmup_s``."""
    if not runs:
        raise AnalysisError("no guidellm runs for this rate")
    w0 = max(r.measure_start for r in runs) + warmup_s
    w1 = min(r.measure_end for r in runs)
    if not (math.isfinite(w0) and math.isfinite(w1)) or w1 - w0 <= 0:
        spans = ", ".join(f"{r.priority_class} {r.measure_start:.1f}-{r.measure_end:.1f}" for r in runs)
        raise AnalysisError(
            f"the runs at {runs[0].rate_rps:g} req/s per class never measured together after "
            f"a {warmup_s:g} s warm-up ({spans}); use a longer --duration-seconds"
        )
    return w0, w1


@dataclass(frozen=True)
class OperatingPoint:
    point: RatePoint
    #: "slo": a higher measured rate failed the SLO, so this is the knee; "sweep_end": no higher rate was
    #: measured (or the next one was not measured: window too short), so θ here is a lower bound of the replica's
    #: capacity at the SLO.
    limit: Literal["slo", "sweep_end"]


def operating_point(points: Sequence[RatePoint]) -> tuple[OperatingPoint | None, str | None]:
    """(operating point, None) or (None, the reason there is none); rates ordered by the load they were measured at
    (achieved), which can differ from the offered order only between bisection steps closer than the tolerance."""
    if not points:
        return None, "no rate was measured"
    ordered = sorted(points, key=lambda p: (p.achieved_rps, p.offered_rps))
    best: RatePoint | None = None
    for p in ordered:
        if not p.meets_slo:
            if best is None:
                return None, (
                    f"no offered rate met the SLO: the lowest, {p.offered_rps:g} req/s ({p.achieved_rps:.3g} "
                    f"achieved), failed ({'; '.join(p.failures)})"
                )
            return OperatingPoint(best, "sweep_end" if p.window_too_short else "slo"), None
        best = p
    assert best is not None
    return OperatingPoint(best, "sweep_end"), None
