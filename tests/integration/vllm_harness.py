"""Reusable pieces for tests that need the real vLLM (CPU build in .venv-vllm/, see scripts/install-vllm.sh).

- ``check_vllm_args({"label": [...flags after `vllm serve`...]})``: validates argument lists with vLLM 0.32's own
  parser (scripts/vllm_argcheck.py); returns ``{"label": {"ok", "error", "model_source"}}``.
- ``vllm_server``: a session-scoped pytest fixture (exposed by tests/integration/conftest.py) that builds the
  tiny random-weight model, starts ``vllm serve`` once on a free loopback port and yields a ``VllmServer``
  (``base_url``, ``pid``, ``release_id``, ``port``, ``log_path``, ``model_dir``). It stops the server's whole
  process group at the end of the session. With pytest-xdist each worker would start its own server (~3 GB
  each), so run the integration tier without ``-n``.
- ``launch_vllm_server(argv, ...)`` + ``wait_until_healthy(server)``: start ``vllm serve`` from an arbitrary full
  argument list (nothing added), several at once if wanted, then wait for each; ``start_vllm_server`` is the small
  test server (SERVER_FLAGS) built on them.
- ``cpu_adapted(rendered_args, model_dir, port)``: a pool's rendered ``vllm serve`` arguments with exactly the
  documented CPU-specific changes (see its docstring), failing loudly when the rendered shape changes;
  ``mirror_release`` makes the local folder mirroring the rendered ``--model`` (tiny model + a manifest written
  with verify_release's own builder); ``cpu_probe_command`` does the same for a rendered exec-probe command.
- ``engine_core_pid`` / ``tree_memory_bytes``: the EngineCore child of a server, and RSS / PSS of its processes.
- ``http_get`` / ``http_post_json`` / ``metric_sum``: loopback HTTP helpers that ignore proxy settings.

A missing .venv-vllm skips the tests with the command that installs it; with ``REQUIRE_VLLM=1`` in the
environment (CI's integration run) it fails them instead, so a broken install cannot pass as "skipped".
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pytest

REPO = Path(__file__).resolve().parents[2]
VLLM_VERSION = "0.32.0"  # the series the serving image runs (infra/config/release.py SUPPORTED_VLLM_SERIES)
VLLM_VENV = Path(os.environ.get("VLLM_VENV", REPO / ".venv-vllm"))
VLLM_PYTHON = VLLM_VENV / "bin" / "python"
INSTALL_STAMP = VLLM_VENV / f".installed-{VLLM_VERSION}"
SCRIPTS = REPO / "scripts"
#: The startup / readiness / liveness exec-probe script the Deployments ship in a ConfigMap.
PROBE_SCRIPT = REPO / "components" / "serving" / "probe.py"

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
#: Observations worth seeing in a passing run (memory, what a refused request got), printed beside TIMINGS.
NOTES: dict[str, str] = {}

_NO_PROXY_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_RUNNING: dict[int, subprocess.Popen] = {}
#: Launch time (monotonic) and full command of each server started, for start-up timing and error messages.
_LAUNCHED: dict[int, tuple[float, list[str]]] = {}


class VllmServer(NamedTuple):
    base_url: str
    pid: int
    release_id: str
    port: int
    log_path: Path
    model_dir: Path
    #: The arguments after ``vllm serve`` it was started with.
    argv: tuple[str, ...] = ()


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
    """Start the small test server (SERVER_FLAGS, one served name) on a free loopback port; wait for /health 200.

    The server runs in its own session (process group = its PID), so ``stop_vllm_server`` also reaches the
    engine-core and worker processes it spawns. Raises RuntimeError with the log tail if it dies or is not
    healthy within SERVER_START_TIMEOUT_S.
    """
    port = free_loopback_port()
    serve_args = [
        "--model", str(model_dir),  # the form our renderer emits
        "--host", "127.0.0.1",
        "--port", str(port),
        "--served-model-name", release_id,
        *SERVER_FLAGS,
        *extra_args,
    ]  # fmt: skip
    server = launch_vllm_server(serve_args, log_path, port=port, release_id=release_id, model_dir=model_dir)
    TIMINGS["vLLM server start (to /health 200)"] = wait_until_healthy(server)
    return server


def launch_vllm_server(
    serve_args: Sequence[str],
    log_path: Path,
    *,
    port: int,
    release_id: str,
    model_dir: Path,
    env: Mapping[str, str] | None = None,
) -> VllmServer:
    """Start ``vllm serve <serve_args>`` with exactly these arguments (nothing added) and return at once.

    ``port``, ``release_id`` and ``model_dir`` only describe the server to the tests; they must agree with
    ``serve_args``. ``env`` is laid over SERVER_ENV. Call :func:`wait_until_healthy` next: launching several
    servers before waiting for any starts them in parallel.
    """
    require_vllm()
    cmd = [str(VLLM_PYTHON), str(SCRIPTS / "vllm_cli.py"), "serve", *serve_args]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **SERVER_ENV, **(env or {})},
            cwd=REPO,
            start_new_session=True,
        )
    _RUNNING[proc.pid] = proc
    _LAUNCHED[proc.pid] = (time.monotonic(), cmd)
    return VllmServer(f"http://127.0.0.1:{port}", proc.pid, release_id, port, log_path, model_dir, tuple(serve_args))


def wait_until_healthy(server: VllmServer, timeout: float = SERVER_START_TIMEOUT_S) -> float:
    """Wait for ``/health`` 200 of a launched server; returns the seconds since its launch.

    Stops the server (whole process group) and raises RuntimeError with its command and log tail if it exits or
    is not healthy within ``timeout``.
    """
    proc = _RUNNING[server.pid]
    started, cmd = _LAUNCHED[server.pid]
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"vLLM exited with status {proc.returncode} before /health answered")
            if time.monotonic() - started > timeout:
                raise RuntimeError(f"vLLM /health did not answer 200 within {timeout:.0f} s")
            try:
                if http_get(f"{server.base_url}/health", timeout=HEALTH_POLL_INTERVAL_S * 2)[0] == 200:
                    return time.monotonic() - started
            except OSError:  # not listening yet
                pass
            time.sleep(HEALTH_POLL_INTERVAL_S)
    except BaseException as e:
        stop_vllm_server(server.pid)
        if isinstance(e, RuntimeError):
            raise RuntimeError(
                f"{e}\ncommand: {' '.join(cmd)}\n"
                f"--- last {LOG_TAIL_LINES} lines of {server.log_path} ---\n{log_tail(server.log_path)}"
            ) from None
        raise


def server_process(server: VllmServer) -> subprocess.Popen:
    """The ``Popen`` of a server this harness started (its API-server process, the container's PID 1 in a pod)."""
    return _RUNNING[server.pid]


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


# ---- rendered arguments on a CPU -------------------------------------------------------------------------------
class CpuAdaptationError(AssertionError):
    """The rendered arguments are not of the shape :func:`cpu_adapted` knows how to adapt; the message says how."""


#: KV-cache budget (GiB, whole) of a server started from rendered arguments. The tiny model needs 1 KiB of KV per
#: token (2 layers x 2 KV heads x 64 x 2 bytes for K and V), so 1 GiB holds ~1M tokens: far more than
#: --max-num-seqs (206) short sequences plus one full --max-model-len (16384) context, which vLLM requires at
#: start-up. 1 is the smallest whole value the variable takes.
RENDERED_KVCACHE_GIB = 1
#: What the servers started from rendered arguments get on top of SERVER_ENV.
RENDERED_SERVER_ENV = {"VLLM_CPU_KVCACHE_SPACE": str(RENDERED_KVCACHE_GIB)}
#: Where a rendered ``gs://<bucket>/<model>/<revision>/`` is mirrored locally: ``<base>/gcs/<bucket>/...``.
GCS_MIRROR_DIR = "gcs"


def _flag_index(args: Sequence[str], flag: str) -> int | None:
    """Index of ``flag`` (as its own token) in ``args``; None if absent; CpuAdaptationError if repeated or in the
    ``--flag=value`` form, which the renderer never emits (a change there must be looked at, not guessed)."""
    hits = [i for i, a in enumerate(args) if a == flag]
    if any(a.startswith(flag + "=") for a in args):
        raise CpuAdaptationError(f"rendered args spell {flag} as {flag}=VALUE; cpu_adapted expects separate tokens")
    if len(hits) > 1:
        raise CpuAdaptationError(f"rendered args carry {flag} {len(hits)} times: {list(args)}")
    return hits[0] if hits else None


def local_model_tail(rendered_model: str) -> str:
    """The relative local folder that mirrors a rendered ``--model``: ``/weights/<m>/<rev>`` -> ``weights/<m>/<rev>``,
    ``gs://<bucket>/<m>/<rev>/`` -> ``gcs/<bucket>/<m>/<rev>`` (so the root /v1/models reports keeps the revision)."""
    if rendered_model.startswith("gs://"):
        tail = f"{GCS_MIRROR_DIR}/{rendered_model[len('gs://') :].strip('/')}"
    elif rendered_model.startswith("/"):
        tail = rendered_model.strip("/")
    else:
        raise CpuAdaptationError(f"rendered --model {rendered_model!r} is neither gs:// nor an absolute path")
    if len(tail.split("/")) < 3:
        raise CpuAdaptationError(f"rendered --model {rendered_model!r} has no <model>/<revision> tail")
    return tail


def local_model_root(rendered_model: str, base: Path) -> str:
    """``--model`` / ``--model-root`` value for the local mirror under ``base``; a trailing slash stays as rendered."""
    return str(base / local_model_tail(rendered_model)) + ("/" if rendered_model.endswith("/") else "")


def write_release_manifest(model_dir: Path, model: str, revision: str, tokenizer_revision: str) -> Path:
    """``<model_dir>/manifest.json`` for the files in ``model_dir``, built and rendered by verify_release's own
    ``build_manifest`` / ``render_manifest`` (sizes, SHA-256 and CRC32C from the stage tool's ``hash_file``)."""
    from components.serving import verify_release as vr
    from infra.offline.release.stage import hash_file

    files = []
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file() and p.name != vr.MANIFEST_NAME):
        size, sha256, crc32c = hash_file(path)
        files.append(vr.ManifestFile(path.relative_to(model_dir).as_posix(), size, sha256, crc32c))
    out = model_dir / vr.MANIFEST_NAME
    out.write_bytes(vr.render_manifest(vr.build_manifest(model, revision, tokenizer_revision, files)))
    return out


def mirror_release(tiny_model: Path, base: Path, rendered_model: str, revision: str, tokenizer_revision: str) -> Path:
    """Make the local folder mirroring ``rendered_model`` (see :func:`local_model_tail`) under ``base``: copies of
    the tiny model's files (regular files, as a release copy holds and as `release stage` reads them: it opens no
    symbolic link) plus a valid manifest for ``revision``. Returns the folder."""
    folder = base / local_model_tail(rendered_model)
    model, rev = folder.parts[-2:]
    if rev != revision:
        raise CpuAdaptationError(
            f"rendered --model {rendered_model!r} does not end in the release's revision {revision}"
        )
    folder.mkdir(parents=True)
    for f in sorted(tiny_model.iterdir()):
        if f.is_file():
            shutil.copyfile(f.resolve(), folder / f.name)
    write_release_manifest(folder, model, revision, tokenizer_revision)
    return folder


def cpu_adapted(args: Sequence[str], model_dir: Path, port: int) -> list[str]:
    """The rendered ``vllm serve`` arguments of a pool, changed only where a 2-core CPU machine needs it.

    Every change, and why:

    1. ``--model <rendered>`` -> ``model_dir``: the local mirror of the rendered location made by
       :func:`mirror_release` (``/weights/<m>/<rev>`` -> ``<tmp>/weights/<m>/<rev>``, ``gs://<b>/<m>/<rev>/`` ->
       ``<tmp>/gcs/<b>/<m>/<rev>/``, a trailing slash kept as rendered) holding the tiny random-weight Llama and a
       manifest for that revision. There are no Qwen3-32B weights here; the tail keeps the revision in the root
       ``/v1/models`` reports, which the startup and readiness probes check.
    2. ``--load-format runai_streamer`` and ``--model-loader-extra-config <json>`` (rendered only for ``gs://``):
       dropped. There is no Cloud Storage here; the mirror is a local folder, read by vLLM's default loader.
    3. ``--tensor-parallel-size N`` -> ``1``: one CPU process, no GPUs to shard over.
    4. ``--quantization <q>``: dropped. It describes the production checkpoint (Qwen3-32B-FP8); the tiny model is
       a bf16 checkpoint.
    5. ``--port 8000`` (GKE; Cloud Run renders 8080, its container port) -> ``port`` (a free loopback port), plus
       ``--host 127.0.0.1``: several servers share this machine, and nothing outside it should reach them.
    6. ``--enforce-eager`` added: torch.compile would add minutes of start-up on 2 cores; it changes how the model
       is executed, not what the server does with requests.

    Everything else stays exactly as rendered: served names, ``--max-model-len``, ``--max-num-seqs``,
    ``--max-num-batched-tokens``, the ``--override-generation-config`` output cap, ``--shutdown-timeout``,
    ``--enable-server-load-tracking``, prefix caching, chunked prefill, ``--dtype``, ``--kv-cache-dtype``, the
    request/access-log settings, and ``--gpu-memory-utilization`` (inert on CPU: the KV budget comes from
    ``VLLM_CPU_KVCACHE_SPACE``, see RENDERED_SERVER_ENV).

    Raises CpuAdaptationError when a flag it changes is absent (or present where it must not be), so a renderer
    change shows up here instead of silently passing with a differently adapted server.
    """
    out = list(args)

    def value(flag: str) -> str:
        i = _flag_index(out, flag)
        if i is None or i + 1 >= len(out) or out[i + 1].startswith("--"):
            raise CpuAdaptationError(f"rendered args have no {flag} VALUE, which cpu_adapted replaces: {list(args)}")
        return out[i + 1]

    def drop(flag: str, expect: str | None = None) -> None:
        v = value(flag)
        if expect is not None and v != expect:
            raise CpuAdaptationError(f"rendered {flag} is {v!r}, not the {expect!r} cpu_adapted knows how to drop")
        i = out.index(flag)
        del out[i : i + 2]

    def replace(flag: str, new: str) -> None:
        value(flag)
        out[out.index(flag) + 1] = new

    for flag in ("--host", "--enforce-eager"):
        if _flag_index(out, flag) is not None:
            raise CpuAdaptationError(f"rendered args already carry {flag}; cpu_adapted's list is out of date")

    rendered_model = value("--model")
    expected = local_model_tail(rendered_model)
    local = str(model_dir).rstrip("/")
    if not local.endswith("/" + expected):
        raise CpuAdaptationError(
            f"local model folder {local} does not mirror the rendered --model "
            f"{rendered_model!r} (expected a folder ending in {expected})"
        )
    if not (model_dir / "config.json").is_file():
        raise CpuAdaptationError(f"{model_dir} holds no model (no config.json)")
    replace("--model", local + ("/" if rendered_model.endswith("/") else ""))
    if rendered_model.startswith("gs://"):  # 2. streamed from Cloud Storage
        drop("--load-format", expect="runai_streamer")
        drop("--model-loader-extra-config")
    else:
        for flag in ("--load-format", "--model-loader-extra-config"):
            if _flag_index(out, flag) is not None:
                raise CpuAdaptationError(f"rendered args carry {flag} for a mounted --model {rendered_model!r}")
    replace("--tensor-parallel-size", "1")  # 3.
    drop("--quantization")  # 4.
    replace("--port", str(port))  # 5.
    out += ["--host", "127.0.0.1", "--enforce-eager"]  # 5., 6.
    return out


def cpu_probe_command(
    rendered: Sequence[str],
    port: int,
    model_roots: Mapping[str, str] | None = None,
    state_file: Path | None = None,
    python: Path = VLLM_PYTHON,
) -> list[str]:
    """A rendered exec-probe command as the kubelet would run it here, changed only in machine-specific values:

    * ``python3`` -> ``python`` (the vLLM environment's interpreter, standing in for the image's python3);
    * the ConfigMap mount path of the script -> components/serving/probe.py (the file the ConfigMap ships);
    * ``--port 8000`` -> ``port``;
    * ``--model-root`` and ``--manifest`` -> their local mirrors, via ``model_roots`` {rendered root: local root};
    * ``--state-file`` -> ``state_file`` (a fresh file per test, not the machine's /tmp).

    Raises CpuAdaptationError when the command is not of the rendered shape, or a value to substitute is absent.
    """
    cmd = list(rendered)
    if len(cmd) < 3 or cmd[0] != "python3" or Path(cmd[1]).name != PROBE_SCRIPT.name:
        raise CpuAdaptationError(f"not a rendered `python3 .../{PROBE_SCRIPT.name} MODE ...` command: {cmd}")
    cmd[0], cmd[1] = str(python), str(PROBE_SCRIPT)

    def sub(flag: str, new: str, required: bool = True) -> None:
        i = _flag_index(cmd, flag)
        if i is None or i + 1 >= len(cmd):
            if required:
                raise CpuAdaptationError(f"rendered probe command has no {flag} VALUE: {list(rendered)}")
            return
        cmd[i + 1] = new

    sub("--port", str(port))
    roots = dict(model_roots or {})
    i = _flag_index(cmd, "--model-root")
    if i is not None:
        if cmd[i + 1] not in roots:
            raise CpuAdaptationError(f"no local mirror given for the rendered --model-root {cmd[i + 1]!r}")
        rendered_root = cmd[i + 1]
        local_root = roots[rendered_root]
        cmd[i + 1] = local_root
        j = _flag_index(cmd, "--manifest")
        if j is not None:
            if not cmd[j + 1].startswith(rendered_root.rstrip("/") + "/"):
                raise CpuAdaptationError(f"rendered --manifest {cmd[j + 1]!r} is not inside {rendered_root!r}")
            cmd[j + 1] = local_root.rstrip("/") + cmd[j + 1][len(rendered_root.rstrip("/")) :]
    if state_file is not None:
        sub("--state-file", str(state_file))
    elif _flag_index(cmd, "--state-file") is not None:
        raise CpuAdaptationError("the rendered command writes a --state-file; give a fresh one (state_file=...)")
    return cmd


def run_probe_command(cmd: Sequence[str], timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    """Run a probe command like the kubelet: a fresh process; its exit status and stdout (one line) are the result.
    ``timeout`` only bounds a hung interpreter; the probe's own --deadline-seconds is what the tests exercise."""
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)


def flag_value(args: Sequence[str], flag: str) -> str:
    """The value after ``flag`` in an argument list; CpuAdaptationError when it is absent or repeated."""
    i = _flag_index(args, flag)
    if i is None or i + 1 >= len(args):
        raise CpuAdaptationError(f"no {flag} VALUE in {list(args)}")
    return args[i + 1]


def with_flag(cmd: Sequence[str], flag: str, value: str) -> list[str]:
    """``cmd`` with the value of its (single) ``flag`` replaced."""
    out = list(cmd)
    i = _flag_index(out, flag)
    if i is None:
        raise CpuAdaptationError(f"no {flag} in {out}")
    out[i + 1] = value
    return out


# ---- processes ---------------------------------------------------------------------------------------------------
def child_pids(pid: int) -> list[int]:
    """Direct children of ``pid`` (from /proc; psutil is not in the main venv)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Field 4 (ppid) follows the parenthesised command name, which may itself contain spaces or ")".
        if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
            found.append(int(entry.name))
    return sorted(found)


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants."""
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo.extend(child_pids(p))
    return tree


def process_title(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""


def engine_core_pid(server: VllmServer) -> int:
    """PID of the server's EngineCore process: vLLM 0.32 titles it ``VLLM::EngineCore``
    (vllm/v1/engine/core.py ``set_process_title("EngineCore")``, prefix from vllm/utils/system_utils.py)."""
    found = [p for p in process_tree(server.pid) if process_title(p).startswith("VLLM::EngineCore")]
    if len(found) != 1:
        titles = {p: process_title(p) for p in process_tree(server.pid)}
        raise RuntimeError(f"expected one VLLM::EngineCore process under {server.pid}, found {titles}")
    return found[0]


def tree_memory_bytes(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of ``pid`` and its descendants. RSS counts shared pages (torch's libraries, mapped in every vLLM
    process) once per process; PSS shares them out, so PSS sums of several servers add up to what they use."""
    rss = pss = 0
    for p in process_tree(pid):
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1]) * 1024
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1]) * 1024
        except OSError:
            continue
    return rss, pss


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
