"""A real release end to end: the tiny model staged into a real Cloud Storage API (gcp-storage-emulator on loopback),
verified by the pod's verifier in both modes with the vLLM environment's python3, then served by the real vLLM
started through the verifier's ``--exec`` from the verified directory.

Run with ``.venv/bin/python -m pytest -q -m integration tests/integration/test_release_vllm_real.py`` (needs
.venv-vllm, see scripts/install-vllm.sh; ~1-2 min, most of it vLLM's start).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.serving import verify_release as vr
from infra.offline.release.stage import StageResult, stage_release

from ..gcs_emulator import Gcs, running_emulator
from . import vllm_harness as harness

pytestmark = pytest.mark.integration

VERIFIER = harness.REPO / "components" / "serving" / "verify_release.py"
#: A made-up commit for the locally built model (the model has no hub revision; any 40 hex identify it).
REVISION = "5eed00000000000000000000000000000000c0de"
MODEL = "tiny-llama"
#: The verifier hashes ~1 MB here; 60 s bounds a hung run, far above the ~0.2 s it takes.
VERIFY_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def gcs() -> Iterator[Gcs]:
    with running_emulator() as g:
        yield g


@pytest.fixture(scope="module")
def staged(gcs: Gcs, tiny_model_dir: Path) -> StageResult:
    return stage_release(tiny_model_dir, gcs.bucket, MODEL, REVISION, client=Gcs.client(gcs.shim_url), workers=4)


def verify(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The verifier run with the vLLM environment's python3, as in the serving image."""
    return subprocess.run(
        [str(harness.VLLM_PYTHON), str(VERIFIER), *args],
        capture_output=True,
        text=True,
        timeout=VERIFY_TIMEOUT_S,
        env=env or dict(os.environ),
    )


def download(gcs: Gcs, staged: StageResult, dest: Path) -> Path:
    client = Gcs.client(gcs.emulator_url)
    for blob in client.list_blobs(gcs.bucket, prefix=staged.folder):
        target = dest / blob.name[len(staged.folder) :]
        target.parent.mkdir(parents=True, exist_ok=True)
        blob.download_to_filename(str(target))
    return dest


def test_staged_tiny_model_verifies_and_serves(gcs: Gcs, staged: StageResult, tmp_path: Path) -> None:
    harness.require_vllm()
    assert staged.manifest == "written" and "model.safetensors" in staged.uploaded

    proc = verify(
        "gcs",
        "--bucket",
        gcs.bucket,
        "--prefix",
        f"{MODEL}/{REVISION}",
        "--expect-revision",
        REVISION,
        env=Gcs.env(gcs.shim_url),
    )
    assert proc.returncode == vr.EXIT_OK, proc.stdout
    assert proc.stdout.startswith(f"verify_release: verified {len(staged.files)} files")

    weights = download(gcs, staged, tmp_path / "weights")
    proc = verify("dir", "--path", str(weights), "--expect-revision", REVISION)
    assert proc.returncode == vr.EXIT_OK, proc.stdout

    # A damaged copy never reaches vLLM: --exec only runs after a successful verification.
    damaged = tmp_path / "damaged"
    shutil.copytree(weights, damaged)
    shard = damaged / "model.safetensors"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x01  # one flipped bit in the weights: same size, only SHA-256 can tell
    shard.write_bytes(bytes(data))
    # (The command is a stand-in that only prints: were the check broken, nothing heavy would start.)
    proc = verify(
        "dir",
        "--path",
        str(damaged),
        "--expect-revision",
        REVISION,
        "--exec",
        "--",
        str(harness.VLLM_PYTHON),
        "-c",
        "print('vllm serve would start now')",
    )
    assert proc.returncode == vr.EXIT_MISMATCH and "exec:" not in proc.stdout and "would start" not in proc.stdout
    assert "verify_release: sha256 mismatch: model.safetensors: manifest " in proc.stdout

    port = harness.free_loopback_port()
    log_path = tmp_path / "server.log"
    command = [
        str(harness.VLLM_PYTHON), str(VERIFIER), "dir", "--path", str(weights), "--expect-revision", REVISION,
        "--exec", "--",
        str(harness.VLLM_PYTHON), str(harness.SCRIPTS / "vllm_cli.py"), "serve",
        "--model", str(weights), "--host", "127.0.0.1", "--port", str(port),
        "--served-model-name", harness.RELEASE_ID, *harness.SERVER_FLAGS,
    ]  # fmt: skip
    with open(log_path, "wb") as log:
        server = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **harness.SERVER_ENV},
            cwd=harness.REPO,
            start_new_session=True,
        )
    # The harness reaps and stops what it tracks (also at exit if the test is interrupted).
    harness._RUNNING[server.pid] = server
    base = f"http://127.0.0.1:{port}"
    try:
        launched = time.monotonic()
        deadline = launched + harness.SERVER_START_TIMEOUT_S
        while True:
            assert server.poll() is None, f"vLLM exited ({server.returncode}):\n{harness.log_tail(log_path)}"
            assert time.monotonic() < deadline, f"no /health 200 in time:\n{harness.log_tail(log_path)}"
            try:
                if harness.http_get(f"{base}/health", timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(harness.HEALTH_POLL_INTERVAL_S)
        harness.TIMINGS["verify_release dir + vLLM start via --exec (to /health 200)"] = time.monotonic() - launched
        status, body = harness.http_get(f"{base}/v1/models")
        assert status == 200 and [m["id"] for m in json.loads(body)["data"]] == [harness.RELEASE_ID]
        log_lines = log_path.read_text(errors="replace").splitlines()
        assert log_lines[0].startswith("verify_release: hashing ")
        assert log_lines[1].startswith(f"verify_release: verified {len(staged.files)} files")
        assert log_lines[2].startswith(f"verify_release: exec: {harness.VLLM_PYTHON} ")
        # exec, not a child: the process we started is vLLM's API server itself.
        cmdline = Path(f"/proc/{server.pid}/cmdline").read_bytes().split(b"\0")
        assert str(harness.SCRIPTS / "vllm_cli.py").encode() in cmdline
    finally:
        harness.stop_vllm_server(server.pid)
