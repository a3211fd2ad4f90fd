"""The co-host server: one container runs several vLLM instances as child processes, each in its own GPU-memory
partition, and routes every request by the ``model`` its body names (seed 003's ``model_cohost_server``).

Standard library plus aiohttp (and prometheus_client's exposition parser for ``/metrics``); both are dependencies of
vLLM, so the serving image has them. Python 3.10 or later. It never reads ``__file__``, so it runs from a file
(``python3 server.py ...``, GKE: the scripts ConfigMap) or inline (``python3 -c "<source>" ...``, where a platform
takes only a command line)::

    python3 server.py --config-json '<document>' [--watch gs://BUCKET/OBJECT --poll-seconds 30]
    python3 server.py --config-file /etc/cohost/config.json

The configuration (:func:`parse_config`, the format this file owns; the planner renders it)::

    {"format": "llm-serving.io/cohost-config", "format_version": 1,
     "port": 8000, "gpus": 1, "transient_reserve": 0.1, "engine_command": ["vllm", "serve"],
     "start_timeout_seconds": 1800, "drain_seconds": 660, "health_interval_seconds": 5,
     "restart": {"max_restarts": 3, "window_seconds": 1800, "backoff_seconds": 10, "max_backoff_seconds": 120},
     "instances": [{"name": "llama-3-1-8b-0", "release": "llama-3.1-8b-fp8-2026-11-25.1",
                    "model_names": ["llama-3.1-8b-fp8-2026-11-25.1", "llama-3.1-8b"], "gpus": [0],
                    "tensor_parallel_size": 1, "partition": 0.4, "port": 8100,
                    "args": ["--model", "gs://...", "--served-model-name", "...", "--port", "8100", ...],
                    "env": {}, "verify": ["python3", "verify_release.py", "gcs", ...]}, ...]}

Every problem of a document is reported at once with its key path (``instances[1].partition: ...``). The typed fields
and the engine arguments must agree (``--port``, ``--served-model-name``, ``--tensor-parallel-size``,
``--gpu-memory-utilization``, a loopback ``--host``): the arguments are what vLLM parses, the fields what the server
places and routes by, and a document where they differ is refused rather than half-believed. Per GPU, the partitions
of the instances on it sum to at most ``1 - transient_reserve`` (seed 003: leave room for "transient" memory).

What the server does:

* **Start-up, staggered.** Instances start one at a time in document order: each is started once the previous one
  answers ``GET /health`` 200. In vLLM 0.32 that answer means its KV cache is allocated: ``vllm serve`` binds its
  port before the engine starts (``launchers/launcher.py`` ``setup_server``) but serves HTTP only after
  ``build_async_engine_client`` returns, which waits for the engine core's READY handshake, sent after
  ``EngineCore.__init__`` ran ``_initialize_kv_caches`` (``v1/engine/core.py``). So no two instances size their KV
  cache against the same free memory at the same moment. ``CUDA_VISIBLE_DEVICES`` is each instance's GPU set; the
  instance's ``verify`` command (the release check) runs before its engine starts, on every start.
* **Routing.** ``POST /v1/chat/completions`` and ``/v1/completions`` go to an instance serving the body's ``model``
  (the least busy healthy one when several do: data parallel); the response is passed through as it arrives, chunk
  by chunk (streams are never buffered). An unknown name gets 404 in vLLM's error shape, listing the served names; a
  known name with no healthy instance 503.
* **Health.** ``GET /health`` is 200 only while every instance is healthy (instances an update is still loading
  excepted: they join once up); ``GET /live`` is 200 while the server itself runs (the liveness probe: a child's
  death is the server's to handle, not a reason to restart the container). ``GET /v1/models`` lists every instance's
  models; ``GET /metrics`` is every instance's exposition, each sample labelled ``cohost_instance`` (the instance)
  and ``cohost_model`` (the name clients send), plus per-pod aggregates for a picker (``cohost:*``) and the server's
  own series; ``GET /cohost/status`` the instances' states and PIDs.
* **A dead child: restart, bounded, then fail fast.** A child whose process exits, or whose ``/health`` fails
  ``UNHEALTHY_CHECKS`` times in a row, is killed (its whole process group) and restarted after a backoff that doubles
  from ``backoff_seconds`` to ``max_backoff_seconds``. More than ``max_restarts`` restarts of one instance within
  ``window_seconds`` (or an initial start that keeps failing) makes the server drain the other instances and exit 1:
  restarting in place keeps the other models' warm engines serving through one model's crash (a reload costs minutes
  per model), but a model that keeps crashing (a bad release, a partition that does not fit) must surface as a
  failing container the platform restarts and alerts on, not loop silently inside a live one.
* **SIGTERM drains.** New requests get 503; every child's API server (not its process group: vLLM's server stops its
  own engine and workers after draining) gets SIGTERM at once (vLLM's ``--shutdown-timeout`` drains its in-flight
  streams) and the server keeps relaying those streams until each child has exited, at most ``drain_seconds`` (then
  SIGKILL of its group), then exits 0.
* **update_models.** With ``--watch gs://BUCKET/OBJECT`` the server polls the object's generation every
  ``--poll-seconds``; a new generation holding a valid document is applied: instances absent from it (or changed) are
  drained and stopped first, then the new ones start, staggered; an instance whose whole entry (release, names, GPUs,
  TP, partition, port, arguments, environment) is unchanged keeps running, same process, never interrupted. An
  invalid document is logged and ignored. The object, when present at start-up, is the model set; else the document
  given on the command line. Cloud Storage is read as ``components/serving/verify_release.py`` does: the JSON API
  over ``http.client`` with an access token from the metadata server, or ``STORAGE_EMULATOR_HOST`` without one.

Exit codes: 0 after a SIGTERM drain; 1 an instance failed beyond its restart policy; 2 a bad command line or
configuration.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import math
import os
import random
import re
import signal
import ssl
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

import aiohttp
from aiohttp import web

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

# ---- the configuration format ------------------------------------------------------------------------------------

CONFIG_FORMAT = "llm-serving.io/cohost-config"
CONFIG_FORMAT_VERSION = 1
#: Instance names label metrics and name log lines: a DNS label.
NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
#: What vLLM's flags must say where the document states the same fact.
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
#: Environment variables the server sets itself per instance (the GPU set).
RESERVED_ENV = frozenset({"CUDA_VISIBLE_DEVICES"})
#: Bounds of the document's numbers: far above any real value, low enough that a slip (minutes typed as seconds
#: times 60) is refused. 16 GPUs: the largest machine's (16 x A100 40GB).
MAX_GPUS = 16
MAX_SECONDS = 24 * 3600
MAX_INSTANCES = 64
#: Largest configuration document read from Cloud Storage: a document of 64 instances is ~100 kB.
MAX_CONFIG_BYTES = 4 << 20
#: Defaults of the optional fields.
DEFAULT_ENGINE_COMMAND = ("vllm", "serve")
DEFAULT_HEALTH_INTERVAL_SECONDS = 5.0


class ConfigError(ValueError):
    """A document that is not a valid co-host configuration; ``problems`` are ``(key path, message)``."""

    def __init__(self, problems: Sequence[tuple[str, str]]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(f"{k}: {m}" if k else m for k, m in self.problems))


@dataclass(frozen=True)
class RestartPolicy:
    #: Restarts of one instance allowed within ``window_seconds``; one more makes the server exit 1.
    max_restarts: int
    window_seconds: float
    #: First wait before a restart, doubled per restart in the window up to ``max_backoff_seconds``.
    backoff_seconds: float
    max_backoff_seconds: float

    def backoff(self, restarts_in_window: int) -> float:
        """Wait before the n-th restart in the window (1-based)."""
        return min(self.backoff_seconds * 2.0 ** max(0, restarts_in_window - 1), self.max_backoff_seconds)


@dataclass(frozen=True)
class InstanceSpec:
    """One vLLM instance: what it serves, where it runs, how it is started. Two equal specs are the same instance
    (``update_models`` keeps it running)."""

    name: str
    release: str
    #: ``--served-model-name``: the release id first (what responses and metrics name), then the public name.
    model_names: tuple[str, ...]
    gpus: tuple[int, ...]
    tensor_parallel_size: int
    #: ``--gpu-memory-utilization`` of every GPU in ``gpus``.
    partition: float
    port: int
    #: What follows ``engine_command``.
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    #: Run before each start of the engine (the release check); empty = none.
    verify: tuple[str, ...] = ()

    @property
    def public_name(self) -> str:
        """The name clients send (the last served name)."""
        return self.model_names[-1]


@dataclass(frozen=True)
class CohostConfig:
    port: int
    gpus: int
    transient_reserve: float
    engine_command: tuple[str, ...]
    #: Longest wait for an instance's ``/health`` 200 after its process starts (the verify step excluded).
    start_timeout_seconds: float
    #: SIGTERM: longest wait for every child to drain and exit (at least each instance's ``--shutdown-timeout``).
    drain_seconds: float
    health_interval_seconds: float
    restart: RestartPolicy
    instances: tuple[InstanceSpec, ...]

    def served_names(self) -> list[str]:
        out: list[str] = []
        for i in self.instances:
            out += [n for n in i.model_names if n not in out]
        return out


def flag_values(args: Sequence[str], flag: str) -> list[str] | None:
    """The values after the last ``flag`` (or in ``flag=value``) up to the next ``--`` option; None when absent."""
    found: list[str] | None = None
    for k, a in enumerate(args):
        if a == flag:
            vals = []
            for b in args[k + 1 :]:
                if b.startswith("--"):
                    break
                vals.append(b)
            found = vals
        elif a.startswith(flag + "="):
            found = [a.split("=", 1)[1]]
    return found


def _check_flags(p: str, spec: InstanceSpec, problems: list[tuple[str, str]]) -> None:
    """The engine arguments say what the typed fields say."""
    args = spec.args

    def one(flag: str) -> str | None:
        vals = flag_values(args, flag)
        if vals is None or len(vals) != 1:
            problems.append((f"{p}.args", f"must give {flag} exactly one value"))
            return None
        return vals[0]

    port = one("--port")
    if port is not None and port != str(spec.port):
        problems.append((f"{p}.args", f"--port {port} differs from port {spec.port}"))
    host = one("--host")
    if host is not None and host not in LOOPBACK_HOSTS:
        problems.append((f"{p}.args", f"--host {host} is not loopback: only the server's port may be reachable"))
    tp = one("--tensor-parallel-size")
    if tp is not None and tp != str(spec.tensor_parallel_size):
        problems.append((f"{p}.args", f"--tensor-parallel-size {tp} differs from {spec.tensor_parallel_size}"))
    util = one("--gpu-memory-utilization")
    if util is not None:
        try:
            same = math.isclose(float(util), spec.partition, abs_tol=1e-9)
        except ValueError:
            same = False
        if not same:
            problems.append((f"{p}.args", f"--gpu-memory-utilization {util} differs from partition {spec.partition}"))
    names = flag_values(args, "--served-model-name")
    if names is None or tuple(names) != spec.model_names:
        problems.append((f"{p}.args", f"--served-model-name {names} differs from model_names {list(spec.model_names)}"))


def _num(doc: Mapping[str, Any], key: str, p: str, lo: float, hi: float, problems: list[tuple[str, str]]) -> float:
    v = doc.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
        problems.append((f"{p}{key}", f"a number in [{lo:g}, {hi:g}], got {v!r}"))
        return lo
    return float(v)


def _int(doc: Mapping[str, Any], key: str, p: str, lo: int, hi: int, problems: list[tuple[str, str]]) -> int:
    v = doc.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        problems.append((f"{p}{key}", f"an integer in [{lo}, {hi}], got {v!r}"))
        return lo
    return v


def _strings(v: Any, key: str, problems: list[tuple[str, str]], non_empty: bool = True) -> tuple[str, ...]:
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v) or (non_empty and not v):
        problems.append((key, f"a {'non-empty ' if non_empty else ''}list of non-empty strings, got {v!r}"))
        return ()
    return tuple(v)


def _keys(
    doc: Mapping[str, Any], p: str, required: set[str], optional: set[str], problems: list[tuple[str, str]]
) -> None:
    for k in sorted(required - set(doc)):
        problems.append((f"{p}{k}", "required key is missing"))
    for k in sorted(set(doc) - required - optional):
        problems.append((f"{p}{k}", "unknown key"))


INSTANCE_KEYS = {"name", "release", "model_names", "gpus", "tensor_parallel_size", "partition", "port", "args"}
INSTANCE_OPTIONAL = {"env", "verify"}
TOP_KEYS = {"format", "format_version", "port", "gpus", "transient_reserve", "start_timeout_seconds", "drain_seconds"}
TOP_OPTIONAL = {"engine_command", "health_interval_seconds", "restart", "instances"}
RESTART_KEYS = {"max_restarts", "window_seconds", "backoff_seconds", "max_backoff_seconds"}


def _instance(doc: Any, p: str, gpus: int, problems: list[tuple[str, str]]) -> InstanceSpec | None:
    if not isinstance(doc, dict):
        problems.append((p, f"an object, got {type(doc).__name__}"))
        return None
    before = len(problems)
    _keys(doc, f"{p}.", INSTANCE_KEYS, INSTANCE_OPTIONAL, problems)
    name = doc.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        problems.append((f"{p}.name", f"a DNS label (lower-case letters, digits, '-'), got {name!r}"))
    release = doc.get("release")
    if not isinstance(release, str) or not release:
        problems.append((f"{p}.release", f"a non-empty string, got {release!r}"))
    names = _strings(doc.get("model_names"), f"{p}.model_names", problems)
    if len(set(names)) != len(names):
        problems.append((f"{p}.model_names", f"names repeat: {list(names)}"))
    tp = _int(doc, "tensor_parallel_size", f"{p}.", 1, MAX_GPUS, problems)
    raw_gpus = doc.get("gpus")
    gpu_set: tuple[int, ...] = ()
    if (
        not isinstance(raw_gpus, list)
        or not raw_gpus
        or not all(isinstance(g, int) and not isinstance(g, bool) and 0 <= g < gpus for g in raw_gpus)
    ):
        problems.append((f"{p}.gpus", f"a non-empty list of GPU indices in [0, {gpus}), got {raw_gpus!r}"))
    else:
        gpu_set = tuple(raw_gpus)
        if len(set(gpu_set)) != len(gpu_set):
            problems.append((f"{p}.gpus", f"GPUs repeat: {list(gpu_set)}"))
        elif len(gpu_set) != tp:
            problems.append((f"{p}.gpus", f"{len(gpu_set)} GPU(s) for tensor_parallel_size {tp}: one per rank"))
    partition = doc.get("partition")
    if isinstance(partition, bool) or not isinstance(partition, (int, float)) or not 0 < partition < 1:
        problems.append((f"{p}.partition", f"a fraction in (0, 1), got {partition!r}"))
        partition = 0.0
    port = _int(doc, "port", f"{p}.", 1, 65535, problems)
    args = _strings(doc.get("args"), f"{p}.args", problems)
    env_doc = doc.get("env", {})
    env: tuple[tuple[str, str], ...] = ()
    if not isinstance(env_doc, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env_doc.items()):
        problems.append((f"{p}.env", f"an object of strings, got {env_doc!r}"))
    else:
        for k in sorted(set(env_doc) & RESERVED_ENV):
            problems.append((f"{p}.env.{k}", "set by the server from gpus"))
        env = tuple(sorted(env_doc.items()))
    verify = _strings(doc.get("verify", []), f"{p}.verify", problems, non_empty=False)
    if len(problems) > before:
        return None
    assert isinstance(name, str) and isinstance(release, str)
    spec = InstanceSpec(name, release, names, gpu_set, tp, float(partition), port, args, env, verify)
    _check_flags(p, spec, problems)
    return spec if len(problems) == before else None


def parse_config(doc: Any) -> CohostConfig:
    """A validated configuration, or ConfigError with every problem and its key path."""
    problems: list[tuple[str, str]] = []
    if not isinstance(doc, dict):
        raise ConfigError([("", f"the configuration is a JSON object, got {type(doc).__name__}")])
    _keys(doc, "", TOP_KEYS, TOP_OPTIONAL, problems)
    if doc.get("format") != CONFIG_FORMAT:
        problems.append(("format", f"must be {CONFIG_FORMAT!r}, got {doc.get('format')!r}"))
    if doc.get("format_version") != CONFIG_FORMAT_VERSION:
        problems.append(("format_version", f"this server reads version {CONFIG_FORMAT_VERSION}"))
    port = _int(doc, "port", "", 1, 65535, problems)
    gpus = _int(doc, "gpus", "", 1, MAX_GPUS, problems)
    reserve = _num(doc, "transient_reserve", "", 0.0, 0.9, problems)
    start_timeout = _num(doc, "start_timeout_seconds", "", 1, MAX_SECONDS, problems)
    drain = _num(doc, "drain_seconds", "", 0, MAX_SECONDS, problems)
    interval = (
        _num(doc, "health_interval_seconds", "", 0.1, 600, problems)
        if "health_interval_seconds" in doc
        else DEFAULT_HEALTH_INTERVAL_SECONDS
    )
    command = (
        _strings(doc["engine_command"], "engine_command", problems)
        if "engine_command" in doc
        else DEFAULT_ENGINE_COMMAND
    )
    rdoc = doc.get(
        "restart", {"max_restarts": 3, "window_seconds": 1800, "backoff_seconds": 10, "max_backoff_seconds": 120}
    )
    restart = RestartPolicy(3, 1800, 10, 120)
    if not isinstance(rdoc, dict):
        problems.append(("restart", f"an object, got {rdoc!r}"))
    else:
        _keys(rdoc, "restart.", RESTART_KEYS, set(), problems)
        restart = RestartPolicy(
            _int(rdoc, "max_restarts", "restart.", 0, 100, problems),
            _num(rdoc, "window_seconds", "restart.", 1, MAX_SECONDS, problems),
            _num(rdoc, "backoff_seconds", "restart.", 0, 3600, problems),
            _num(rdoc, "max_backoff_seconds", "restart.", 0, 3600, problems),
        )
    raw = doc.get("instances", [])
    specs: list[InstanceSpec] = []
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_INSTANCES:
        problems.append(("instances", f"a list of 1 to {MAX_INSTANCES} instances, got {raw!r}"))
        raw = []
    for i, item in enumerate(raw):
        spec = _instance(item, f"instances[{i}]", gpus, problems)
        if spec is not None:
            specs.append(spec)
    _check_set(specs, port, gpus, reserve, drain, problems)
    if problems:
        raise ConfigError(problems)
    return CohostConfig(port, gpus, reserve, command, start_timeout, drain, interval, restart, tuple(specs))


def _check_set(
    specs: list[InstanceSpec], port: int, gpus: int, reserve: float, drain: float, problems: list[tuple[str, str]]
) -> None:
    """What holds across instances: distinct names and ports, one release behind each name, the partitions per GPU,
    and the drain bound over every instance's own."""
    seen_names: dict[str, str] = {}
    seen_ports = {port: "the server"}
    owner: dict[str, InstanceSpec] = {}
    sums = [0.0] * gpus
    for s in specs:
        if s.name in seen_names:
            problems.append(("instances", f"instance name {s.name!r} is given twice"))
        seen_names[s.name] = s.release
        if s.port in seen_ports:
            problems.append(("instances", f"{s.name}: port {s.port} is already {seen_ports[s.port]}'s"))
        seen_ports[s.port] = s.name
        for n in s.model_names:
            o = owner.setdefault(n, s)
            if o.release != s.release or o.model_names != s.model_names:
                problems.append(
                    (
                        "instances",
                        f"{s.name}: model name {n!r} already reaches {o.name} ({o.release}, {list(o.model_names)})",
                    )
                )
        for g in s.gpus:
            sums[g] += s.partition
        timeout = flag_values(s.args, "--shutdown-timeout")
        if timeout and len(timeout) == 1 and timeout[0].isdigit() and int(timeout[0]) > drain:
            problems.append(
                ("drain_seconds", f"{drain:g} s is shorter than {s.name}'s --shutdown-timeout {timeout[0]}")
            )
    limit = round(1 - reserve, 9)
    for g, total in enumerate(sums):
        if round(total, 9) > limit:
            on = " + ".join(f"{s.name} {s.partition:g}" for s in specs if g in s.gpus)
            problems.append(
                (
                    "instances",
                    f"partitions on GPU {g} sum to {round(total, 9):g} ({on}) > 1 - transient_reserve = {limit:g}",
                )
            )


def config_document(cfg: CohostConfig) -> dict[str, Any]:
    """The document of a configuration (``parse_config(config_document(c)) == c``)."""
    r = cfg.restart
    return {
        "format": CONFIG_FORMAT,
        "format_version": CONFIG_FORMAT_VERSION,
        "port": cfg.port,
        "gpus": cfg.gpus,
        "transient_reserve": cfg.transient_reserve,
        "engine_command": list(cfg.engine_command),
        "start_timeout_seconds": cfg.start_timeout_seconds,
        "drain_seconds": cfg.drain_seconds,
        "health_interval_seconds": cfg.health_interval_seconds,
        "restart": {
            "max_restarts": r.max_restarts,
            "window_seconds": r.window_seconds,
            "backoff_seconds": r.backoff_seconds,
            "max_backoff_seconds": r.max_backoff_seconds,
        },
        "instances": [
            {
                "name": s.name,
                "release": s.release,
                "model_names": list(s.model_names),
                "gpus": list(s.gpus),
                "tensor_parallel_size": s.tensor_parallel_size,
                "partition": s.partition,
                "port": s.port,
                "args": list(s.args),
                "env": dict(s.env),
                "verify": list(s.verify),
            }
            for s in cfg.instances
        ],
    }


def render_config(cfg: CohostConfig) -> str:
    """Canonical JSON (sorted keys, no spaces): one configuration, one byte string."""
    return json.dumps(config_document(cfg), sort_keys=True, separators=(",", ":"))


# ---- logging -----------------------------------------------------------------------------------------------------

LOG_PREFIX = "cohost: "


def say(line: str) -> None:
    print(f"{LOG_PREFIX}{line}", file=sys.stderr, flush=True)


# ---- Cloud Storage (update_models) ---------------------------------------------------------------------------------

STORAGE_HOST = "storage.googleapis.com"
METADATA_HOST = "169.254.169.254"
TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"
#: Statuses Cloud Storage's retry strategy calls transient (https://cloud.google.com/storage/docs/retry-strategy).
RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
#: Attempts per request within one poll: a later poll tries again anyway.
GCS_ATTEMPTS = 3
GCS_TIMEOUT_SECONDS = 30.0
#: A token is reused until this long before it expires (the metadata server's tokens live about an hour).
TOKEN_MARGIN_SECONDS = 300.0


class GcsError(Exception):
    """The object could not be read (network, HTTP status, permissions)."""


@dataclass(frozen=True)
class GcsObject:
    bucket: str
    name: str

    @staticmethod
    def parse(uri: str) -> GcsObject:
        m = re.match(r"^gs://([a-z0-9][a-z0-9._-]{1,221}[a-z0-9])/(.+)\Z", uri)
        if not m:
            raise ValueError(f"must be gs://BUCKET/OBJECT, got {uri!r}")
        return GcsObject(m.group(1), m.group(2))

    def __str__(self) -> str:
        return f"gs://{self.bucket}/{self.name}"


class GcsReader:
    """``objects.get`` of one object's metadata (its generation) and media, over ``http.client`` (blocking: run in a
    thread). ``STORAGE_EMULATOR_HOST`` points it at an emulator without a token; ``GCE_METADATA_HOST`` at another
    metadata server, as for Google's client libraries."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        raw = environ.get("STORAGE_EMULATOR_HOST", "").strip()
        if raw:
            parts = urlsplit(raw if "://" in raw else "http://" + raw)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"STORAGE_EMULATOR_HOST must look like http://HOST:PORT, got {raw!r}")
            self.storage = (parts.scheme, parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
            self.needs_token = False
        else:
            self.storage = ("https", STORAGE_HOST, 443)
            self.needs_token = True
        meta = urlsplit("http://" + (environ.get("GCE_METADATA_HOST", "").strip() or METADATA_HOST))
        self.metadata = ("http", meta.hostname or METADATA_HOST, meta.port or 80)
        self._token: tuple[str, float] | None = None

    def _once(self, endpoint: tuple[str, str, int], target: str, headers: dict[str, str]) -> tuple[int, bytes]:
        scheme, host, port = endpoint
        conn: http.client.HTTPConnection
        if scheme == "https":
            conn = http.client.HTTPSConnection(
                host, port, timeout=GCS_TIMEOUT_SECONDS, context=ssl.create_default_context()
            )
        else:
            conn = http.client.HTTPConnection(host, port, timeout=GCS_TIMEOUT_SECONDS)
        try:
            conn.request("GET", target, headers=headers)
            resp = conn.getresponse()
            body = resp.read(MAX_CONFIG_BYTES + 1)
        finally:
            conn.close()
        if len(body) > MAX_CONFIG_BYTES:
            raise GcsError(f"GET {target.split('?')[0]}: response larger than {MAX_CONFIG_BYTES} bytes")
        return resp.status, body

    def _get(
        self, endpoint: tuple[str, str, int], target: str, headers: dict[str, str], what: str
    ) -> tuple[int, bytes]:
        reason = ""
        for attempt in range(1, GCS_ATTEMPTS + 1):
            try:
                status, body = self._once(endpoint, target, headers)
            except (OSError, http.client.HTTPException) as e:
                reason = f"{type(e).__name__}: {e}"
            else:
                if status not in RETRYABLE_STATUS:
                    return status, body
                reason = f"HTTP {status}"
            if attempt < GCS_ATTEMPTS:
                time.sleep(min(2.0 ** (attempt - 1), 8.0) * random.uniform(0.5, 1.0))
        raise GcsError(f"{what}: {reason} (gave up after {GCS_ATTEMPTS} attempts)")

    def _headers(self) -> dict[str, str]:
        if not self.needs_token:
            return {}
        now = time.monotonic()
        if self._token is None or self._token[1] <= now:
            status, body = self._get(self.metadata, TOKEN_PATH, {"Metadata-Flavor": "Google"}, "access token")
            if status != 200:
                raise GcsError(f"the metadata server answered HTTP {status} for an access token")
            try:
                doc = json.loads(body)
                token, expires = str(doc["access_token"]), float(doc.get("expires_in", 0))
            except (ValueError, KeyError, TypeError) as e:
                raise GcsError(f"the metadata server's token document is unreadable: {e}") from None
            self._token = (token, now + max(0.0, expires - TOKEN_MARGIN_SECONDS))
        return {"Authorization": f"Bearer {self._token[0]}"}

    def generation(self, obj: GcsObject) -> str | None:
        """The object's live generation, None when it does not exist."""
        target = f"/storage/v1/b/{quote(obj.bucket, safe='')}/o/{quote(obj.name, safe='')}?fields=generation"
        status, body = self._get(self.storage, target, self._headers(), f"GET {obj} metadata")
        if status == 404:
            return None
        if status != 200:
            raise GcsError(f"GET {obj} metadata answered HTTP {status}")
        try:
            return str(json.loads(body)["generation"])
        except (ValueError, KeyError, TypeError) as e:
            raise GcsError(f"GET {obj} metadata: no generation ({e})") from None

    def read(self, obj: GcsObject, generation: str) -> bytes | None:
        """That generation's bytes; None when it no longer exists."""
        q = f"?alt=media&generation={quote(generation, safe='')}"
        target = f"/storage/v1/b/{quote(obj.bucket, safe='')}/o/{quote(obj.name, safe='')}{q}"
        status, body = self._get(self.storage, target, self._headers(), f"GET {obj}#{generation}")
        if status == 404:
            return None
        if status != 200:
            raise GcsError(f"GET {obj}#{generation} answered HTTP {status}")
        return body


def load_config_bytes(data: bytes, where: str) -> CohostConfig:
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ConfigError([("", f"{where} is not JSON: {e}")]) from None
    return parse_config(doc)


# ---- the instances --------------------------------------------------------------------------------------------------

#: Consecutive failed ``/health`` checks of a running instance before it is killed and restarted: with the default
#: 5 s interval a wedged engine is replaced within ~15 s, while one slow answer (a long prefill step) is not enough.
UNHEALTHY_CHECKS = 3
#: Timeout of one ``/health`` check: vLLM answers it from the API server without queuing behind the engine.
HEALTH_TIMEOUT_SECONDS = 5.0
#: Poll period of an instance's ``/health`` while it starts.
START_POLL_SECONDS = 1.0
#: Grace after SIGTERM for a child being replaced because it is dead or unhealthy (nothing left to drain).
KILL_GRACE_SECONDS = 10.0
#: After an instance's API server exited on SIGTERM, how long its engine core and workers may take to follow it before
#: the rest of its process group is killed: vLLM's server stops its engine before it exits, so they are normally gone.
CHILDREN_EXIT_SECONDS = 10.0
#: Longest wait for a killed child's whole process group (its engine workers) to be gone, so the GPU memory it held
#: is free before anything starts in its place.
GROUP_EXIT_SECONDS = 30.0
#: Largest request body accepted: prompts of the largest contexts are a few MB of text, images more.
MAX_BODY_BYTES = 64 << 20
#: Paths whose JSON body names the model; every other route is the server's own.
ROUTED_PATHS = ("/v1/chat/completions", "/v1/completions")
#: Hop-by-hop headers a proxy must not forward (RFC 9110 section 7.6.1), plus those the proxy recomputes.
HOP_HEADERS = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "host",
        "content-length",
    }
)
#: Timeout of the server's own calls to an instance (``/v1/models``, ``/metrics``).
PEER_TIMEOUT_SECONDS = 10.0
#: States whose engine answers HTTP (``/metrics``).
SCRAPED_STATES = frozenset({"healthy", "unhealthy", "stopping"})
#: Longest child log line relayed whole (vLLM logs its non-default arguments on one line).
LOG_LINE_LIMIT = 1 << 20


@dataclass
class Instance:
    """One running (or starting, or restarting) instance of the current set."""

    spec: InstanceSpec
    #: ``pending`` (waiting its turn), ``verifying``, ``starting``, ``healthy``, ``unhealthy``, ``backoff``,
    #: ``stopping``, ``stopped``, ``failed``.
    state: str = "pending"
    proc: asyncio.subprocess.Process | None = None
    #: Requests being relayed to it now.
    in_flight: int = 0
    #: It has been healthy once since it joined the set (only then does an update's new instance gate /health).
    healthy_once: bool = False
    #: It joined at start-up (it gates /health from the start) rather than through an update.
    initial: bool = True
    restarts: list[float] = field(default_factory=list)
    restarts_total: int = 0
    stopping: bool = False
    task: asyncio.Task[None] | None = None
    log_task: asyncio.Task[None] | None = None

    def leaving(self) -> bool:
        """Being stopped (read through a call: it changes while a coroutine awaits)."""
        return self.stopping

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.returncode is None else None

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.spec.port}{path}"


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _reap_orphans() -> None:
    """Reap zombie children the server did not start itself: when it is the container's PID 1, an engine's workers
    whose parent died are re-parented to it, and a zombie still counts as a member of its process group."""
    me = str(os.getpid())
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[-1].split()
            if len(fields) > 1 and fields[0] == "Z" and fields[1] == me:
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(int(entry), os.WNOHANG)


class Supervisor:
    """The current set of instances, their lifecycle and the routing table."""

    def __init__(
        self,
        cfg: CohostConfig,
        session: aiohttp.ClientSession,
        log: Callable[[str], None] = say,
        base: CohostConfig | None = None,
    ) -> None:
        self.cfg = cfg
        #: The command line's document (the plan's): what an update may not change (:func:`update_problems`).
        self.base = base if base is not None else cfg
        self.session = session
        self.log = log
        self.instances: dict[str, Instance] = {}
        self.routes: dict[str, list[Instance]] = {}
        #: Held while an instance starts, until it is healthy: the stagger.
        self.start_lock = asyncio.Lock()
        self.update_lock = asyncio.Lock()
        self.draining = False
        self.fatal: str | None = None
        self.done = asyncio.Event()
        self.exit_code = 0
        self.generation: str | None = None
        self.reloads: dict[str, int] = {"applied": 0, "refused": 0}
        self._shutdown_task: asyncio.Future[None] | None = None

    # ---- the set -----------------------------------------------------------------------------------------------

    def _index(self) -> None:
        routes: dict[str, list[Instance]] = {}
        for inst in self.instances.values():
            for n in inst.spec.model_names:
                routes.setdefault(n, []).append(inst)
        self.routes = routes

    def start(self) -> None:
        """Start every instance of the configuration, in order, one at a time."""
        for spec in self.cfg.instances:
            self._launch(Instance(spec), initial=True)
        self._index()

    def _launch(self, inst: Instance, initial: bool) -> None:
        inst.initial = initial
        self.instances[inst.spec.name] = inst
        inst.task = asyncio.ensure_future(self._run(inst))

    def is_draining(self) -> bool:
        """Shutting down (read through a call: it changes while a coroutine awaits)."""
        return self.draining

    def healthy(self) -> bool:
        if self.draining or self.fatal is not None:
            return False
        return all(i.state == "healthy" for i in self.instances.values() if i.initial or i.healthy_once)

    def served_names(self) -> list[str]:
        return [n for n in self.cfg.served_names() if n in self.routes]

    def pick(self, model: str) -> Instance | None:
        """The least busy healthy instance serving ``model`` (first in order on a tie); None when none is healthy.
        KeyError when nothing serves it."""
        candidates = self.routes[model]
        healthy = [i for i in candidates if i.state == "healthy" and not i.stopping]
        return min(healthy, key=lambda i: i.in_flight) if healthy else None

    # ---- one instance ------------------------------------------------------------------------------------------

    async def _run(self, inst: Instance) -> None:
        """Start, watch, restart within the policy; on exhaustion fail the whole server."""
        while not inst.stopping:
            if await self._start(inst):
                await self._watch(inst)
            if inst.leaving():
                return
            await self._terminate(inst, KILL_GRACE_SECONDS)
            if not self._may_restart(inst):
                inst.state = "failed"
                await self.fail(
                    f"instance {inst.spec.name} failed again after {len(inst.restarts)} restart(s) within "
                    f"{self.cfg.restart.window_seconds:g} s (restart policy: at most {self.cfg.restart.max_restarts})"
                )
                return
            delay = self.cfg.restart.backoff(len(inst.restarts))
            inst.state = "backoff"
            self.log(f"{inst.spec.name}: restart {len(inst.restarts)} in {delay:g} s")
            await asyncio.sleep(delay)

    def _may_restart(self, inst: Instance) -> bool:
        now = time.monotonic()
        window = self.cfg.restart.window_seconds
        inst.restarts = [t for t in inst.restarts if now - t < window]
        if len(inst.restarts) >= self.cfg.restart.max_restarts:
            return False
        inst.restarts.append(now)
        inst.restarts_total += 1
        return True

    async def _start(self, inst: Instance) -> bool:
        """Verify, spawn, wait for /health 200 (under the start lock). True when healthy."""
        spec = inst.spec
        async with self.start_lock:
            if inst.leaving() or self.draining:
                return False
            if spec.verify:
                inst.state = "verifying"
                self.log(f"{spec.name}: verifying release {spec.release}")
                verify = await asyncio.create_subprocess_exec(*spec.verify, stdin=asyncio.subprocess.DEVNULL)
                rc = await verify.wait()
                if rc != 0:
                    self.log(f"{spec.name}: release check exited {rc}")
                    return False
            env = {**os.environ, **dict(spec.env), "CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in spec.gpus)}
            argv = [*self.cfg.engine_command, *spec.args]
            inst.state = "starting"
            started = time.monotonic()
            try:
                inst.proc = await asyncio.create_subprocess_exec(
                    *argv,
                    env=env,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.STDOUT,
                    start_new_session=True,
                    limit=LOG_LINE_LIMIT,
                )
            except OSError as e:
                self.log(f"{spec.name}: cannot start {argv[0]!r}: {e}")
                return False
            inst.log_task = asyncio.ensure_future(self._relay_log(inst, inst.proc))
            self.log(f"{spec.name}: started pid {inst.proc.pid} on GPU(s) {env['CUDA_VISIBLE_DEVICES']}")
            deadline = started + self.cfg.start_timeout_seconds
            while time.monotonic() < deadline:
                if inst.leaving():
                    return False
                if inst.proc.returncode is not None:
                    self.log(f"{spec.name}: exited {inst.proc.returncode} while starting")
                    return False
                if await self._health(inst):
                    inst.state = "healthy"
                    inst.healthy_once = True
                    self.log(f"{spec.name}: healthy after {time.monotonic() - started:.1f} s")
                    return True
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.shield(inst.proc.wait()), START_POLL_SECONDS)
            self.log(f"{spec.name}: not healthy within {self.cfg.start_timeout_seconds:g} s")
            return False

    async def _relay_log(self, inst: Instance, proc: asyncio.subprocess.Process) -> None:
        """The child's output line by line, prefixed with its instance name."""
        assert proc.stdout is not None
        prefix = f"[{inst.spec.name}] ".encode()
        out = sys.stdout.buffer
        while True:
            try:
                line = await proc.stdout.readline()
            except (ValueError, asyncio.LimitOverrunError):  # a line longer than the stream limit: pass it raw
                line = await proc.stdout.read(1 << 16)
            if not line:
                return
            out.write(prefix + line if line.endswith(b"\n") else prefix + line + b"\n")
            out.flush()

    async def _health(self, inst: Instance) -> bool:
        try:
            async with self.session.get(
                inst.url("/health"), timeout=aiohttp.ClientTimeout(total=HEALTH_TIMEOUT_SECONDS)
            ) as r:
                await r.read()
                return r.status == 200
        except (aiohttp.ClientError, asyncio.TimeoutError):
            return False

    async def _watch(self, inst: Instance) -> None:
        """Until the instance is stopped, exits, or fails UNHEALTHY_CHECKS health checks in a row."""
        assert inst.proc is not None
        failures = 0
        while not inst.stopping:
            try:
                await asyncio.wait_for(asyncio.shield(inst.proc.wait()), self.cfg.health_interval_seconds)
            except asyncio.TimeoutError:
                pass
            if inst.leaving():
                return
            if inst.proc.returncode is not None:
                inst.state = "unhealthy"
                self.log(f"{inst.spec.name}: pid {inst.proc.pid} exited {inst.proc.returncode}")
                return
            if await self._health(inst):
                failures = 0
                inst.state = "healthy"
                continue
            failures += 1
            inst.state = "unhealthy"
            self.log(f"{inst.spec.name}: /health failed ({failures}/{UNHEALTHY_CHECKS})")
            if failures >= UNHEALTHY_CHECKS:
                return

    async def _terminate(self, inst: Instance, grace: float) -> None:
        """SIGTERM the instance's API server, SIGKILL its process group after ``grace`` (or once the server exited
        and its children had CHILDREN_EXIT_SECONDS to follow), and wait until the group is gone.

        Only the API server is signalled: it drains (``--shutdown-timeout``), then stops its engine core, which stops
        its workers (vLLM 0.32 ``entrypoints/launchers/launcher.py`` ``handle_shutdown``, ``v1/engine/utils.py``).
        A SIGTERM to the whole group reaches the engine core and workers too: the workers exit at once and every
        in-flight stream fails (``EngineDeadError``, seen on the CPU vLLM in tests/integration/
        test_cohost_server_real.py)."""
        proc = inst.proc
        if proc is None:
            return
        pgid = proc.pid
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(asyncio.shield(proc.wait()), grace)
                end = time.monotonic() + CHILDREN_EXIT_SECONDS
                while _alive(pgid) and time.monotonic() < end:
                    _reap_orphans()
                    await asyncio.sleep(0.2)
            except asyncio.TimeoutError:
                self.log(f"{inst.spec.name}: still running {grace:g} s after SIGTERM: SIGKILL")
        with contextlib.suppress(ProcessLookupError):
            if _alive(pgid):
                os.killpg(pgid, signal.SIGKILL)
        await proc.wait()
        end = time.monotonic() + GROUP_EXIT_SECONDS
        while _alive(pgid) and time.monotonic() < end:
            _reap_orphans()
            await asyncio.sleep(0.2)
        if inst.log_task is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(inst.log_task, 5)

    async def stop(self, inst: Instance, grace: float) -> None:
        """Take the instance out of the set: no new requests, drain (``grace``), gone."""
        inst.stopping = True
        inst.state = "stopping"
        self._index()
        if inst.task is not None and inst.proc is None:
            inst.task.cancel()
        await self._terminate(inst, grace)
        if inst.task is not None:
            inst.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await inst.task
        inst.state = "stopped"

    # ---- update_models -----------------------------------------------------------------------------------------

    async def update(self, new: CohostConfig, generation: str | None = None) -> None:
        """Apply a new model set: stop what left or changed, keep what is unchanged, start what is new."""
        async with self.update_lock:
            problems = update_problems(self.base, new)
            if new.port != self.cfg.port:
                problems.insert(0, f"the server's port cannot change live ({self.cfg.port} -> {new.port})")
            if problems:
                self.reloads["refused"] += 1
                self.log(f"update refused: {'; '.join(problems)}")
                return
            wanted = {s.name: s for s in new.instances}
            same_engine = new.engine_command == self.cfg.engine_command
            keep = {
                name
                for name, inst in self.instances.items()
                if same_engine and wanted.get(name) == inst.spec and not inst.stopping
            }
            leaving = [i for n, i in self.instances.items() if n not in keep]
            self.log(
                f"update{'' if generation is None else ' to generation ' + generation}: keep {sorted(keep) or 'none'}, "
                f"stop {sorted(i.spec.name for i in leaving) or 'none'}, "
                f"start {sorted(n for n in wanted if n not in keep) or 'none'}"
            )
            await asyncio.gather(*(self.stop(i, new.drain_seconds) for i in leaving))
            for i in leaving:
                del self.instances[i.spec.name]
            self.cfg = new
            kept = {n: self.instances[n] for n in keep}
            self.instances = {}
            for spec in new.instances:
                if spec.name in kept:
                    self.instances[spec.name] = kept[spec.name]
                else:
                    self._launch(Instance(spec), initial=False)
            self._index()
            self.generation = generation
            self.reloads["applied"] += 1

    # ---- the end -----------------------------------------------------------------------------------------------

    async def shutdown(self, code: int = 0) -> None:
        """Drain every instance at once (SIGTERM: vLLM's own drain), then let the server exit with ``code``."""
        if self.draining:
            return
        self.draining = True
        self.exit_code = code
        self.log(f"draining {len(self.instances)} instance(s), at most {self.cfg.drain_seconds:g} s")
        await asyncio.gather(*(self.stop(i, self.cfg.drain_seconds) for i in list(self.instances.values())))
        self.done.set()

    async def fail(self, reason: str) -> None:
        if self.fatal is None:
            self.fatal = reason
            self.log(f"fatal: {reason}; draining the other instances and exiting 1")
            self._shutdown_task = asyncio.ensure_future(self.shutdown(1))


# ---- metrics ---------------------------------------------------------------------------------------------------------

#: Labels added to every sample of an instance: the instance, and the model name clients send (vLLM's own
#: ``model_name`` label is the first served name, the release id). Not ``instance``: Prometheus owns that label.
INSTANCE_LABEL = "cohost_instance"
MODEL_LABEL = "cohost_model"
#: The server's gauge of each instance (1 while healthy).
INSTANCE_UP = "cohost:instance_up"
#: Pod-level aggregates for an endpoint picker that reads one series per metric (GAIE v1.5.0 takes the first series
#: of a family when none has a timestamp): (name, vLLM family, how instances combine, help).
AGGREGATES = (
    ("cohost:num_requests_waiting", "vllm:num_requests_waiting", "sum", "Requests waiting, summed over instances."),
    ("cohost:num_requests_running", "vllm:num_requests_running", "sum", "Requests running, summed over instances."),
    ("cohost:kv_cache_usage_perc", "vllm:kv_cache_usage_perc", "max", "KV-cache usage of the fullest instance."),
)


def merge_metrics(
    expositions: Iterable[tuple[InstanceSpec, str]], own: Iterable[Metric] = ()
) -> tuple[bytes, list[tuple[str, str]]]:
    """One exposition of every instance's (each sample labelled with its instance and model), the aggregates, and
    ``own`` metric families; and the instances whose text did not parse (name, error)."""
    from prometheus_client.exposition import generate_latest
    from prometheus_client.metrics_core import Metric
    from prometheus_client.parser import text_string_to_metric_families
    from prometheus_client.samples import Sample

    families: dict[str, Metric] = {}
    order: list[str] = []
    errors: list[tuple[str, str]] = []
    combined: dict[str, list[float]] = {a[1]: [] for a in AGGREGATES}
    for spec, text in expositions:
        try:
            parsed = list(text_string_to_metric_families(text))
        except (ValueError, TypeError, IndexError) as e:
            errors.append((spec.name, f"{type(e).__name__}: {e}"))
            continue
        extra = {INSTANCE_LABEL: spec.name, MODEL_LABEL: spec.public_name}
        for fam in parsed:
            key = f"{fam.name}\0{fam.type}"
            merged = families.get(key)
            if merged is None:
                merged = families[key] = Metric(fam.name, fam.documentation, fam.type, fam.unit)
                order.append(key)
            for s in fam.samples:
                merged.samples.append(
                    Sample(s.name, {**s.labels, **extra}, s.value, s.timestamp, s.exemplar, s.native_histogram)
                )
                if s.name in combined:
                    combined[s.name].append(float(s.value))
    out: list[Metric] = [families[k] for k in order]
    for name, source, how, doc in AGGREGATES:
        agg = Metric(name, doc, "gauge")
        values = combined[source]
        agg.add_sample(name, {}, (sum(values) if how == "sum" else max(values)) if values else 0.0)
        out.append(agg)
    out += list(own)

    from prometheus_client.registry import Collector, CollectorRegistry

    class _Snapshot(Collector):
        def collect(self) -> Iterable[Metric]:
            return out

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot())
    return generate_latest(registry), errors


def own_metrics(sup: Supervisor) -> list[Metric]:
    from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily

    up = GaugeMetricFamily(INSTANCE_UP, "1 while the instance is healthy.", labels=[INSTANCE_LABEL, MODEL_LABEL])
    restarts = CounterMetricFamily(
        "cohost:instance_restarts", "Restarts of the instance by the server.", labels=[INSTANCE_LABEL, MODEL_LABEL]
    )
    for inst in sup.instances.values():
        labels = [inst.spec.name, inst.spec.public_name]
        up.add_metric(labels, 1.0 if inst.state == "healthy" else 0.0)
        restarts.add_metric(labels, float(inst.restarts_total))
    reloads = CounterMetricFamily("cohost:config_reloads", "Model-set updates by outcome.", labels=["result"])
    for result, n in sorted(sup.reloads.items()):
        reloads.add_metric([result], float(n))
    return [up, restarts, reloads]


# ---- HTTP ------------------------------------------------------------------------------------------------------------


def error_response(status: int, message: str, err_type: str, param: str | None = None) -> web.Response:
    """vLLM's error shape (``ErrorResponse``: ``{"error": {message, type, param, code}}``)."""
    body = {"error": {"message": message, "type": err_type, "param": param, "code": status}}
    return web.json_response(body, status=status)


class Router:
    """The HTTP face of the supervisor."""

    def __init__(self, sup: Supervisor) -> None:
        self.sup = sup

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        for path in ROUTED_PATHS:
            app.router.add_post(path, self.relay)
        app.router.add_get("/health", self.health)
        app.router.add_get("/live", self.live)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_get("/cohost/status", self.status)
        return app

    async def relay(self, request: web.Request) -> web.StreamResponse:
        sup = self.sup
        if sup.draining:
            return error_response(503, "the server is shutting down", "ServiceUnavailableError")
        body = await request.read()
        try:
            doc = json.loads(body)
        except ValueError:
            return error_response(400, "the request body is not JSON", "BadRequestError")
        model = doc.get("model") if isinstance(doc, dict) else None
        served = sup.served_names()
        if not isinstance(model, str) or not model:
            return error_response(
                400, f"the body must name a model; served: {', '.join(served)}", "BadRequestError", "model"
            )
        if model not in sup.routes:
            return error_response(
                404, f"The model `{model}` does not exist. Served here: {', '.join(served)}.", "NotFoundError", "model"
            )
        inst = sup.pick(model)
        if inst is None:
            return error_response(503, f"no healthy instance serves `{model}` right now", "ServiceUnavailableError")
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        inst.in_flight += 1
        resp: web.StreamResponse | None = None
        try:
            async with sup.session.post(inst.url(request.path_qs), data=body, headers=headers) as up:
                resp = web.StreamResponse(status=up.status, reason=up.reason)
                for k, v in up.headers.items():
                    if k.lower() not in HOP_HEADERS and k.lower() not in ("content-encoding", "date", "server"):
                        resp.headers.add(k, v)
                await resp.prepare(request)
                async for chunk in up.content.iter_any():
                    await resp.write(chunk)
                await resp.write_eof()
                return resp
        except ConnectionResetError:  # the client left: leaving the block closes the upstream request too
            assert resp is not None
            return resp
        except (aiohttp.ClientError, asyncio.TimeoutError) as e:
            if resp is None or not resp.prepared:
                return error_response(502, f"instance {inst.spec.name} did not answer: {e}", "BadGatewayError")
            raise  # mid-stream: the client sees the stream end early
        finally:
            inst.in_flight -= 1

    async def health(self, request: web.Request) -> web.Response:
        sup = self.sup
        states = {n: i.state for n, i in sup.instances.items()}
        return web.json_response({"healthy": sup.healthy(), "instances": states}, status=200 if sup.healthy() else 503)

    async def live(self, request: web.Request) -> web.Response:
        return web.json_response({"live": True})

    async def _peer_get(self, inst: Instance, path: str) -> tuple[int, bytes] | None:
        try:
            async with self.sup.session.get(
                inst.url(path), timeout=aiohttp.ClientTimeout(total=PEER_TIMEOUT_SECONDS)
            ) as r:
                return r.status, await r.read()
        except (aiohttp.ClientError, asyncio.TimeoutError):
            return None

    async def models(self, request: web.Request) -> web.Response:
        """Every model of the healthy instances (one instance per group of data-parallel instances asked)."""
        first: dict[tuple[str, ...], Instance] = {}
        for inst in self.sup.instances.values():
            if inst.state == "healthy" and not inst.stopping:
                first.setdefault(inst.spec.model_names, inst)
        answers = await asyncio.gather(*(self._peer_get(i, "/v1/models") for i in first.values()))
        data: list[Any] = []
        seen: set[str] = set()
        for ans in answers:
            if ans is None or ans[0] != 200:
                continue
            with contextlib.suppress(ValueError, AttributeError, TypeError):
                for card in json.loads(ans[1]).get("data", []):
                    if isinstance(card, dict) and card.get("id") not in seen:
                        seen.add(str(card.get("id")))
                        data.append(card)
        return web.json_response({"object": "list", "data": data})

    async def metrics(self, request: web.Request) -> web.Response:
        # Only engines that serve HTTP already: a starting vLLM holds its port but answers once its engine is up.
        live = [i for i in self.sup.instances.values() if i.pid is not None and i.state in SCRAPED_STATES]
        answers = await asyncio.gather(*(self._peer_get(i, "/metrics") for i in live))
        texts = [
            (i.spec, ans[1].decode("utf-8", "replace"))
            for i, ans in zip(live, answers, strict=True)
            if ans and ans[0] == 200
        ]
        body, errors = merge_metrics(texts, own_metrics(self.sup))
        for name, err in errors:
            self.sup.log(f"{name}: /metrics not parsed: {err}")
        return web.Response(
            body=body, content_type="text/plain", charset="utf-8", headers={"X-Content-Version": "0.0.4"}
        )

    async def status(self, request: web.Request) -> web.Response:
        sup = self.sup
        return web.json_response(
            {
                "healthy": sup.healthy(),
                "draining": sup.draining,
                "fatal": sup.fatal,
                "generation": sup.generation,
                "instances": [
                    {
                        "name": i.spec.name,
                        "release": i.spec.release,
                        "model_names": list(i.spec.model_names),
                        "state": i.state,
                        "pid": i.pid,
                        "restarts": i.restarts_total,
                        "in_flight": i.in_flight,
                    }
                    for i in sup.instances.values()
                ],
            }
        )


# ---- watching the model set in Cloud Storage -------------------------------------------------------------------------


async def watch(sup: Supervisor, reader: GcsReader, obj: GcsObject, poll_seconds: float) -> None:
    """Poll the object's generation; apply each new valid document (update_models)."""
    while not sup.draining:
        await asyncio.sleep(poll_seconds)
        if sup.is_draining():
            return
        gen: str | None = None
        try:
            gen = await asyncio.to_thread(reader.generation, obj)
            if gen is None or gen == sup.generation:
                continue
            data = await asyncio.to_thread(reader.read, obj, gen)
            if data is None:
                continue
            new = load_config_bytes(data, f"{obj}#{gen}")
        except GcsError as e:
            sup.log(f"watch {obj}: {e}")
            continue
        except ConfigError as e:
            sup.reloads["refused"] += 1
            sup.generation = gen  # do not re-read the same bad generation every poll
            sup.log(f"watch {obj}#{gen}: not applied: {e}")
            continue
        await sup.update(new, gen)


def update_problems(base: CohostConfig, new: CohostConfig) -> list[str]:
    """Why a watched document may not replace the command line's (empty: it may). The object changes the model set
    (releases, names, GPUs, partitions, engine arguments), not which programs the server runs: its engine command
    is the command line's, every instance runs one of the command line's release checks (the same program,
    arguments of its own) and sets only environment variables the command line's instances set, so a writer of the
    object cannot make the pods run another program (LD_PRELOAD, PYTHONPATH) or skip the check."""
    out = []
    if new.engine_command != base.engine_command:
        out.append(f"engine_command {list(new.engine_command)} is not the command line's {list(base.engine_command)}")
    checks = {s.verify[:2] for s in base.instances}
    # Environment variables only those the command line sets (values of their own): no LD_PRELOAD, PYTHONPATH, ...
    names = {k for s in base.instances for k, _ in s.env}
    for s in new.instances:
        if s.verify[:2] not in checks:
            out.append(
                f"instance {s.name}: release check {list(s.verify[:2]) or 'none'} is not one of the command line's "
                f"({', '.join(str(list(c)) for c in sorted(checks))})"
            )
        extra = sorted({k for k, _ in s.env} - names)
        if extra:
            out.append(f"instance {s.name}: env {', '.join(extra)} is not set by the command line's instances")
    return out


# ---- main ------------------------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="cohost-server", description="Run and route several vLLM instances.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--config-json", help="the configuration document itself")
    src.add_argument("--config-file", help="a file holding the configuration document")
    p.add_argument("--watch", help="gs://BUCKET/OBJECT holding the model set to follow (update_models)")
    p.add_argument("--poll-seconds", type=float, default=30.0, help="how often the watched object is checked")
    p.add_argument("--host", default="0.0.0.0", help="address the server listens on")
    args = p.parse_args(argv)
    if args.poll_seconds <= 0:
        p.error("--poll-seconds must be positive")
    return args


async def serve(
    cfg: CohostConfig,
    host: str,
    watched: tuple[GcsReader, GcsObject, float] | None,
    generation: str | None = None,
    base: CohostConfig | None = None,
) -> int:
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, auto_decompress=False) as session:
        sup = Supervisor(cfg, session, base=base)
        sup.generation = generation
        runner = web.AppRunner(Router(sup).app(), handler_cancellation=True, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, cfg.port)
        await site.start()
        say(f"listening on {host}:{cfg.port}, {len(cfg.instances)} instance(s): {', '.join(cfg.served_names())}")
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, lambda: asyncio.ensure_future(sup.shutdown(0)))
        sup.start()
        watcher = asyncio.ensure_future(watch(sup, *watched)) if watched else None
        await sup.done.wait()
        if watcher is not None:
            watcher.cancel()
        await runner.cleanup()
        say(f"exit {sup.exit_code}")
        return sup.exit_code


def initial_config(
    args: argparse.Namespace, reader: GcsReader | None, obj: GcsObject | None
) -> tuple[CohostConfig, str | None, CohostConfig]:
    """The watched object's document when it exists and may replace the command line's (:func:`update_problems`),
    else the command line's; its generation; and the command line's document."""
    if args.config_json is not None:
        base = load_config_bytes(args.config_json.encode("utf-8"), "--config-json")
    else:
        with open(args.config_file, "rb") as f:
            base = load_config_bytes(f.read(MAX_CONFIG_BYTES + 1), args.config_file)
    if reader is not None and obj is not None:
        gen = reader.generation(obj)
        if gen is not None:
            data = reader.read(obj, gen)
            if data is not None:
                try:
                    stored = load_config_bytes(data, f"{obj}#{gen}")
                except ConfigError as e:
                    what = "; ".join(f"{k + ': ' if k else ''}{m}" for k, m in e.problems)
                    say(f"{obj}#{gen}: not applied: {what}; the command line's model set")
                    return base, gen, base
                problems = update_problems(base, stored)
                if stored.port != base.port:
                    problems.insert(0, f"port {stored.port} is not the command line's {base.port}")
                if not problems:
                    say(f"model set from {obj}#{gen}")
                    return stored, gen, base
                say(f"{obj}#{gen}: not applied: {'; '.join(problems)}; the command line's model set")
                return base, gen, base
    return base, None, base


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    reader = obj = None
    try:
        if args.watch:
            obj = GcsObject.parse(args.watch)
            reader = GcsReader(os.environ)
        cfg, gen, base = initial_config(args, reader, obj)
    except ConfigError as e:
        for key, msg in e.problems:
            say(f"bad configuration: {key + ': ' if key else ''}{msg}")
        return 2
    except (ValueError, OSError, GcsError) as e:
        say(f"cannot read the configuration: {e}")
        return 2 if not isinstance(e, GcsError) else 1
    watched = (reader, obj, args.poll_seconds) if reader is not None and obj is not None else None
    return asyncio.run(serve(cfg, args.host, watched, gen, base))


if __name__ == "__main__":
    sys.exit(main())
