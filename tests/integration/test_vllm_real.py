"""The real vLLM 0.32 (CPU build): its serve parser checks our flags; a served tiny model exercises the liveness
probe's idle case and the Prometheus metric names our dashboards and autoscaling depend on.

The startup and readiness probes need a server with the rendered identity (release id + public name, model root,
context length); tests/integration/test_traffic_real.py runs them, as rendered, against servers started from the
staging stack's own arguments. This session server serves only RELEASE_ID.

Run with ``make integration`` (installs .venv-vllm first) or
``.venv/bin/python -m pytest -m integration tests/integration -x -q``. One server start per session (~1 min).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from components.serving import probe

from .vllm_harness import (
    PROBE_SCRIPT,
    VllmServer,
    check_vllm_args,
    free_loopback_port,
    http_get,
    http_post_json,
    metric_sum,
)

pytestmark = pytest.mark.integration

#: A production-shaped argument list (the form our renderer emits: model as --model <location>).
GOOD_ARGS = [
    "--model", "gs://models-bucket/llama/0123456789abcdef0123456789abcdef01234567",
    "--load-format", "runai_streamer",
    "--model-loader-extra-config", '{"concurrency":16}',
    "--served-model-name", "llama-r1",
    "--max-model-len", "8192",
    "--tensor-parallel-size", "2",
    "--gpu-memory-utilization", "0.9",
    "--max-num-seqs", "256",
    "--max-num-batched-tokens", "8192",
    "--enable-prefix-caching",
    "--kv-cache-dtype", "fp8",
    "--port", "8000",
]  # fmt: skip
#: Per-call bound on one probe run: the probe's own default deadline is 4 s, plus Python start-up.
PROBE_TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def argcheck() -> dict:
    """All argument lists in one vLLM import (~15 s) rather than one per test."""
    return check_vllm_args(
        {
            "good": GOOD_ARGS,
            "abbreviated": [*GOOD_ARGS, "--max-num-seq", "4"],
            "misspelt": [*GOOD_ARGS, "--gpu-memory-utilisation", "0.9"],
        }
    )


def test_argcheck_accepts_known_good_args(argcheck: dict) -> None:
    assert argcheck["good"] == {"ok": True, "error": "", "model_source": "--model"}


@pytest.mark.parametrize(
    ("label", "flag"), [("abbreviated", "--max-num-seq"), ("misspelt", "--gpu-memory-utilisation")]
)
def test_argcheck_rejects_abbreviated_or_misspelt_flag(argcheck: dict, label: str, flag: str) -> None:
    result = argcheck[label]
    assert result["ok"] is False
    assert "unrecognized arguments" in result["error"] and flag in result["error"], result["error"]


# ---- probe script against the session server ------------------------------------------------------------
def run_probe(mode: str, port: int, *args: str) -> subprocess.CompletedProcess:
    """components/serving/probe.py as the kubelet runs it: a fresh interpreter, one line of output, exit status."""
    return subprocess.run(
        [sys.executable, str(PROBE_SCRIPT), mode, "--port", str(port), *args],
        capture_output=True, text=True, timeout=PROBE_TIMEOUT_S,
    )  # fmt: skip


#: What startup and readiness need besides the port (the values do not matter when nothing listens).
IDENTITY = (
    "--release-id",
    "tiny-llama-r1",
    "--public-name",
    "tiny-llama",
    "--model-root",
    "/weights/tiny",
    "--max-model-len",
    "256",
)


@pytest.mark.parametrize(
    ("mode", "args"),
    [
        ("startup", IDENTITY),
        ("readiness", IDENTITY),
        ("liveness", ("--stall-seconds", "60")),
    ],
)
def test_every_probe_fails_when_nothing_listens(mode: str, args: tuple[str, ...], tmp_path: Path) -> None:
    port = free_loopback_port()
    extra = ("--state-file", str(tmp_path / "state.json")) if mode == "liveness" else ()
    result = run_probe(mode, port, *args, *extra)
    assert result.returncode == 1
    assert result.stdout == (
        f"fail: health check failed: GET /health to 127.0.0.1:{port}: connection refused (is vLLM listening?)\n"
    ), result.stdout


def test_liveness_never_calls_an_idle_engine_hung(vllm_server: VllmServer, tmp_path: Path) -> None:
    # Nothing in flight: however long the token counters stand still (here past a 0.5 s window), the engine is
    # idle, not hung; the progress clock restarts on every run.
    state = tmp_path / "state.json"
    args = ("--stall-seconds", "0.5", "--state-file", str(state))
    first = run_probe("liveness", vllm_server.port, *args)
    time.sleep(1.0)  # twice the window
    second = run_probe("liveness", vllm_server.port, *args)
    for result in (first, second):
        assert result.returncode == 0 and result.stdout == "ok: engine alive (idle)\n", result.stdout + result.stderr
    assert json.loads(state.read_text())["version"] == probe.STATE_VERSION  # the clock was (re)started


# ---- health and metrics ---------------------------------------------------------------------------------
def test_health_and_metric_names(vllm_server: VllmServer) -> None:
    # A multi-token request first, so the latency histograms have observations whatever ran before.
    status, body = http_post_json(
        f"{vllm_server.base_url}/v1/completions",
        {"model": vllm_server.release_id, "prompt": "The model serves", "max_tokens": 4, "temperature": 0},
    )
    assert status == 200 and len(body["choices"]) == 1, body
    assert http_get(f"{vllm_server.base_url}/health")[0] == 200
    status, metrics = http_get(f"{vllm_server.base_url}/metrics")
    assert status == 200
    for name, kind in (
        ("vllm:kv_cache_usage_perc", "gauge"),
        ("vllm:num_requests_waiting", "gauge"),
        ("vllm:inter_token_latency_seconds", "histogram"),
    ):
        assert f"# TYPE {name} {kind}\n" in metrics, f"{name} ({kind}) missing from /metrics"
        sample = rf'^{re.escape(name)}(_count)?\{{[^}}]*model_name="{re.escape(vllm_server.release_id)}"'
        assert re.search(sample, metrics, re.MULTILINE), f"no {name} sample labelled with the served model name"
    # The histogram saw the 3 inter-token gaps of the request above.
    assert metric_sum(metrics, "vllm:inter_token_latency_seconds_count", model_name=vllm_server.release_id) >= 3
