"""Traffic behaviour of the real vLLM 0.32 (CPU build), started from the RENDERED arguments of the shipped staging stack.

Both pools of ``staging`` are planned offline (``planned("staging")``, the real program under the mock monitor), and
each pool's ``vllm serve`` arguments -- ``plan.pools[role].vllm_args``, the same list the Deployment's container
carries -- are started as they are, changed only by ``vllm_harness.cpu_adapted`` (its docstring lists every change
and why: the model location becomes a local mirror of the rendered path holding the tiny random-weight Llama and a
manifest for the release's revision, no Run:ai streamer, TP 1, no fp8, a loopback port, ``--enforce-eager``). The
probes are the Deployment's rendered exec commands, run as the kubelet would (a fresh ``python3``, exit status and
one line), with only the port, the model root / manifest path and the state file substituted
(``vllm_harness.cpu_probe_command``).

Every number the tests check comes from the plan: the public model name and release ids, the output cap
(``--override-generation-config``), ``--max-num-seqs``, ``--shutdown-timeout``, the pod's
``terminationGracePeriodSeconds`` and preStop sleep, and the probes' deadlines and stall window.

The stable and canary servers start in parallel once per module (~45-60 s on 2 cores, ~3 GB each). The SIGTERM
drain test stops the canary's server, so it is the last test of the module; the tests before it never need a
drained server (and each checks that its server is still running, so a reordering fails with that reason).

Run with ``REQUIRE_VLLM=1 .venv/bin/python -m pytest -q -m integration tests/integration/test_traffic_real.py``.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from components.serving import verify_release as vr
from components.serving.spec import ProbeTimings
from infra.targets.gke.planning import GkePoolPlan
from tests.conftest import planned

from . import vllm_harness as h
from .vllm_harness import VllmServer

pytestmark = pytest.mark.integration

STACK = "staging"
ROLES = ("stable", "canary")
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
#: A short prompt: a few tokens of the tiny tokenizer; the tests are about what the server does with requests.
PROMPT = "The gateway routes each request"
#: Requests beyond --max-num-seqs in the over-capacity test: enough that the queue is visible in /metrics.
OVER_CAPACITY = 50
#: Output tokens of each over-capacity request. At 206 running sequences one decode step of the tiny model takes
#: ~25-30 ms on 2 cores, so the first wave (and with it the queue) lasts ~25-30 s. The queue must outlast the
#: readiness probe run as a fresh process: ~1.3 s on an idle machine, but 11.1 s in one CI run, where the CPU
#: engine's busy threads starved the probe's Python start-up (its own HTTP checks stayed inside their 4 s budget).
#: With 384 tokens the queue had drained before that probe returned.
BUSY_MAX_TOKENS = 1024
#: Stall window used instead of the rendered one (60 s) in the liveness test, so that it takes seconds, not
#: minutes; the logic under test (progress clock in the state file) does not depend on the length.
SHORT_STALL_S = 3.0
#: Output tokens of the request that hangs behind the stopped engine in the liveness test.
HUNG_REQUEST_TOKENS = 8
#: Upper bound on one HTTP request of these tests (the capped 4096-token requests take ~12 s here).
REQUEST_TIMEOUT_S = 300.0
#: Silence on the drained stream that counts as "cut": tokens arrive every few ms while it drains; with
#: --shutdown-timeout 0 vLLM can kill the engine and leave the stream open without another byte (see the test).
STREAM_STALL_S = 30.0
#: vLLM 0.32's log line when a drain has finished (``EngineCoreProc._handle_shutdown``).
DRAIN_DONE_LOG = "[shutdown] EngineCore: request processing complete"
#: /metrics polling period while the over-capacity requests run (a sample costs a few ms).
POLL_S = 0.05
#: Bound on the API server accepting the over-capacity burst, and on the queue showing up in /metrics (~1 s on
#: an idle machine; far longer only when something is broken).
GATE_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Pool:
    """One pool of the staging plan and the CPU server started from its rendered arguments."""

    role: str
    server: VllmServer
    public_name: str
    release_id: str
    model_revision: str
    rendered_args: tuple[str, ...]
    rendered_root: str  # --model as rendered (and --model-root of the probes)
    local_root: str  # its local mirror, as passed to the server
    probes: ProbeTimings
    container: dict[str, Any]  # the Deployment's rendered vllm container
    termination_grace_seconds: int
    #: The workload contract's max_output_tokens: what the rendered --override-generation-config must enforce.
    output_cap: int

    def flag(self, name: str) -> str:
        return h.flag_value(self.rendered_args, name)

    @property
    def pre_stop_seconds(self) -> int:
        return int(self.container["lifecycle"]["preStop"]["sleep"]["seconds"])

    def probe(self, kind: str, state_file: Path | None = None) -> list[str]:
        """The rendered ``startupProbe`` / ``readinessProbe`` / ``livenessProbe`` command, CPU paths substituted."""
        return h.cpu_probe_command(
            self.container[kind]["exec"]["command"],
            self.server.port,
            {self.rendered_root: self.local_root},
            state_file=state_file,
        )

    def alive(self) -> VllmServer:
        proc = h._RUNNING.get(self.server.pid)
        if proc is None or proc.poll() is not None:
            pytest.fail(f"the {self.role} server is no longer running (the drain test stops it and runs last)")
        return self.server


def deployment_container(inventory: dict[str, Any], role: str) -> tuple[dict[str, Any], dict[str, Any]]:
    (dep,) = [r for r in inventory["resources"] if r["type"] == DEPLOYMENT and r["name"] == f"vllm-{role}-deployment"]
    pod = dep["inputs"]["spec"]["template"]["spec"]
    (container,) = [c for c in pod["containers"] if c["name"] == "vllm"]
    return pod, container


@pytest.fixture(scope="module")
def pools(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Pool]]:
    """Stable and canary of the staging plan, each served by a CPU vLLM from its rendered arguments, started in
    parallel; both stopped (whole process group) at the end of the module."""
    h.require_vllm()
    cfg, plan, inv = planned(STACK)
    work = tmp_path_factory.mktemp("traffic")
    launched: dict[str, Pool] = {}
    try:
        for role in ROLES:
            p = plan.pools[role]
            assert isinstance(p, GkePoolPlan)  # the stack's pools run on GKE
            pod, container = deployment_container(inv, role)
            assert container["args"] == list(p.vllm_args), "the Deployment carries the plan's arguments"
            rendered_root = h.flag_value(p.vllm_args, "--model")
            assert rendered_root == p.model_root
            base = work / role
            mirror = h.mirror_release(
                tiny_model_dir, base, rendered_root, p.release.model_revision, p.release.tokenizer_revision
            )
            local_root = h.local_model_root(rendered_root, base)
            port = h.free_loopback_port()
            argv = h.cpu_adapted(p.vllm_args, Path(local_root), port)
            server = h.launch_vllm_server(
                argv,
                work / f"{role}.log",
                port=port,
                release_id=p.release.release,
                model_dir=mirror,
                env=h.RENDERED_SERVER_ENV,
            )
            launched[role] = Pool(
                role,
                server,
                cfg.serving.model_name,
                p.release.release,
                p.release.model_revision,
                tuple(p.vllm_args),
                rendered_root,
                local_root,
                p.probes,
                container,
                int(pod["terminationGracePeriodSeconds"]),
                cfg.contract.max_output_tokens,
            )
        for role, pool in launched.items():  # both are starting already; each wait overlaps the other's start
            h.TIMINGS[f"traffic: {role} server start from rendered args (to /health 200)"] = h.wait_until_healthy(
                pool.server
            )
        h.TIMINGS["traffic: stable + canary started in parallel (both /health 200)"] = max(
            h.TIMINGS[f"traffic: {r} server start from rendered args (to /health 200)"] for r in ROLES
        )
        total_rss = total_pss = 0
        for role, pool in launched.items():
            rss, pss = h.tree_memory_bytes(pool.server.pid)
            total_rss, total_pss = total_rss + rss, total_pss + pss
            h.NOTES[f"traffic: {role} server memory after start"] = f"RSS {rss / 1e9:.2f} GB, PSS {pss / 1e9:.2f} GB"
        h.NOTES["traffic: both servers together"] = f"RSS {total_rss / 1e9:.2f} GB, PSS {total_pss / 1e9:.2f} GB"
        yield launched
    finally:
        for pool in launched.values():
            h.stop_vllm_server(pool.server.pid)


@pytest.fixture(params=ROLES)
def pool(request: pytest.FixtureRequest, pools: dict[str, Pool]) -> Pool:
    return pools[request.param]


# ---- helpers ---------------------------------------------------------------------------------------------------
def post(server: VllmServer, path: str, body: dict[str, Any], timeout: float = REQUEST_TIMEOUT_S) -> tuple[int, Any]:
    return h.http_post_json(f"{server.base_url}{path}", body, timeout=timeout)


def metrics(server: VllmServer) -> str:
    status, text = h.http_get(f"{server.base_url}/metrics")
    assert status == 200
    return text


def one_line(result) -> str:
    lines = result.stdout.splitlines()
    assert len(lines) == 1, f"a probe prints exactly one line; got {result.stdout!r} (stderr {result.stderr!r})"
    return lines[0]


def server_load(server: VllmServer) -> int:
    """Requests in flight as vLLM's API server counts them (``GET /load``, ``--enable-server-load-tracking``)."""
    status, text = h.http_get(f"{server.base_url}/load")
    assert status == 200, text
    return int(json.loads(text)["server_load"])


def other(pools: dict[str, Pool], role: str) -> Pool:
    (o,) = [p for r, p in pools.items() if r != role]
    return o


# ---- the adaptation itself (no server) -------------------------------------------------------------------------
def test_cpu_adaptation_changes_only_the_documented_flags(tmp_path: Path) -> None:
    _, plan, _ = planned(STACK)
    changed = {
        "--model",
        "--load-format",
        "--model-loader-extra-config",
        "--tensor-parallel-size",
        "--quantization",
        "--port",
        "--host",
        "--enforce-eager",
    }

    def pairs(args: list[str]) -> list[tuple[str, str | None]]:
        out, i = [], 0
        while i < len(args):
            value = args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("--") else None
            out.append((args[i], value))
            i += 2 if value is not None else 1
        return out

    for role in ROLES:
        rendered = list(plan.pools[role].vllm_args)
        root = h.flag_value(rendered, "--model")
        local = Path(h.local_model_root(root, tmp_path / role))
        local.mkdir(parents=True)
        (local / "config.json").write_text("{}")
        adapted = h.cpu_adapted(rendered, local, 12345)
        assert [p for p in pairs(adapted) if p[0] not in changed] == [p for p in pairs(rendered) if p[0] not in changed]
        assert h.flag_value(adapted, "--model") == str(local) + ("/" if root.endswith("/") else "")
        assert (
            h.flag_value(adapted, "--tensor-parallel-size"),
            h.flag_value(adapted, "--port"),
            h.flag_value(adapted, "--host"),
        ) == ("1", "12345", "127.0.0.1")
        assert "--enforce-eager" in adapted and "--quantization" not in adapted and "--load-format" not in adapted
        # A renderer change the adaptation does not know about fails loudly instead of starting something else.
        i = rendered.index("--quantization")
        with pytest.raises(h.CpuAdaptationError, match="no --quantization"):
            h.cpu_adapted(rendered[:i] + rendered[i + 2 :], local, 12345)
        with pytest.raises(h.CpuAdaptationError, match="does not mirror"):
            h.cpu_adapted(rendered, tmp_path, 12345)
    canary = list(plan.pools["canary"].vllm_args)
    i = canary.index("--load-format")
    local = Path(h.local_model_root(h.flag_value(canary, "--model"), tmp_path / "canary"))
    with pytest.raises(h.CpuAdaptationError, match="no --load-format"):
        h.cpu_adapted(canary[:i] + canary[i + 2 :], local, 12345)


# ---- a. clients send the public name; responses name the release ---------------------------------------------
def test_public_name_is_served_and_names_the_release(pool: Pool, pools: dict[str, Pool]) -> None:
    server = pool.alive()
    status, body = post(
        server, "/v1/completions", {"model": pool.public_name, "prompt": PROMPT, "max_tokens": 4, "temperature": 0}
    )
    assert status == 200, body
    assert body["model"] == pool.release_id, "the response names the release that served it"
    assert body["usage"]["completion_tokens"] == 4

    status, body = post(
        server,
        "/v1/chat/completions",
        {
            "model": pool.public_name,
            "messages": [{"role": "user", "content": PROMPT}],
            "max_tokens": 4,
            "temperature": 0,
        },
    )
    assert status == 200, body
    assert body["model"] == pool.release_id and body["choices"][0]["message"]["role"] == "assistant"

    # A name the pool does not serve -- made up, or the other pool's release id -- is a 404, not a silent fallback.
    for name in (f"{pool.public_name}-does-not-exist", other(pools, pool.role).release_id):
        status, body = post(server, "/v1/completions", {"model": name, "prompt": PROMPT, "max_tokens": 1})
        assert status == 404, (name, body)
        assert name in json.loads(body)["error"]["message"]


# ---- e. startup and readiness probes as rendered ---------------------------------------------------------------
def test_rendered_startup_probe_passes(pool: Pool) -> None:
    pool.alive()
    cmd = pool.probe("startupProbe")
    assert ("--manifest" in cmd) == pool.rendered_root.startswith("/"), "mounted weights carry a manifest check"
    result = h.run_probe_command(cmd)
    line = one_line(result)
    assert result.returncode == 0, line
    assert line.startswith(f"ok: {pool.release_id} serves {pool.public_name!r} from {pool.local_root}"), line
    assert "1-token generation in" in line


def test_rendered_readiness_probe_passes_and_names_a_wrong_release_or_root(pool: Pool, pools: dict[str, Pool]) -> None:
    pool.alive()
    cmd = pool.probe("readinessProbe")
    result = h.run_probe_command(cmd)
    assert result.returncode == 0 and one_line(result).startswith(f"ok: /health 200, {pool.release_id} serves"), (
        result.stdout
    )

    # The other pool's release id: this pod is not that release.
    o = other(pools, pool.role)
    result = h.run_probe_command(h.with_flag(cmd, "--release-id", o.release_id))
    line = one_line(result)
    assert result.returncode == 1
    assert line == (
        f"fail: models check failed: GET /v1/models lists {[pool.release_id, pool.public_name]}; "
        f"expected exactly {[o.release_id, pool.public_name]}"
    ), line

    # Another model root (the other release's revision folder): same names, other weights.
    wrong_root = o.local_root
    result = h.run_probe_command(h.with_flag(cmd, "--model-root", wrong_root))
    line = one_line(result)
    assert result.returncode == 1
    assert line.startswith(f"fail: models check failed: model {pool.release_id!r} is loaded from "), line
    assert "not the release's" in line, line  # the roots themselves are cut at the probe's 300-character limit


def test_rendered_startup_probe_fails_when_the_mounted_manifest_names_another_revision(
    pools: dict[str, Pool], tmp_path: Path
) -> None:
    pool = pools["stable"]  # the pool whose weights are mounted (the canary streams from gs://: no manifest)
    pool.alive()
    cmd = pool.probe("startupProbe")
    real = vr.parse_manifest(Path(h.flag_value(cmd, "--manifest")).read_bytes())
    assert real.revision == pool.model_revision
    o = other(pools, pool.role)
    stale = vr.build_manifest(real.model, o.model_revision, real.tokenizer_revision, real.files)
    (tmp_path / vr.MANIFEST_NAME).write_bytes(vr.render_manifest(stale))
    result = h.run_probe_command(h.with_flag(cmd, "--manifest", str(tmp_path / vr.MANIFEST_NAME)))
    line = one_line(result)
    assert result.returncode == 1
    assert line == (
        f"fail: manifest check failed: the mounted weights are revision {o.model_revision!r}, "
        f"not the release's {pool.model_revision!r}"
    ), line


# ---- b. the output cap -----------------------------------------------------------------------------------------
#: /v1/completions' own default for an absent (or null) max_tokens, as in OpenAI's legacy completions API: vLLM
#: 0.32's CompletionRequest declares ``max_tokens: int | None = 16`` and ``normalize_null_max_tokens`` turns null
#: into that default (vllm/entrypoints/openai/completion/protocol.py). So on /v1/completions the server's default
#: (the cap) never applies; on /v1/chat/completions (``max_tokens`` defaults to None) it does.
COMPLETIONS_DEFAULT_MAX_TOKENS = 16


def test_output_is_capped_at_the_contract_max_output_tokens(pools: dict[str, Pool]) -> None:
    pool = pools["stable"]
    server = pool.alive()
    cap = pool.output_cap
    chat = [{"role": "user", "content": PROMPT}]
    capped: dict[str, tuple[str, dict[str, Any]]] = {  # each must stop at exactly the cap, finish_reason "length"
        "completions, max_tokens = cap + 100": ("/v1/completions", {"prompt": PROMPT, "max_tokens": cap + 100}),
        "chat, max_tokens = cap + 100": ("/v1/chat/completions", {"messages": chat, "max_tokens": cap + 100}),
        "chat, no max_tokens": ("/v1/chat/completions", {"messages": chat}),
    }
    requests = {**capped, "completions, no max_tokens": ("/v1/completions", {"prompt": PROMPT})}
    started = time.monotonic()
    with ThreadPoolExecutor(len(requests)) as ex:  # one batch: the cap is paid once, not once per request
        futures = {
            what: ex.submit(
                post, server, path, {"model": pool.public_name, "ignore_eos": True, "temperature": 0, **body}
            )
            for what, (path, body) in requests.items()
        }
        results = {what: f.result() for what, f in futures.items()}
    h.TIMINGS[f"traffic: {len(requests)} concurrent requests, {len(capped)} of them to the {cap}-token cap"] = (
        time.monotonic() - started
    )
    got = {
        what: (
            status,
            body["usage"]["completion_tokens"] if status == 200 else body,
            body["choices"][0]["finish_reason"] if status == 200 else None,
        )
        for what, (status, body) in results.items()
    }
    assert got == {
        **{what: (200, cap, "length") for what in capped},
        "completions, no max_tokens": (200, COMPLETIONS_DEFAULT_MAX_TOKENS, "length"),
    }
    assert json.loads(pool.flag("--override-generation-config")) == {"max_new_tokens": cap}  # the flag that did it


# ---- d. more sequences than --max-num-seqs ---------------------------------------------------------------------
def test_over_capacity_requests_queue_and_all_complete_while_readiness_passes(pools: dict[str, Pool]) -> None:
    pool = pools["stable"]
    server = pool.alive()
    max_num_seqs = int(pool.flag("--max-num-seqs"))
    n = max_num_seqs + OVER_CAPACITY
    samples: list[tuple[float, float]] = []  # (waiting, running)
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            text = metrics(server)
            samples.append(
                (h.metric_sum(text, "vllm:num_requests_waiting"), h.metric_sum(text, "vllm:num_requests_running"))
            )
            time.sleep(POLL_S)

    def one(i: int) -> tuple[int, Any]:
        return post(
            server,
            "/v1/completions",
            {
                "model": pool.public_name,
                "prompt": f"{i} {PROMPT}",
                "max_tokens": BUSY_MAX_TOKENS,
                "ignore_eos": True,
                "temperature": 0,
            },
        )

    # The burst must reach the scheduler at once. On a loaded 2-core machine n HTTP requests can take longer to
    # arrive than the first ones take to finish, and then no queue ever forms; so the engine is held (SIGSTOP)
    # until the API server has accepted all n (GET /load), then released: the scheduler sees n requests together.
    engine = h.engine_core_pid(server)
    poller = threading.Thread(target=poll, daemon=True)
    started = time.monotonic()
    os.kill(engine, signal.SIGSTOP)
    held = True
    try:
        with ThreadPoolExecutor(n) as ex:
            futures = [ex.submit(one, i) for i in range(n)]
            deadline = time.monotonic() + GATE_TIMEOUT_S
            while server_load(server) < n:
                assert time.monotonic() < deadline, f"only {server_load(server)} of {n} requests arrived"
                time.sleep(POLL_S)
            h.TIMINGS[f"traffic: {n} requests accepted by the API server"] = time.monotonic() - started
            poller.start()
            os.kill(engine, signal.SIGCONT)
            held = False
            deadline = time.monotonic() + GATE_TIMEOUT_S
            while not (samples and samples[-1][0] > 0) and time.monotonic() < deadline:
                time.sleep(POLL_S)
            assert samples and samples[-1][0] > 0, f"no queue seen in /metrics: {samples[-5:]}"
            # The rendered readiness probe while requests queue: a fresh process, as the kubelet runs it.
            probe_started = time.monotonic()
            result = h.run_probe_command(pool.probe("readinessProbe"))
            probe_seconds = time.monotonic() - probe_started
            still_waiting = h.metric_sum(metrics(server), "vllm:num_requests_waiting")
            results = [f.result() for f in futures]
    finally:
        if held:
            os.kill(engine, signal.SIGCONT)
        stop.set()
        if poller.is_alive():
            poller.join()
    h.TIMINGS[f"traffic: {n} concurrent requests x {BUSY_MAX_TOKENS} tokens (max-num-seqs {max_num_seqs})"] = (
        time.monotonic() - started
    )
    h.NOTES["traffic: readiness probe against the saturated server"] = (
        f"{probe_seconds:.2f} s (deadline {pool.probes.readiness_deadline_seconds} s): {result.stdout.strip()}"
    )

    line = one_line(result)
    assert result.returncode == 0 and line.startswith("ok: /health 200"), line
    assert still_waiting > 0, "the probe ran while requests were queued"
    # The engine ran exactly the rendered --max-num-seqs at once and queued the rest.
    assert (max(r for _, r in samples), max(w for w, _ in samples)) == (max_num_seqs, n - max_num_seqs)
    assert [s for s, _ in results] == [200] * n
    assert {b["usage"]["completion_tokens"] for _, b in results} == {BUSY_MAX_TOKENS}


# ---- f. liveness catches a hung engine -------------------------------------------------------------------------
def test_liveness_fails_for_a_hung_engine_that_health_still_calls_healthy(
    pools: dict[str, Pool], tmp_path: Path
) -> None:
    pool = pools["stable"]
    server = pool.alive()
    rendered_stall = float(h.flag_value(pool.container["livenessProbe"]["exec"]["command"], "--stall-seconds"))
    assert rendered_stall == pool.probes.liveness_stall_seconds
    # The rendered window (60 s) shortened to SHORT_STALL_S, with a fresh state file; nothing else changes.
    cmd = h.with_flag(
        pool.probe("livenessProbe", state_file=tmp_path / "liveness-state.json"),
        "--stall-seconds",
        f"{SHORT_STALL_S:g}",
    )
    engine = h.engine_core_pid(server)
    answer: dict[str, Any] = {}

    def hung_request() -> None:
        answer["result"] = post(
            server,
            "/v1/completions",
            {"model": pool.public_name, "prompt": PROMPT, "max_tokens": HUNG_REQUEST_TOKENS, "ignore_eos": True},
        )

    os.kill(engine, signal.SIGSTOP)  # the engine makes no progress; the API server is untouched
    try:
        client = threading.Thread(target=hung_request, daemon=True)
        client.start()
        deadline = time.monotonic() + 10  # the API server counts it within milliseconds
        while server_load(server) < 1:
            assert time.monotonic() < deadline, "the request never showed up in /load"
            time.sleep(0.05)

        first = h.run_probe_command(cmd)
        assert first.returncode == 0 and one_line(first).startswith("ok: engine alive (1 request(s) in flight"), (
            first.stdout
        )
        time.sleep(SHORT_STALL_S + 0.5)
        second = h.run_probe_command(cmd)
        line = one_line(second)
        assert second.returncode == 1, line
        assert line.startswith(
            "fail: progress check failed: engine hung: 1 request(s) in flight and no token processed for "
        ), line
        # vLLM's /health only reports an engine it has seen die (vllm/entrypoints/serve/instrumentator/health.py
        # -> AsyncLLM.check_health in vllm/v1/engine/async_llm.py checks the `errored` flag): a stopped engine
        # still answers 200, so /health alone cannot tell a hung engine.
        assert h.http_get(f"{server.base_url}/health")[0] == 200
        assert client.is_alive(), "the request hangs while the engine is stopped"
    finally:
        os.kill(engine, signal.SIGCONT)
    client.join(REQUEST_TIMEOUT_S)
    status, body = answer["result"]
    assert status == 200 and body["usage"]["completion_tokens"] == HUNG_REQUEST_TOKENS, body
    third = h.run_probe_command(cmd)
    assert third.returncode == 0 and one_line(third).startswith("ok: engine alive"), third.stdout


# ---- c. SIGTERM drains in-flight streams (last: it stops the canary's server) ----------------------------------
def test_sigterm_drains_the_stream_refuses_new_requests_and_exits_within_the_grace_period(
    pools: dict[str, Pool],
) -> None:
    """What vLLM 0.32 does on SIGTERM to its API-server process (the container's PID 1):

    * vllm/entrypoints/launchers/launcher.py (``serve_http``): the SIGTERM handler sets ``shutdown_event``;
      ``handle_shutdown`` then calls ``engine_client.shutdown(timeout=vllm_config.shutdown_timeout)`` ("mode=drain"
      when the timeout is > 0, "abort" for 0) and only afterwards stops the HTTP server -- it keeps listening
      during the drain.
    * vllm/v1/engine/async_llm.py (``AsyncLLM.shutdown``): shuts the renderer (tokenisation) down first, then the
      engine core; a new request therefore fails while being rendered: HTTP 500 "cannot schedule new futures
      after shutdown" -- not 503, and not a refused connection.
    * vllm/v1/engine/utils.py (``CoreEngineProcManager.shutdown``) -> vllm/v1/utils.py (``shutdown``): SIGTERM to
      the EngineCore process, then ``join`` for up to the timeout, then kill.
    * vllm/v1/engine/core.py (``run_engine_core`` signal handler, ``_handle_shutdown``): with a timeout > 0 the
      engine logs "draining in-flight requests count=N timeout=Ts", keeps stepping until nothing is left
      (``_reject_add_in_shutdown`` aborts anything new that still reaches it), then tears down; with 0 it aborts
      every in-flight request at once.

    Seen here with ``--shutdown-timeout 0`` (vLLM's default) instead: the process manager gets a 0 s budget and
    kills the EngineCore at once, and the stream is cut in one of two ways, depending on whether the engine's
    abort output reaches the API server before the kill: it ends at once after the tokens so far with
    ``finish_reason: "abort"`` and ``[DONE]``; or it receives nothing more and stays open, uvicorn's shutdown waits
    for it, and the process does not exit by itself (the kubelet would SIGKILL it at the end of the grace period).
    """
    pool = pools["canary"]
    server = pool.alive()
    proc = h.server_process(server)
    cap = pool.output_cap
    shutdown_timeout = int(pool.flag("--shutdown-timeout"))
    # The kubelet's clock: preStop (sleep) starts the grace period, SIGTERM follows when it ends, SIGKILL at the
    # end of terminationGracePeriodSeconds. So from SIGTERM the server has grace - preStop seconds.
    kill_after = pool.termination_grace_seconds - pool.pre_stop_seconds
    assert kill_after > shutdown_timeout, "the plan leaves room for the drain (policy-checked; restated here)"

    body = {
        "model": pool.public_name,
        "prompt": PROMPT,
        "max_tokens": cap + 100,
        "ignore_eos": True,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=STREAM_STALL_S)
    conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    during: dict[str, Any] = {}

    def during_the_drain() -> None:
        """Once the engine has begun shutting down: a new client request, then /load and /health. From this thread,
        so that the timing never depends on thread scheduling on a loaded machine; the stream's tokens wait in
        the server meanwhile. A refused connection and an HTTP error both count as refused."""
        deadline = time.monotonic() + STREAM_STALL_S
        while "[shutdown] EngineCore: start mode=" not in server.log_path.read_text(errors="replace"):
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert sigterm_at is not None  # called right after SIGTERM is sent
        during["sent_after_s"] = time.monotonic() - sigterm_at
        try:
            status, answer = post(
                server, "/v1/completions", {"model": pool.public_name, "prompt": PROMPT, "max_tokens": 4}, timeout=30
            )
            during["outcome"], during["status"] = f"HTTP {status}: {str(answer)[:160]}", status
        except (ConnectionRefusedError, urllib.error.URLError) as e:
            during["outcome"], during["status"] = f"connection refused ({e})", None
        # The engine logs this once the last in-flight request has finished (vllm/v1/engine/core.py).
        during["engine_still_draining"] = DRAIN_DONE_LOG not in server.log_path.read_text(errors="replace")
        for path in ("/load", "/health"):
            try:
                during[path] = h.http_get(f"{server.base_url}{path}", timeout=5)
            except OSError as e:
                during[path] = (None, type(e).__name__)

    tokens, finish, done_at, sigterm_at, ended = 0, None, None, None, "closed without [DONE]"
    tokens_at_sigterm = None
    try:
        while True:
            try:
                raw = resp.readline()
            except TimeoutError:
                ended = f"no byte for {STREAM_STALL_S:g} s"
                break
            if not raw:
                break  # the stream ended without [DONE]: cut
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[len(b"data:") :].strip()
            if data == b"[DONE]":
                done_at = time.monotonic()
                break
            event = json.loads(data)
            tokens = (event.get("usage") or {}).get("completion_tokens", tokens)
            for choice in event.get("choices", []):
                finish = choice.get("finish_reason") or finish
            if sigterm_at is None and tokens >= 1:  # the first tokens have arrived
                os.kill(server.pid, signal.SIGTERM)  # the main process only, as the kubelet signals PID 1
                sigterm_at = time.monotonic()
                tokens_at_sigterm = tokens
                during_the_drain()
    finally:
        conn.close()
    assert sigterm_at is not None, f"the stream ended after {tokens} tokens, before SIGTERM was sent"
    h.TIMINGS["traffic: SIGTERM -> drained stream's [DONE]"] = (done_at or time.monotonic()) - sigterm_at
    h.NOTES["traffic: new request during the drain"] = (
        f"{during['outcome']} (sent {during['sent_after_s']:.2f} s after SIGTERM; then /load {during['/load'][1]}, "
        f"/health {during['/health'][0]}; SIGTERM came after {tokens_at_sigterm} of {cap} tokens)"
    )

    # The stream completed: every token up to the cap, then [DONE], within the rendered --shutdown-timeout.
    assert done_at is not None, f"the stream was cut after {tokens} tokens ({ended})"
    assert (tokens, finish) == (cap, "length")
    assert done_at - sigterm_at <= shutdown_timeout
    log = server.log_path.read_text(errors="replace")
    assert f"draining in-flight requests count=1 timeout={shutdown_timeout}s" in log, "vLLM took the drain path"
    # A new request during the drain is refused (no completion); the engine was still draining the stream then.
    assert during["status"] in (None, 500, 503), during["outcome"]
    assert during["engine_still_draining"], "the new request came after the drain had finished"
    # The process exits by itself before the kubelet would SIGKILL it.
    try:
        exit_status = proc.wait(timeout=max(1.0, kill_after - (time.monotonic() - sigterm_at)))
    except subprocess.TimeoutExpired:
        exit_status = None
    exited_after = time.monotonic() - sigterm_at
    h.TIMINGS["traffic: SIGTERM -> server process exit"] = exited_after
    assert exit_status == 0, f"exit status {exit_status} after {exited_after:.1f} s"
    assert exited_after < kill_after
