"""Reusable pieces for tests that need the real vLLM (CPU build in .venv-vllm/, see scripts/install-vllm.sh).

- ``check_vllm_args({"label": [...flags after `vllm serve`...]})``: validates argument lists with vLLM 0.32's own
  parser (scripts/vllm_argcheck.py); returns ``{"label": {"ok", "error", "model_source"}}``.
- ``vllm_server``: a session-scoped pytest fixture (exposed by tests/integration/conftest.py) that builds the
  tiny random-weight model, starts ``vllm serve`` once on a free loopback port and yields a ``VllmServer``
  (``base_url``, ``pid``, ``release_id``, ``port``, ``log_path``, ``model_dir``). It stops the server's whole
  process group at the end of the session. With pytest-xdist each worker would start its own server (~3 GB
  each), so run the integration tier without ``-n``.
- ``http_get`` / ``http_post_json`` / ``metric_sum``: loopback HTTP helpers that ignore proxy settings.

A missing .venv-vllm skips the tests with the command that installs it; with ``REQUIRE_VLLM=1`` in the
environment (CI's integration run) it fails them instead, so a broken install cannot pass as "skipped".
"""

from __future__ import annotations

import atexit
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

REPO = Path(__file__).resolve().parents[2]
VLLM_VERSION = "0.32.0"  # the series the serving image runs (infra/config/release.py SUPPORTED_VLLM_SERIES)
VLLM_VENV = Path(os.environ.get("VLLM_VENV", REPO / ".venv-vllm"))
VLLM_PYTHON = VLLM_VENV / "bin" / "python"
INSTALL_STAMP = VLLM_VENV / f".installed-{VLLM_VERSION}"
SCRIPTS = REPO / "scripts"
READINESS_PROBE = REPO / "components" / "serving" / "readiness_probe.py"

#: Served model name of the test server; a valid release id (RELEASE_ID_PATTERN in infra/config/release.py).
RELEASE_ID = "tiny-llama-r1"
#: Flags of the test server: a 256-token context and 4 sequences keep the CPU engine small (~3 GB RSS);
#: --enforce-eager skips torch.compile, which would add minutes of start-up on 2 cores.
SERVER_FLAGS = (
    "--max-model-len", "256",
    "--max-num-seqs", "4",
    "--max-num-batched-tokens", "256",
    "--dtype", "bfloat16",
    "--enforce-eager",
)  # fmt: skip
SERVER_ENV = {
    "HF_HUB_OFFLINE": "1",  # never reach a model hub: the model is a local folder
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache: plenty for 4 x 256 tokens, instead of a share of RAM
    "VLLM_NO_USAGE_STATS": "1",  # no usage report to vLLM's collector
    "DO_NOT_TRACK": "1",
}

#: vLLM's start on 2 cores measured 55-70 s (imports ~20 s, engine process ~25 s); 240 s leaves room for a
#: loaded CI machine while still failing well inside CI's 90-minute budget.
SERVER_START_TIMEOUT_S = 240.0
#: SIGTERM shutdown measured ~2 s; 30 s is what the kubelet's default grace period would allow before SIGKILL.
SERVER_STOP_GRACE_S = 30.0
#: Poll period while waiting for /health: start-up takes about a minute, so 1 s costs at most 1 s extra.
HEALTH_POLL_INTERVAL_S = 1.0
#: Importing vLLM plus building its parser measured ~15 s; 300 s only guards against a hung interpreter.
ARGCHECK_TIMEOUT_S = 300.0
#: Building the tiny model measured ~11 s (mostly importing torch and transformers).
MODEL_BUILD_TIMEOUT_S = 300.0
#: Per-request timeout for the tests' own HTTP calls to the local server (a 1-token completion takes ~0.05 s).
HTTP_TIMEOUT_S = 10.0
#: Lines of server log shown when start-up or a test fails: enough for a Python traceback.
LOG_TAIL_LINES = 80

#: Measured durations (seconds) of the session's expensive steps, printed in pytest's terminal summary.
TIMINGS: dict[str, float] = {}

_NO_PROXY_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_RUNNING: dict[int, subprocess.Popen] = {}


class VllmServer(NamedTuple):
    base_url: str
    pid: int
    release_id: str
    port: int
    log_path: Path
    model_dir: Path


# ---- availability --------------------------------------------------------------------------------------------
def vllm_missing_reason() -> str | None:
    """Why the real vLLM cannot be used here, or None when it can."""
    if not VLLM_PYTHON.exists():
        return f"no vLLM venv at {VLLM_VENV}: run `make integration-deps` (scripts/install-vllm.sh, 4-6 min)"
    if not INSTALL_STAMP.exists():
        return f"{VLLM_VENV} has no {INSTALL_STAMP.name} stamp (interrupted install?): re-run scripts/install-vllm.sh"
    return None


def require_vllm() -> None:
    """Skip the calling test (or fail it under REQUIRE_VLLM=1) when the vLLM venv is unusable."""
    reason = vllm_missing_reason()
    if reason is None:
        return
    if os.environ.get("REQUIRE_VLLM") == "1":
        pytest.fail(f"REQUIRE_VLLM=1 but {reason}", pytrace=False)
    pytest.skip(reason)


# ---- argument checking ---------------------------------------------------------------------------------------
def check_vllm_args(argv_sets: dict[str, list[str]]) -> dict[str, dict[str, Any]]:
    """Parse each list as ``vllm serve <list>`` with vLLM's own parser; one vLLM import for all lists.

    Returns ``{label: {"ok": bool, "error": str, "model_source": "--model"|"positional"|"placeholder"}}``.
    Lists without a model get a placeholder positional (see scripts/vllm_argcheck.py).
    """
    require_vllm()
    proc = subprocess.run(
        [str(VLLM_PYTHON), str(SCRIPTS / "vllm_argcheck.py")],
        input=json.dumps({"argv_sets": argv_sets}),
        capture_output=True,
        text=True,
        timeout=ARGCHECK_TIMEOUT_S,
        env={**os.environ, **SERVER_ENV},
        cwd=REPO,
    )
    try:
        results = json.loads(proc.stdout)
    except json.JSONDecodeError:
        results = None
    if proc.returncode not in (0, 1) or not isinstance(results, dict) or set(results) != set(argv_sets):
        tail = "\n".join(proc.stderr.splitlines()[-30:])
        raise RuntimeError(f"vllm_argcheck.py exited {proc.returncode} without a result for every label:\n{tail}")
    return results


# ---- HTTP helpers ----------------------------------------------------------------------------------------------
def http_get(url: str, timeout: float = HTTP_TIMEOUT_S) -> tuple[int, str]:
    try:
        with _NO_PROXY_OPENER.open(url, timeout=timeout) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


def http_post_json(url: str, body: dict[str, Any], timeout: float = HTTP_TIMEOUT_S) -> tuple[int, Any]:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with _NO_PROXY_OPENER.open(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


def metric_sum(metrics_text: str, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` (exact name, e.g. ``vllm:request_success_total``) matching ``labels``."""
    total = 0.0
    pattern = re.compile(rf"^{re.escape(name)}(\{{(?P<labels>[^}}]*)\}})?\s+(?P<value>\S+)")
    for line in metrics_text.splitlines():
        m = pattern.match(line)
        if not m:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group("labels") or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(m.group("value"))
    return total


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        return f"(no log at {path}: {e})"
    return "\n".join(text.splitlines()[-lines:])


# ---- the server ----------------------------------------------------------------------------------------------
def build_tiny_model(out_dir: Path) -> Path:
    """Run scripts/make_tiny_model.py in the vLLM venv; returns the model folder."""
    require_vllm()
    started = time.monotonic()
    proc = subprocess.run(
        [str(VLLM_PYTHON), str(SCRIPTS / "make_tiny_model.py"), str(out_dir)],
        capture_output=True,
        text=True,
        timeout=MODEL_BUILD_TIMEOUT_S,
        env={**os.environ, **SERVER_ENV},
        cwd=REPO,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"make_tiny_model.py failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}")
    TIMINGS["tiny model build"] = time.monotonic() - started
    return out_dir


def start_vllm_server(
    model_dir: Path, log_path: Path, release_id: str = RELEASE_ID, extra_args: tuple[str, ...] = ()
) -> VllmServer:
    """Start ``vllm serve`` (scripts/vllm_cli.py) on a free loopback port and wait for /health 200.

    The server runs in its own session (process group = its PID), so ``stop_vllm_server`` also reaches the
    engine-core and worker processes it spawns. Raises RuntimeError with the log tail if it dies or is not
    healthy within SERVER_START_TIMEOUT_S.
    """
    require_vllm()
    port = free_loopback_port()
    cmd = [
        str(VLLM_PYTHON), str(SCRIPTS / "vllm_cli.py"), "serve",
        "--model", str(model_dir),  # the form our renderer emits
        "--host", "127.0.0.1",
        "--port", str(port),
        "--served-model-name", release_id,
        *SERVER_FLAGS,
        *extra_args,
    ]  # fmt: skip
    base_url = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **SERVER_ENV},
            cwd=REPO,
            start_new_session=True,
        )
    _RUNNING[proc.pid] = proc
    server = VllmServer(base_url, proc.pid, release_id, port, log_path, model_dir)
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"vLLM exited with status {proc.returncode} before /health answered")
            elapsed = time.monotonic() - started
            if elapsed > SERVER_START_TIMEOUT_S:
                raise RuntimeError(f"vLLM /health did not answer 200 within {SERVER_START_TIMEOUT_S:.0f} s")
            try:
                if http_get(f"{base_url}/health", timeout=HEALTH_POLL_INTERVAL_S * 2)[0] == 200:
                    break
            except OSError:  # not listening yet
                pass
            time.sleep(HEALTH_POLL_INTERVAL_S)
    except BaseException as e:
        stop_vllm_server(proc.pid)
        if isinstance(e, RuntimeError):
            raise RuntimeError(
                f"{e}\ncommand: {' '.join(cmd)}\n"
                f"--- last {LOG_TAIL_LINES} lines of {log_path} ---\n{log_tail(log_path)}"
            ) from None
        raise
    TIMINGS["vLLM server start (to /health 200)"] = time.monotonic() - started
    return server


def stop_vllm_server(pid: int, grace_seconds: float = SERVER_STOP_GRACE_S) -> None:
    """SIGTERM the server's process group, SIGKILL it after ``grace_seconds``; then reap the leader."""
    proc = _RUNNING.pop(pid, None)

    def signal_group(sig: int) -> bool:
        try:
            os.killpg(pid, sig)
            return True
        except ProcessLookupError:
            return False

    if not signal_group(signal.SIGTERM):
        return
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            break
        if proc is None and not signal_group(0):
            break
        time.sleep(0.2)  # shutdown takes ~2 s; 0.2 s polling adds little
    # Whatever is left of the group (a wedged worker, or the leader past its grace period) is killed outright.
    signal_group(signal.SIGKILL)
    if proc is not None:
        try:
            proc.wait(timeout=10)  # after SIGKILL the kernel reaps in milliseconds; 10 s is a safety bound
        except subprocess.TimeoutExpired:
            print(f"vllm_harness: process {pid} still not reaped after SIGKILL", file=sys.stderr)
    # Let the init process reap the killed engine/worker processes before the next test looks at the machine;
    # 5 s bounds the wait where nothing reaps orphans (their zombies would keep the group "alive").
    gone_by = time.monotonic() + 5.0
    while signal_group(0) and time.monotonic() < gone_by:
        time.sleep(0.1)


@atexit.register
def _stop_leftovers() -> None:
    # A session interrupted before fixture teardown must not leave a 3 GB server behind.
    for pid in list(_RUNNING):
        stop_vllm_server(pid, grace_seconds=5.0)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Llama model, built once per session."""
    require_vllm()
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def vllm_server(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    """One real vLLM server for the whole session, stopped (whole process group) afterwards."""
    log_path = tmp_path_factory.mktemp("vllm-server") / "server.log"
    server = start_vllm_server(tiny_model_dir, log_path)
    try:
        yield server
    finally:
        stop_vllm_server(server.pid)
