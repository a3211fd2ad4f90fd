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
