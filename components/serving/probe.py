"""Startup, readiness and liveness probes of one vLLM replica, each answering one question and nothing else.

Standard library only: it is shipped into the pod in a ConfigMap and run by the kubelet as an exec probe with
the vLLM image's ``python3`` (3.8 or later)::

    python3 probe.py startup   --port 8000 --release-id R --public-name P --model-root ROOT --max-model-len N \\
                               [--manifest ROOT/manifest.json --expect-revision REV] --deadline-seconds 5
    python3 probe.py readiness --port 8000 --release-id R --public-name P --model-root ROOT --max-model-len N
    python3 probe.py liveness  --port 8000 --stall-seconds 60 --state-file /tmp/liveness-state.json

``startup`` — has this replica really come up as the release? (runs until it passes once)
  (a) ``GET /health`` answers 200;
  (b) ``GET /v1/models`` lists exactly ``[release id, public name]`` (vLLM lists its served names in order), each
      with model root ``--model-root`` and the context ``--max-model-len`` the plan rendered: a pod serving
      another release, another revision, another context or extra adapters never passes;
  (c) with ``--manifest`` (mounted weights): the checksum manifest *on the volume* names ``--expect-revision``
      — evidence from the weights themselves, not from the pod spec;
  (d) ``GET /load`` answers (the liveness probe depends on ``--enable-server-load-tracking``);
  (e) ``POST /v1/completions`` for one greedy token under the *public* name answers 200 with one choice and
      ``model`` = the release id: the scheduler, the model and the tokenizer work, clients' name reaches this
      engine, and responses say which release served them. Nothing queues ahead of it: a pod receives traffic
      only after its startup probe has passed.

``readiness`` — may this replica take traffic now? (a) and (b) only. Both are answered by vLLM's API server
  without entering the engine's queue, so a healthy server that is busy stays ready; a dead engine (``/health``
  503) or a wrong release leaves rotation.

``liveness`` — is the engine hung? Restart only what cannot recover by itself:
  * ``/health`` not 200: vLLM marks a dead engine permanently (503); a restart is the only way back;
  * requests in flight (``GET /load``) while the token counters (``vllm:prompt_tokens_total`` +
    ``vllm:generation_tokens_total`` on ``/metrics``) have not moved for ``--stall-seconds``: the API server is
    up but the engine makes no progress (a hung collective, a wedged worker). ``/health`` stays 200 in that
    state, which is why it cannot be the liveness signal alone. An idle engine is never "hung": with nothing in
    flight the progress clock restarts on every run.
  The progress clock lives in ``--state-file`` (written atomically; a file from a previous container is
  recognised by its counter value and restarts the clock).

Output: exactly one line on stdout, which the kubelet records as the probe message: ``ok: ...`` (exit 0), or
``fail: <check> check failed: <why>`` (exit 1). If the server sets ``--api-key``, the key is read from the
environment variable named by ``--api-key-env`` (default ``VLLM_API_KEY``, which vLLM itself also reads) and sent
to the /v1 endpoints. Keep ``--deadline-seconds`` below the probe's ``timeoutSeconds`` so that a slow server gets
this script's message rather than the kubelet's bare "command timed out".
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import socket
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

#: Largest response body read; /v1/models, /load and a 1-token completion are a few kB, /metrics a few hundred.
MAX_BODY_BYTES = 8 << 20
#: Longest reason text kept in the one-line message (kubelet events are truncated anyway).
MAX_DETAIL_CHARS = 300
#: Prompt for the generation check: short, so prefill costs a couple of tokens on any tokenizer.
PROMPT = "Hi"
#: Format of the liveness state file; bump it when the format changes so that old files are ignored.
STATE_VERSION = 2
#: The weight manifest's format marker (written by ``llm-serving release stage``).
MANIFEST_FORMAT = "llm-serving.io/weight-manifest"
#: Counters whose sum is the engine's progress: prompt tokens prefilled plus tokens generated.
PROGRESS_COUNTERS = ("vllm:prompt_tokens_total", "vllm:generation_tokens_total")

Clock = Callable[[], float]


class ProbeFailure(Exception):
    """One failed check; ``str()`` is the single line printed for the kubelet."""

    def __init__(self, check: str, detail: str) -> None:
        self.check = check
        self.detail = " ".join(str(detail).split())[:MAX_DETAIL_CHARS]  # one line, bounded
        super().__init__(f"fail: {check} check failed: {self.detail}")


class Deadline:
    """An absolute deadline on a monotonic clock shared by every check of one probe run."""

    def __init__(self, seconds: float, clock: Clock = time.monotonic) -> None:
        self.seconds = seconds
        self.clock = clock
        self.end = clock() + seconds

    def remaining(self) -> float:
        return self.end - self.clock()

    def expired_failure(self, check: str, what: str) -> ProbeFailure:
        return ProbeFailure(check, f"deadline of {self.seconds:g} s exceeded during {what}")


class Server:
    """The local vLLM as the probe sees it: host, port and the headers the /v1 endpoints need."""

    def __init__(self, host: str, port: int, api_key: Optional[str] = None) -> None:
        self.host = host
        self.port = port
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def request(self, method: str, path: str, deadline: Deadline, check: str,
                body: Optional[Dict[str, Any]] = None) -> Tuple[int, bytes]:
        """One HTTP request bounded by the remaining time; transport problems become a ProbeFailure.

        http.client is used directly (not urllib) so that no HTTP(S)_PROXY setting in the pod can divert a
        loopback request."""
        what = f"{method} {path}"
        remaining = deadline.remaining()
        if remaining <= 0:
            raise deadline.expired_failure(check, f"{what} (not started)")
        data = None
        hdrs = dict(self.headers) if path.startswith("/v1/") else {}
        if body is not None:
            data = json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
        conn = http.client.HTTPConnection(self.host, self.port, timeout=remaining)
        try:
            conn.request(method, path, body=data, headers=hdrs)
            resp = conn.getresponse()
            payload = resp.read(MAX_BODY_BYTES)
            status = resp.status
        except socket.timeout:
            raise deadline.expired_failure(check, what) from None
        except ConnectionRefusedError:
            raise ProbeFailure(check, f"{what} to {self.host}:{self.port}: connection refused (is vLLM listening?)") from None
        except (OSError, http.client.HTTPException) as e:
            raise ProbeFailure(check, f"{what} to {self.host}:{self.port}: {type(e).__name__}: {e}") from None
        finally:
            conn.close()
        if deadline.remaining() < 0:
            raise deadline.expired_failure(check, what)
        return status, payload


def _json(payload: bytes, check: str, what: str) -> Any:
    try:
        return json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ProbeFailure(check, f"{what} did not return JSON: {payload[:80]!r}") from None


def _error_text(payload: bytes) -> str:
    """vLLM's error message from an error body ({"error": {"message": ...}} or {"message": ...}), else raw text."""
    try:
        doc = json.loads(payload.decode("utf-8"))
        err = doc.get("error", doc) if isinstance(doc, dict) else doc
        if isinstance(err, dict) and "message" in err:
            return str(err["message"])
    except (UnicodeDecodeError, ValueError):
        pass
    return payload[:200].decode("utf-8", "replace")


def _same_root(a: str, b: str) -> bool:
    """Model roots compare without a trailing slash (``gs://b/m/r/`` and ``gs://b/m/r`` are one folder)."""
    return a.rstrip("/") == b.rstrip("/")


# ---- checks ---------------------------------------------------------------------------------------------------
def check_health(server: Server, deadline: Deadline) -> None:
    """GET /health must answer 200 (vLLM answers 503 once its engine is dead)."""
    status, payload = server.request("GET", "/health", deadline, "health")
    if status != 200:
        raise ProbeFailure("health", f"GET /health answered HTTP {status}: {_error_text(payload)}")


def check_models(server: Server, deadline: Deadline, names: List[str], model_root: str, max_model_len: int) -> None:
    """GET /v1/models must list exactly ``names``, in order, each with this model root and context length."""
    status, payload = server.request("GET", "/v1/models", deadline, "models")
    if status != 200:
        raise ProbeFailure("models", f"GET /v1/models answered HTTP {status}: {_error_text(payload)}")
    doc = _json(payload, "models", "GET /v1/models")
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list) or not all(isinstance(m, dict) for m in data):
        raise ProbeFailure("models", "GET /v1/models has no 'data' list of models")
    ids = [str(m.get("id")) for m in data]
    if ids != names:
        raise ProbeFailure("models", f"GET /v1/models lists {ids}; expected exactly {names}")
    for m in data:
        root = m.get("root")
        if not isinstance(root, str) or not _same_root(root, model_root):
            raise ProbeFailure("models", f"model {m.get('id')!r} is loaded from {root!r}, not the release's "
                                         f"{model_root!r}")
        if m.get("max_model_len") != max_model_len:
            raise ProbeFailure("models", f"model {m.get('id')!r} serves max_model_len {m.get('max_model_len')!r}, "
                                         f"not the planned {max_model_len}")


def check_manifest(path: str, expect_revision: str) -> None:
    """The checksum manifest on the mounted weights must name the release's revision."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise ProbeFailure("manifest", f"cannot read {path}: {e.strerror or e}") from None
    except ValueError:
        raise ProbeFailure("manifest", f"{path} is not JSON") from None
    if not isinstance(doc, dict) or doc.get("format") != MANIFEST_FORMAT:
        raise ProbeFailure("manifest", f"{path} is not a {MANIFEST_FORMAT} document")
    if doc.get("revision") != expect_revision:
        raise ProbeFailure("manifest", f"the mounted weights are revision {doc.get('revision')!r}, "
                                       f"not the release's {expect_revision!r}")


def read_load(server: Server, deadline: Deadline) -> int:
    """Requests in flight, as vLLM's API server counts them (``GET /load``, ``--enable-server-load-tracking``)."""
    status, payload = server.request("GET", "/load", deadline, "load")
    if status != 200:
        raise ProbeFailure("load", f"GET /load answered HTTP {status} (is --enable-server-load-tracking set?)")
    doc = _json(payload, "load", "GET /load")
    value = doc.get("server_load") if isinstance(doc, dict) else None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ProbeFailure("load", f"GET /load has no server_load count: {payload[:80]!r}")
    return value


_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{[^}]*\})?\s+(?P<value>\S+)")


def progress_tokens(metrics_text: str) -> float:
    """Sum of every sample of the progress counters (all label sets: one per model name and engine)."""
    total = 0.0
    seen = False
    for line in metrics_text.splitlines():
        m = _SAMPLE.match(line)
        if m and m.group("name") in PROGRESS_COUNTERS:
            try:
                total += float(m.group("value"))
            except ValueError:
                continue
            seen = True
    if not seen:
        raise ProbeFailure("progress", f"/metrics has none of {', '.join(PROGRESS_COUNTERS)}")
    return total


def check_generation(server: Server, deadline: Deadline, public_name: str, release_id: str) -> None:
    """One greedy token under the public name: 200, one choice, answered by this release."""
    body = {"model": public_name, "prompt": PROMPT, "max_tokens": 1, "temperature": 0}
    status, payload = server.request("POST", "/v1/completions", deadline, "generation", body=body)
    if status != 200:
        raise ProbeFailure("generation", f"POST /v1/completions answered HTTP {status}: {_error_text(payload)}")
    doc = _json(payload, "generation", "POST /v1/completions")
    choices = doc.get("choices") if isinstance(doc, dict) else None
    if not isinstance(choices, list) or len(choices) != 1:
        n = len(choices) if isinstance(choices, list) else "no"
        raise ProbeFailure("generation", f"POST /v1/completions returned {n} choices; expected 1")
    if doc.get("model") != release_id:
        raise ProbeFailure("generation", f"the response names model {doc.get('model')!r}, not the release id "
                                         f"{release_id!r}")


# ---- liveness state -------------------------------------------------------------------------------------------
def load_state(path: str) -> Dict[str, Any]:
    """The state file's content, or {} when it is missing, unreadable or of another format."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) and doc.get("version") == STATE_VERSION else {}


def save_state(path: str, state: Dict[str, Any]) -> None:
    """Write atomically (temp file + rename), so a probe killed mid-write never leaves a torn file."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".probe-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(state, f)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# ---- modes ----------------------------------------------------------------------------------------------------
def run_startup(server: Server, deadline: Deadline, release_id: str, public_name: str, model_root: str,
                max_model_len: int, manifest: Optional[str], expect_revision: Optional[str],
                monotonic: Clock = time.monotonic) -> str:
    check_health(server, deadline)
    check_models(server, deadline, [release_id, public_name], model_root, max_model_len)
    if manifest is not None:
        check_manifest(manifest, expect_revision or "")
    read_load(server, deadline)
    started = monotonic()
    check_generation(server, deadline, public_name, release_id)
    return (f"ok: {release_id} serves {public_name!r} from {model_root}; 1-token generation in "
            f"{monotonic() - started:.2f} s")


def run_readiness(server: Server, deadline: Deadline, release_id: str, public_name: str, model_root: str,
                  max_model_len: int) -> str:
    check_health(server, deadline)
    check_models(server, deadline, [release_id, public_name], model_root, max_model_len)
    return f"ok: /health 200, {release_id} serves {public_name!r} from {model_root}"


def run_liveness(server: Server, deadline: Deadline, stall_seconds: float, state_file: str,
                 wall_clock: Clock = time.time) -> str:
    check_health(server, deadline)
    in_flight = read_load(server, deadline)
    status, payload = server.request("GET", "/metrics", deadline, "progress")
    if status != 200:
        raise ProbeFailure("progress", f"GET /metrics answered HTTP {status}")
    tokens = progress_tokens(payload.decode("utf-8", "replace"))
    now = wall_clock()
    state = load_state(state_file)
    last_tokens = state.get("tokens")
    since = state.get("progress_at")
    moving = (in_flight == 0 or last_tokens != tokens or not isinstance(since, (int, float))
              or isinstance(since, bool) or since > now)
    if moving:
        try:
            save_state(state_file, {"version": STATE_VERSION, "tokens": tokens, "progress_at": now})
        except OSError as e:  # the probe still passes; the next run starts the clock again
            print(f"liveness: could not write state file {state_file}: {e}", file=sys.stderr)
        what = "idle" if in_flight == 0 else f"{in_flight} request(s) in flight, tokens moving"
        return f"ok: engine alive ({what})"
    stalled = now - float(since)
    if stalled >= stall_seconds:
        raise ProbeFailure("progress", f"engine hung: {in_flight} request(s) in flight and no token processed "
                                       f"for {stalled:.0f} s (limit {stall_seconds:g} s)")
    return f"ok: engine alive ({in_flight} request(s) in flight, no token for {stalled:.0f} s of {stall_seconds:g} s)"


# ---- command line ---------------------------------------------------------------------------------------------
def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    def positive(text: str) -> float:
        value = float(text)
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    p = argparse.ArgumentParser(description="vLLM startup / readiness / liveness probe.")
    sub = p.add_subparsers(dest="mode", required=True)

    def common(q: argparse.ArgumentParser, deadline_default: float) -> None:
        q.add_argument("--port", type=int, required=True, help="vLLM HTTP port (the rendered --port of the server)")
        q.add_argument("--host", default="127.0.0.1", help="address to probe; the pod's own loopback by default")
        q.add_argument("--deadline-seconds", type=positive, default=deadline_default,
                       help="time budget for all checks together; keep it below the probe's timeoutSeconds")
        q.add_argument("--api-key-env", default="VLLM_API_KEY", help="environment variable holding vLLM's --api-key")

    def identity(q: argparse.ArgumentParser) -> None:
        q.add_argument("--release-id", required=True, help="first served model name (--served-model-name)")
        q.add_argument("--public-name", required=True, help="second served model name: what clients send")
        q.add_argument("--model-root", required=True, help="the --model the server must report as root")
        q.add_argument("--max-model-len", type=int, required=True, help="the --max-model-len it must report")

    # 4 s: one second under a probe timeoutSeconds of 5, so this script reports a timeout itself.
    s = sub.add_parser("startup", help="health, identity, manifest, /load, one generated token")
    common(s, 4.0)
    identity(s)
    s.add_argument("--manifest", help="checksum manifest on the mounted weights (omit for gs:// streaming)")
    s.add_argument("--expect-revision", help="revision the manifest must name (required with --manifest)")
    r = sub.add_parser("readiness", help="health and identity, without entering the engine's queue")
    common(r, 4.0)
    identity(r)
    v = sub.add_parser("liveness", help="health, and token progress while requests are in flight")
    common(v, 4.0)
    v.add_argument("--stall-seconds", type=positive, required=True,
                   help="no token progress for this long with requests in flight = hung")
    v.add_argument("--state-file", default="/tmp/liveness-state.json", help="where the progress clock is kept")
    args = p.parse_args(argv)
    if args.mode == "startup" and (args.manifest is None) != (args.expect_revision is None):
        p.error("--manifest and --expect-revision go together")
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    server = Server(args.host, args.port, os.environ.get(args.api_key_env) or None)
    deadline = Deadline(args.deadline_seconds)
    try:
        if args.mode == "startup":
            line = run_startup(server, deadline, args.release_id, args.public_name, args.model_root,
                               args.max_model_len, args.manifest, args.expect_revision)
        elif args.mode == "readiness":
            line = run_readiness(server, deadline, args.release_id, args.public_name, args.model_root,
                                 args.max_model_len)
        else:
            line = run_liveness(server, deadline, args.stall_seconds, args.state_file)
    except ProbeFailure as e:
        print(e, flush=True)
        return 1
    print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
