"""``bench`` subcommand wiring and its failure mode: one ``error:`` line on stderr, exit 2, no traceback.
(The real run against vLLM is tests/integration/test_bench_real.py.)"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from infra.offline.bench.cli import register

from .test_bench_record import target


def parse(tmp_path: Path, *argv: str, resolved=None) -> argparse.Namespace:
    seen: dict[str, argparse.Namespace] = {}

    def resolve(args: argparse.Namespace):
        seen["args"] = args
        return resolved or target(tokenizer_path=str(tmp_path))

    p = argparse.ArgumentParser(prog="llm-serving")
    register(p.add_subparsers(dest="command", required=True), resolve)
    return p.parse_args(["bench", *argv])


def run(tmp_path: Path, capsys, *argv: str) -> tuple[int, str]:
    args = parse(tmp_path, *argv)
    code = args.fn(args)
    err = capsys.readouterr().err
    return code, err


def test_options_parse(tmp_path: Path):
    args = parse(
        tmp_path,
        "--stack",
        "prod",
        "--pool",
        "canary",
        "--rates",
        "0.5,1,2",
        "--quick",
        "--priority-mix",
        "interactive=0.8,batch=0.2",
        "--prefix-ratio",
        "0.3",
        "--guidellm",
        "/x",
        "--record",
        "stacks/measurements/m.json",
        "--out",
        str(tmp_path),
        "--url",
        "http://h:1",
        "--duration-seconds",
        "30",
    )
    assert (args.stack, args.pool, args.rates, args.quick, args.prefix_ratio) == (
        "prod",
        "canary",
        (0.5, 1.0, 2.0),
        True,
        0.3,
    )
    assert parse(tmp_path).rates is None and parse(tmp_path, "--rates", "auto").rates is None


def test_bad_rates_are_an_argparse_error(tmp_path: Path, capsys):
    with pytest.raises(SystemExit) as exit_:
        parse(tmp_path, "--rates", "1,-2")
    assert exit_.value.code == 2
    assert "rates must be distinct positive numbers, got '1,-2'" in capsys.readouterr().err


def test_bad_priority_mix_is_one_line_exit_2(tmp_path: Path, capsys):
    code, err = run(tmp_path, capsys, "--priority-mix", "chat=1", "--out", str(tmp_path / "o"))
    assert code == 2
    assert err == "error: --priority-mix: unknown class 'chat' (contract classes: interactive, batch)\n"


def test_missing_guidellm_is_one_line_exit_2(tmp_path: Path, capsys):
    code, err = run(tmp_path, capsys, "--guidellm", str(tmp_path / "nope"), "--out", str(tmp_path / "o"))
    assert code == 2
    assert err == f"error: --guidellm {tmp_path / 'nope'}: not an executable file\n"


def test_unreachable_server_is_one_line_exit_2(tmp_path: Path, capsys):
    fake = tmp_path / "guidellm"
    fake.write_text("#!/bin/sh\necho 'guidellm version: 0.8.1'\n")
    fake.chmod(0o755)
    # Port 9 (discard) on loopback: nothing listens there in the test environment, so the connection is refused.
    code, err = run(
        tmp_path, capsys, "--guidellm", str(fake), "--url", "http://127.0.0.1:9", "--out", str(tmp_path / "o")
    )
    assert code == 2
    assert err.startswith("error: http://127.0.0.1:9/health: not reachable (") and err.count("\n") == 1


def test_existing_record_is_refused_before_any_load(tmp_path: Path, capsys):
    existing = tmp_path / "m.json"
    existing.write_text("{}")
    code, err = run(tmp_path, capsys, "--record", str(existing))
    assert code == 2
    assert err == f"error: --record {existing} already exists: refusing to overwrite it\n"


def test_missing_tokenizer_directory(tmp_path: Path, capsys):
    code, err = run(tmp_path, capsys, "--tokenizer", str(tmp_path / "no-tokenizer"))
    assert code == 2
    assert err == (f"error: tokenizer directory {tmp_path / 'no-tokenizer'} does not exist (pass --tokenizer DIR)\n")


def test_default_guidellm_location_is_the_vllm_venv():
    from infra.offline.bench.runner import DEFAULT_GUIDELLM, REPO

    assert DEFAULT_GUIDELLM == REPO / ".venv-vllm" / "bin" / "guidellm"
    assert os.path.basename(DEFAULT_GUIDELLM) == "guidellm"


# ---- where a stack's release and measurement paths resolve ---------------------------------------------------


def test_with_stacks_dir_paths_stay_relative_to_the_project_root_and_the_error_says_so(tmp_path: Path, capsys):
    """A team keeping its stack files elsewhere puts the record beside them: it is not read from there, and the error
    states the rule (release and measured paths are relative to the project root, as the Pulumi program reads them)."""
    import yaml

    from infra.offline import cli
    from infra.offline.stackfile import ROOT, STACKS_DIR

    stacks = tmp_path / "team-stacks"
    (stacks / "measurements").mkdir(parents=True)
    doc = yaml.safe_load((STACKS_DIR / "Pulumi.dev.yaml").read_text())
    doc["config"]["llm-serving:serving"]["stable"]["measured"] = "stacks/measurements/dev-stable.json"
    (stacks / "Pulumi.dev.yaml").write_text(yaml.safe_dump(doc))
    (stacks / "measurements" / "dev-stable.json").write_text("{}")  # beside the stack file: never read

    assert cli.main(["capacity", "--stack", "dev", "--stacks-dir", str(stacks)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "1 configuration error(s):",
        "  - llm-serving:serving.stable.measured: stacks/measurements/dev-stable.json: file not found",
        f"note: --stacks-dir {stacks} moves only the stack files; release and `measured:` paths "
        f"(stacks/releases/..., stacks/measurements/...) are read from the project root {ROOT}, as the Pulumi "
        "program reads them, not from beside the stack file",
        "nothing was registered.",
    ]
    # The release files the stack names are read from the project root too: the same stack without the record plans.
    del doc["config"]["llm-serving:serving"]["stable"]["measured"]
    (stacks / "Pulumi.dev.yaml").write_text(yaml.safe_dump(doc))
    assert cli.main(["capacity", "--stack", "dev", "--stacks-dir", str(stacks)]) == 0


def test_without_stacks_dir_a_missing_file_gets_no_note(capsys):
    from infra.config import ConfigError, ConfigIssue
    from infra.offline.cli import paths_note
    from infra.offline.stackfile import STACKS_DIR

    err = ConfigError([ConfigIssue("llm-serving:releases[0]", "stacks/releases/dev/x.json: file not found")])
    assert paths_note(None, err) is None
    assert paths_note(STACKS_DIR, err) is None  # the default folder, named explicitly
    other = ConfigError([ConfigIssue("llm-serving:contract.ttft_p95_ms", "must be > 0")])
    assert paths_note(Path("/elsewhere"), other) is None  # an error naming no file path
    assert paths_note(Path("/elsewhere"), err) is not None
