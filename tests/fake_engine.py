"""A stand-in for ``vllm serve`` in the co-host server's unit tests: standard library only, started by the server as
its engine command (``python3 tests/fake_engine.py <vllm flags>``), so the server's whole lifecycle runs in seconds.

What it copies from vLLM 0.32, and only that: it binds its port first and serves HTTP only after a start-up delay
(``FAKE_ENGINE_START_SECONDS``; vLLM holds its port while the engine allocates its KV cache), answers ``/health``,
``/v1/models`` (its ``--served-model-name`` values, root ``--model``), ``/v1/chat/completions`` and
``/v1/completions`` for its served names only (404 in vLLM's error shape otherwise; ``"stream": true`` gives
``max_tokens`` server-sent events ``FAKE_ENGINE_TOKEN_SECONDS`` apart, then ``data: [DONE]``), ``/metrics`` (vLLM's
queue, KV-cache and success series labelled ``model_name`` = the first served name), and drains on SIGTERM: new
requests get 503, in-flight streams finish, at most ``--shutdown-timeout`` seconds.

Test hooks: ``FAKE_ENGINE_EVENTS`` (a file: one JSON line per ``start`` / ``ready`` / ``exit`` with the time, pid,
name and ``CUDA_VISIBLE_DEVICES``), ``FAKE_ENGINE_UNHEALTHY`` (a file: while it exists ``/health`` answers 503),
``FAKE_ENGINE_WORKER=1`` (a child process in the engine's process group, as vLLM's EngineCore and workers are; its pid
is in the ``ready`` event; a SIGTERM of its own ends it at once and the streams in flight end with an error, as
vLLM's do when a worker dies, while the engine's own SIGTERM drains first and ends the worker after).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def event(kind: str, **extra: Any) -> None:
    path = os.environ.get("FAKE_ENGINE_EVENTS")
    if not path:
        return
    line = {
        "event": kind,
        "t": time.time(),
        "pid": os.getpid(),
        "gpus": os.environ.get("CUDA_VISIBLE_DEVICES"),
        **extra,
    }
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--served-model-name", nargs="+", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--shutdown-timeout", type=int, default=0)
    args, _ = p.parse_known_args()
    names: list[str] = args.served_model_name
    token_s = float(os.environ.get("FAKE_ENGINE_TOKEN_SECONDS", "0.05"))
    unhealthy = os.environ.get("FAKE_ENGINE_UNHEALTHY")
    state = {"in_flight": 0, "draining": False, "served": 0}
    lock = threading.Lock()
    #: The engine's worker, once started (FAKE_ENGINE_WORKER): streams stop when it is gone.
    worker_box: list[subprocess.Popen[bytes]] = []
    event("start", name=names[0])

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *a: Any) -> None:
            pass

        def _json(self, status: int, doc: Any) -> None:
            body = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/health":
                ok = not (unhealthy and os.path.exists(unhealthy))
                self._json(200 if ok else 503, {})
            elif self.path == "/v1/models":
                cards = [{"id": n, "object": "model", "root": args.model, "max_model_len": 256} for n in names]
                self._json(200, {"object": "list", "data": cards})
            elif self.path == "/metrics":
                lbl = f'{{engine="0",model_name="{names[0]}"}}'
                text = (
                    "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n"
                    "# TYPE vllm:num_requests_waiting gauge\n"
                    f"vllm:num_requests_waiting{lbl} 0.0\n"
                    "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
                    "# TYPE vllm:num_requests_running gauge\n"
                    f"vllm:num_requests_running{lbl} {float(state['in_flight'])}\n"
                    "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n"
                    "# TYPE vllm:kv_cache_usage_perc gauge\n"
                    f"vllm:kv_cache_usage_perc{lbl} {float(os.environ.get('FAKE_ENGINE_KV', '0.25'))}\n"
                    "# HELP vllm:request_success_total Count of successfully processed requests.\n"
                    "# TYPE vllm:request_success_total counter\n"
                    f'vllm:request_success_total{{engine="0",finished_reason="stop",model_name="{names[0]}"}} '
                    f"{float(state['served'])}\n"
                )
                body = text.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            else:
                self._json(
                    404, {"error": {"message": "not found", "type": "NotFoundError", "param": None, "code": 404}}
                )

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path not in ("/v1/chat/completions", "/v1/completions"):
                return self._json(404, {})
            with lock:
                if state["draining"]:
                    return self._json(503, {"error": {"message": "draining", "code": 503}})
                state["in_flight"] += 1
            try:
                req = json.loads(body)
                model = req.get("model")
                if model not in names:
                    msg = f"The model `{model}` does not exist."
                    return self._json(
                        404, {"error": {"message": msg, "type": "NotFoundError", "param": "model", "code": 404}}
                    )
                n = int(req.get("max_tokens") or 5)
                if not req.get("stream"):
                    time.sleep(token_s * n)
                    return self._json(200, {"id": "x", "model": names[0], "choices": [{"index": 0, "text": "ok " * n}]})
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for i in range(n):
                    if worker_box and worker_box[0].poll() is not None:
                        # vLLM: the engine's worker is gone, the stream ends with an error (EngineDeadError).
                        err = b'data: {"error": {"message": "EngineDeadError", "code": 500}}\n\n'
                        self.wfile.write(f"{len(err):x}\r\n".encode() + err + b"\r\n")
                        break
                    chunk = f"data: {json.dumps({'model': names[0], 'index': i, 't': time.time()})}\n\n".encode()
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
                    time.sleep(token_s)
                done = b"data: [DONE]\n\n"
                self.wfile.write(f"{len(done):x}\r\n".encode() + done + b"\r\n0\r\n\r\n")
                self.wfile.flush()
            finally:
                with lock:
                    state["in_flight"] -= 1
                    state["served"] += 1

    # Bind first (vLLM's setup_server), serve only once the "engine" is up.
    server = ThreadingHTTPServer((args.host, args.port), Handler, bind_and_activate=False)
    server.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.server_bind()
    server.server_activate()
    server.daemon_threads = True
    worker = None
    if os.environ.get("FAKE_ENGINE_WORKER") == "1":
        # As a vLLM worker: a SIGTERM of its own (the default action) ends it at once, whatever is in flight.
        worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        worker_box.append(worker)
    time.sleep(float(os.environ.get("FAKE_ENGINE_START_SECONDS", "0.2")))
    event("ready", name=names[0], worker=worker.pid if worker else None)

    def drain(*_: Any) -> None:
        def run() -> None:
            with lock:
                state["draining"] = True
            end = time.monotonic() + args.shutdown_timeout
            while time.monotonic() < end:
                with lock:
                    if state["in_flight"] == 0:
                        break
                time.sleep(0.05)
            event("exit", name=names[0], in_flight=state["in_flight"])
            if worker is not None:
                worker.terminate()
            server.shutdown()

        threading.Thread(target=run, daemon=True).start()

    signal.signal(signal.SIGTERM, drain)
    server.serve_forever(poll_interval=0.05)
    return 0


if __name__ == "__main__":
    sys.exit(main())
