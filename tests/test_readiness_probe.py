"""components/serving/readiness_probe.py against a fake vLLM (stdlib http.server on loopback): every failure
mode, the deadline, and the rate limit on the generation check. No vLLM needed."""

from __future__ import annotations

import ast
import contextlib
import io
import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from components.serving import readiness_probe as rp

PROBE = Path(rp.__file__)
RELEASE = "llama-r1"


class _QuietServer(ThreadingHTTPServer):
    """The deadline tests make the probe hang up on a slow fake on purpose: the fake's write then fails with
    a broken pipe, which is the expected outcome, not an error worth a traceback in the test log."""

    def handle_error(self, request, client_address) -> None:  # noqa: ANN001
        import sys

        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


class FakeVllm:
    """Answers like vLLM; each attribute can be changed by a test to produce one failure mode."""

    def __init__(self) -> None:
        self.health_status = 200
        self.models: Any = {"object": "list", "data": [{"id": RELEASE, "object": "model"}]}
        self.models_status = 200
        self.completion_status = 200
        self.completion: Any = {"object": "text_completion", "choices": [{"index": 0, "text": "x"}]}
        self.delay: dict[str, float] = {}  # path -> seconds to sleep before answering
        self.requests: list[tuple[str, str, dict[str, str], Any]] = []  # (method, path, headers, json body)
        self.server: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.server_address[1]

    def completions(self) -> list[Any]:
        return [body for method, path, _, body in self.requests if (method, path) == ("POST", "/v1/completions")]

    def handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep pytest output clean
                pass

            def _answer(self, status: int, doc: Any) -> None:
                payload = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _record(self, body: Any) -> None:
                fake.requests.append((self.command, self.path, dict(self.headers), body))
                time.sleep(fake.delay.get(self.path, 0.0))

            def do_GET(self) -> None:
                self._record(None)
                if self.path == "/health":
                    self._answer(fake.health_status, b"" if fake.health_status == 200 else {"error": "engine dead"})
                elif self.path == "/v1/models":
                    self._answer(fake.models_status, fake.models)
                else:
                    self._answer(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"null")
                self._record(body)
                if self.path == "/v1/completions":
                    if fake.completion_status == 200:
                        self._answer(200, fake.completion)
                    else:
                        self._answer(fake.completion_status, {"error": {"message": "The model does not exist."}})
                else:
                    self._answer(404, {"error": {"message": "not found"}})

        return Handler


@pytest.fixture
def fake() -> Iterator[FakeVllm]:
    f = FakeVllm()
    server = _QuietServer(("127.0.0.1", 0), f.handler())
    server.daemon_threads = True  # a handler still sleeping for a deadline test must not block shutdown
    f.server = server
    # A short poll interval: shutdown() waits up to one interval, once per test (default 0.5 s).
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f
    finally:
        server.shutdown()
        server.server_close()


def probe(fake: FakeVllm, state: Path, *, deadline: float = 5.0, interval: float = 60.0, release: str = RELEASE,
          **kw: Any) -> tuple[int, str]:
    """main() in-process; returns (exit status, the single stdout line)."""
    argv = ["--port", str(fake.port), "--release-id", release, "--deadline-seconds", str(deadline),
            "--state-file", str(state), "--min-interval-seconds", str(interval)]  # fmt: skip
    for k, v in kw.items():
        argv += [f"--{k.replace('_', '-')}", str(v)]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = rp.main(argv)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1, f"expected exactly one line of output, got {lines}"
    return code, lines[0]


# ---- the happy path --------------------------------------------------------------------------------------------
def test_passes_when_healthy_serving_the_release_and_generating(fake: FakeVllm, tmp_path: Path) -> None:
    code, line = probe(fake, tmp_path / "s.json")
    assert code == 0, line
    assert line.startswith("ready:") and "generation ok" in line
    assert [(m, p) for m, p, _, _ in fake.requests] == [
        ("GET", "/health"), ("GET", "/v1/models"), ("POST", "/v1/completions")
    ]
    assert fake.completions() == [{"model": RELEASE, "prompt": rp.PROMPT, "max_tokens": 1, "temperature": 0}]
    state = json.loads((tmp_path / "s.json").read_text())
    assert state["release_id"] == RELEASE and state["port"] == fake.port and state["version"] == rp.STATE_VERSION


def test_sends_api_key_to_v1_endpoints_only(fake: FakeVllm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_VLLM_KEY", "s3cret")
    code, _ = probe(fake, tmp_path / "s.json", api_key_env="TEST_VLLM_KEY")
    assert code == 0
    auth = {path: headers.get("Authorization") for _, path, headers, _ in fake.requests}
    assert auth == {"/health": None, "/v1/models": "Bearer s3cret", "/v1/completions": "Bearer s3cret"}


# ---- each failure mode: exit 1 and one line naming the failed check -------------------------------------------
@pytest.mark.parametrize("status", [503, 500])
def test_fails_when_health_is_not_200(fake: FakeVllm, tmp_path: Path, status: int) -> None:
    fake.health_status = status
    code, line = probe(fake, tmp_path / "s.json")
    assert code == 1
    assert line.startswith("not ready: health check failed:") and f"HTTP {status}" in line
    assert [p for _, p, _, _ in fake.requests] == ["/health"]  # stops at the first failed check


def test_fails_when_nothing_listens(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound but not listening: connections are refused
        out = subprocess.run(
            [sys.executable, str(PROBE), "--port", str(port), "--release-id", RELEASE, "--state-file",
             str(tmp_path / "s.json")],
            capture_output=True, text=True, timeout=30,  # a refused connection returns at once; 30 s is a hang guard
        )  # fmt: skip
    assert out.returncode == 1
    assert out.stdout.startswith("not ready: health check failed:") and "connection refused" in out.stdout
    assert out.stdout.count("\n") == 1


@pytest.mark.parametrize(
    ("models", "expect"),
    [
        ({"object": "list", "data": []}, "lists []"),
        ({"object": "list", "data": [{"id": RELEASE}, {"id": "lora-a"}]}, "lists ['llama-r1', 'lora-a']"),
        ({"object": "list", "data": [{"id": "llama-r0"}]}, "lists ['llama-r0']; expected exactly ['llama-r1']"),
        ({"object": "list"}, "no 'data' list"),
        (b"<html>oops</html>", "did not return JSON"),
    ],
    ids=["none", "two", "other-release", "no-data", "not-json"],
)
def test_fails_unless_exactly_the_release_is_listed(fake: FakeVllm, tmp_path: Path, models: Any, expect: str) -> None:
    fake.models = models
    code, line = probe(fake, tmp_path / "s.json")
    assert code == 1
    assert line.startswith("not ready: models check failed:") and expect in line, line
    assert fake.completions() == []


def test_fails_when_models_endpoint_errors(fake: FakeVllm, tmp_path: Path) -> None:
    fake.models_status = 401
    code, line = probe(fake, tmp_path / "s.json")
    assert code == 1 and line.startswith("not ready: models check failed:") and "HTTP 401" in line


def test_fails_when_generation_errors(fake: FakeVllm, tmp_path: Path) -> None:
    fake.completion_status = 404
    code, line = probe(fake, tmp_path / "s.json")
    assert code == 1
    assert line == (
        "not ready: generation check failed: POST /v1/completions answered HTTP 404: The model does not exist."
    )
    assert not (tmp_path / "s.json").exists()  # a failed generation records nothing


@pytest.mark.parametrize(("choices", "n"), [([], "0"), ([{"text": "a"}, {"text": "b"}], "2"), (None, "no")])
def test_fails_unless_generation_returns_one_choice(fake: FakeVllm, tmp_path: Path, choices: Any, n: str) -> None:
    fake.completion = {"object": "text_completion", "choices": choices}
    code, line = probe(fake, tmp_path / "s.json")
    assert code == 1
    assert line == f"not ready: generation check failed: POST /v1/completions returned {n} choices; expected 1"


def test_failure_message_is_one_bounded_line() -> None:
    err = rp.ProbeFailure("models", "line one\nline two " + "x" * 1000)
    assert "\n" not in str(err) and len(err.detail) == rp.MAX_DETAIL_CHARS


# ---- the deadline covers all checks together ----------------------------------------------------------------
def test_deadline_exceeded_by_a_slow_check(fake: FakeVllm, tmp_path: Path) -> None:
    fake.delay["/v1/models"] = 3.0  # far longer than the whole 0.3 s budget
    started = time.monotonic()
    code, line = probe(fake, tmp_path / "s.json", deadline=0.3)
    assert code == 1
    assert line == "not ready: models check failed: deadline of 0.3 s exceeded during GET /v1/models"
    assert time.monotonic() - started < 2.0  # gave up near the deadline instead of waiting 3 s for the answer


def test_deadline_is_shared_across_checks(fake: FakeVllm, tmp_path: Path) -> None:
    # Each request alone fits in 0.75 s; the three together (0.9 s) do not. Normally the budget runs out during
    # the generation; on a very loaded machine already during the models check. Health always fits.
    fake.delay.update({"/health": 0.3, "/v1/models": 0.3, "/v1/completions": 0.3})
    code, line = probe(fake, tmp_path / "s.json", deadline=0.75)
    assert code == 1
    assert re.match(r"not ready: (models|generation) check failed: deadline of 0\.75 s exceeded during ", line), line


def test_deadline_already_spent_before_a_request() -> None:
    clock = iter([0.0, 10.0])  # Deadline created at t=0, checked at t=10
    deadline = rp.Deadline(1.0, clock=lambda: next(clock))
    with pytest.raises(rp.ProbeFailure, match=r"deadline of 1 s exceeded during GET /health \(not started\)"):
        rp.check_health("127.0.0.1", 9, deadline)


# ---- rate limiting of the generation check ------------------------------------------------------------------
def test_generation_runs_at_most_once_per_interval(fake: FakeVllm, tmp_path: Path) -> None:
    state = tmp_path / "s.json"
    assert probe(fake, state, interval=60)[0] == 0
    code, line = probe(fake, state, interval=60)
    assert code == 0 and "generation skipped" in line
    assert len(fake.completions()) == 1
    # Health and models are still checked on every run.
    assert [p for _, p, _, _ in fake.requests].count("/v1/models") == 2
    # A skipped run still fails when a cheap check fails.
    fake.health_status = 503
    assert probe(fake, state, interval=60)[0] == 1


def test_generation_reruns_once_the_interval_has_passed(fake: FakeVllm, tmp_path: Path) -> None:
    state = tmp_path / "s.json"
    now = [1_000_000.0]
    kwargs = dict(
        port=fake.port, release_id=RELEASE, deadline_seconds=5, state_file=str(state), min_interval_seconds=60
    )
    rp.run_probe(**kwargs, wall_clock=lambda: now[0])
    now[0] += 59.0
    assert "skipped" in rp.run_probe(**kwargs, wall_clock=lambda: now[0])
    now[0] += 1.0
    assert "generation ok" in rp.run_probe(**kwargs, wall_clock=lambda: now[0])
    assert len(fake.completions()) == 2


def test_zero_interval_generates_every_time(fake: FakeVllm, tmp_path: Path) -> None:
    for _ in range(3):
        assert probe(fake, tmp_path / "s.json", interval=0)[0] == 0
    assert len(fake.completions()) == 3


@pytest.mark.parametrize(
    "change",
    [
        {"release_id": "llama-r0"},
        {"port": 1},
        {"version": 99},
        {"last_generation_ok": "yesterday"},
        {"last_generation_ok": 4e12},  # dated in the future: the clock stepped back
    ],
    ids=["other-release", "other-port", "other-version", "bad-time", "future"],
)
def test_unusable_state_means_generate(fake: FakeVllm, tmp_path: Path, change: dict[str, Any]) -> None:
    state = tmp_path / "s.json"
    fresh = {"version": rp.STATE_VERSION, "release_id": RELEASE, "port": fake.port, "last_generation_ok": time.time()}
    state.write_text(json.dumps({**fresh, **change}))
    code, line = probe(fake, state, interval=3600)
    assert code == 0 and "generation ok" in line
    assert json.loads(state.read_text())["release_id"] == RELEASE  # replaced by a valid record


def test_corrupt_state_means_generate(fake: FakeVllm, tmp_path: Path) -> None:
    state = tmp_path / "s.json"
    state.write_text("{not json")
    assert "generation ok" in probe(fake, state, interval=3600)[1]


def test_unwritable_state_file_still_passes(fake: FakeVllm, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    state = tmp_path / "missing-dir" / "s.json"
    code = rp.main(["--port", str(fake.port), "--release-id", RELEASE, "--state-file", str(state)])
    out = capsys.readouterr()
    assert code == 0 and out.out.startswith("ready:")
    assert "could not write state file" in out.err


# ---- CLI and packaging ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "bad",
    [["--deadline-seconds", "0"], ["--min-interval-seconds", "-1"], []],
    ids=["zero-deadline", "negative-interval", "no-release-id"],
)
def test_rejects_bad_arguments(bad: list[str]) -> None:
    argv = ["--release-id", RELEASE, *bad] if bad else []
    with pytest.raises(SystemExit) as e:
        rp.parse_args(argv)
    assert e.value.code == 2


def test_uses_only_the_standard_library() -> None:
    """The file runs in the vLLM image with its own python3: no third-party or project imports."""
    tree = ast.parse(PROBE.read_text())
    modules = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    modules |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert modules <= set(sys.stdlib_module_names) | {"__future__"}, modules - set(sys.stdlib_module_names)
