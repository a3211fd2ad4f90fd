"""Sample the server's Prometheus ``/metrics`` while load runs: queue depth and KV-cache usage over time.

guidellm sees the server from outside (latencies, tokens); whether a latency rise comes from queueing or from a
full KV cache only the engine can say. vLLM 0.32 exports both as gauges:

- ``vllm:num_requests_waiting``: requests admitted but not yet scheduled (the queue);
- ``vllm:kv_cache_usage_perc``: fraction of KV-cache blocks in use (1 = full; the name says perc, the value is
  a fraction).

A background thread polls the endpoint at a fixed period and keeps ``(unix time, waiting, kv usage)`` samples;
``window`` summarises the samples that fall in one rate's measurement window (guidellm's wall-clock timestamps
come from the same machine, so the clocks agree). With several engines behind one endpoint (data parallel) the
queue is summed over engines and the KV usage is the fullest engine's, because the fullest engine is the one
that starts preempting first.
"""

from __future__ import annotations

import math
import re
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

from components import naming

WAITING = naming.VLLM_NUM_REQUESTS_WAITING
KV_USAGE = naming.VLLM_KV_CACHE_USAGE
#: Poll period: vLLM updates these gauges once per engine step (tens of ms), and 0.5 s gives at least 8 samples
#: in the shortest (--quick) measurement window while costing the server one small text response per period.
SCRAPE_PERIOD_S = 0.5
#: One scrape may take this long before it is abandoned; longer than a busy CPU server needs (~50 ms measured)
#: and short enough that a hung endpoint costs at most a few missed samples.
SCRAPE_TIMEOUT_S = 2.0

_SAMPLE_RE = re.compile(r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
_LABEL_RE = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def parse_samples(text: str, name: str, model_name: str | None = None) -> list[float]:
    """Values of every series of ``name`` in Prometheus text format, optionally only ``model_name="..."``."""
    values: list[float] = []
    for line in text.splitlines():
        m = _SAMPLE_RE.match(line)
        if not m or m.group("name") != name:
            continue
        labels = dict(_LABEL_RE.findall(m.group("labels") or ""))
        if model_name is not None and labels.get("model_name", model_name) != model_name:
            continue
        try:
            value = float(m.group("value"))
        except ValueError:
            continue
        if math.isfinite(value):
            values.append(value)
    return values


@dataclass(frozen=True)
class Sample:
    time: float
    waiting: float | None
    kv_usage: float | None


@dataclass(frozen=True)
class GaugeSummary:
    mean: float
    max: float
    samples: int


def summarise(values: list[float]) -> GaugeSummary | None:
    return GaugeSummary(sum(values) / len(values), max(values), len(values)) if values else None


class MetricsScraper:
    """Poll ``url`` every SCRAPE_PERIOD_S seconds on a daemon thread between ``start()`` and ``stop()``."""

    def __init__(self, url: str, model_name: str | None, period_s: float = SCRAPE_PERIOD_S):
        self.url = url
        self.model_name = model_name
        self.period_s = period_s
        self.samples: list[Sample] = []
        self.failures = 0
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-metrics-scraper", daemon=True)

    def scrape_once(self) -> Sample | None:
        try:
            with _NO_PROXY.open(self.url, timeout=SCRAPE_TIMEOUT_S) as resp:
                text = resp.read().decode("utf-8", "replace")
        except (OSError, urllib.error.URLError) as err:
            self.failures += 1
            self.last_error = str(err)
            return None
        waiting = parse_samples(text, WAITING, self.model_name)
        kv = parse_samples(text, KV_USAGE, self.model_name)
        return Sample(time.time(), sum(waiting) if waiting else None, max(kv) if kv else None)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            sample = self.scrape_once()
            if sample is not None:
                self.samples.append(sample)
            self._stop.wait(max(0.0, self.period_s - (time.monotonic() - started)))

    def start(self) -> MetricsScraper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=SCRAPE_TIMEOUT_S + self.period_s)

    def window(self, start: float, end: float) -> tuple[GaugeSummary | None, GaugeSummary | None]:
        """(queue depth, KV usage) summaries of the samples taken in ``[start, end]``."""
        inside = [s for s in self.samples if start <= s.time <= end]
        return (
            summarise([s.waiting for s in inside if s.waiting is not None]),
            summarise([s.kv_usage for s in inside if s.kv_usage is not None]),
        )
