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
