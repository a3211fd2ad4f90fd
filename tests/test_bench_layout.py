"""``llm-serving bench-layout`` (infra/offline/bench/layout.py): seed 003's interference and scaling tests as sweeps of
the ordinary benchmark, compared by their operating points. The sweeps are stood in by a launcher that writes the
records a sweep would (tests/test_bench_record.py builds them); the real benchmark is tests/integration/
test_bench_real.py. Also the benchmark's ``--group/--model`` target: a co-hosted model as the bench measures it."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from infra.config.measurement import args_sha256
from infra.offline import cli, stackfile
from infra.offline.bench import layout as lay
from infra.offline.bench.record import write_measurement
from infra.offline.bench.runner import BenchError

from .test_bench_record import record, rp

STACK = "dev-cohost-gke"


def test_the_seeds_interference_figures_give_their_ratio():
    # seed 003: Gemma-3n 30.21 req/s co-hosted vs 30.96 alone: 30.21 / 30.96 = 0.9758
    co = lay.Side("co-hosted", "u", "r", 30.21, 3021.0, None)
    alone = lay.Side("alone", "u", "r", 30.96, 3096.0, None)
    c = lay.compare("gemma-3n", co, alone, 1.0)
    assert (c.rps_ratio, c.output_tokens_ratio, c.ideal) == (0.9758, 0.9758, 1.0)
    none = lay.compare("m", lay.Side("co-hosted", "u", "r", None, None, "no offered rate met the SLO"), alone, 1.0)
    assert none.rps_ratio is None and "no operating point (no offered rate met the SLO)" in lay.describe(none, "x")


def args(tmp_path: Path, *argv: str) -> argparse.Namespace:
    ns = cli.parser().parse_args(["bench-layout", *argv, "--out", str(tmp_path / "out")])
    return ns


def fake_launcher(curves: dict[str, list]) -> tuple[lay.Launcher, list[list[str]]]:
    """Writes, for each sweep, the record a sweep of its out directory's curve would write; records the argv."""
    seen: list[list[str]] = []

    def launch(runs: Sequence[tuple[list[str], Path]]) -> list[int]:
        for argv, out in runs:
            seen.append(argv)
            (out / "sweep").mkdir(parents=True)
            write_measurement(record(curves[out.name]), out / "sweep" / "measurement.json")
        return [0] * len(runs)

    return launch, seen


def test_interference_sweeps_the_models_together_then_each_alone(tmp_path: Path, capsys):
    ns = args(
        tmp_path,
        "interference",
        "--stack",
        STACK,
        "--group",
        "pair",
        "--url",
        "http://pod:8000",
        "--alone",
        "llama-3.1-8b=http://a:8000",
        "--alone",
        "mistral-7b=http://b:8000",
        "--tokenizer",
        "llama-3.1-8b=/tok/l",
        "--tokenizer",
        "mistral-7b=/tok/m",
        "--rates",
        "1,2,4,8",
    )
    # co-hosted llama meets the SLO up to 2 req/s, alone up to 4; mistral 4 either way
    curves = {
        "cohosted-llama-3.1-8b": [rp(1, 400, 1.0), rp(2, 700, 0.99), rp(4, 1600, 0.96)],
        "alone-llama-3.1-8b": [rp(1, 400, 1.0), rp(2, 700, 0.99), rp(4, 1400, 0.96), rp(8, 4000, 0.5)],
        "cohosted-mistral-7b": [rp(1, 400, 1.0), rp(4, 1400, 0.96), rp(8, 4000, 0.5)],
        "alone-mistral-7b": [rp(1, 400, 1.0), rp(4, 1400, 0.96), rp(8, 4000, 0.5)],
    }
    launch, seen = fake_launcher(curves)
    assert lay.cmd_layout(ns, launch) == 0
    # the co-hosted sweeps are launched in one batch (concurrently), each through the pod, naming its model
    assert [a[a.index("--model") + 1] for a in seen] == ["llama-3.1-8b", "mistral-7b", "llama-3.1-8b", "mistral-7b"]
    assert [a[a.index("--url") + 1] for a in seen] == [
        "http://pod:8000",
        "http://pod:8000",
        "http://a:8000",
        "http://b:8000",
    ]
    assert all(a[a.index("--rates") + 1] == "1,2,4,8" and a[a.index("--group") + 1] == "pair" for a in seen)
    doc = json.loads((tmp_path / "out" / "layout.json").read_text())
    got = {
        c["model"]: (c["numerator"]["offered_rps"], c["denominator"]["offered_rps"], c["rps_ratio"])
        for c in doc["comparisons"]
    }
    assert got == {"llama-3.1-8b": (2.0, 4.0, 0.5), "mistral-7b": (4.0, 4.0, 1.0)}
    err = capsys.readouterr().err
    assert "llama-3.1-8b (interference): co-hosted 2 req/s (700.0 output tokens/s) vs alone 4 req/s" in err


def test_scaling_compares_n_instances_with_one(tmp_path: Path, capsys):
    v = json.loads(json.dumps(stackfile.read_stack_file(STACK, stackfile.STACKS_DIR).values))
    v["llm-serving:accelerators"]["h100-shared"].update(machine_type="a3-highgpu-2g", gpus_per_node=2)
    v["llm-serving:cohosting"]["pair"]["models"][0]["instances"] = 2
    import yaml

    (tmp_path / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump({"config": v}))
    ns = args(
        tmp_path,
        "scaling",
        "--stack",
        STACK,
        "--group",
        "pair",
        "--model",
        "llama-3.1-8b",
        "--url",
        "http://pod:8000",
        "--one",
        "http://single:8000",
        "--tokenizer",
        "llama-3.1-8b=/tok/l",
        "--stacks-dir",
        str(tmp_path),
    )
    curves = {
        "instances-many": [rp(1, 400, 1.0), rp(2, 500, 1.0), rp(4, 700, 0.99), rp(8, 4000, 0.5)],
        "instances-one": [rp(1, 400, 1.0), rp(2, 700, 0.99), rp(4, 4000, 0.5)],
    }
    launch, seen = fake_launcher(curves)
    assert lay.cmd_layout(ns, launch) == 0
    (c,) = json.loads((tmp_path / "out" / "layout.json").read_text())["comparisons"]
    # 4 req/s through two instances, 2 through one: 2x, the ideal for 2 instances
    assert (c["numerator"]["label"], c["rps_ratio"], c["ideal"]) == ("2 instances", 2.0, 2.0)
    assert [a[a.index("--url") + 1] for a in seen] == ["http://pod:8000", "http://single:8000"]


def test_refusals_name_the_flag(tmp_path: Path, capsys):
    ns = args(tmp_path, "interference", "--stack", STACK, "--group", "pair", "--url", "http://pod:8000")
    assert lay.cmd_layout(ns, fake_launcher({})[0]) == 2
    assert "every model needs --alone MODEL=URL and --tokenizer MODEL=DIR: ['llama-3.1-8b', 'mistral-7b'" in (
        capsys.readouterr().err
    )
    ns = args(tmp_path, "interference", "--stack", STACK, "--group", "trio", "--url", "http://pod:8000")
    assert lay.cmd_layout(ns, fake_launcher({})[0]) == 2
    assert "--group 'trio': not a co-host server group of stack dev-cohost-gke" in capsys.readouterr().err
    ns = args(tmp_path, "scaling", "--stack", STACK, "--group", "pair", "--url", "u", "--model", "qwen3-8b")
    assert lay.cmd_layout(ns, fake_launcher({})[0]) == 2
    assert "--model 'qwen3-8b': group pair serves llama-3.1-8b, mistral-7b" in capsys.readouterr().err
    with pytest.raises(BenchError, match="--alone 'x': expected MODEL=VALUE"):
        lay._pairs(["x"], "--alone")


def test_the_bench_targets_a_co_hosted_model_with_its_instances_arguments(tmp_path: Path):
    ns = cli.parser().parse_args(
        [
            "bench",
            "--stack",
            STACK,
            "--group",
            "pair",
            "--model",
            "mistral-7b",
            "--url",
            "http://pod:8000/",
            "--tokenizer",
            str(tmp_path),
        ]
    )
    t = cli.bench_target(ns)
    plan = cli.resolve(STACK).plan
    inst = next(i for i in plan.cohosting["pair"].server.instances if i.public_name == "mistral-7b")  # type: ignore[attr-defined]
    assert (t.served_model_name, t.release, t.base_url) == (
        "mistral-7b",
        "mistral-7b-v0.3-fp8-2026-11-25.1",
        "http://pod:8000",
    )
    assert t.vllm_args == inst.args and t.vllm_args_sha256 == args_sha256(inst.args)
    assert (t.machine_type, t.gpus_per_node, t.tensor_parallel_size) == ("a3-highgpu-1g", 1, 1)
    ns.model = "qwen3-8b"
    with pytest.raises(BenchError, match=r"--model .qwen3-8b.: group pair serves llama-3\.1-8b, mistral-7b"):
        cli.bench_target(ns)
