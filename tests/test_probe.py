"""components/serving/probe.py (startup / readiness / liveness exec probe) against a fake vLLM on loopback.

The fake (stdlib http.server) answers like vLLM 0.32: ``/health``, ``/v1/models`` (one card per
``--served-model-name``, in order, ``root`` = ``--model``), ``/load`` (``--enable-server-load-tracking``),
``/metrics`` (Prometheus text) and ``POST /v1/completions``. Each test changes one answer and expects one exact
line and exit status. Liveness runs on an injected wall clock, so the stall window costs no real time; the only
real wait is the deadline test's half second. No vLLM needed.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import glob
import http.client
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from components.serving import probe
from components.serving import verify_release as vr

PROBE = Path(probe.__file__)
RELEASE = "llama-3-8b-r7"
PUBLIC = "chat"
REVISION = "0123456789abcdef0123456789abcdef01234567"
OTHER_REVISION = "fedcba9876543210fedcba9876543210fedcba98"
ROOT = f"/weights/llama-3-8b/{REVISION}"
MAX_LEN = 8192
#: The fake's default counters: prompt 12 + generation 30 on engine 0.
TOKENS = 42.0
T0 = 1_700_000_000.0  # wall-clock origin of the liveness tests

ENGINE_DEAD = "EngineCore encountered an issue. See stack trace (above) for the root cause."


class Request(NamedTuple):
    method: str
    path: str
    auth: str | None
    content_type: str | None
    body: Any


class _QuietServer(ThreadingHTTPServer):
    """The deadline test hangs up on a slow fake on purpose; the fake's late write then fails with a broken pipe,
    which is the expected outcome, not a traceback worth printing."""

    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


def metrics_text(prompt: dict[str, float], generation: dict[str, float]) -> str:
    """/metrics as vLLM's prometheus_client renders it: HELP/TYPE lines, ``_total`` and ``_created`` samples per
    engine, and unrelated series whose names start like the progress counters."""
    lines = [
        "# HELP python_gc_objects_collected_total Objects collected during gc",
        "# TYPE python_gc_objects_collected_total counter",
        'python_gc_objects_collected_total{generation="0"} 9876.0',
        "# HELP vllm:num_requests_running Number of requests in model execution batches.",
        "# TYPE vllm:num_requests_running gauge",
        f'vllm:num_requests_running{{engine="0",model_name="{RELEASE}"}} 1.0',
        "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.",
        "# TYPE vllm:prompt_tokens_total counter",
    ]
    for engine, v in prompt.items():
        lines.append(f'vllm:prompt_tokens_total{{engine="{engine}",model_name="{RELEASE}"}} {v!r}')
        lines.append(f'vllm:prompt_tokens_created{{engine="{engine}",model_name="{RELEASE}"}} 1.7e+09')
    lines += [
        "# HELP vllm:generation_tokens_total Number of generation tokens processed.",
        "# TYPE vllm:generation_tokens_total counter",
    ]
    for engine, v in generation.items():
        lines.append(f'vllm:generation_tokens_total{{engine="{engine}",model_name="{RELEASE}"}} {v!r}')
        lines.append(f'vllm:generation_tokens_created{{engine="{engine}",model_name="{RELEASE}"}} 1.7e+09')
    lines += [
        "# HELP vllm:request_prompt_tokens Number of prefill tokens processed.",
        "# TYPE vllm:request_prompt_tokens histogram",
        f'vllm:request_prompt_tokens_bucket{{engine="0",le="+Inf",model_name="{RELEASE}"}} 5.0',
        f'vllm:request_prompt_tokens_sum{{engine="0",model_name="{RELEASE}"}} 777.0',
        f'vllm:request_prompt_tokens_count{{engine="0",model_name="{RELEASE}"}} 5.0',
    ]
    return "\n".join(lines) + "\n"


class FakeVllm:
    """Answers like vLLM 0.32; each attribute can be changed by a test to produce one failure mode."""

    def __init__(self) -> None:
        self.health_status = 200
        self.health_body: Any = {"error": {"message": ENGINE_DEAD, "type": "EngineDeadError", "code": 503}}
        # /v1/models: one card per served name (in order), then one per LoRA adapter.
        self.served = [RELEASE, PUBLIC]
        self.root = ROOT
        self.roots: dict[str, Any] = {}  # per-name override of root
        self.max_model_len: Any = MAX_LEN
        self.max_lens: dict[str, Any] = {}  # per-name override of max_model_len
        self.adapters: list[str] = []
        self.models_status = 200
        self.models_doc: Any = None  # replaces the whole /v1/models answer (a doc or raw bytes)
        # /load and /metrics
        self.load_tracking = True
        self.load: Any = 0
        self.prompt_tokens = {"0": 12.0}
        self.generation_tokens = {"0": 30.0}
        self.metrics_status = 200
        self.metrics_body: str | None = None  # replaces the whole /metrics text
        # POST /v1/completions
        self.completion_status = 200
        self.completion_model = RELEASE  # vLLM names the first served name in every response
        self.choices: Any = [{"index": 0, "text": "x", "logprobs": None, "finish_reason": "length",
                              "stop_reason": None}]  # fmt: skip
        self.completion_doc: Any = None  # replaces the whole completion answer (a doc or raw bytes)
        self.api_key: str | None = None  # like vllm --api-key: /v1/* needs "Authorization: Bearer <key>"
        self.delay: dict[str, float] = {}  # path -> seconds to wait before answering (cut short at teardown)
        self.released = threading.Event()
        self.requests: list[Request] = []
        self.port = 0  # the loopback server's, set by the fixture

    def calls(self) -> list[tuple[str, str]]:
        return [(r.method, r.path) for r in self.requests]

    def set_tokens(self, prompt: float, generation: float) -> None:
        self.prompt_tokens = {"0": prompt}
        self.generation_tokens = {"0": generation}

    def models(self) -> Any:
        if self.models_doc is not None:
            return self.models_doc
        cards = [{"id": name, "object": "model", "created": 1_760_000_000, "owned_by": "vllm",
                  "root": self.roots.get(name, self.root), "parent": None,
                  "max_model_len": self.max_lens.get(name, self.max_model_len),
                  "permission": [{"id": f"modelperm-{i}", "object": "model_permission", "allow_sampling": True}]}
                 for i, name in enumerate(self.served)]  # fmt: skip
        cards += [{"id": a, "object": "model", "created": 1_760_000_000, "owned_by": "vllm",
                   "root": f"/adapters/{a}", "parent": self.served[0], "max_model_len": None, "permission": []}
                  for a in self.adapters]  # fmt: skip
        return {"object": "list", "data": cards}

    def completion(self, body: Any) -> tuple[int, Any]:
        if self.completion_status != 200:
            return self.completion_status, {"error": {"message": "CUDA error: an illegal memory access",
                                                      "type": "InternalServerError", "code": 500}}  # fmt: skip
        if not isinstance(body, dict) or body.get("model") not in self.served + self.adapters:
            model = body.get("model") if isinstance(body, dict) else None
            return 404, {"error": {"message": f"The model `{model}` does not exist.", "type": "NotFoundError",
                                   "code": 404}}  # fmt: skip
        if self.completion_doc is not None:
            return 200, self.completion_doc
        return 200, {"id": "cmpl-5f1c", "object": "text_completion", "created": 1_760_000_001,
                     "model": self.completion_model, "choices": self.choices,
                     "usage": {"prompt_tokens": 2, "total_tokens": 3, "completion_tokens": 1}}  # fmt: skip


def _handler(current: Callable[[], FakeVllm]) -> type[BaseHTTPRequestHandler]:
    """The request handler of the shared loopback server: it answers as the current test's fake."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep pytest output clean
            pass

        def _answer(self, status: int, doc: Any, content_type: str = "application/json") -> None:
            if isinstance(doc, bytes):
                payload = doc
            elif isinstance(doc, str):
                payload = doc.encode()
            else:
                payload = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _record(self, fake: FakeVllm, body: Any) -> bool:
            """Log the request, wait its delay; False when the API key is missing (401 sent)."""
            path = self.path
            fake.requests.append(Request(self.command, path, self.headers.get("Authorization"),
                                         self.headers.get("Content-Type"), body))  # fmt: skip
            if path in fake.delay:
                fake.released.wait(fake.delay[path])
            if (
                fake.api_key
                and path.startswith("/v1")
                and self.headers.get("Authorization") != (f"Bearer {fake.api_key}")
            ):
                self._answer(401, {"error": "Unauthorized"})
                return False
            return True

        def do_GET(self) -> None:
            fake = current()
            if not self._record(fake, None):
                return
            if self.path == "/health":
                self._answer(fake.health_status, b"" if fake.health_status == 200 else fake.health_body)
            elif self.path == "/v1/models":
                self._answer(fake.models_status, fake.models())
            elif self.path == "/load" and fake.load_tracking:
                self._answer(200, {"server_load": fake.load})
            elif self.path == "/metrics":
                text = fake.metrics_body
                if text is None:
                    text = metrics_text(fake.prompt_tokens, fake.generation_tokens)
                self._answer(fake.metrics_status, text, "text/plain; version=0.0.4; charset=utf-8")
            else:
                self._answer(404, {"detail": "Not Found"})  # FastAPI's answer for an unknown route

        def do_POST(self) -> None:
            fake = current()
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw or b"null")
            except ValueError:
                body = raw
            if not self._record(fake, body):
                return
            if self.path == "/v1/completions":
                self._answer(*fake.completion(body))
            else:
                self._answer(404, {"detail": "Not Found"})

    return Handler


@pytest.fixture(autouse=True)
def _no_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe reads VLLM_API_KEY by default: keep the developer's environment out of the tests."""
    monkeypatch.delenv("VLLM_API_KEY", raising=False)


@pytest.fixture(scope="module")
def _loopback() -> Iterator[tuple[list[FakeVllm], int]]:
    """One loopback server for the module (starting and stopping one per test would cost more than the tests);
    it answers as ``slot[0]``, the current test's fake."""
    slot = [FakeVllm()]
    server = _QuietServer(("127.0.0.1", 0), _handler(lambda: slot[0]))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield slot, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def fake(_loopback: tuple[list[FakeVllm], int]) -> Iterator[FakeVllm]:
    slot, port = _loopback
    f = FakeVllm()
    f.port = port
    slot[0] = f
    try:
        yield f
    finally:
        f.released.set()  # end every delayed or hanging answer of this test now


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A loopback port that refuses connections: bound (so nobody else takes it) but not listening."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def identity_args(port: int, **kw: Any) -> list[str]:
    args = {"port": port, "release_id": RELEASE, "public_name": PUBLIC, "model_root": ROOT,
            "max_model_len": MAX_LEN, "deadline_seconds": 5, **kw}  # fmt: skip
    argv: list[str] = []
    for k, v in args.items():
        argv += [f"--{k.replace('_', '-')}", str(v)]
    return argv


def liveness_args(port: int, state: Path, stall: float = 60, **kw: Any) -> list[str]:
    argv = ["--port", str(port), "--stall-seconds", str(stall), "--state-file", str(state), "--deadline-seconds", "5"]
    for k, v in kw.items():
        argv += [f"--{k.replace('_', '-')}", str(v)]
    return argv


def run(argv: list[str]) -> tuple[int, str, str]:
    """probe.main() in-process: (exit status, the single stdout line, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = probe.main(argv)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1, f"expected exactly one line on stdout, got {lines}"
    assert out.getvalue().endswith("\n")
    return code, lines[0], err.getvalue()


def startup(port: int, *extra: str, **kw: Any) -> tuple[int, str]:
    code, line, err = run(["startup", *identity_args(port, **kw), *extra])
    assert err == ""
    return code, line


def readiness(port: int, **kw: Any) -> tuple[int, str]:
    code, line, err = run(["readiness", *identity_args(port, **kw)])
    assert err == ""
    return code, line


MODES: dict[str, Callable[..., tuple[int, str]]] = {"startup": startup, "readiness": readiness}


def live(fake: FakeVllm, state: Path, at: float, stall: float = 60.0) -> str:
    """run_liveness on an injected wall clock; the ok line, or the failure line."""
    server = probe.Server("127.0.0.1", fake.port)
    try:
        return probe.run_liveness(server, probe.Deadline(5.0), stall, str(state), wall_clock=lambda: at)
    except probe.ProbeFailure as e:
        return str(e)


def hung(n: int, seconds: int, limit: int = 60) -> str:
    return (f"fail: progress check failed: engine hung: {n} request(s) in flight and no token processed for "
            f"{seconds} s (limit {limit} s)")  # fmt: skip


def write_manifest(path: Path, revision: str = REVISION) -> Path:
    """A manifest exactly as ``llm-serving release stage`` writes it (verify_release owns the format)."""
    files = [vr.ManifestFile("config.json", 663, "a" * 64, vr.crc32c_to_base64(0x1234))]
    path.write_bytes(vr.render_manifest(vr.build_manifest("llama-3-8b", revision, revision, files)))
    return path


STARTUP_OK = re.compile(rf"ok: {re.escape(RELEASE)} serves 'chat' from {re.escape(ROOT)}; "
                        r"1-token generation in \d+\.\d\d s")  # fmt: skip
READY_OK = f"ok: /health 200, {RELEASE} serves 'chat' from {ROOT}"
GENERATION = {"model": PUBLIC, "prompt": probe.PROMPT, "max_tokens": 1, "temperature": 0}


# ---- startup: the happy path -----------------------------------------------------------------------------------
def test_startup_passes_on_a_good_server(fake: FakeVllm) -> None:
    code, line = startup(fake.port)
    assert code == 0 and STARTUP_OK.fullmatch(line), line
    assert fake.calls() == [("GET", "/health"), ("GET", "/v1/models"), ("GET", "/load"), ("POST", "/v1/completions")]
    post = fake.requests[-1]
    # One greedy token under the name clients send.
    assert post.body == {"model": "chat", "prompt": "Hi", "max_tokens": 1, "temperature": 0} == GENERATION
    assert post.content_type == "application/json"
    assert all(r.auth is None for r in fake.requests)  # no VLLM_API_KEY set: no header


def test_startup_reports_the_generation_time(fake: FakeVllm) -> None:
    ticks = iter([100.0, 100.25])
    line = probe.run_startup(probe.Server("127.0.0.1", fake.port), probe.Deadline(5.0), RELEASE, PUBLIC, ROOT,
                             MAX_LEN, None, None, monotonic=lambda: next(ticks))  # fmt: skip
    assert line == f"ok: {RELEASE} serves 'chat' from {ROOT}; 1-token generation in 0.25 s"


@functools.cache
def _python38() -> str | None:
    """A Python 3.8 interpreter (the oldest the vLLM image may ship), if this machine has one."""
    candidates = [os.environ.get("PYTHON38"), *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.8.*/bin/"
                                                                                     "python3.8"))),
                  shutil.which("python3.8")]  # fmt: skip
    for exe in filter(None, candidates):
        try:
            out = subprocess.run([exe, "-c", "import sys; print(sys.version_info[:2] == (3, 8))"],
                                 capture_output=True, text=True, timeout=30)  # fmt: skip
        except OSError:
            continue
        if out.returncode == 0 and out.stdout.strip() == "True":
            return exe
    return None


def cli(exe: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """``python3 probe.py MODE ...`` as the kubelet runs it. -I -S: no site-packages, no PYTHON* variables, no
    script directory on sys.path, i.e. the script alone."""
    env = {k: v for k, v in os.environ.items() if k != "VLLM_API_KEY"}
    # timeout is a hang guard only: every run here answers within milliseconds.
    return subprocess.run([exe, "-I", "-S", str(PROBE), *argv], capture_output=True, text=True, env=env, timeout=30)


def test_cli_exit_status_and_one_line(fake: FakeVllm, refused_port: int) -> None:
    ok = cli(sys.executable, "startup", *identity_args(fake.port))
    assert (ok.returncode, ok.stderr) == (0, "") and STARTUP_OK.fullmatch(ok.stdout.rstrip("\n")), ok
    assert ok.stdout.count("\n") == 1
    assert fake.calls()[-1] == ("POST", "/v1/completions") and fake.requests[-1].body == GENERATION
    dead = cli(sys.executable, "startup", *identity_args(refused_port))
    assert (dead.returncode, dead.stderr) == (1, "")
    assert dead.stdout == (f"fail: health check failed: GET /health to 127.0.0.1:{refused_port}: connection refused "
                           "(is vLLM listening?)\n")  # fmt: skip


def test_runs_on_python_3_8(fake: FakeVllm, tmp_path: Path) -> None:
    """The vLLM image's python3 may be 3.8: every mode, the manifest and the state file on a real 3.8."""
    exe = _python38()
    if exe is None:
        pytest.skip("no Python 3.8 interpreter here (set PYTHON38=/path/to/python3.8)")
    manifest = write_manifest(tmp_path / "manifest.json")
    ok = cli(exe, "startup", *identity_args(fake.port), "--manifest", str(manifest), "--expect-revision", REVISION)
    assert (ok.returncode, ok.stderr) == (0, "") and STARTUP_OK.fullmatch(ok.stdout.rstrip("\n")), ok
    state = tmp_path / "state.json"
    alive = cli(exe, "liveness", *liveness_args(fake.port, state))
    assert (alive.returncode, alive.stdout, alive.stderr) == (0, "ok: engine alive (idle)\n", "")
    fake.load = 1
    state.write_text(json.dumps({"version": probe.STATE_VERSION, "tokens": TOKENS, "progress_at": time.time() - 100}))
    stuck = cli(exe, "liveness", *liveness_args(fake.port, state))
    assert (stuck.returncode, stuck.stderr) == (1, ""), stuck
    assert stuck.stdout.startswith("fail: progress check failed: engine hung: 1 request(s) in flight")


# ---- startup and readiness: every failure, one exact line ----------------------------------------------------
def _setting(**attrs: Any) -> Callable[[Any], None]:
    """A setup that sets several attributes of the fake server."""

    def setup(fake: Any) -> None:
        for name, value in attrs.items():
            setattr(fake, name, value)

    return setup


# (setup, expected line): the same check, the same line, in both modes.
IDENTITY_FAILURES = [
    pytest.param(
        lambda f: setattr(f, "health_status", 503),
        f"fail: health check failed: GET /health answered HTTP 503: {ENGINE_DEAD}",
        id="health-503",
    ),
    pytest.param(
        _setting(health_status=503, health_body=b""),
        "fail: health check failed: GET /health answered HTTP 503:",
        id="health-503-empty-body",
    ),
    pytest.param(
        lambda f: setattr(f, "served", ["llama-3-8b-r6", PUBLIC]),
        f"fail: models check failed: GET /v1/models lists ['llama-3-8b-r6', 'chat']; expected exactly "
        f"['{RELEASE}', 'chat']",
        id="other-release",
    ),
    pytest.param(
        lambda f: setattr(f, "served", [PUBLIC, RELEASE]),
        f"fail: models check failed: GET /v1/models lists ['chat', '{RELEASE}']; expected exactly "
        f"['{RELEASE}', 'chat']",
        id="wrong-order",
    ),
    pytest.param(
        lambda f: setattr(f, "adapters", ["sql-lora"]),
        f"fail: models check failed: GET /v1/models lists ['{RELEASE}', 'chat', 'sql-lora']; expected "
        f"exactly ['{RELEASE}', 'chat']",
        id="extra-adapter",
    ),
    pytest.param(
        lambda f: setattr(f, "served", [RELEASE]),
        f"fail: models check failed: GET /v1/models lists ['{RELEASE}']; expected exactly ['{RELEASE}', 'chat']",
        id="no-public-name",
    ),
    pytest.param(
        lambda f: setattr(f, "served", [RELEASE, "Chat"]),
        f"fail: models check failed: GET /v1/models lists ['{RELEASE}', 'Chat']; expected exactly "
        f"['{RELEASE}', 'chat']",
        id="public-name-case",
    ),
    pytest.param(
        lambda f: setattr(f, "models_doc", {"object": "list", "data": []}),
        f"fail: models check failed: GET /v1/models lists []; expected exactly ['{RELEASE}', 'chat']",
        id="no-models",
    ),
    pytest.param(
        lambda f: setattr(f, "models_doc", {"object": "list"}),
        "fail: models check failed: GET /v1/models has no 'data' list of models",
        id="no-data",
    ),
    pytest.param(
        lambda f: setattr(f, "models_doc", {"object": "list", "data": [RELEASE, PUBLIC]}),
        "fail: models check failed: GET /v1/models has no 'data' list of models",
        id="data-not-cards",
    ),
    pytest.param(
        lambda f: setattr(f, "models_doc", b"<html>502 Bad Gateway</html>"),
        "fail: models check failed: GET /v1/models did not return JSON: b'<html>502 Bad Gateway</html>'",
        id="not-json",
    ),
    pytest.param(
        _setting(models_status=500, models_doc={"error": {"message": "boom", "code": 500}}),
        "fail: models check failed: GET /v1/models answered HTTP 500: boom",
        id="models-500",
    ),
    pytest.param(
        lambda f: setattr(f, "root", f"/weights/llama-3-8b/{OTHER_REVISION}"),
        f"fail: models check failed: model '{RELEASE}' is loaded from '/weights/llama-3-8b/"
        f"{OTHER_REVISION}', not the release's '{ROOT}'",
        id="other-root",
    ),
    pytest.param(
        lambda f: setattr(f, "root", ROOT + "-old"),
        f"fail: models check failed: model '{RELEASE}' is loaded from '{ROOT}-old', not the release's '{ROOT}'",
        id="root-with-suffix",
    ),
    pytest.param(
        lambda f: setattr(f, "root", "/weights/llama-3-8b"),
        f"fail: models check failed: model '{RELEASE}' is loaded from '/weights/llama-3-8b', not the "
        f"release's '{ROOT}'",
        id="parent-root",
    ),
    pytest.param(
        lambda f: f.roots.update({PUBLIC: "/weights/other"}),
        f"fail: models check failed: model 'chat' is loaded from '/weights/other', not the release's '{ROOT}'",
        id="public-name-other-root",
    ),
    pytest.param(
        lambda f: f.roots.update({RELEASE: None}),
        f"fail: models check failed: model '{RELEASE}' is loaded from None, not the release's '{ROOT}'",
        id="no-root",
    ),
    pytest.param(
        lambda f: setattr(f, "max_model_len", 4096),
        f"fail: models check failed: model '{RELEASE}' serves max_model_len 4096, not the planned 8192",
        id="other-max-model-len",
    ),
    pytest.param(
        lambda f: f.max_lens.update({PUBLIC: 16384}),
        "fail: models check failed: model 'chat' serves max_model_len 16384, not the planned 8192",
        id="public-name-other-max-model-len",
    ),
    pytest.param(
        lambda f: f.max_lens.update({RELEASE: None}),
        f"fail: models check failed: model '{RELEASE}' serves max_model_len None, not the planned 8192",
        id="no-max-model-len",
    ),
]


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize(("setup", "expect"), IDENTITY_FAILURES)
def test_identity_failures(fake: FakeVllm, mode: str, setup: Callable[[FakeVllm], Any], expect: str) -> None:
    setup(fake)
    assert MODES[mode](fake.port) == (1, expect)
    assert ("POST", "/v1/completions") not in fake.calls()  # stops at the first failed check
    if expect.startswith("fail: health"):
        assert fake.calls() == [("GET", "/health")]


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize(
    ("served_root", "model_root"),
    [(ROOT + "/", ROOT), (ROOT, ROOT + "/"), ("gs://acme-models/llama/r7/", "gs://acme-models/llama/r7")],
)
def test_root_equal_up_to_a_trailing_slash_passes(fake: FakeVllm, mode: str, served_root: str, model_root: str) -> None:
    fake.root = served_root
    code, line = MODES[mode](fake.port, model_root=model_root)
    assert code == 0, line
    assert line.startswith(f"ok: {RELEASE} serves 'chat' from {model_root}; " if mode == "startup" else
                           f"ok: /health 200, {RELEASE} serves 'chat' from {model_root}")  # fmt: skip


@pytest.mark.parametrize("mode", ["startup", "readiness", "liveness"])
def test_connection_refused(refused_port: int, tmp_path: Path, mode: str) -> None:
    args = liveness_args(refused_port, tmp_path / "s.json") if mode == "liveness" else identity_args(refused_port)
    code, line, err = run([mode, *args])
    assert (code, err) == (1, "")
    assert line == (f"fail: health check failed: GET /health to 127.0.0.1:{refused_port}: connection refused "
                    "(is vLLM listening?)")  # fmt: skip


def test_deadline_exceeded_by_a_slow_server(fake: FakeVllm) -> None:
    fake.delay["/v1/models"] = 10.0  # far beyond the whole 0.5 s budget
    started = time.monotonic()
    code, line = startup(fake.port, deadline_seconds=0.5)
    elapsed = time.monotonic() - started
    assert (code, line) == (1, "fail: models check failed: deadline of 0.5 s exceeded during GET /v1/models")
    assert 0.4 < elapsed < 2.0  # gave up at the deadline instead of waiting for the answer
    assert fake.calls() == [("GET", "/health"), ("GET", "/v1/models")]


def test_deadline_spent_before_a_request_starts() -> None:
    ticks = iter([0.0, 10.0])  # Deadline made at t=0, first request at t=10
    deadline = probe.Deadline(1.0, clock=lambda: next(ticks))
    with pytest.raises(probe.ProbeFailure) as e:
        probe.check_health(probe.Server("127.0.0.1", 9), deadline)
    assert str(e.value) == "fail: health check failed: deadline of 1 s exceeded during GET /health (not started)"


def test_deadline_passed_while_the_answer_arrived(fake: FakeVllm) -> None:
    """An answer that arrives after the deadline (in pieces, each within the socket timeout) still fails."""
    ticks = iter([0.0, 0.0, 10.0])  # made, checked before the request, checked after the answer
    deadline = probe.Deadline(1.0, clock=lambda: next(ticks))
    with pytest.raises(probe.ProbeFailure) as e:
        probe.check_health(probe.Server("127.0.0.1", fake.port), deadline)
    assert str(e.value) == "fail: health check failed: deadline of 1 s exceeded during GET /health"


# ---- startup only: /load, generation, manifest ----------------------------------------------------------------
GENERATION_FAILURES = [
    pytest.param(
        lambda f: setattr(f, "load_tracking", False),
        "fail: load check failed: GET /load answered HTTP 404 (is --enable-server-load-tracking set?)",
        id="load-404",
    ),
    pytest.param(
        lambda f: setattr(f, "load", "0"),
        'fail: load check failed: GET /load has no server_load count: b\'{"server_load": "0"}\'',
        id="load-not-a-count",
    ),
    pytest.param(
        lambda f: setattr(f, "completion_status", 500),
        "fail: generation check failed: POST /v1/completions answered HTTP 500: CUDA error: an illegal memory access",
        id="generation-500",
    ),
    pytest.param(
        lambda f: setattr(f, "choices", [{"index": 0, "text": "x"}, {"index": 1, "text": "y"}]),
        "fail: generation check failed: POST /v1/completions returned 2 choices; expected 1",
        id="two-choices",
    ),
    pytest.param(
        lambda f: setattr(f, "choices", []),
        "fail: generation check failed: POST /v1/completions returned 0 choices; expected 1",
        id="no-choice",
    ),
    pytest.param(
        lambda f: setattr(f, "completion_doc", {"object": "text_completion", "model": RELEASE}),
        "fail: generation check failed: POST /v1/completions returned no choices; expected 1",
        id="choices-missing",
    ),
    pytest.param(
        lambda f: setattr(f, "completion_model", PUBLIC),
        f"fail: generation check failed: the response names model 'chat', not the release id '{RELEASE}'",
        id="response-names-public-name",
    ),
    pytest.param(
        lambda f: setattr(f, "completion_model", "llama-3-8b-r6"),
        f"fail: generation check failed: the response names model 'llama-3-8b-r6', not the release id '{RELEASE}'",
        id="response-names-other-release",
    ),
    pytest.param(
        lambda f: setattr(f, "completion_doc", b"Internal Server Error"),
        "fail: generation check failed: POST /v1/completions did not return JSON: b'Internal Server Error'",
        id="generation-not-json",
    ),
]


@pytest.mark.parametrize(("setup", "expect"), GENERATION_FAILURES)
def test_startup_load_and_generation_failures(fake: FakeVllm, setup: Callable[[FakeVllm], Any], expect: str) -> None:
    setup(fake)
    assert startup(fake.port) == (1, expect)
    # The /load failures stop before the generation; the generation failures did generate.
    assert (("POST", "/v1/completions") in fake.calls()) == expect.startswith("fail: generation")


@pytest.mark.parametrize("mode", list(MODES))
def test_readiness_passes_where_only_startup_checks_fail(fake: FakeVllm, mode: str) -> None:
    """What only startup checks (/load, generation) cannot fail readiness."""
    fake.load_tracking = False
    fake.completion_status = 500
    code, line = MODES[mode](fake.port)
    assert (code, line) == (
        (1, "fail: load check failed: GET /load answered HTTP 404 (is --enable-server-load-tracking set?)")
        if mode == "startup"
        else (0, READY_OK)
    )


def _manifest_missing(p: Path) -> str:
    return f"fail: manifest check failed: cannot read {p}: No such file or directory"


def _manifest_not_json(p: Path) -> str:
    p.write_text('{"format": "llm-serving.io/weight-manifest", ')
    return f"fail: manifest check failed: {p} is not JSON"


def _manifest_not_utf8(p: Path) -> str:
    p.write_bytes(b"\xff\xfe{}")
    return f"fail: manifest check failed: {p} is not JSON"


def _manifest_other_format(p: Path) -> str:
    p.write_text(json.dumps({"format": "huggingface/safetensors-index", "revision": REVISION}))
    return f"fail: manifest check failed: {p} is not a llm-serving.io/weight-manifest document"


def _manifest_not_object(p: Path) -> str:
    p.write_text(json.dumps(["llm-serving.io/weight-manifest", REVISION]))
    return f"fail: manifest check failed: {p} is not a llm-serving.io/weight-manifest document"


def _manifest_other_revision(p: Path) -> str:
    write_manifest(p, OTHER_REVISION)
    return (
        f"fail: manifest check failed: the mounted weights are revision '{OTHER_REVISION}', not the release's "
        f"'{REVISION}'"
    )


def _manifest_directory(p: Path) -> str:
    p.mkdir()
    return f"fail: manifest check failed: cannot read {p}: Is a directory"


@pytest.mark.parametrize("make", [_manifest_missing, _manifest_not_json, _manifest_not_utf8, _manifest_other_format,
                                  _manifest_not_object, _manifest_other_revision, _manifest_directory],
                         ids=lambda f: f.__name__.removeprefix("_manifest_"))  # fmt: skip
def test_startup_manifest_failures(fake: FakeVllm, tmp_path: Path, make: Callable[[Path], str]) -> None:
    path = tmp_path / "manifest.json"
    expect = make(path)
    assert startup(fake.port, "--manifest", str(path), "--expect-revision", REVISION) == (1, expect)
    # Checked after the server's identity, before /load and the generation.
    assert fake.calls() == [("GET", "/health"), ("GET", "/v1/models")]


def test_startup_manifest_of_the_release_passes(fake: FakeVllm, tmp_path: Path) -> None:
    path = write_manifest(tmp_path / "manifest.json")
    code, line = startup(fake.port, "--manifest", str(path), "--expect-revision", REVISION)
    assert code == 0 and STARTUP_OK.fullmatch(line), line
    assert fake.calls()[-1] == ("POST", "/v1/completions")


TOGETHER = "--manifest and --expect-revision go together"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["startup", *identity_args(8000), "--manifest", "/weights/m.json"], TOGETHER),
        (["startup", *identity_args(8000), "--expect-revision", REVISION], TOGETHER),
        (
            ["readiness", *identity_args(8000), "--manifest", "/w/m.json", "--expect-revision", REVISION],
            "unrecognized arguments: --manifest /w/m.json --expect-revision",
        ),
        (
            ["readiness", "--port", "8000", "--release-id", RELEASE, "--model-root", ROOT, "--max-model-len", "8192"],
            "the following arguments are required: --public-name",
        ),
        (["startup", *identity_args(8000, deadline_seconds=0)], "must be > 0, got 0"),
        (["liveness", "--port", "8000"], "the following arguments are required: --stall-seconds"),
        (["liveness", "--port", "8000", "--stall-seconds", "-1"], "must be > 0, got -1"),
        (["--port", "8000"], "invalid choice: '8000'"),
        ([], "the following arguments are required: mode"),
    ],
    ids=[
        "manifest-without-revision",
        "revision-without-manifest",
        "readiness-manifest",
        "no-public-name",
        "zero-deadline",
        "no-stall-seconds",
        "negative-stall",
        "no-mode",
        "nothing",
    ],
)
def test_usage_errors(argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    """argparse's exit status 2 and its message on stderr; nothing on stdout (the kubelet's probe message)."""
    with pytest.raises(SystemExit) as e:
        probe.main(argv)
    assert e.value.code == 2
    out = capsys.readouterr()
    assert out.out == "" and "usage:" in out.err and says in out.err, out.err


# ---- readiness never enters the engine's queue -----------------------------------------------------------------
def test_readiness_passes_on_a_good_server_without_generating(fake: FakeVllm) -> None:
    assert readiness(fake.port) == (0, READY_OK)
    assert fake.calls() == [("GET", "/health"), ("GET", "/v1/models")]


def test_readiness_stays_ready_while_the_engine_is_busy(fake: FakeVllm) -> None:
    """A generation that hangs in the engine's queue does not make a healthy replica unready."""
    fake.delay["/v1/completions"] = 60.0  # until teardown
    fake.load = 3

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=60)
        with contextlib.suppress(OSError, http.client.HTTPException):
            conn.request("POST", "/v1/completions", body=json.dumps({"model": PUBLIC, "prompt": "x" * 1000}),
                         headers={"Content-Type": "application/json"})  # fmt: skip
            conn.getresponse().read()
        conn.close()

    busy = threading.Thread(target=client, daemon=True)
    busy.start()
    for _ in range(400):  # wait (up to 2 s) until the fake holds the client's request
        if fake.calls():
            break
        time.sleep(0.005)
    assert fake.calls() == [("POST", "/v1/completions")]
    for _ in range(2):
        assert readiness(fake.port, deadline_seconds=1) == (0, READY_OK)
    assert fake.calls() == [("POST", "/v1/completions")] + [("GET", "/health"), ("GET", "/v1/models")] * 2
    assert busy.is_alive()  # the client's generation is still hanging
    fake.released.set()
    busy.join(5)


# ---- liveness --------------------------------------------------------------------------------------------------
def state_of(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def test_liveness_passes_when_idle_whatever_the_counters(fake: FakeVllm, tmp_path: Path) -> None:
    state = tmp_path / "s.json"
    assert live(fake, state, T0) == "ok: engine alive (idle)"
    assert state_of(state) == {"version": probe.STATE_VERSION, "tokens": TOKENS, "progress_at": T0}
    # Idle for an hour with counters unchanged: still alive, and each idle run restarts the progress clock.
    assert live(fake, state, T0 + 3600) == "ok: engine alive (idle)"
    assert state_of(state)["progress_at"] == T0 + 3600
    fake.set_tokens(100.0, 5.0)
    assert live(fake, state, T0 + 7200) == "ok: engine alive (idle)"
    assert state_of(state) == {"version": probe.STATE_VERSION, "tokens": 105.0, "progress_at": T0 + 7200}
    # Busy from here, no token: the window counts from the last idle run, not from the first run.
    fake.load = 2
    assert live(fake, state, T0 + 7259) == "ok: engine alive (2 request(s) in flight, no token for 59 s of 60 s)"
    assert live(fake, state, T0 + 7260) == hung(2, 60)
    assert fake.calls() == [("GET", "/health"), ("GET", "/load"), ("GET", "/metrics")] * 5  # never /v1/*


def test_liveness_fails_once_the_stall_window_has_passed(fake: FakeVllm, tmp_path: Path) -> None:
    state = tmp_path / "s.json"
    fake.load = 1
    assert live(fake, state, T0) == "ok: engine alive (1 request(s) in flight, tokens moving)"  # clock starts
    assert live(fake, state, T0 + 30) == "ok: engine alive (1 request(s) in flight, no token for 30 s of 60 s)"
    assert live(fake, state, T0 + 59.4) == "ok: engine alive (1 request(s) in flight, no token for 59 s of 60 s)"
    assert live(fake, state, T0 + 60) == hung(1, 60)
    assert live(fake, state, T0 + 125) == hung(1, 125)  # a failing run does not restart the clock
    assert state_of(state) == {"version": probe.STATE_VERSION, "tokens": TOKENS, "progress_at": T0}
    # The window is --stall-seconds.
    assert live(fake, state, T0 + 125, stall=300) == (
        "ok: engine alive (1 request(s) in flight, no token for 125 s of 300 s)"
    )
    assert live(fake, state, T0 + 300, stall=300) == hung(1, 300, limit=300)
    assert live(fake, state, T0 + 10, stall=2.5) == (
        "fail: progress check failed: engine hung: 1 request(s) in flight and no token processed for 10 s (limit 2.5 s)"
    )


def test_liveness_passes_while_tokens_move(fake: FakeVllm, tmp_path: Path) -> None:
    state = tmp_path / "s.json"
    fake.load = 4
    assert live(fake, state, T0) == "ok: engine alive (4 request(s) in flight, tokens moving)"
    fake.set_tokens(12.0, 31.0)  # one more generated token
    assert live(fake, state, T0 + 100) == "ok: engine alive (4 request(s) in flight, tokens moving)"
    assert state_of(state) == {"version": probe.STATE_VERSION, "tokens": 43.0, "progress_at": T0 + 100}
    fake.set_tokens(20.0, 23.0)  # the probe watches the sum (43 again): not progress
    assert live(fake, state, T0 + 159) == "ok: engine alive (4 request(s) in flight, no token for 59 s of 60 s)"
    assert live(fake, state, T0 + 160) == hung(4, 60)


def test_liveness_sums_every_engine_and_ignores_other_series(fake: FakeVllm, tmp_path: Path) -> None:
    state = tmp_path / "s.json"
    fake.prompt_tokens = {"0": 12.0, "1": 1000.0}
    fake.generation_tokens = {"0": 30.0, "1": 0.5}
    assert live(fake, state, T0) == "ok: engine alive (idle)"
    assert state_of(state)["tokens"] == 1042.5  # not the _created, _sum, _count or bucket samples
    # Progress on the second engine alone counts.
    fake.load = 1
    fake.generation_tokens = {"0": 30.0, "1": 1.5}
    assert live(fake, state, T0 + 100) == "ok: engine alive (1 request(s) in flight, tokens moving)"


@pytest.mark.parametrize(
    "content",
    [
        json.dumps({"version": probe.STATE_VERSION - 1, "tokens": TOKENS, "progress_at": T0 - 1000}),
        json.dumps({"version": probe.STATE_VERSION + 1, "tokens": TOKENS, "progress_at": T0 - 1000}),
        json.dumps({"tokens": TOKENS, "progress_at": T0 - 1000}),
        f'{{"version": {probe.STATE_VERSION}, "tokens": 42.0, "progress_at": ',
        "\x00\xff garbage",
        "",
        json.dumps([probe.STATE_VERSION, TOKENS, T0 - 1000]),
        json.dumps({"version": probe.STATE_VERSION, "tokens": TOKENS, "progress_at": "2023-11-14T22:13:20Z"}),
        json.dumps({"version": probe.STATE_VERSION, "tokens": TOKENS, "progress_at": True}),
        json.dumps({"version": probe.STATE_VERSION, "tokens": TOKENS}),
        json.dumps({"version": probe.STATE_VERSION, "tokens": TOKENS, "progress_at": T0 + 1000}),  # future
        json.dumps({"version": probe.STATE_VERSION, "tokens": 5000.0, "progress_at": T0 - 1000}),  # counters went down
    ],
    ids=[
        "older-version",
        "newer-version",
        "no-version",
        "torn",
        "garbage",
        "empty",
        "list",
        "date-string",
        "bool-time",
        "no-time",
        "future",
        "counters-down",
    ],
)
def test_unusable_state_restarts_the_clock(fake: FakeVllm, tmp_path: Path, content: str) -> None:
    """A state file the probe cannot trust (another format, a clock step, a previous container whose counters
    were higher) restarts the progress clock; it never makes the probe fail."""
    state = tmp_path / "s.json"
    state.write_text(content)
    fake.load = 2
    assert live(fake, state, T0) == "ok: engine alive (2 request(s) in flight, tokens moving)"
    assert state_of(state) == {"version": probe.STATE_VERSION, "tokens": TOKENS, "progress_at": T0}
    assert live(fake, state, T0 + 59) == "ok: engine alive (2 request(s) in flight, no token for 59 s of 60 s)"
    assert live(fake, state, T0 + 60) == hung(2, 60)


def test_liveness_trusts_a_valid_state_file(fake: FakeVllm, tmp_path: Path) -> None:
    """The counterpart of the test above: a valid file with the same counters is the running clock."""
    state = tmp_path / "s.json"
    state.write_text(json.dumps({"version": probe.STATE_VERSION, "tokens": TOKENS, "progress_at": T0 - 1000}))
    fake.load = 2
    assert live(fake, state, T0) == hung(2, 1000)


def test_liveness_via_main_on_the_real_clock(fake: FakeVllm, tmp_path: Path) -> None:
    state = tmp_path / "s.json"
    state.write_text(json.dumps({"version": probe.STATE_VERSION, "tokens": TOKENS, "progress_at": time.time() - 100}))
    fake.load = 1
    code, line, err = run(["liveness", *liveness_args(fake.port, state, stall=60)])
    assert (code, err) == (1, "")
    assert re.fullmatch(r"fail: progress check failed: engine hung: 1 request\(s\) in flight and no token processed "
                        r"for 10[01] s \(limit 60 s\)", line), line  # fmt: skip
    code, line, err = run(["liveness", *liveness_args(fake.port, state, stall=600)])
    assert (code, err) == (0, "")
    assert re.fullmatch(r"ok: engine alive \(1 request\(s\) in flight, no token for 10[01] s of 600 s\)", line), line


def test_liveness_state_file_is_replaced_atomically(fake: FakeVllm, tmp_path: Path) -> None:
    state = tmp_path / "s.json"
    for i in range(3):
        fake.set_tokens(12.0 + i, 30.0)
        live(fake, state, T0 + i)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]  # no temporary file left behind


def test_liveness_fails_at_once_on_a_dead_engine(fake: FakeVllm, tmp_path: Path) -> None:
    fake.health_status = 503
    expect = f"fail: health check failed: GET /health answered HTTP 503: {ENGINE_DEAD}"
    assert live(fake, tmp_path / "s.json", T0) == expect
    assert fake.calls() == [("GET", "/health")]
    assert not (tmp_path / "s.json").exists()


@pytest.mark.parametrize(
    ("setup", "expect"),
    [
        pytest.param(
            lambda f: setattr(f, "metrics_body", metrics_text({}, {})),
            "fail: progress check failed: /metrics has none of vllm:prompt_tokens_total, vllm:generation_tokens_total",
            id="no-counters",
        ),
        pytest.param(
            lambda f: setattr(f, "metrics_body", ""),
            "fail: progress check failed: /metrics has none of vllm:prompt_tokens_total, vllm:generation_tokens_total",
            id="empty-metrics",
        ),
        pytest.param(
            lambda f: setattr(f, "metrics_status", 500),
            "fail: progress check failed: GET /metrics answered HTTP 500",
            id="metrics-500",
        ),
        pytest.param(
            lambda f: setattr(f, "load_tracking", False),
            "fail: load check failed: GET /load answered HTTP 404 (is --enable-server-load-tracking set?)",
            id="load-404",
        ),
    ],
)
def test_liveness_fails_without_its_signals(
    fake: FakeVllm, tmp_path: Path, setup: Callable[[FakeVllm], Any], expect: str
) -> None:
    setup(fake)
    assert live(fake, tmp_path / "s.json", T0) == expect


def test_liveness_one_counter_is_enough(fake: FakeVllm, tmp_path: Path) -> None:
    fake.prompt_tokens = {}
    assert live(fake, tmp_path / "s.json", T0) == "ok: engine alive (idle)"
    assert state_of(tmp_path / "s.json")["tokens"] == 30.0


def test_liveness_passes_when_the_state_file_cannot_be_written(fake: FakeVllm, tmp_path: Path) -> None:
    state = tmp_path / "no-such-dir" / "s.json"
    code, line, err = run(["liveness", *liveness_args(fake.port, state)])
    assert (code, line) == (0, "ok: engine alive (idle)")
    assert err.startswith(f"liveness: could not write state file {state}: [Errno 2] No such file or directory")
    assert err.count("\n") == 1


# ---- API key -----------------------------------------------------------------------------------------------------
def test_api_key_goes_to_the_v1_endpoints_only(fake: FakeVllm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake.api_key = "s3cret"
    monkeypatch.setenv("VLLM_API_KEY", "s3cret")
    code, line = startup(fake.port)
    assert code == 0 and STARTUP_OK.fullmatch(line), line
    assert readiness(fake.port) == (0, READY_OK)
    assert run(["liveness", *liveness_args(fake.port, tmp_path / "s.json")])[:2] == (0, "ok: engine alive (idle)")
    auth = [(r.path, r.auth) for r in fake.requests]
    assert auth == [
        ("/health", None), ("/v1/models", "Bearer s3cret"), ("/load", None), ("/v1/completions", "Bearer s3cret"),
        ("/health", None), ("/v1/models", "Bearer s3cret"),
        ("/health", None), ("/load", None), ("/metrics", None),
    ]  # fmt: skip


def test_api_key_from_another_variable(fake: FakeVllm, monkeypatch: pytest.MonkeyPatch) -> None:
    fake.api_key = "k2"
    monkeypatch.setenv("VLLM_API_KEY", "not-this-one")
    monkeypatch.setenv("SERVING_KEY", "k2")
    assert readiness(fake.port, api_key_env="SERVING_KEY") == (0, READY_OK)
    assert [r.auth for r in fake.requests] == [None, "Bearer k2"]


@pytest.mark.parametrize("value", [None, ""])
def test_no_api_key_sends_no_header(fake: FakeVllm, monkeypatch: pytest.MonkeyPatch, value: str | None) -> None:
    if value is not None:
        monkeypatch.setenv("VLLM_API_KEY", value)
    fake.api_key = "s3cret"  # the server wants one: the probe's failure says so
    assert readiness(fake.port) == (1, 'fail: models check failed: GET /v1/models answered HTTP 401: {"error": '
                                       '"Unauthorized"}')  # fmt: skip
    assert [r.auth for r in fake.requests] == [None, None]


# ---- the message and the file ------------------------------------------------------------------------------------
def test_failure_message_is_one_bounded_line() -> None:
    err = probe.ProbeFailure("models", "line one\nline two\t" + "x" * 1000)
    assert str(err).startswith("fail: models check failed: line one line two xxx") and "\n" not in str(err)
    assert len(err.detail) == probe.MAX_DETAIL_CHARS


def test_parses_as_python_3_8() -> None:
    """The vLLM image's python3 may be 3.8: no newer syntax (match, except*, PEP 695 generics, ...)."""
    ast.parse(PROBE.read_text(), filename=str(PROBE), feature_version=(3, 8))


def test_uses_only_the_standard_library() -> None:
    """The file runs in the vLLM image on its own: no third-party or project imports."""
    tree = ast.parse(PROBE.read_text())
    modules = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    modules |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level], "relative import"
    assert modules <= set(sys.stdlib_module_names) | {"__future__"}, modules - set(sys.stdlib_module_names)
