"""Sample the server's Prometheus ``/metrics`` while load runs: queue depth, KV-cache usage and vLLM's per-token
inter-token-latency histogram.

guidellm sees the server from outside (latencies, tokens); whether a latency rise comes from queueing or from a
full KV cache only the engine can say, and the ITL the alerts and dashboards judge is the engine's own histogram.
vLLM 0.32 exports (vllm/v1/metrics/loggers.py):

- ``vllm:num_requests_waiting``: requests admitted but not yet scheduled (the queue), a gauge;
- ``vllm:kv_cache_usage_perc``: fraction of KV-cache blocks in use (1 = full; the name says perc, the value is
  a fraction), a gauge;
- ``vllm:inter_token_latency_seconds``: one observation per generated token after the first (the gap since the
  previous token of that request), a histogram. The project's one ITL (components/monitoring/metrics.py ``ITL``):
  the alerts and dashboards take ``histogram_quantile`` of it, and so does this bench, over each rate's window.

Every series carries ``model_name``: vLLM's ``served_model_name``, the *first* ``--served-model-name`` the server
was started with (``BenchTarget.metrics_model_name``), not the name requests carry. A scrape that matches no series
of that label is an error, before any load and for every rate's window: a silent null would look like a server
that was never watched.

A background thread polls the endpoint at a fixed period and keeps ``(unix time, waiting, kv usage, ITL buckets)``
samples; ``window`` summarises the samples of one rate's measurement window (guidellm's wall-clock timestamps come
from the same machine, so the clocks agree). With several engines behind one endpoint (data parallel) the queue is
summed over engines, the KV usage is the fullest engine's (the one that starts preempting first), and the ITL
buckets are summed over engines (``sum by (le)``, as the alerts do).
"""

from __future__ import annotations

import math
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from components import naming
from components.monitoring import metrics as monitoring

from .stats import Quantiles

WAITING = naming.VLLM_NUM_REQUESTS_WAITING
KV_USAGE = naming.VLLM_KV_CACHE_USAGE
#: The ITL histogram (``vllm:inter_token_latency_seconds``) and its bucket series: the alerts' ITL.
ITL_HISTOGRAM = monitoring.ITL.name
ITL_BUCKET = monitoring.ITL.bucket
#: The label vLLM puts its served name in.
MODEL_NAME_LABEL = monitoring.VLLM_MODEL_NAME_LABEL
#: Poll period: vLLM updates these gauges once per engine step (tens of ms), and 0.5 s gives at least 8 samples
#: in the shortest (--quick) measurement window while costing the server one small text response per period.
SCRAPE_PERIOD_S = 0.5
#: One scrape may take this long before it is abandoned; longer than a busy CPU server needs (~50 ms measured)
#: and short enough that a hung endpoint costs at most a few missed samples.
SCRAPE_TIMEOUT_S = 2.0
#: Quantiles of the ITL histogram recorded per rate (the contract's objective is the p95).
ITL_QUANTILES = (0.50, 0.95, 0.99)

_SAMPLE_RE = re.compile(r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
_LABEL_RE = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class ScrapeError(RuntimeError):
    """``/metrics`` could not be read, or held no series of the server's ``model_name``; one line for the CLI."""


def parse_series(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """Every sample of ``name`` in Prometheus text format as (labels, value); non-finite values are kept out."""
    out: list[tuple[dict[str, str], float]] = []
    for line in text.splitlines():
        m = _SAMPLE_RE.match(line)
        if not m or m.group("name") != name:
            continue
        try:
            value = float(m.group("value"))
        except ValueError:
            continue
        if math.isfinite(value) or (value == math.inf and name.endswith("_bucket")):
            out.append((dict(_LABEL_RE.findall(m.group("labels") or "")), value))
    return out


def parse_samples(text: str, name: str, model_name: str) -> list[float]:
    """Values of every series of ``name`` whose ``model_name`` label is exactly ``model_name``."""
    return [v for labels, v in parse_series(text, name) if labels.get(MODEL_NAME_LABEL) == model_name]


def model_names(text: str) -> list[str]:
    """The ``model_name`` values of the queue, KV and ITL series in ``text``, sorted (for error messages)."""
    seen = {
        labels[MODEL_NAME_LABEL]
        for name in (WAITING, KV_USAGE, ITL_BUCKET)
        for labels, _ in parse_series(text, name)
        if MODEL_NAME_LABEL in labels
    }
    return sorted(seen)


def _le(text: str) -> float:
    return math.inf if text in ("+Inf", "Inf", "inf") else float(text)


def parse_buckets(text: str, model_name: str) -> dict[float, float] | None:
    """The ITL histogram's cumulative bucket counts by upper bound, summed over engines; None without a series."""
    buckets: dict[float, float] = {}
    for labels, value in parse_series(text, ITL_BUCKET):
        if labels.get(MODEL_NAME_LABEL) != model_name or "le" not in labels:
            continue
        try:
            le = _le(labels["le"])
        except ValueError:
            continue
        buckets[le] = buckets.get(le, 0.0) + value
    return buckets or None


def histogram_quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """PromQL's ``histogram_quantile(q, ...)`` of one set of cumulative buckets (upper bound -> count).

    Prometheus's own rule (promql/quantile.go ``bucketQuantile``, v2.42.0, the Debian build the integration tier
    runs; unchanged in v3): buckets sorted by upper bound, the last must be +Inf; rank = q x total; the first bucket
    whose cumulative count reaches the rank holds the quantile, linearly interpolated between its lower and upper
    bound (the lowest bucket's lower bound is 0); a rank in the +Inf bucket returns the highest finite bound.
    None where PromQL returns NaN (no +Inf bucket, fewer than two buckets, no observations).
    """
    if not 0 <= q <= 1:
        raise ValueError(f"q must be in [0, 1], got {q}")
    ordered = sorted(buckets.items())
    if len(ordered) < 2 or ordered[-1][0] != math.inf:
        return None
    uppers = [le for le, _ in ordered]
    counts: list[float] = []
    for _, c in ordered:  # ensureMonotonic: a count below the previous one is raised to it
        counts.append(max(c, counts[-1]) if counts else c)
    total = counts[-1]
    if total == 0:
        return None
    rank = q * total
    b = next((i for i in range(len(counts) - 1) if counts[i] >= rank), len(counts) - 1)
    if b == len(counts) - 1:
        return uppers[-2]
    if b == 0 and uppers[0] <= 0:
        return uppers[0]
    start, end, count = 0.0, uppers[b], counts[b]
    if b > 0:
        start = uppers[b - 1]
        count -= counts[b - 1]
        rank -= counts[b - 1]
    return start + (end - start) * (rank / count)


@dataclass(frozen=True)
class Sample:
    time: float
    waiting: float | None
    kv_usage: float | None
    itl_buckets: dict[float, float] | None


@dataclass(frozen=True)
class GaugeSummary:
    mean: float
    max: float
    samples: int


def summarise(values: Sequence[float]) -> GaugeSummary | None:
    return GaugeSummary(sum(values) / len(values), max(values), len(values)) if values else None


@dataclass(frozen=True)
class TokenItl:
    """vLLM's ITL histogram over one window: quantiles in ms and the token gaps observed."""

    quantiles_ms: Quantiles | None
    observations: int


@dataclass(frozen=True)
class ServerWindow:
    """What the server's ``/metrics`` said during one rate's measurement window."""

    queue_waiting: GaugeSummary
    kv_cache_usage: GaugeSummary
    token_itl: TokenItl


def itl_between(before: Mapping[float, float], after: Mapping[float, float]) -> TokenItl:
    """The histogram of the token gaps observed between two scrapes (the increase of every bucket), as quantiles in
    ms: what ``histogram_quantile(q, sum by (le) (increase(...[window])))`` gives, without PromQL's extrapolation
    to the window's edges (the two scrapes *are* the edges here). ScrapeError when a bucket decreased: the server
    restarted inside the window, and its counts describe nothing."""
    if set(before) != set(after):
        raise ScrapeError("the ITL histogram's buckets changed inside the window (the server restarted?)")
    delta = {le: after[le] - before[le] for le in after}
    if any(d < 0 for d in delta.values()):
        raise ScrapeError("the ITL histogram's counts decreased inside the window: the server restarted")
    observed = round(delta.get(math.inf, 0.0))
    qs = [histogram_quantile(q, delta) for q in ITL_QUANTILES]
    if observed == 0 or any(v is None for v in qs):
        return TokenItl(None, observed)
    p50, p95, p99 = (1000.0 * v for v in qs if v is not None)
    return TokenItl(Quantiles(p50, p95, p99), observed)


class MetricsScraper:
    """Poll ``url`` every SCRAPE_PERIOD_S seconds on a daemon thread between ``start()`` and ``stop()``, keeping the
    series whose ``model_name`` is ``model_name``."""

    def __init__(self, url: str, model_name: str, period_s: float = SCRAPE_PERIOD_S):
        self.url = url
        self.model_name = model_name
        self.period_s = period_s
        self.samples: list[Sample] = []
        self.failures = 0
        self.last_error: str | None = None
        #: model_name values the last scrape that matched nothing saw (for the error message).
        self.unmatched_names: list[str] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-metrics-scraper", daemon=True)

    def _fetch(self) -> str:
        with _NO_PROXY.open(self.url, timeout=SCRAPE_TIMEOUT_S) as resp:
            data: bytes = resp.read()
        return data.decode("utf-8", "replace")

    def parse(self, text: str) -> Sample | None:
        """One sample from a scrape's text; None (and ``unmatched_names`` set) when nothing matched the label."""
        waiting = parse_samples(text, WAITING, self.model_name)
        kv = parse_samples(text, KV_USAGE, self.model_name)
        buckets = parse_buckets(text, self.model_name)
        if not waiting and not kv and buckets is None:
            self.unmatched_names = model_names(text)
            return None
        return Sample(time.time(), sum(waiting) if waiting else None, max(kv) if kv else None, buckets)

    def scrape_once(self) -> Sample | None:
        try:
            text = self._fetch()
        except (OSError, urllib.error.URLError) as err:
            self.failures += 1
            self.last_error = str(err)
            return None
        sample = self.parse(text)
        if sample is None:
            self.failures += 1
            self.last_error = self._unmatched()
        return sample

    def _unmatched(self) -> str:
        seen = ", ".join(repr(n) for n in self.unmatched_names or []) or "none"
        return (
            f"{self.url} has no {WAITING}, {KV_USAGE} or {ITL_BUCKET} series with {MODEL_NAME_LABEL}="
            f"{self.model_name!r} (the values it has: {seen}); vLLM labels its metrics with the server's first "
            "--served-model-name"
        )

    def check(self) -> Sample:
        """One scrape now, before any load: ScrapeError unless it matches all three series of ``model_name``."""
        try:
            text = self._fetch()
        except (OSError, urllib.error.URLError) as err:
            raise ScrapeError(f"{self.url}: not readable ({err}); pass --metrics-url URL") from None
        sample = self.parse(text)
        if sample is None:
            raise ScrapeError(self._unmatched())
        missing = [
            name
            for name, value in (
                (WAITING, sample.waiting),
                (KV_USAGE, sample.kv_usage),
                (ITL_BUCKET, sample.itl_buckets),
            )
            if value is None
        ]
        if missing:
            raise ScrapeError(
                f"{self.url} has no {', '.join(missing)} series with {MODEL_NAME_LABEL}={self.model_name!r}: "
                "not the vLLM 0.32 metrics this bench reads"
            )
        return sample

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            sample = self.scrape_once()
            if sample is not None:
                with self._lock:
                    self.samples.append(sample)
            self._stop.wait(max(0.0, self.period_s - (time.monotonic() - started)))

    def start(self) -> MetricsScraper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=SCRAPE_TIMEOUT_S + self.period_s)

    def window(self, start: float, end: float) -> ServerWindow:
        """The queue, KV usage and ITL histogram of ``[start, end]``; ScrapeError when the window holds no sample of
        a gauge or no ITL histogram at both edges (the record would otherwise carry a silent null)."""
        with self._lock:
            samples = list(self.samples)
        return window_of(samples, start, end, self._why_empty())

    def _why_empty(self) -> str:
        return f"{self.failures} scrape(s) of {self.url} failed, the last: {self.last_error}" if self.failures else ""


def window_of(samples: Sequence[Sample], start: float, end: float, why: str = "") -> ServerWindow:
    """``MetricsScraper.window`` on a list of samples (kept separate so it is testable without a server)."""
    inside = [s for s in samples if start <= s.time <= end]
    queue = summarise([s.waiting for s in inside if s.waiting is not None])
    kv = summarise([s.kv_usage for s in inside if s.kv_usage is not None])
    with_buckets = [s for s in samples if s.itl_buckets is not None]
    before = [s for s in with_buckets if s.time <= start]
    upto = [s for s in with_buckets if s.time <= end]
    edges = (before[-1], upto[-1]) if before and upto and upto[-1].time > before[-1].time else None
    if queue is None or kv is None or edges is None:
        lacking = [
            what
            for what, ok in ((WAITING, queue is not None), (KV_USAGE, kv is not None), (ITL_BUCKET, edges is not None))
            if not ok
        ]
        raise ScrapeError(
            f"no {' / '.join(lacking)} sample in the measurement window {start:.1f}-{end:.1f}"
            + (f" ({why})" if why else "")
            + "; the server's /metrics must be read throughout the run"
        )
    assert edges[0].itl_buckets is not None and edges[1].itl_buckets is not None
    return ServerWindow(queue, kv, itl_between(edges[0].itl_buckets, edges[1].itl_buckets))
