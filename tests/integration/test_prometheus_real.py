"""Integration tier: a real Prometheus (Debian ``prometheus`` package) scrapes the real vLLM of the
model-server harness on loopback while a short, bounded completion load runs; then EVERY dashboard query and
every alert query of every stack runs through Prometheus' HTTP API. Each returns data, or is on the allow-list
below with the reason it cannot here (no GPU, no endpoint picker, no kube-state metrics on a laptop-sized CPU
run). A misspelt metric name is shown to fail the same check.

The vLLM target is scraped once per (pool, release) of the stacks with the labels the GMP PodMonitoring adds
(``namespace``, ``pool``, ``release``, ``pod``), so stable/canary/ratio queries all see series.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import yaml

from components.monitoring import metrics as m
from components.monitoring.alerts import AlertSpec
from components.monitoring.dashboard import dashboard_queries
from components.observability import alerts as alerting
from components.observability import metrics as gke
from components.observability import tenants as tenant_obs
from components.observability.tenants import TenantView
from infra.targets.common import thresholds
from infra.targets.gke.compose import pool_views
from infra.targets.gke.planning import gke_part

from ..conftest import STACKS, planned, resources
from .vllm_harness import VllmServer, free_loopback_port, http_get, http_post_json

pytestmark = pytest.mark.integration

PROMETHEUS = shutil.which("prometheus")
#: Scrape every second: the whole load lasts ~20 s and rate() needs two samples inside its window.
SCRAPE_INTERVAL = "1s"
#: Prometheus start-up on loopback with an empty TSDB measured < 2 s; 60 s bounds a hung start.
PROM_START_TIMEOUT_S = 60.0
#: SIGTERM shutdown of Prometheus (TSDB head flush) measured < 1 s; SIGKILL after 20 s.
PROM_STOP_GRACE_S = 20.0
#: The load: 48 completions of 24 tokens, 8 at a time against --max-num-seqs 4, so requests queue
#: (vllm:num_requests_waiting > 0) and every latency histogram gets observations. Bounded by LOAD_TIMEOUT_S.
LOAD_REQUESTS = 48
LOAD_CONCURRENCY = 8
LOAD_MAX_TOKENS = 24
LOAD_TIMEOUT_S = 180.0
#: Bound on waiting until every scrape job has a successful sample before / after the load. A scrape of the
#: busy CPU-only vLLM can exceed the 1 s timeout, so "a few seconds" is not enough on a loaded 2-core runner:
#: the test waits for the evidence (a fresh `up == 1` sample per job) instead, at most this long.
SCRAPED_TIMEOUT_S = 60.0

#: Metric-name prefixes that cannot have data in this environment, and why.
ALLOW = {
    "DCGM_FI_": "needs NVIDIA GPUs and GKE's managed DCGM exporter (the test vLLM runs on CPU)",
    "llm_d_epp_": "needs the llm-d Router's endpoint picker of GKE Inference Gateway (not part of the loopback setup)",
    "kube_": "needs GKE's kube-state metrics packages (no Kubernetes here)",
}


#: How a query keeps answering when its series are absent (components/observability/tenants.py).
ZERO_FALLBACK = " or on() vector(0)"


def allowed_reason(query: str) -> str | None:
    for prefix, reason in ALLOW.items():
        if any(tok.startswith(prefix) for tok in _names(query)):
            return reason
    return None


def _names(query: str) -> list[str]:
    return re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*(?=\{)", query)


class Prometheus:
    def __init__(self, pid: int, url: str):
        self.pid, self.url = pid, url

    def query(self, q: str, at: float) -> dict[str, Any]:
        params = urllib.parse.urlencode({"query": q, "time": f"{at:.3f}"})
        status, body = http_get(f"{self.url}/api/v1/query?{params}")
        doc = json.loads(body)
        assert status == 200 and doc["status"] == "success", f"{q}: {status} {body[:500]}"
        return doc["data"]

    def wait_all_jobs_scraped(self, jobs: int, after: float) -> None:
        """Block until each of ``jobs`` scrape jobs has a successful sample taken after ``after``: counters
        then have a sample on both sides of the load, so every rate() window sees the increase."""
        deadline = time.monotonic() + SCRAPED_TIMEOUT_S
        while True:
            fresh = [r for r in self.query("timestamp(up == 1)", time.time())["result"] if float(r["value"][1]) > after]
            if len(fresh) >= jobs:
                return
            assert time.monotonic() < deadline, f"only {len(fresh)} of {jobs} scrape jobs succeeded after {after}"
            time.sleep(0.5)

    def has_data(self, q: str, at: float) -> bool:
        """True when the query returns at least one sample with a finite value."""
        data = self.query(q, at)
        values = (
            [float(r["value"][1]) for r in data["result"]]
            if data["resultType"] == "vector"
            else [float(data["result"][1])]
            if data["resultType"] == "scalar"
            else []
        )
        return any(math.isfinite(v) for v in values)


def scrape_config(server: VllmServer) -> dict[str, Any]:
    jobs: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for stack in STACKS:
        cfg, _, _ = planned(stack)
        for role, pool in cfg.pools():
            if (role, pool.release) in seen:
                continue
            seen.add((role, pool.release))
            jobs.append(
                {
                    "job_name": f"vllm-{role}-{len(jobs)}",
                    "scrape_interval": SCRAPE_INTERVAL,
                    "metrics_path": "/metrics",
                    "static_configs": [
                        {
                            "targets": [f"127.0.0.1:{server.port}"],
                            "labels": {
                                "namespace": f"llm-serving-{role}",
                                "pool": role,
                                "release": pool.release,
                                "pod": f"vllm-{role}-5d8f7c6b9-x{len(jobs)}q2z",
                            },
                        }
                    ],
                }
            )
    return {
        "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL},
        "scrape_configs": jobs,
    }


@pytest.fixture(scope="module")
def prometheus(vllm_server: VllmServer, tmp_path_factory: pytest.TempPathFactory):
    if PROMETHEUS is None:
        if os.environ.get("REQUIRE_PROMETHEUS") == "1":
            pytest.fail("prometheus binary missing (REQUIRE_PROMETHEUS=1)")
        pytest.skip("prometheus not installed: `make integration-deps` installs the Debian prometheus package")
    work = tmp_path_factory.mktemp("prometheus")
    (work / "prometheus.yml").write_text(yaml.safe_dump(scrape_config(vllm_server)))
    port = free_loopback_port()
    log = open(work / "prometheus.log", "wb")
    proc = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={work / 'prometheus.yml'}",
            f"--storage.tsdb.path={work / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--storage.tsdb.retention.time=1h",
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + PROM_START_TIMEOUT_S
        while True:
            assert proc.poll() is None, (work / "prometheus.log").read_text()[-3000:]
            try:
                if http_get(f"{url}/-/ready", timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "prometheus not ready in time"
            time.sleep(0.5)
        yield Prometheus(proc.pid, url)
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=PROM_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=PROM_STOP_GRACE_S)
        log.close()


@pytest.fixture(scope="module")
def loaded(prometheus: Prometheus, vllm_server: VllmServer) -> float:
    """Run the bounded load while Prometheus scrapes; return the evaluation time just after it."""
    prompt = "The serving platform keeps warm replicas because " * 4
    errors: list[str] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        status, body = http_post_json(
            f"{vllm_server.base_url}/v1/completions",
            {
                "model": vllm_server.release_id,
                "prompt": f"{i} {prompt}",
                "max_tokens": LOAD_MAX_TOKENS,
                "temperature": 0,
                "ignore_eos": True,
            },
            timeout=LOAD_TIMEOUT_S,
        )
        if status != 200:
            with lock:
                errors.append(f"{status}: {str(body)[:200]}")

    jobs = len(scrape_config(vllm_server)["scrape_configs"])
    prometheus.wait_all_jobs_scraped(jobs, after=0.0)  # every job has a sample from before the load
    with ThreadPoolExecutor(LOAD_CONCURRENCY) as pool:
        list(pool.map(one, range(LOAD_REQUESTS), timeout=LOAD_TIMEOUT_S))
    assert not errors, errors
    prometheus.wait_all_jobs_scraped(jobs, after=time.time())  # ... and one from after it
    return time.time()


def stack_queries(stack: str) -> tuple[list[str], list[AlertSpec]]:
    cfg, plan, inv = planned(stack)
    dash = [
        q
        for r in resources(inv, "gcp:monitoring/dashboard:Dashboard")
        for q in dashboard_queries(r["inputs"]["dashboardJson"])
    ]
    views = list(pool_views(cfg, gke_part(plan)))
    specs = alerting.alert_specs(views, thresholds(cfg)) + tenant_obs.alert_specs(
        views, [TenantView(t.id, t.output_tokens_per_minute) for t in cfg.contract.tenants]
    )
    rendered = sorted(
        c["conditionPrometheusQueryLanguage"]["query"]
        for r in resources(inv, "gcp:monitoring/alertPolicy:AlertPolicy")
        for c in r["inputs"]["conditions"]
    )
    assert sorted(s.expr for s in specs) == rendered, "alert specs differ from the rendered alert policies"
    return dash, specs


@pytest.mark.parametrize("stack", STACKS)
def test_every_dashboard_and_alert_query_returns_data(prometheus: Prometheus, loaded: float, stack: str):
    dash, specs = stack_queries(stack)
    queries = dash + [q for s in specs for q in (s.signal, s.guard_signal) if q]
    no_data, allowed = [], {}
    for q in queries:
        reason = allowed_reason(q)
        got = prometheus.has_data(q, loaded)
        if reason is None and not got:
            no_data.append(q)
        elif reason is not None:
            # A zero fallback for absent series (``or on() vector(0)``, the tenants' token sums) always answers: the
            # allow-listed series themselves must be absent.
            bare = q.replace(ZERO_FALLBACK, "")
            assert not prometheus.has_data(bare, loaded), (
                f"allow-listed query returned data, drop it from the allow-list: {q}"
            )
            allowed[q] = reason
    # The full alert conditions evaluate without error (empty = not firing is a valid answer).
    for s in specs:
        prometheus.query(s.expr, loaded)
    assert no_data == [], "queries without data:\n" + "\n".join(no_data)
    served = len(queries) - len(allowed)
    print(f"\n{stack}: {served} queries returned data, {len(allowed)} allow-listed:")
    for q, why in sorted(allowed.items()):
        print(f"  [{why}] {q}")
    # Not vacuous: more queries answer than are allowed empty for want of a GPU or kube-state metrics (the picker's
    # own panels, llm_d_epp_*, outnumber the vLLM ones on a pool with flow control and tenants, and no picker runs
    # here at all).
    assert served > sum(1 for why in allowed.values() if why != ALLOW["llm_d_epp_"])


def test_load_moved_the_signals_the_hpa_and_alerts_use(prometheus: Prometheus, loaded: float):
    window = f"[{int(time.time() - loaded) + 60}s]"
    assert prometheus.has_data(
        f"max_over_time({m.NUM_REQUESTS_RUNNING.series}{gke.serving('stable')}{window}) > 0", loaded
    )
    assert prometheus.has_data(f"sum(increase({m.GENERATION_TOKENS.total}{gke.serving('stable')}{window})) > 0", loaded)


def test_a_misspelt_metric_name_fails_the_check(prometheus: Prometheus, loaded: float):
    good = gke.waiting_per_pod("stable")
    assert prometheus.has_data(good, loaded)
    bad = good.replace(m.NUM_REQUESTS_WAITING.series, "vllm:num_request_waiting")  # missing "s"
    assert bad != good
    assert not prometheus.has_data(bad, loaded)
    assert allowed_reason(bad) is None  # a typo cannot hide behind the allow-list
