"""The Vertex AI co-host container runs as rendered: the shipped ``dev-cohost`` group's deployed model's own
``containerSpec.command`` + ``args`` are executed here, with only what a CPU machine must stand in for changed (the
scripts folder, the ports, ``vllm serve`` replaced by tests/fake_engine.py, the Cloud Storage release check by a no-op).
The bootstrap writes the server and the verifier byte-for-byte, becomes the server (the process Vertex signals), and
the server answers each co-hosted model through the one port, by model name, then drains on SIGTERM."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from components import naming
from components.vertex import container

from .gcs_emulator import Gcs, free_port, running_emulator
from .test_cohosting import GROUP_DEPLOYMENT, deployed

REPO = Path(__file__).resolve().parents[1]
FAKE = REPO / "tests" / "fake_engine.py"
WAIT_S = 30.0


def rendered() -> tuple[list[str], list[str]]:
    spec = deployed(GROUP_DEPLOYMENT)["upload_model_request"]["model"]["containerSpec"]
    return list(spec["command"]), list(spec["args"])


def request(port: int, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=json.dumps(body) if body is not None else None)
        r = conn.getresponse()
        data = r.read()
        return r.status, json.loads(data) if data else {}
    finally:
        conn.close()


def wait_healthy(proc: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the server exited before it was healthy"
        try:
            if request(port, "GET", "/health")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError("the server never became healthy")


def test_the_rendered_command_line_fits_execve_and_names_the_scripts_it_writes() -> None:
    command, args = rendered()
    assert command[:2] == ["python3", "-c"]
    assert command[2] == (REPO / "components/vertex/bootstrap.py").read_text()
    assert command[3] == naming.VERTEX_SCRIPTS_DIR
    doc = json.loads(args[1])
    # Every instance's release check runs the verifier the bootstrap writes into that folder.
    assert {i["verify"][1] for i in doc["instances"]} == {f"{naming.VERTEX_SCRIPTS_DIR}/{naming.VERIFY_SCRIPT_FILE}"}
    # Each argument below MAX_ARG_STRLEN, all of them below ARG_MAX, with room to spare for the environment.
    assert max(len(a.encode()) for a in command + args) < container.MAX_ARG_BYTES
    assert container.command_line_bytes(command + args) < container.MAX_ARGS_TOTAL_BYTES / 4


def test_bootstrap_refuses_a_bad_command_line_and_runs_nothing(tmp_path: Path) -> None:
    boot = (REPO / "components/vertex/bootstrap.py").read_text()
    for argv in (
        [str(tmp_path / "s")],
        [str(tmp_path / "s"), "a.py", "--"],
        [str(tmp_path / "s"), "../x.py", "t", "--"],
    ):
        r = subprocess.run([sys.executable, "-c", boot, *argv], capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and r.stderr.startswith("bootstrap: ")
    assert not (tmp_path / "s").exists()


@pytest.fixture
def gcs() -> Any:
    """A loopback Cloud Storage holding the rendered weights bucket (the watched model set's)."""
    _, args = rendered()
    bucket = args[args.index("--watch") + 1].removeprefix("gs://").split("/", 1)[0]
    with running_emulator(bucket=bucket) as g:
        yield g


@pytest.fixture
def server(tmp_path: Path, gcs: Gcs) -> Any:
    command, args = rendered()
    scripts = tmp_path / "scripts"
    command[3] = str(scripts)
    doc = json.loads(args[1])
    doc["engine_command"] = [sys.executable, str(FAKE)]
    doc["port"] = free_port()
    for inst in doc["instances"]:
        port = free_port()
        inst["port"] = port
        inst["args"][inst["args"].index("--port") + 1] = str(port)
        # The release check reads Cloud Storage: here it only proves the verifier the bootstrap wrote runs.
        inst["verify"] = [sys.executable, str(scripts / naming.VERIFY_SCRIPT_FILE), "--help"]
    args[1] = json.dumps(doc)
    args[args.index("--poll-seconds") + 1] = "0.3"  # the rendered 30 s, shortened to see an update in the test
    log = (tmp_path / "server.log").open("wb")
    # "python3" is the image's interpreter; here the test's, which has the server's aiohttp. The server reads Cloud
    # Storage through STORAGE_EMULATOR_HOST as through the metadata server's token on Vertex.
    proc = subprocess.Popen(
        [sys.executable, *command[1:], *args],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, **Gcs.env(gcs.emulator_url)},
    )
    try:
        yield proc, doc, scripts, args, gcs
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()


def test_the_rendered_container_serves_every_model_by_name_and_drains(server: Any) -> None:
    proc, doc, scripts, _, _ = server
    wait_healthy(proc, doc["port"])
    # The scripts were written byte-for-byte from the command line.
    assert (scripts / naming.COHOST_SERVER_FILE).read_text() == (REPO / "components/cohost/server.py").read_text()
    assert (scripts / naming.VERIFY_SCRIPT_FILE).read_text() == (
        REPO / "components/serving/verify_release.py"
    ).read_text()
    # The bootstrap became the server: the process Vertex signals is the one that serves.
    status, models = request(doc["port"], "GET", "/v1/models")
    assert status == 200
    assert {m["id"] for m in models["data"]} == {n for i in doc["instances"] for n in i["model_names"]}
    for public, release in (
        ("llama-3.1-8b", "llama-3.1-8b-fp8-2026-11-25.1"),
        ("mistral-7b", "mistral-7b-v0.3-fp8-2026-11-25.1"),
    ):
        status, body = request(
            doc["port"],
            "POST",
            "/v1/chat/completions",
            {"model": public, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2},
        )
        assert status == 200, body
        assert body["model"] in (public, release)
    status, body = request(doc["port"], "POST", "/v1/chat/completions", {"model": "qwen3-8b", "messages": []})
    assert status == 404 and "llama-3.1-8b" in body["error"]["message"]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=WAIT_S) == 0


def wait_for(what: str, cond: Any) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.2)
    raise AssertionError(f"never: {what}")


def test_the_rendered_container_follows_its_model_set_document(server: Any) -> None:
    """update_models on Vertex: the rendered ``--watch`` object in the weights bucket, written with the llama
    instance unchanged and mistral gone: mistral is drained, llama's process keeps running (same PID)."""
    proc, doc, _, args, gcs = server
    wait_healthy(proc, doc["port"])
    _, status = request(doc["port"], "GET", "/cohost/status")
    before = {i["name"]: i["pid"] for i in status["instances"]}
    watched = args[args.index("--watch") + 1].removeprefix(f"gs://{gcs.bucket}/")
    assert watched == "cohosting/dev-cohost/pair.json"
    new = {**doc, "instances": [doc["instances"][0]]}
    gcs.client(gcs.emulator_url).bucket(gcs.bucket).blob(watched).upload_from_string(json.dumps(new))

    def names() -> set[str]:
        return {i["name"] for i in request(doc["port"], "GET", "/cohost/status")[1]["instances"]}

    wait_for("mistral drained", lambda: names() == {"llama-3-1-8b-0"})
    _, status = request(doc["port"], "GET", "/cohost/status")
    assert {i["name"]: i["pid"] for i in status["instances"]} == {"llama-3-1-8b-0": before["llama-3-1-8b-0"]}
    status_code, _ = request(doc["port"], "POST", "/v1/chat/completions", {"model": "mistral-7b", "messages": []})
    assert status_code == 404
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=WAIT_S) == 0
