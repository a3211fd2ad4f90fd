"""Readiness probe for one vLLM replica: ready only when the engine is healthy, serves exactly this release, and
can actually generate a token.

Standard library only: it is shipped into the pod in a ConfigMap and run by the kubelet as an exec probe with
the vLLM image's ``python3`` (3.8 or later)::

    python3 readiness_probe.py --port 8000 --release-id <id> --deadline-seconds 4 \\
        --state-file /tmp/readiness-state.json --min-interval-seconds 60

Checks, in order, all within ``--deadline-seconds`` of the start:

(a) ``GET /health`` answers 200 (vLLM answers 503 once its engine is dead);
(b) ``GET /v1/models`` lists exactly one model and its id is the release id (``--served-model-name``), so a pod
    still serving another release, or one with extra adapters, never takes traffic for this one;
(c) ``POST /v1/completions`` for that model with a short prompt, ``max_tokens: 1`` and ``temperature: 0``
    answers 200 with exactly one choice: the scheduler, the model and the tokenizer really work.

Rate limit: (c) costs a real (tiny) generation, so it runs only when the last successful generation recorded in
``--state-file`` for this release and port is at least ``--min-interval-seconds`` old (or when the file is
missing, unreadable, for another release, or dated in the future). In between, (a) and (b) suffice and the probe
adds no load to the engine. Trade-off: an engine that hangs while /health still says 200 is noticed within one
interval, not at once.

Output: exactly one line on stdout, which the kubelet records as the probe message: ``ready: ...`` (exit 0), or
``not ready: <check> check failed: <why>`` (exit 1). If the server sets ``--api-key``, the key is read from the
environment variable named by ``--api-key-env`` (default ``VLLM_API_KEY``, which vLLM itself also reads) and sent
to the /v1 endpoints; /health needs none.

Keep ``--deadline-seconds`` below the probe's ``timeoutSeconds`` so that a slow server gets this script's
message rather than the kubelet's bare "command timed out".
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

#: Largest response body read; /v1/models and a 1-token completion are a few kB, so 1 MiB is ample.
MAX_BODY_BYTES = 1 << 20
#: Longest reason text kept in the one-line message (kubelet events are truncated anyway).
MAX_DETAIL_CHARS = 300
#: Prompt for the generation check: short, so prefill costs a couple of tokens on any tokenizer.
PROMPT = "Hi"
#: Format of the state file; bump it when the format changes so that old files are ignored, not misread.
STATE_VERSION = 1

Clock = Callable[[], float]


class ProbeFailure(Exception):
    """One failed check; ``str()`` is the single line printed for the kubelet."""

    def __init__(self, check: str, detail: str) -> None:
        self.check = check
        self.detail = " ".join(str(detail).split())[:MAX_DETAIL_CHARS]  # one line, bounded
        super().__init__(f"not ready: {check} check failed: {self.detail}")


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


def http_request(
    host: str,
    port: int,
    method: str,
    path: str,
    deadline: Deadline,
    check: str,
    body: Optional[Dict[str, Any]] = None,
    headers: Optional[Dict[str, str]] = None,
) -> Tuple[int, bytes]:
    """One HTTP request bounded by the remaining time; transport problems become a ProbeFailure for ``check``.

    http.client is used directly (not urllib) so that no HTTP(S)_PROXY setting in the pod can divert a
    loopback request.
    """
    what = f"{method} {path}"
    remaining = deadline.remaining()
    if remaining <= 0:
        raise deadline.expired_failure(check, f"{what} (not started)")
    data = None
    hdrs = dict(headers or {})
    if body is not None:
        data = json.dumps(body).encode()
        hdrs["Content-Type"] = "application/json"
    conn = http.client.HTTPConnection(host, port, timeout=remaining)
    try:
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        payload = resp.read(MAX_BODY_BYTES)
        status = resp.status
    except socket.timeout:
        raise deadline.expired_failure(check, what) from None
    except ConnectionRefusedError:
        raise ProbeFailure(check, f"{what} to {host}:{port}: connection refused (is vLLM listening?)") from None
    except (OSError, http.client.HTTPException) as e:
        raise ProbeFailure(check, f"{what} to {host}:{port}: {type(e).__name__}: {e}") from None
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


def check_health(host: str, port: int, deadline: Deadline) -> None:
    """(a) GET /health must answer 200."""
    status, payload = http_request(host, port, "GET", "/health", deadline, "health")
    if status != 200:
        raise ProbeFailure("health", f"GET /health answered HTTP {status}: {_error_text(payload)}")


def check_models(host: str, port: int, release_id: str, deadline: Deadline, headers: Dict[str, str]) -> None:
    """(b) GET /v1/models must list exactly one model, whose id is the release id."""
    status, payload = http_request(host, port, "GET", "/v1/models", deadline, "models", headers=headers)
    if status != 200:
        raise ProbeFailure("models", f"GET /v1/models answered HTTP {status}: {_error_text(payload)}")
    doc = _json(payload, "models", "GET /v1/models")
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list):
        raise ProbeFailure("models", "GET /v1/models has no 'data' list")
    ids: List[str] = [str(m.get("id")) if isinstance(m, dict) else repr(m) for m in data]
    if ids != [release_id]:
        raise ProbeFailure("models", f"GET /v1/models lists {ids}; expected exactly [{release_id!r}]")


def check_generation(host: str, port: int, release_id: str, deadline: Deadline, headers: Dict[str, str]) -> None:
    """(c) POST /v1/completions for one greedy token must answer 200 with exactly one choice."""
    body = {"model": release_id, "prompt": PROMPT, "max_tokens": 1, "temperature": 0}
    status, payload = http_request(
        host, port, "POST", "/v1/completions", deadline, "generation", body=body, headers=headers
    )
    if status != 200:
        raise ProbeFailure("generation", f"POST /v1/completions answered HTTP {status}: {_error_text(payload)}")
    doc = _json(payload, "generation", "POST /v1/completions")
    choices = doc.get("choices") if isinstance(doc, dict) else None
    if not isinstance(choices, list) or len(choices) != 1:
        n = len(choices) if isinstance(choices, list) else "no"
        raise ProbeFailure("generation", f"POST /v1/completions returned {n} choices; expected 1")


# ---- rate-limit state ---------------------------------------------------------------------------------------
def load_state(path: str) -> Dict[str, Any]:
    """The state file's content, or {} when it is missing or unreadable (the generation check then runs)."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) and doc.get("version") == STATE_VERSION else {}


def save_state(path: str, state: Dict[str, Any]) -> None:
    """Write atomically (temp file + rename), so a probe killed mid-write never leaves a torn file."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".readiness-", dir=directory)
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


def generation_age(state: Dict[str, Any], release_id: str, port: int, now: float) -> Optional[float]:
    """Seconds since the last successful generation for this release and port, or None if unknown/unusable."""
    if state.get("release_id") != release_id or state.get("port") != port:
        return None
    last = state.get("last_generation_ok")
    if not isinstance(last, (int, float)) or isinstance(last, bool):
        return None
    age = now - float(last)
    return age if age >= 0 else None  # a date in the future (clock stepped back) proves nothing


def run_probe(
    port: int,
    release_id: str,
    deadline_seconds: float,
    state_file: str,
    min_interval_seconds: float,
    host: str = "127.0.0.1",
    api_key: Optional[str] = None,
    wall_clock: Clock = time.time,
    monotonic: Clock = time.monotonic,
) -> str:
    """Run the checks; return the success line, or raise ProbeFailure."""
    deadline = Deadline(deadline_seconds, monotonic)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    check_health(host, port, deadline)
    check_models(host, port, release_id, deadline, headers)

    age = generation_age(load_state(state_file), release_id, port, wall_clock())
    if age is not None and age < min_interval_seconds:
        return (
            f"ready: /health 200, serving {release_id}; generation skipped "
            f"(last ok {age:.0f} s ago, interval {min_interval_seconds:g} s)"
        )
    started = monotonic()
    check_generation(host, port, release_id, deadline, headers)
    took = monotonic() - started
    try:
        save_state(
            state_file,
            {"version": STATE_VERSION, "release_id": release_id, "port": port, "last_generation_ok": wall_clock()},
        )
    except OSError as e:  # the probe still passes; the next run just generates again
        print(f"readiness: could not write state file {state_file}: {e}", file=sys.stderr)
    return f"ready: /health 200, serving {release_id}; 1-token generation ok in {took:.2f} s"


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    def positive(text: str) -> float:
        value = float(text)
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    def non_negative(text: str) -> float:
        value = float(text)
        if not value >= 0:
            raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
        return value

    p = argparse.ArgumentParser(description="vLLM readiness probe (health, served model, 1-token generation).")
    p.add_argument("--port", type=int, required=True, help="vLLM HTTP port (the rendered --port of the server)")
    p.add_argument("--host", default="127.0.0.1", help="address to probe; the pod's own loopback by default")
    p.add_argument("--release-id", required=True, help="the one model id /v1/models must list (--served-model-name)")
    p.add_argument(
        "--deadline-seconds",
        type=positive,
        default=4.0,  # one second under a probe timeoutSeconds of 5, so this script reports the timeout itself
        help="time budget for all checks together; keep it below the probe's timeoutSeconds",
    )
    p.add_argument("--state-file", default="/tmp/readiness-state.json", help="where the last generation time is kept")
    p.add_argument(
        "--min-interval-seconds",
        type=non_negative,
        default=60.0,  # one tiny generation a minute per replica: negligible load, a hung engine seen within 1 min
        help="re-run the generation check only when the last success is at least this old (0: every time)",
    )
    p.add_argument("--api-key-env", default="VLLM_API_KEY", help="environment variable holding vLLM's --api-key")
    return p.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    try:
        line = run_probe(
            port=args.port,
            release_id=args.release_id,
            deadline_seconds=args.deadline_seconds,
            state_file=args.state_file,
            min_interval_seconds=args.min_interval_seconds,
            host=args.host,
            api_key=os.environ.get(args.api_key_env) or None,
        )
    except ProbeFailure as e:
        print(e, flush=True)
        return 1
    print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
