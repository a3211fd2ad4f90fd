"""The bench's view of the server's /metrics: the label vLLM really uses, a loud failure when nothing matches, the
gauges of a window, and vLLM's per-token ITL histogram read with PromQL's own quantile rule (by hand here; against
real Prometheus in tests/integration/test_bench_real.py)."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from infra.offline.bench.scrape import (
    GaugeSummary,
    MetricsScraper,
    Sample,
    ScrapeError,
    histogram_quantile,
    itl_between,
    parse_buckets,
    window_of,
)
from infra.offline.bench.stats import Quantiles
from infra.offline.bench.target import TargetError, metrics_model_name

RELEASE = "qwen3-8b-fp8-2026-11-02.1"

#: What vLLM 0.32 serves for a server started with ``--served-model-name <release> qwen3-8b`` (two engines: data
#: parallel), trimmed to the series the bench reads: every series is labelled with the *first* served name.
METRICS = f"""\
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="{RELEASE}"}} 3.0
vllm:num_requests_waiting{{engine="1",model_name="{RELEASE}"}} 2.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="{RELEASE}"}} 0.25
vllm:kv_cache_usage_perc{{engine="1",model_name="{RELEASE}"}} 0.5
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{{engine="0",le="0.01",model_name="{RELEASE}"}} 4.0
vllm:inter_token_latency_seconds_bucket{{engine="0",le="0.025",model_name="{RELEASE}"}} 30.0
vllm:inter_token_latency_seconds_bucket{{engine="0",le="+Inf",model_name="{RELEASE}"}} 50.0
vllm:inter_token_latency_seconds_bucket{{engine="1",le="0.01",model_name="{RELEASE}"}} 6.0
vllm:inter_token_latency_seconds_bucket{{engine="1",le="0.025",model_name="{RELEASE}"}} 30.0
vllm:inter_token_latency_seconds_bucket{{engine="1",le="+Inf",model_name="{RELEASE}"}} 50.0
vllm:inter_token_latency_seconds_count{{engine="0",model_name="{RELEASE}"}} 50.0
"""


# ---- the label -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, label",
    [
        # The renderer's form: the release id first, the public name second. vLLM labels with the first.
        (("--model", "/w/m", "--served-model-name", RELEASE, "qwen3-8b", "--port", "8000"), RELEASE),
        (("--model", "/w/m", "--served-model-name=qwen3-8b"), "qwen3-8b"),
        # argparse keeps the last occurrence of a flag.
        (("--served-model-name", "a", "--model", "/w/m", "--served-model-name", "b", "c"), "b"),
        # No served name: vLLM falls back to the model (ModelConfig.served_model_name = model).
        (("--model", "/w/m", "--port", "8000"), "/w/m"),
        (("/w/m", "--port", "8000"), "/w/m"),
    ],
)
def test_the_metrics_label_is_the_first_served_name(args, label):
    assert metrics_model_name(args) == label


def test_arguments_naming_no_model_have_no_label():
    with pytest.raises(TargetError, match="no --served-model-name and no --model"):
        metrics_model_name(("--port", "8000"))


def test_a_bench_target_scrapes_the_release_id_while_requests_carry_the_public_name():
    from .test_bench_record import target

    t = target()
    assert (t.served_model_name, t.metrics_model_name) == ("qwen3-32b", "qwen3-32b-fp8-2026-08-23.1")
    # A server that ran other arguments is labelled by those.
    t = target(served_args=("--model", "/m", "--served-model-name", "x", "y"), served_args_reason="cpu")
    assert t.metrics_model_name == "x"


# ---- one scrape ----------------------------------------------------------------------------------------------


def test_one_scrape_sums_the_queue_takes_the_fullest_kv_and_sums_the_itl_buckets():
    s = MetricsScraper("http://unused/metrics", RELEASE).parse(METRICS)
    assert s is not None
    assert (s.waiting, s.kv_usage) == (5.0, 0.5)
    assert s.itl_buckets == {0.01: 10.0, 0.025: 60.0, math.inf: 100.0}


def test_a_scrape_of_another_name_matches_nothing_and_says_which_names_there_are():
    scraper = MetricsScraper("http://unused/metrics", "qwen3-8b")  # the public name: vLLM never labels with it
    assert scraper.parse(METRICS) is None
    assert scraper.unmatched_names == [RELEASE]
    assert parse_buckets(METRICS, "qwen3-8b") is None


@pytest.fixture()
def metrics_server() -> Iterator[str]:
    """A loopback HTTP server answering METRICS on /metrics."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = METRICS.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}/metrics"
    finally:
        httpd.shutdown()


def test_the_check_before_any_load_fails_loudly_on_a_label_that_matches_nothing(metrics_server: str):
    assert MetricsScraper(metrics_server, RELEASE).check().waiting == 5.0
    with pytest.raises(ScrapeError) as err:
        MetricsScraper(metrics_server, "qwen3-8b").check()
    assert str(err.value) == (
        f"{metrics_server} has no vllm:num_requests_waiting, vllm:kv_cache_usage_perc or "
        "vllm:inter_token_latency_seconds_bucket series with model_name='qwen3-8b' (the values it has: "
        f"'{RELEASE}'); vLLM labels its metrics with the server's first --served-model-name"
    )


def test_the_check_fails_on_an_endpoint_that_does_not_answer():
    # Port 9 (discard) on loopback: nothing listens there in the test environment.
    with pytest.raises(ScrapeError, match=r"^http://127.0.0.1:9/metrics: not readable \(.*\); pass --metrics-url URL$"):
        MetricsScraper("http://127.0.0.1:9/metrics", RELEASE).check()


# ---- PromQL's histogram_quantile -----------------------------------------------------------------------------

#: 100 token gaps: 10 up to 10 ms, 50 in (10, 25], 35 in (25, 50], 5 in (50, 75] ms.
BUCKETS = {0.01: 10.0, 0.025: 60.0, 0.05: 95.0, 0.075: 100.0, math.inf: 100.0}


def test_histogram_quantile_by_hand():
    # p50: rank 50 falls in (0.01, 0.025] holding 50, 40 of them below the rank: 0.01 + 0.015 x 40/50 = 0.022.
    assert histogram_quantile(0.50, BUCKETS) == pytest.approx(0.022)
    # p95: rank 95 is exactly the (0.025, 0.05] bucket's top: 0.025 + 0.025 x 35/35 = 0.05.
    assert histogram_quantile(0.95, BUCKETS) == pytest.approx(0.05)
    # p99: rank 99 in (0.05, 0.075] holding 5, 4 below the rank: 0.05 + 0.025 x 4/5 = 0.07.
    assert histogram_quantile(0.99, BUCKETS) == pytest.approx(0.07)
    # The lowest bucket interpolates from 0: rank 5 of its 10 -> 0.01 x 5/10.
    assert histogram_quantile(0.05, BUCKETS) == pytest.approx(0.005)


def test_histogram_quantile_edges_as_prometheus_has_them():
    # A rank in the +Inf bucket: the highest finite bound (PromQL cannot say more).
    assert histogram_quantile(0.95, {0.01: 5.0, 0.025: 8.0, math.inf: 10.0}) == 0.025
    # No +Inf bucket, no observations, or one bucket only: NaN in PromQL, None here.
    assert histogram_quantile(0.5, {0.01: 5.0, 0.025: 8.0}) is None
    assert histogram_quantile(0.5, {0.01: 0.0, math.inf: 0.0}) is None
    assert histogram_quantile(0.5, {math.inf: 3.0}) is None
    # A count below its predecessor is raised to it (ensureMonotonic): 0.01 -> 10, so p50 lies in (0, 0.01].
    assert histogram_quantile(0.5, {0.01: 10.0, 0.025: 9.0, math.inf: 10.0}) == pytest.approx(0.005)


def test_the_itl_of_a_window_is_the_histogram_of_its_increase():
    before = {0.01: 100.0, 0.025: 200.0, 0.05: 300.0, 0.075: 300.0, math.inf: 300.0}
    after = {le: before[le] + BUCKETS[le] for le in before}  # BUCKETS observed in between
    itl = itl_between(before, after)
    assert itl.observations == 100
    assert itl.quantiles_ms == Quantiles(pytest.approx(22.0), pytest.approx(50.0), pytest.approx(70.0))  # type: ignore[arg-type]
    with pytest.raises(ScrapeError, match="counts decreased inside the window: the server restarted"):
        itl_between(after, before)
    assert itl_between(before, before).quantiles_ms is None  # no token gap observed: no quantile


# ---- a window ------------------------------------------------------------------------------------------------


def sample(t: float, waiting: float, kv: float, gaps: float) -> Sample:
    return Sample(t, waiting, kv, {0.01: gaps, math.inf: gaps})


def test_a_window_summarises_the_gauges_inside_it_and_the_itl_between_its_edges():
    samples = [
        sample(9.6, 9, 0.9, 100),
        sample(10.1, 1, 0.1, 110),
        sample(10.6, 3, 0.3, 150),
        sample(11.2, 7, 0.7, 400),
    ]
    w = window_of(samples, 10.0, 11.0)
    assert w.queue_waiting == GaugeSummary(2.0, 3.0, 2)  # the samples at 10.1 and 10.6
    assert w.kv_cache_usage == GaugeSummary(pytest.approx(0.2), 0.3, 2)  # type: ignore[arg-type]
    # Edges: the last scrape at or before 10.0 (9.6: 100 gaps) and at or before 11.0 (10.6: 150 gaps).
    assert w.token_itl.observations == 50


def test_a_window_without_samples_is_an_error_not_a_null():
    samples = [sample(1.0, 1, 0.1, 10), sample(20.0, 1, 0.1, 10)]
    with pytest.raises(ScrapeError) as err:
        window_of(samples, 10.0, 11.0, "3 scrape(s) of http://h/metrics failed, the last: timed out")
    assert str(err.value) == (
        "no vllm:num_requests_waiting / vllm:kv_cache_usage_perc / vllm:inter_token_latency_seconds_bucket sample in "
        "the measurement window 10.0-11.0 (3 scrape(s) of http://h/metrics failed, the last: timed out); the "
        "server's /metrics must be read throughout the run"
    )
