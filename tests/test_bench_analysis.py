"""Bench analysis on synthetic requests: percentiles, goodput, throughput, the operating point, the sweep, and
the guidellm report parser (on a request exactly as guidellm 0.8.1 serialises it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.offline.bench.analysis import (
    AnalysisError,
    Quantiles,
    RatePoint,
    RequestObs,
    RunReport,
    Slo,
    operating_point,
    rate_point,
    read_guidellm_report,
)
from infra.offline.bench.runner import SweepConfig, sweep
from infra.offline.bench.scrape import GaugeSummary, ServerWindow, TokenItl, parse_samples, summarise
from infra.offline.bench.stats import nearest_rank, weighted_nearest_rank

SLO = Slo(ttft_ms=500, itl_ms=50)
T0 = 1_000_000.0  # an arbitrary unix time; only differences matter


def server(itl_p95: float = 20.0, observations: int = 1000) -> ServerWindow:
    """What /metrics said over a window: a short queue, a quarter of the KV cache, the token ITL p95 given."""
    return ServerWindow(
        GaugeSummary(0.5, 2.0, 18), GaugeSummary(0.25, 0.3, 18), TokenItl(Quantiles(10.0, itl_p95, 40.0), observations)
    )


SERVER = server()


def ok(
    arrival: float, ttft_ms: float, itl_ms: float | None, out: int = 11, prompt: int = 100, delay: float = 0.0
) -> RequestObs:
    """A successful request arriving at T0 + arrival whose tokens stream for (out - 1) * itl after the first."""
    start = T0 + arrival + delay
    first = start + ttft_ms / 1000
    last = first + (out - 1) * (itl_ms or 0) / 1000
    return RequestObs("successful", T0 + arrival, start, first, last, last, ttft_ms, itl_ms, prompt, out, delay)


def run(*requests: RequestObs, cls: str = "interactive", start: float = 0.0, end: float = 10.0) -> RunReport:
    return RunReport("mem", cls, 1.0, T0 + start, T0 + end, tuple(requests), (), "0.8.1")


# ---- percentiles ---------------------------------------------------------------------------------------------


def test_nearest_rank_by_hand():
    values = list(range(1, 21))  # 1..20
    assert nearest_rank(values, 0.95) == 19  # ceil(0.95 * 20) = 19th value
    assert nearest_rank(values, 0.50) == 10
    assert nearest_rank(values[:10], 0.95) == 10  # fewer than 20 samples: p95 is the maximum


def test_weighted_nearest_rank_weights_token_gaps():
    # A 90-gap request at 10 ms and a 10-gap request at 100 ms: 90 % of token gaps are 10 ms, so p50 = 10 but
    # p95 = 100 (the cumulative weight reaches 95 of 100 only at the second request).
    pairs = [(100.0, 10), (10.0, 90)]
    assert weighted_nearest_rank(pairs, 0.50) == 10.0
    assert weighted_nearest_rank(pairs, 0.90) == 10.0
    assert weighted_nearest_rank(pairs, 0.95) == 100.0


# ---- one rate ------------------------------------------------------------------------------------------------


def test_goodput_counts_requests_meeting_both_objectives():
    # 10 arrivals in [1 s, 10 s): 7 conform, 1 misses TTFT, 1 misses ITL, 1 errored -> goodput 7/10.
    reqs = [ok(1 + i, 100, 10) for i in range(7)]
    reqs += [ok(8.0, 900, 10), ok(8.5, 100, 80)]
    reqs.append(RequestObs("errored", T0 + 9, T0 + 9, None, None, T0 + 9.1, None, None, 100, None, 0.0))
    p = rate_point(1.0, [run(*reqs)], SLO, warmup_s=1.0)
    assert (p.arrivals, p.successful, p.errored) == (10, 9, 1)
    assert p.goodput_share == pytest.approx(0.7)
    assert p.error_rate == pytest.approx(0.1)
    # Goodput tokens: 7 conforming requests x 11 tokens over the 9 s window.
    assert p.goodput_output_tokens_per_s == pytest.approx(77 / 9)
    assert not p.meets_slo
    assert "goodput 70.0% < 95%" in p.failures


def test_cut_off_requests_count_only_once_they_breached_ttft():
    # Two arrivals still without a first token when the run stopped at T0 + 10: one had waited 3 s (> 500 ms:
    # a violation, and a TTFT lower bound), one 0.2 s (undetermined, excluded).
    late = RequestObs("incomplete", T0 + 7, T0 + 7, None, None, T0 + 10, None, None, 100, None, 0.0)
    fresh = RequestObs("incomplete", T0 + 9.8, T0 + 9.8, None, None, T0 + 10, None, None, 100, None, 0.0)
    p = rate_point(1.0, [run(ok(2, 100, 10), late, fresh)], SLO, warmup_s=1.0)
    assert (p.cut_off_late, p.cut_off_undetermined) == (1, 1)
    assert p.goodput_share == pytest.approx(1 / 2)
    assert p.ttft_ms is not None and p.ttft_ms.p95 == pytest.approx(3000.0)


def test_percentiles_and_throughput_of_a_passing_rate():
    # 20 arrivals 0.45 s apart from t = 1 s, TTFT 10..200 ms, ITL 20 ms, 11 output tokens, 100 prompt tokens.
    reqs = [ok(1 + 0.45 * i, 10.0 * (i + 1), 20.0) for i in range(20)]
    p = rate_point(2.0, [run(*reqs)], SLO, warmup_s=1.0, server=SERVER)
    assert p.ttft_ms == Quantiles(p50=100.0, p95=190.0, p99=200.0)
    assert p.request_itl_ms == Quantiles(p50=20.0, p95=20.0, p99=20.0)
    assert p.token_itl_ms == Quantiles(10.0, 20.0, 40.0) and p.token_itl_observations == 1000
    assert (p.queue_waiting, p.kv_cache_usage) == (SERVER.queue_waiting, SERVER.kv_cache_usage)
    assert p.meets_slo and p.goodput_share == 1.0
    # Every request's 11 tokens and 100 prompt tokens fall inside the 9 s window.
    assert p.output_tokens_per_s == pytest.approx(20 * 11 / 9)
    assert p.input_tokens_per_s == pytest.approx(20 * 100 / 9)
    assert p.achieved_rps == pytest.approx(20 / 9)


def test_the_itl_objective_is_judged_on_vllms_token_histogram_not_the_request_means():
    # Every request's mean gap is 80 ms (over the 50 ms objective): the per-request view fails, but the ITL the
    # alerts judge is vLLM's per-token histogram, whose p95 here is 45 ms: the rate meets the objective. Goodput
    # still judges each request on its own mean, so every request misses it.
    reqs = [ok(1 + 0.45 * i, 100.0, 80.0) for i in range(20)]
    p = rate_point(2.0, [run(*reqs)], SLO, warmup_s=1.0, server=server(itl_p95=45.0))
    assert p.request_itl_ms is not None and p.request_itl_ms.p95 == 80.0
    assert p.token_itl_ms is not None and p.token_itl_ms.p95 == 45.0
    assert p.failures == ("goodput 0.0% < 95%",)
    # The other way round: request means of 20 ms, a token p95 of 60 ms: the ITL objective fails.
    reqs = [ok(1 + 0.45 * i, 100.0, 20.0) for i in range(20)]
    p = rate_point(2.0, [run(*reqs)], SLO, warmup_s=1.0, server=server(itl_p95=60.0))
    assert p.failures == ("ITL p95 (vLLM per-token histogram) 60.0 ms > objective 50 ms",)


def test_without_the_servers_histogram_a_rate_cannot_meet_the_itl_objective():
    reqs = [ok(1 + 0.45 * i, 100.0, 20.0) for i in range(20)]
    p = rate_point(2.0, [run(*reqs)], SLO, warmup_s=1.0)
    assert p.failures == (
        "no inter-token latency in vLLM's histogram for the window (no token after a first one was generated)",
    )
    assert (p.queue_waiting, p.kv_cache_usage, p.token_itl_observations) == (None, None, 0)


def test_achieved_rate_and_the_tolerance_of_its_label():
    # 20 arrivals in the 9 s window at 2 req/s offered: 2.22 req/s achieved, 11 % over the label.
    reqs = [ok(1 + 0.45 * i, 10.0, 20.0) for i in range(20)]
    p = rate_point(2.0, [run(*reqs)], SLO, warmup_s=1.0, server=SERVER)
    assert p.achieved_rps == pytest.approx(20 / 9) and not p.arrivals_on_label
    # The same arrivals labelled 2.1 req/s: 20/9 / 2.1 = 1.058, within 10 %.
    assert rate_point(2.1, [run(*reqs)], SLO, warmup_s=1.0, server=SERVER).arrivals_on_label


def test_tokens_straddling_the_window_edge_count_pro_rata():
    # Tokens stream from 9.5 s to 10.5 s; the window ends at 10 s, so half of the 11 tokens count.
    r = ok(9.0, 500, 100, out=11)  # first token at 9.5 s, last at 9.5 + 10 * 0.1 = 10.5 s
    p = rate_point(1.0, [run(r)], SLO, warmup_s=1.0)
    assert p.output_tokens_per_s == pytest.approx(5.5 / 9)


def test_concurrent_class_runs_share_one_window():
    # interactive measured 0-10 s, batch 2-12 s: the common window after a 1 s warm-up is 3-10 s.
    a = run(ok(2.5, 100, 10), ok(4, 100, 10), cls="interactive", start=0, end=10)
    b = run(ok(5, 100, 10), ok(11, 100, 10), cls="batch", start=2, end=12)
    p = rate_point(1.0, [a, b], SLO, warmup_s=1.0)
    assert (p.window_start - T0, p.window_end - T0) == (3.0, 10.0)
    assert p.arrivals == 2  # 4 s and 5 s; 2.5 s is before the window, 11 s after it


def test_runs_that_never_overlap_are_an_error():
    with pytest.raises(AnalysisError, match="never measured together"):
        rate_point(1.0, [run(cls="a", start=0, end=5), run(cls="b", start=6, end=11)], SLO, warmup_s=0.5)


def test_a_lagging_load_generator_invalidates_the_rate():
    reqs = [ok(1 + i, 100, 10, delay=0.5) for i in range(5)]
    p = rate_point(1.0, [run(*reqs)], SLO, warmup_s=1.0, server=SERVER)
    assert p.failures == (
        "load generator fell behind: mean dispatch delay 0.500 s > 0.2 s (not the offered open loop)",
    )


def test_class_runs_that_barely_overlap_did_not_measure_the_rate():
    # interactive measured 0-10 s, batch 8.6-18.6 s: after the 1 s warm-up they share 9.6-10 s = 0.4 s, under half
    # of the 10 - 1 = 9 s each measured alone. The sliver's numbers (one arrival in 0.4 s = 2.5 req/s "achieved" at
    # 1 req/s offered) describe nothing.
    a = run(ok(9.7, 100, 10), cls="interactive", start=0, end=10)
    b = run(cls="batch", start=8.6, end=18.6)
    p = rate_point(1.0, [a, b], SLO, warmup_s=1.0, server=SERVER)
    assert p.window_seconds == pytest.approx(0.4) and p.window_too_short and not p.meets_slo
    assert p.failures == (
        "not measured: the class runs measured together for 0.4 s, under 50% of the 9.0 s each "
        "measured after warm-up (they started too far apart); use a longer --duration-seconds or "
        "an idle load generator",
    )
    # 4.5 s of 9 s is enough: batch starting at 4.5 s leaves 5.5-10 s.
    assert not rate_point(1.0, [a, run(cls="batch", start=4.5, end=14.5)], SLO, warmup_s=1.0).window_too_short


def test_an_unmeasured_rate_ends_the_sweep_without_calling_it_the_knee():
    import dataclasses

    sliver = dataclasses.replace(point(4, 10), failures=("not measured: ...",), window_too_short=True)
    found, _ = operating_point([point(1, 100), point(2, 200), sliver])
    assert found is not None and (found.point.offered_rps, found.limit) == (2, "sweep_end")


# ---- operating point -----------------------------------------------------------------------------------------


def point(
    rate: float,
    ttft_p95: float,
    itl_p95: float = 10.0,
    goodput: float = 1.0,
    tps: float = 0.0,
    achieved: float | None = None,
) -> RatePoint:
    """A point over a 100 s window with ``achieved x 100`` arrivals (default: the offered rate)."""
    failures = []
    if ttft_p95 > SLO.ttft_ms:
        failures.append("ttft")
    if itl_p95 > SLO.itl_ms:
        failures.append("itl")
    if goodput < SLO.min_goodput_share:
        failures.append("goodput")
    q = lambda v: Quantiles(v / 2, v, v)  # noqa: E731
    n = round(100 * (rate if achieved is None else achieved))
    return RatePoint(
        offered_rps=rate,
        window_start=T0,
        window_end=T0 + 100,
        arrivals=n,
        successful=n,
        errored=0,
        cut_off_late=0,
        cut_off_undetermined=0,
        ttft_ms=q(ttft_p95),
        request_itl_ms=q(itl_p95),
        token_itl_ms=q(itl_p95),
        output_tokens_per_s=tps or 10 * rate,
        input_tokens_per_s=5 * rate,
        error_rate=0.0,
        goodput_share=goodput,
        goodput_output_tokens_per_s=tps,
        dispatch_delay_mean_s=0.0,
        dispatch_delay_p95_s=0.0,
        queue_waiting=None,
        kv_cache_usage=None,
        failures=tuple(failures),
    )


def test_operating_point_is_the_last_rate_before_the_first_failure():
    curve = [point(1, 100), point(2, 200), point(4, 450), point(8, 900), point(16, 2000)]
    found, reason = operating_point(curve)
    assert reason is None and found is not None
    assert (found.point.offered_rps, found.limit) == (4, "slo")


def test_a_pass_above_a_failure_is_not_capacity():
    # 8 req/s passes again after 4 failed: noise, not capacity. The operating point stays at 2.
    found, _ = operating_point([point(1, 100), point(2, 200), point(4, 600), point(8, 400)])
    assert found is not None and found.point.offered_rps == 2


def test_goodput_alone_can_fail_a_rate():
    found, _ = operating_point([point(1, 100), point(2, 200, goodput=0.94)])
    assert found is not None and found.point.offered_rps == 1


def test_no_rate_meeting_the_slo_means_no_operating_point():
    found, reason = operating_point([point(2, 800), point(1, 600)])
    assert found is None
    assert reason == "no offered rate met the SLO: the lowest, 1 req/s (1 achieved), failed (ttft)"


def test_rates_are_judged_in_the_order_of_their_achieved_load():
    # Two bisection steps 12 % apart: 4.0 offered achieved 4.36, 4.5 offered achieved 4.10 (both within 10 % of
    # their labels). The 4.5 point failed, and it was measured at the lower load: so 4.0's pass above a failure is
    # not capacity, and the operating point is 2.
    curve = [point(1, 100), point(2, 200), point(4, 300, achieved=4.36), point(4.5, 900, achieved=4.10)]
    found, _ = operating_point(curve)
    assert found is not None and found.point.offered_rps == 2


def test_every_rate_passing_is_a_lower_bound():
    found, _ = operating_point([point(1, 100), point(2, 200)])
    assert found is not None and (found.point.offered_rps, found.limit) == (2, "sweep_end")


# ---- sweep ---------------------------------------------------------------------------------------------------

CFG = SweepConfig(rates=None, start_rps=1, growth=2, max_rates=10, refine_steps=2, duration_s=10, warmup_fraction=0.1)


def fake_server(knee: float):
    """A server meeting the SLO below ``knee`` req/s; goodput collapses at twice the knee."""
    measured: list[float] = []

    def measure(rate: float, index: int):
        measured.append(rate)
        goodput = 1.0 if rate <= knee else (0.8 if rate < 2 * knee else 0.3)
        return point(rate, 100 if rate <= knee else 900, goodput=goodput), ()

    return measure, measured


def test_auto_sweep_doubles_until_collapse_then_bisects_the_knee():
    measure, measured = fake_server(knee=5.0)
    result = sweep(measure, CFG)
    # 1, 2, 4 pass; 8 fails (goodput 0.8); 16 collapses (0.3) -> stop. Bisect 4..8: sqrt(32) = 5.66 fails,
    # then sqrt(4 * 5.66) = 4.76 passes.
    assert measured == pytest.approx([1, 2, 4, 8, 16, 32**0.5, (4 * 32**0.5) ** 0.5])
    found, _ = operating_point(result.points)
    assert found is not None and found.point.offered_rps == pytest.approx(4.757, abs=1e-3)


def test_auto_sweep_stops_after_two_failures_past_the_knee():
    measured: list[float] = []

    def measure(rate: float, index: int):  # fails ITL beyond 2 req/s but goodput never collapses
        measured.append(rate)
        return point(rate, 100, itl_p95=10 if rate <= 2 else 90, goodput=1.0 if rate <= 2 else 0.9), ()

    sweep(measure, SweepConfig(**{**CFG.__dict__, "refine_steps": 0}))
    assert measured == [1, 2, 4, 8]


def test_explicit_rates_are_measured_in_ascending_order():
    measure, measured = fake_server(knee=100)
    sweep(measure, SweepConfig(**{**CFG.__dict__, "rates": (4.0, 1.0, 2.0)}))
    assert measured == [1.0, 2.0, 4.0]


# ---- /metrics ------------------------------------------------------------------------------------------------

METRICS = """\
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="tiny"} 3.0
vllm:num_requests_waiting{engine="1",model_name="tiny"} 2.0
vllm:num_requests_waiting{engine="0",model_name="other"} 7.0
vllm:kv_cache_usage_perc{engine="0",model_name="tiny"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="tiny"} 0.5
vllm:num_requests_waiting_by_reason{engine="0",model_name="tiny",reason="capacity"} 9.0
"""


def test_parse_samples_filters_name_and_model():
    assert parse_samples(METRICS, "vllm:num_requests_waiting", "tiny") == [3.0, 2.0]
    assert parse_samples(METRICS, "vllm:kv_cache_usage_perc", "tiny") == [0.25, 0.5]
    assert parse_samples(METRICS, "vllm:kv_cache_usage_perc", "other") == []
    assert summarise([1.0, 3.0]) == GaugeSummary(mean=2.0, max=3.0, samples=2)
    assert summarise([]) is None


# ---- guidellm's report format --------------------------------------------------------------------------------

#: One successful and one cancelled request copied from a guidellm 0.8.1 report of a run against the CPU tiny
#: model (fields the bench does not read removed).
REAL_SUCCESSFUL = {
    "time_to_first_token_ms": 21.712064743041992,
    "inter_token_latency_ms": 2.853878613176017,
    "prompt_tokens": 2,
    "output_tokens": 30,
    "request_dispatch_delay": 0.060433149337768555,
    "info": {
        "status": "completed",
        "timings": {
            "targeted_start": 1796114151.9148622,
            "request_start": 1796114151.9752953,
            "first_token_iteration": 1796114151.9970074,
            "last_token_iteration": 1796114152.0797698,
            "request_end": 1796114152.081366,
            "resolve_end": 1796114152.0814812,
        },
    },
}
REAL_CANCELLED = {
    "time_to_first_token_ms": None,
    "inter_token_latency_ms": None,
    "prompt_tokens": 22,
    "output_tokens": None,
    "request_dispatch_delay": 0.006579160690307617,
    "info": {
        "status": "cancelled",
        "timings": {
            "targeted_start": 1796114165.2786753,
            "request_start": 1796114165.2852545,
            "first_token_iteration": None,
            "last_token_iteration": None,
            "request_end": None,
            "resolve_end": 1796114165.287476,
        },
    },
}


def report_doc(**over) -> dict:
    doc = {
        "metadata": {"version": 2, "guidellm_version": "0.8.1"},
        "benchmarks": [
            {
                "config": {"strategy": {"type_": "poisson", "rate": 2.0}},
                "scheduler_metrics": {"measure_start_time": 1796114150.8218143, "measure_end_time": 1796114160.8218143},
                "requests": {
                    "successful": [REAL_SUCCESSFUL],
                    "errored": [],
                    "incomplete": [REAL_CANCELLED],
                    "total": None,
                },
                "warnings": [{"message": "p95 root dispatch delay was 0.222s"}],
            }
        ],
    }
    doc.update(over)
    return doc


def test_read_guidellm_report(tmp_path: Path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report_doc()))
    r = read_guidellm_report(path, "batch")
    assert (r.priority_class, r.rate_rps, r.guidellm_version) == ("batch", 2.0, "0.8.1")
    assert [q.status for q in r.requests] == ["successful", "incomplete"]
    s = r.requests[0]
    assert (s.ttft_ms, s.itl_ms, s.prompt_tokens, s.output_tokens) == (21.712064743041992, 2.853878613176017, 2, 30)
    assert s.end == 1796114152.081366
    assert r.requests[1].end == 1796114165.287476  # no request_end: the cancellation (resolve_end)
    assert r.warnings == ("p95 root dispatch delay was 0.222s",)


@pytest.mark.parametrize(
    "over, message",
    [
        ({"metadata": {"version": 3}}, "guidellm report schema version 3, this bench reads 2"),
        ({"benchmarks": []}, "expected one benchmark per run, found 0"),
        (
            {"benchmarks": [{"config": {"strategy": {"type_": "constant", "rate": 1}}}]},
            "strategy 'constant', expected 'poisson'",
        ),
        (
            {"benchmarks": [{"config": {"strategy": {"type_": "poisson", "rate": 1}}}]},
            "not a guidellm 2 report (missing 'scheduler_metrics')",
        ),
    ],
)
def test_read_guidellm_report_rejects(tmp_path: Path, over, message):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report_doc(**over)))
    with pytest.raises(AnalysisError) as err:
        read_guidellm_report(path, "batch")
    assert str(err.value) == f"{path}: {message}"


def test_a_completion_without_a_text_chunk_is_judged_on_its_latency():
    # guidellm reports no TTFT for a completion whose only token decodes to empty text; the request's 44 ms
    # latency bounds its TTFT from above, so it conforms (and enters the TTFT percentiles as 44 ms).
    empty = RequestObs("successful", T0 + 2, T0 + 2, None, None, T0 + 2.044, None, None, 45, 1, 0.0)
    p = rate_point(1.0, [run(empty)], SLO, warmup_s=1.0, server=SERVER)
    assert p.goodput_share == 1.0
    assert p.ttft_ms is not None and p.ttft_ms.p95 == pytest.approx(44.0)
