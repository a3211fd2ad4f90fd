"""Issue 28: one hostile value per class of bad input on the newer surfaces (release staging, runbooks, bench,
measurement records, the Vertex caller role), each seen to fail before its fix. The CLI-level cases run the real
``llm-serving`` entry point and assert one ``error:`` line naming the flag, never a traceback."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.config import ConfigError
from infra.offline.stackfile import ROOT, read_stack_file
from infra.resolve import resolve_stack


def _values(stack: str) -> dict[str, Any]:
    return json.loads(json.dumps(read_stack_file(stack, ROOT / "stacks").values))


# ---- the Vertex caller role --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "role",
    ["roles/aiplatform.admin", "roles/owner", "roles/editor", "roles/aiplatform.user\n", "roles/iam.securityAdmin"],
)
def test_endpoint_callers_get_invoker_roles_only(role: str) -> None:
    v = _values("staging-vertex")
    v["llm-serving:vertex"]["caller_role"] = role
    with pytest.raises(ConfigError) as err:
        resolve_stack(v, "staging-vertex", ROOT)
    assert any("caller_role" in str(i) for i in err.value.issues), err.value.issues


@pytest.mark.parametrize("role", ["roles/aiplatform.user", "projects/acme-llm-staging/roles/endpointPredictOnly"])
def test_the_invoker_role_and_a_custom_role_are_accepted(role: str) -> None:
    v = _values("staging-vertex")
    v["llm-serving:vertex"]["caller_role"] = role
    assert resolve_stack(v, "staging-vertex", ROOT).config is not None


# ---- bench -------------------------------------------------------------------------------------------------------
from pathlib import Path  # noqa: E402

from infra.offline.bench.runner import resolve_guidellm  # noqa: E402

from .test_bench_cli import parse, run  # noqa: E402


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://[::1", "not a valid URL"),
        ("http://h:port", "not a valid URL"),
        ("http://h:99999", "not a valid URL"),
        ("http://user:s3cret@h:1", "credentials"),
        ("file:///etc/passwd", "only http"),
        ("http://", "no host"),
        ("http://h:1/\x1b[2J", "control characters"),
    ],
)
@pytest.mark.parametrize("flag", ["--url", "--metrics-url"])
def test_bad_urls_are_one_line_without_traceback_or_password(tmp_path: Path, capsys, flag: str, url: str, says: str):
    code, err = run(tmp_path, capsys, flag, url, "--out", str(tmp_path / "o"))
    assert code == 2 and err.count("\n") == 1 and err.startswith(f"error: {flag} "), err
    assert says in err and "s3cret" not in err and "\x1b" not in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ("--duration-seconds", "0"),
        ("--duration-seconds", "nan"),
        ("--duration-seconds", "1e9"),
        ("--rates", "100000"),
        ("--rates", ",".join(str(i) for i in range(1, 40))),
        ("--prefix-ratio", "inf"),
    ],
)
def test_bench_numbers_are_finite_and_bounded(tmp_path: Path, capsys, argv: tuple[str, str]):
    with pytest.raises(SystemExit) as exit_:
        parse(tmp_path, *argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert argv[0].lstrip("-").split("-")[0] in err, err


def _fake_guidellm(tmp_path: Path) -> Path:
    exe = tmp_path / "guidellm"
    exe.write_text("#!/bin/sh\necho 'guidellm version: 0.3.0'\n")
    exe.chmod(0o755)
    return exe


def test_record_into_a_missing_folder_is_refused_before_any_load(tmp_path: Path, capsys):
    code, err = run(tmp_path, capsys, "--record", str(tmp_path / "no" / "m.json"), "--out", str(tmp_path / "o"))
    assert code == 2 and "--record" in err and "does not exist" in err, err


def test_a_refused_run_leaves_no_empty_out_folder(tmp_path: Path, capsys):
    exe = _fake_guidellm(tmp_path)
    out = tmp_path / "runs" / "o"
    code, err = run(tmp_path, capsys, "--url", "http://127.0.0.1:9", "--guidellm", str(exe), "--out", str(out))
    assert code == 2 and "not reachable" in err, err
    assert not out.exists() and not out.parent.exists()


def test_guidellm_runs_the_file_that_was_checked(tmp_path: Path, monkeypatch):
    _fake_guidellm(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert resolve_guidellm("./guidellm") == tmp_path / "guidellm"
    assert resolve_guidellm("./guidellm").is_absolute()


# ---- measurement records: the contract's objectives and workload; every target; a GKE plan citing one ------------
import argparse  # noqa: E402
import dataclasses  # noqa: E402
import shutil  # noqa: E402

from infra.offline import cli  # noqa: E402
from infra.offline.bench.analysis import Slo, operating_point  # noqa: E402
from infra.offline.bench.record import build_measurement, load_measurement, write_measurement  # noqa: E402
from infra.offline.bench.runner import SweepConfig  # noqa: E402
from infra.offline.bench.target import BenchTarget  # noqa: E402
from infra.offline.bench.workload import parse_priority_mix, plan_workload  # noqa: E402
from infra.offline.planrun import run_plan  # noqa: E402

from .test_bench_record import CURVE, WHEN  # noqa: E402


def _target(stack: str) -> BenchTarget:
    ns = argparse.Namespace(
        stack=stack, stacks_dir=None, pool="stable", url="http://127.0.0.1:8000", tokenizer="/models/t",
        served_args=None, served_args_reason=None,
    )  # fmt: skip
    return cli.bench_target(ns)


def _record(t: BenchTarget, *, slo: Slo | None = None, duration_s: float = 120):
    """What ``bench`` writes for target ``t`` (equal shares of the contract's classes), with CURVE's points."""
    plan = plan_workload(
        prompt_mean=t.prompt_mean_tokens,
        prompt_p95=t.prompt_p95_tokens,
        max_input=t.max_input_tokens,
        output_mean=t.output_mean_tokens,
        output_p95=t.output_p95_tokens,
        max_output=t.max_output_tokens,
        prefix_ratio=0.0,
        mix=parse_priority_mix(None, t.priority_classes),
    )
    found, reason = operating_point(CURVE)
    cfg = SweepConfig(
        rates=None,
        start_rps=1,
        growth=2,
        max_rates=10,
        refine_steps=2,
        duration_s=duration_s,
        warmup_fraction=0.1,
    )
    return build_measurement(
        target=t,
        plan=plan,
        slo=slo or Slo(t.ttft_p95_ms, t.itl_p95_ms),
        sweep_cfg=cfg,
        points=CURVE,
        found=found,
        no_point_reason=reason,
        guidellm_version="0.8.1",
        measured_at=WHEN,
        metrics_period_s=0.5,
    )


@pytest.fixture()
def record_root(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "stacks" / "releases", tmp_path / "stacks" / "releases")
    (tmp_path / "stacks" / "measurements").mkdir()
    return tmp_path


def _measured_errors(root: Path, stack: str, rec, **stable: Any) -> dict[str, str]:
    write_measurement(rec, root / "stacks/measurements/m.json")
    v = _values(stack)
    v["llm-serving:serving"]["stable"].update(measured="stacks/measurements/m.json", **stable)
    try:
        resolve_stack(v, stack, root)
    except ConfigError as err:
        return {i.path: i.message for i in err.issues}
    return {}


@pytest.mark.parametrize("stack", ["prod", "dev-cloudrun", "staging-vertex"])
def test_bench_writes_a_valid_record_for_every_target(record_root: Path, stack: str) -> None:
    t = _target(stack)
    path = record_root / "r.json"
    write_measurement(_record(t), path)  # validates against the schema as it builds
    rec = load_measurement(path)
    assert rec.accelerator.machine_type == t.machine_type and rec.accelerator.gpu_type == t.gpu_type
    errors = _measured_errors(record_root, stack, rec)
    assert not any("measured another configuration" in m for m in errors.values()), errors


def test_a_cloud_run_pool_records_its_machine_facts() -> None:
    t = _target("dev-cloudrun")
    assert (t.machine_type, t.gpu_type, t.gpus_per_node) == ("cloud-run", "nvidia-l4", 1)


@pytest.mark.parametrize(
    ("over", "says"),
    [
        (dict(slo=Slo(3000, 50)), "slo.ttft_p95_ms: record 3000, contract 1500"),
        (dict(slo=Slo(1500, 200)), "slo.itl_p95_ms: record 200, contract 50"),
        (dict(slo=Slo(1500, 50, min_goodput_share=0.5)), "slo.min_goodput_share: record 0.5, at least 0.95"),
        (dict(duration_s=10), "workload.duration_floor_seconds: record 10 s per rate"),
    ],
)
def test_a_record_judged_under_another_contract_is_refused(record_root: Path, over, says: str) -> None:
    errors = _measured_errors(record_root, "prod", _record(_target("prod"), **over), min_replicas=4)
    assert set(errors) == {"llm-serving:serving.stable.measured"}, errors
    assert says in errors["llm-serving:serving.stable.measured"]


def test_a_record_of_other_lengths_is_refused(record_root: Path) -> None:
    t = dataclasses.replace(_target("prod"), prompt_mean_tokens=100, prompt_p95_tokens=200)
    errors = _measured_errors(record_root, "prod", _record(t), min_replicas=4)
    assert "workload.prompt.contract_p95: record 200, contract 8000" in errors["llm-serving:serving.stable.measured"]


def test_a_gke_stack_citing_a_record_plans(record_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real program (under the mocks) plans prod with its stable pool sized from a record: a project root in
    the test's folder (release files copied, the record beside them), so the repository is never written."""
    import infra.entry

    monkeypatch.setattr(infra.entry, "PROJECT_ROOT", record_root)
    write_measurement(_record(_target("prod")), record_root / "stacks/measurements/m.json")
    text = (ROOT / "stacks" / "Pulumi.prod.yaml").read_text()
    old = "      min_replicas: 2\n      max_replicas: 4\n"
    assert text.count(old) >= 1
    new = "      min_replicas: 4\n      max_replicas: 4\n      measured: stacks/measurements/m.json\n"
    stacks = tmp_path / "stack-files"
    stacks.mkdir()
    (stacks / "Pulumi.prod.yaml").write_text(text.replace(old, new, 1))
    run = run_plan("prod", stacks)
    assert run.resolved.plan.measurements["stable"].operating_point is not None
    assert run.resolved.plan.pools["stable"].capacity.required_replicas == 4  # as test_measured_capacity derives
