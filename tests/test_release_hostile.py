"""Issue 28, release staging and the hydration runbook: hostile values, each refused with one printable line (and
the runbook, rendered for values that pass, executed by bash against stand-in gcloud that records its argv)."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from infra.offline.release import cli as release_cli
from infra.offline.release import hydrate, stage

from .test_release_artifacts import REV, make_hf_snapshot

HYDRATE: dict[str, Any] = dict(
    project="acme-llm-staging",
    zone="us-central1-a",
    bucket="acme-weights",
    prefix=f"qwen3-32b/{REV}",
    release="qwen3-32b-2026-11",
    size_gib=200,
    provisioned_throughput_mib_s=2400,
)


def test_a_blobs_folder_linked_elsewhere_is_not_followed(tmp_path: Path) -> None:
    snap = make_hf_snapshot(tmp_path)
    repo = snap.parent.parent
    secret = tmp_path / "home" / ".ssh"
    secret.mkdir(parents=True)
    (secret / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    shutil.rmtree(repo / "blobs")
    (repo / "blobs").symlink_to(secret)  # blobs/ -> ~/.ssh
    (snap / "model.safetensors").unlink()
    (snap / "model.safetensors").symlink_to("../../blobs/id_rsa")
    with pytest.raises(stage.StageError) as err:
        stage.scan_source(snap, REV)
    assert any("model.safetensors points outside the source folder" in p for p in err.value.problems)


def test_a_real_blobs_folder_is_followed(tmp_path: Path) -> None:
    files, _ = stage.scan_source(make_hf_snapshot(tmp_path), REV)
    assert "model.safetensors" in [f.path for f in files]


def _fifo(tmp_path: Path) -> Path:
    fifo = tmp_path / "template.json"
    os.mkfifo(fifo)
    return fifo


@pytest.mark.parametrize("make", [_fifo, lambda _: Path("/dev/zero"), lambda p: p])
def test_a_template_that_is_not_a_regular_file_is_refused_without_blocking(tmp_path: Path, make) -> None:
    path = make(tmp_path)
    result: list[BaseException] = []

    def run() -> None:
        try:
            stage.release_identity_json({"model_revision": REV}, path)
        except BaseException as e:
            result.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(5)
    assert not t.is_alive(), "reading the template blocked"
    assert isinstance(result[0], stage.StageError) and "not a regular file" in result[0].problems[0]


def test_a_template_with_a_duplicate_key_is_refused(tmp_path: Path) -> None:
    t = tmp_path / "t.json"
    t.write_text('{"release": "a", "release": "b"}')
    with pytest.raises(stage.StageError) as err:
        stage.release_identity_json({"model_revision": REV}, t)
    assert "duplicate" in err.value.problems[0]


def test_write_into_a_missing_folder_is_refused_before_anything_is_read(tmp_path: Path, capsys) -> None:
    argv = ["release", "stage", str(tmp_path / "nowhere"), "--bucket", "acme-weights", "--model", "m"]
    argv += ["--revision", REV, "--release-template", str(tmp_path / "t.json"), "--write", str(tmp_path / "no/r.json")]
    assert release_cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--write" in err and "does not exist" in err, err


@pytest.mark.parametrize("bucket", ["acme-weights\n", "acme-weights\nrm -rf ~"])
def test_a_final_newline_in_an_identifier_is_refused(bucket: str) -> None:
    assert any("bucket name" in p for p in stage.input_problems(Path("."), bucket, "m", REV, REV))
    with pytest.raises(hydrate.HydrationError):
        hydrate.hydration_runbook(**{**HYDRATE, "bucket": bucket})
    with pytest.raises(hydrate.HydrationError):
        hydrate.hydration_runbook(**{**HYDRATE, "release": "r1\n"})


def test_file_names_reach_the_terminal_printable(tmp_path: Path, capsys) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "w\x1b[2J\nerror: all files verified").write_text("x")
    os.mkfifo(src / "pipe\x07")
    assert (
        release_cli.main(["release", "stage", str(src), "--bucket", "acme-weights", "--model", "m", "--revision", REV])
        == 2
    )
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err
    assert all(line.startswith("error: ") for line in err.splitlines()), err


HOSTILE = [
    "--scp-flag=-oProxyCommand=touch CANARY",
    "-oProxyCommand=touch CANARY",
    "x;touch CANARY",
    "$(touch CANARY)",
    "`touch CANARY`",
    "a b",
    "a\ntouch CANARY",
    "host:/etc/passwd",
    "components/serving/verify_release.py\n",
]


@pytest.mark.parametrize("verifier", HOSTILE)
def test_a_verifier_that_would_be_a_flag_or_a_command_is_refused(verifier: str) -> None:
    with pytest.raises(hydrate.HydrationError) as err:
        hydrate.hydration_runbook(**HYDRATE, verifier=verifier)
    assert any("verifier" in p for p in err.value.problems)


STAND_IN = """#!/bin/sh
# Records its argv (one NUL-separated record per call) and answers READY to `snapshots describe`.
for a in "$@"; do printf '%s\\0' "$a" >> "$ARGV_LOG"; done; printf '\\n' >> "$ARGV_LOG"
case "$*" in *"snapshots describe"*) echo READY;; esac
"""


@pytest.mark.parametrize(
    "over",
    [
        {},
        {"subnet": "projects/acme-llm-staging/regions/us-central1/subnetworks/hydrate"},
        {"verifier": "./+tools/verify_release.py"},
        {"release": "a.b-c"},
    ],
)
def test_every_printed_runbook_runs_exactly_its_commands(tmp_path: Path, over: dict[str, str]) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("gcloud", "gsutil"):
        (bin_dir / tool).write_text(STAND_IN)
        (bin_dir / tool).chmod(0o755)
    book = hydrate.hydration_runbook(**{**HYDRATE, **over})
    script = tmp_path / "runbook.sh"
    script.write_text(hydrate.render_runbook(book))
    log = tmp_path / "argv.log"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "ARGV_LOG": str(log), "HOME": str(tmp_path)}
    proc = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    calls = [tuple(rec.split("\0")[:-1]) for rec in log.read_text().split("\n") if rec]
    assert calls == [c[1:] for c in book.gcloud_commands()]
    assert not (tmp_path / "CANARY").exists()
    assert (
        proc.stdout
        == f"{book.release}: snapshot {book.snapshot} (set llm-serving:gke.weights.hyperdisk_ml.snapshots.{book.release})\n"
    )
