"""The co-host server (components/cohost/server.py) on the real vLLM 0.32 (CPU), started from the shipped
``dev-cohost-gke`` group's rendered Deployment: its command, and its ``--config-json`` document adapted to this
machine where it must be, runs two tiny models of different shapes in one server on one port.

The CPU adaptation of the document, and why (every other field is the planner's, unchanged):

* **Engine command.** ``vllm serve`` -> the vLLM environment's ``scripts/vllm_cli.py serve`` (the CPU build's
  wrapper, vllm_harness ``launch_vllm_server``); the server itself runs under that environment's python, which has
  aiohttp and prometheus_client as the serving image does.
* **Each instance's arguments** -> ``vllm_harness.cpu_adapted`` of them (the local mirror of its ``--model``, TP 1,
  no quantization, ``--enforce-eager``, a free loopback port): its documented changes, after taking out the
  rendered loopback ``--host``, which ``cpu_adapted`` puts back itself. The typed ``port`` follows ``--port``.
* **Each instance's ``env``** gains ``VLLM_CPU_KVCACHE_SPACE`` = partition x ``VIRTUAL_GPU_GIB``: vLLM's CPU backend
  ignores ``--gpu-memory-utilization`` and takes its KV space from it (tests/integration/test_cohosting_real.py).
* **Each instance's ``verify``** -> the same verifier (components/serving/verify_release.py) in ``dir`` mode on the
  local mirror (regular-file copies of the tiny model: the verifier refuses symbolic links), expecting the rendered
  revision: there is no Cloud Storage bucket of the release here, only its mirror with a manifest written by the
  verifier's own builder.
* **``--watch``** keeps the rendered object name, in a loopback Cloud Storage (gcp-storage-emulator) holding the
  rendered bucket; the server reads it through ``STORAGE_EMULATOR_HOST`` as the verifier does. ``--poll-seconds`` 2
  instead of 30, so an update is seen in seconds.
* **``start_timeout_seconds``** -> ``vllm_harness.SERVER_START_TIMEOUT_S``: a CPU vLLM starts in ~60 s on 2 cores,
  the H100 estimate's 163 s is not this machine's.

What is asserted (the issue's integration acceptance): both models answer only their own names through the one port,
a stream arrives piece by piece, the instances start one after the other, ``/metrics`` labels each instance, killing
one child turns ``/health`` unhealthy and the child is restarted, ``update_models`` with one model unchanged keeps
that child's PID, the planner's per-model KV capacity matches each engine's report within one block, and SIGTERM
drains an in-flight stream before the server exits 0.
"""

from __future__ import annotations

import copy
import http.client
import json
import math
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from infra.offline.planrun import run_plan
from infra.planning import capacity
from infra.planning import cohosting as ch
from infra.targets.gke.planning import GkeCoHostedGroupPlan

from ..gcs_emulator import running_emulator
from . import vllm_harness as h

pytestmark = pytest.mark.integration

STACK = "dev-cohost-gke"
SERVER = h.REPO / "components" / "cohost" / "server.py"
#: The CPU stand-in for one GPU, GiB: 0.4 of it is a whole 2 GiB of KV space (VLLM_CPU_KVCACHE_SPACE is whole GiB).
VIRTUAL_GPU_GIB = 5
#: (layers, KV heads) of the tiny model standing in for each co-hosted model, in the group's order.
SHAPES = ((2, 2), (3, 1))
#: Poll period of the watched model set here (the stack's 30 s would only slow the test down).
POLL_SECONDS = 2
LOG_LINE = re.compile(
    r"\[(?P<instance>[a-z0-9-]+)\] .*CPU KV cache size: (?P<tokens>[\d,]+) tokens, Maximum concurrency for "
    r"(?P<len>[\d,]+) tokens per request: (?P<concurrency>[\d.]+)x"
)
#: Longest wait for a state of the whole server: two CPU engines starting one after the other.
WAIT_S = 2 * h.SERVER_START_TIMEOUT_S
REQUEST_TIMEOUT_S = 120.0
#: Tokens of the stream in flight when the server gets SIGTERM (test_sigterm_drains_an_in_flight_stream_then_exits_0).
DRAIN_TOKENS = 300


@dataclass
class CoHost:
    proc: subprocess.Popen[bytes]
    port: int
    log: Path
    document: dict[str, Any]
    group: GkeCoHostedGroupPlan
    model_dirs: dict[str, Path]
    bucket: str
    object_name: str
    gcs: Any

    def get(self, path: str, timeout: float = 30) -> tuple[int, Any]:
        return h.http_get(f"http://127.0.0.1:{self.port}{path}", timeout=timeout)

    def status(self) -> dict[str, Any]:
        code, body = self.get("/cohost/status")
        assert code == 200, body
        doc: dict[str, Any] = json.loads(body)
        return doc

    def pids(self) -> dict[str, int | None]:
        return {i["name"]: i["pid"] for i in self.status()["instances"]}

    def states(self) -> dict[str, str]:
        return {i["name"]: i["state"] for i in self.status()["instances"]}

    def healthy(self) -> bool:
        return self.get("/health")[0] == 200

    def wait(self, what: str, cond: Any, timeout: float = WAIT_S) -> float:
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"server exited {self.proc.returncode} waiting for {what}:\n{h.log_tail(self.log)}"
                )
            try:
                if cond():
                    return time.monotonic() - start
            except (OSError, http.client.HTTPException, ValueError):
                pass
            time.sleep(1)
        raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}:\n{h.log_tail(self.log)}")


def rendered() -> tuple[GkeCoHostedGroupPlan, list[str], dict[str, Any]]:
    """The group's plan, the rendered container's command + arguments, and its configuration document."""
    run = run_plan(STACK)
    group = run.resolved.plan.cohosting["pair"]
    assert isinstance(group, GkeCoHostedGroupPlan)
    (dep,) = [
        r["inputs"]
        for r in run.inventory.to_dict()["resources"]
        if r["type"] == "kubernetes:apps/v1:Deployment" and r["inputs"]["metadata"]["name"] == "vllm-pair"
    ]
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    argv = [*c["command"], *c["args"]]
    return group, argv, json.loads(argv[argv.index("--config-json") + 1])


def tiny_model(out: Path, layers: int, kv_heads: int) -> Path:
    proc = subprocess.run(
        [
            str(h.VLLM_PYTHON),
            str(h.SCRIPTS / "make_tiny_model.py"),
            str(out),
            "--layers",
            str(layers),
            "--kv-heads",
            str(kv_heads),
        ],
        capture_output=True,
        text=True,
        timeout=h.MODEL_BUILD_TIMEOUT_S,
        env={**os.environ, **h.SERVER_ENV},
        cwd=h.REPO,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    return out


def adapt_instance(inst: dict[str, Any], base: Path, tiny: Path, revision: str, tokenizer_revision: str) -> Path:
    """The CPU adaptation of one instance entry (module docstring), in place; returns its local model folder."""
    args = list(inst["args"])
    at = args.index("--host")
    assert args[at + 1] == "127.0.0.1"  # rendered loopback: only the server's port is reachable
    del args[at : at + 2]
    rendered_root = h.flag_value(args, "--model")
    mirror = h.mirror_release(tiny, base, rendered_root, revision, tokenizer_revision)
    # The verifier refuses symbolic links (a release copy, like the objects of gs://, is regular files): copies of
    # the same bytes, so the manifest mirror_release wrote still holds.
    for link in sorted(p for p in mirror.iterdir() if p.is_symlink()):
        source = link.resolve()
        link.unlink()
        shutil.copyfile(source, link)
    port = h.free_loopback_port()
    inst["args"] = h.cpu_adapted(args, Path(h.local_model_root(rendered_root, base)), port)
    inst["port"] = port
    inst["tensor_parallel_size"] = 1
    space = inst["partition"] * VIRTUAL_GPU_GIB
    assert space == int(space), f"partition {inst['partition']} x {VIRTUAL_GPU_GIB} GiB is not a whole GiB"
    inst["env"] = {**h.SERVER_ENV, **inst["env"], "VLLM_CPU_KVCACHE_SPACE": str(int(space))}
    verify = inst["verify"]
    assert verify[1].endswith("/verify_release.py") and verify[2] == "gcs"
    inst["verify"] = [
        str(h.VLLM_PYTHON),
        str(h.REPO / "components" / "serving" / "verify_release.py"),
        "dir",
        "--path",
        str(mirror),
        "--expect-revision",
        h.flag_value(verify, "--expect-revision"),
    ]
    return mirror


def put_document(c: CoHost, doc: dict[str, Any]) -> None:
    c.gcs.client(c.gcs.emulator_url).bucket(c.bucket).blob(c.object_name).upload_from_string(json.dumps(doc))


@pytest.fixture(scope="module")
def cohost(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CoHost]:
    h.require_vllm()
    group, argv, doc = rendered()
    work = tmp_path_factory.mktemp("cohost-server")
    watch = argv[argv.index("--watch") + 1]
    bucket, object_name = watch[len("gs://") :].split("/", 1)
    model_dirs: dict[str, Path] = {}
    for inst, m, (layers, kv_heads) in zip(doc["instances"], group.models, SHAPES, strict=True):
        tiny = tiny_model(work / f"tiny-{m.model_name}", layers, kv_heads)
        adapt_instance(inst, work / m.model_name, tiny, m.release.model_revision, m.release.tokenizer_revision)
        model_dirs[inst["name"]] = tiny
    doc["engine_command"] = [str(h.VLLM_PYTHON), str(h.SCRIPTS / "vllm_cli.py"), "serve"]
    doc["start_timeout_seconds"] = h.SERVER_START_TIMEOUT_S
    port = h.free_loopback_port()
    doc["port"] = port
    log = work / "server.log"
    with running_emulator(bucket) as gcs:
        env = {**gcs.env(gcs.emulator_url), **h.SERVER_ENV}
        cmd = [
            str(h.VLLM_PYTHON),
            str(SERVER),
            "--config-json",
            json.dumps(doc),
            "--watch",
            watch,
            "--poll-seconds",
            str(POLL_SECONDS),
            "--host",
            "127.0.0.1",
        ]
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=h.REPO, start_new_session=True
            )
        c = CoHost(proc, port, log, doc, group, model_dirs, bucket, object_name, gcs)
        try:
            h.TIMINGS["cohost server: both instances up (staggered)"] = c.wait("both healthy", c.healthy)
            yield c
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def chat(c: CoHost, model: str, max_tokens: int = 4) -> tuple[int, Any]:
    return h.http_post_json(
        f"http://127.0.0.1:{c.port}/v1/chat/completions",
        {"model": model, "messages": [{"role": "user", "content": "hello"}], "max_tokens": max_tokens},
        timeout=REQUEST_TIMEOUT_S,
    )


def stream(c: CoHost, model: str, tokens: int) -> Iterator[tuple[float, bytes]]:
    conn = http.client.HTTPConnection("127.0.0.1", c.port, timeout=REQUEST_TIMEOUT_S)
    # include_usage: the stream ends with a usage event counting the tokens generated (vLLM merges the deltas of
    # several tokens into one event when the client reads slower than the engine generates, so events != tokens).
    body = {
        "model": model,
        "prompt": "hi",
        "max_tokens": tokens,
        "stream": True,
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
    }
    conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    assert r.status == 200, r.read()
    try:
        while True:
            piece = r.read1(65536)
            if not piece:
                return
            yield time.monotonic(), piece
    finally:
        conn.close()


def completion_tokens(text: bytes) -> int:
    """The ``completion_tokens`` of a finished stream's usage event (the last before ``[DONE]``)."""
    events = [json.loads(e[len(b"data: ") :]) for e in text.split(b"\n\n") if e.startswith(b"data: {")]
    usage = events[-1]["usage"]
    assert events[-1]["choices"] == [] and usage is not None, events[-1]
    return int(usage["completion_tokens"])


def test_each_model_answers_only_its_names_through_the_one_port(cohost: CoHost) -> None:
    code, body = cohost.get("/v1/models")
    assert code == 200
    names = [m["id"] for m in json.loads(body)["data"]]
    expected = [n for m in cohost.group.models for n in (m.release.release, m.model_name)]
    assert names == expected
    for m in cohost.group.models:
        for name in (m.model_name, m.release.release):
            code, answer = chat(cohost, name)
            assert code == 200, answer
            assert answer["model"] == m.release.release  # the release that answered, whatever name was sent
    code, answer = chat(cohost, "qwen3-8b")  # the stack's other model is not this pod's
    assert code == 404
    answer = json.loads(answer)  # an error body comes back as text (vllm_harness.http_post_json)
    assert answer["error"]["message"] == f"The model `qwen3-8b` does not exist. Served here: {', '.join(expected)}."


def test_instances_started_one_after_the_other(cohost: CoHost) -> None:
    log = cohost.log.read_text(errors="replace")
    first, second = (i["name"] for i in cohost.document["instances"])
    assert log.index(f"cohost: {first}: healthy") < log.index(f"cohost: {second}: started pid")
    assert log.index(f"cohost: {second}: started pid") < log.index(f"cohost: {second}: healthy")


#: Tokens of the streaming test: the tiny model generates ~3 ms per token on the CPU, so 64 tokens (0.19 s, seen in
#: one piece on loaded cores) can arrive before the client reads once; 512 spread the stream over a second or more.
STREAM_TOKENS = 512


def test_a_stream_arrives_piece_by_piece(cohost: CoHost) -> None:
    model = cohost.group.models[1].model_name
    t0 = time.monotonic()
    pieces = list(stream(cohost, model, STREAM_TOKENS))
    text = b"".join(p for _, p in pieces)
    assert completion_tokens(text) == STREAM_TOKENS and text.endswith(b"data: [DONE]\n\n")
    assert text.count(b'"finish_reason":"length"') == 1
    first, last = pieces[0][0] - t0, pieces[-1][0] - t0
    # Relayed as generated: many pieces, spread over the generation (a buffering relay delivers them at once). Not
    # "first < last / 2": on loaded shared cores the prompt's prefill alone can take most of the time.
    assert len(pieces) > 8 and last - first > 0.2 * last, (len(pieces), first, last)
    h.NOTES[f"cohost: stream of {STREAM_TOKENS} tokens through the server"] = (
        f"{len(pieces)} pieces, first {first:.2f} s, last {last:.2f} s"
    )


def test_metrics_label_every_instance(cohost: CoHost) -> None:
    code, text = cohost.get("/metrics")
    assert code == 200
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    by_instance = {s.labels["cohost_instance"]: s.labels for s in fams["vllm:num_requests_running"].samples}
    assert sorted(by_instance) == sorted(i["name"] for i in cohost.document["instances"])
    for inst in cohost.document["instances"]:
        assert by_instance[inst["name"]]["model_name"] == inst["release"]
        assert by_instance[inst["name"]]["cohost_model"] == inst["model_names"][-1]
    assert {s.labels["cohost_instance"]: s.value for s in fams["cohost:instance_up"].samples} == {
        i["name"]: 1.0 for i in cohost.document["instances"]
    }
    assert len(fams["cohost:num_requests_waiting"].samples) == 1


def engine_kv(cohost: CoHost, instance: str) -> dict[str, Any]:
    found = [m for m in LOG_LINE.finditer(cohost.log.read_text(errors="replace")) if m.group("instance") == instance]
    assert found, f"no KV-capacity line of {instance} in {cohost.log}"
    m = found[-1]
    code, text = cohost.get("/metrics")
    assert code == 200
    (info,) = [
        s
        for f in text_string_to_metric_families(text)
        if f.name == "vllm:cache_config_info"
        for s in f.samples
        if s.labels.get("cohost_instance") == instance
    ]
    return {
        "len": int(m.group("len").replace(",", "")),
        "concurrency": float(m.group("concurrency")),
        "block_size": int(info.labels["block_size"]),
        "num_blocks": int(info.labels["num_gpu_blocks"]),
        "budget_bytes": int(info.labels["kv_cache_memory_bytes"]),
    }


def test_planner_kv_capacity_matches_each_engines_report_within_one_block(cohost: CoHost) -> None:
    # The tiny models' own geometry (config.json), weights 0 (host memory, outside the KV space), the group's
    # partitions on the 5 GiB stand-in GPU: 2 GiB of KV each.
    inputs = []
    for m, inst in zip(cohost.group.models, cohost.document["instances"], strict=True):
        cfg = json.loads((cohost.model_dirs[inst["name"]] / "config.json").read_text())
        geo = capacity.Geometry(0, cfg["num_hidden_layers"], cfg["num_key_value_heads"], cfg["head_dim"], 2.0, 2.0)
        inputs.append(
            ch.ModelInputs(
                m.release.release, m.model_name, geo, 1, m.placement.max_model_len, m.placement.partition, 1, 1, 0.0
            )
        )
    layout = ch.plan_layout(inputs, 1, VIRTUAL_GPU_GIB, cohost.group.layout.transient_reserve, 800)
    # By hand: KV per token 2 x 2 x 2 x 64 x 2 = 1,024 B and 2 x 3 x 1 x 64 x 2 = 768 B; 2 GiB each; a 4096-token
    # sequence takes 4 MiB and 3 MiB: 512 and 682 sequences at max_model_len.
    for placed, inst, (k, seqs) in zip(
        layout.models, cohost.document["instances"], ((1024, 512), (768, 682)), strict=True
    ):
        e = engine_kv(cohost, inst["name"])
        assert e["budget_bytes"] == 2 * capacity.GIB
        assert placed.kv_bytes_per_token_per_gpu == k and e["len"] == placed.max_model_len == 4096
        assert placed.max_seqs_at_max_model_len == seqs == math.floor(e["concurrency"])
        assert abs(placed.kv_tokens_per_instance - e["num_blocks"] * e["block_size"]) < e["block_size"], (placed, e)


def test_a_killed_child_turns_health_unhealthy_and_is_restarted(cohost: CoHost) -> None:
    first = cohost.document["instances"][0]["name"]
    before = cohost.pids()
    os.kill(before[first] or 0, signal.SIGKILL)
    cohost.wait("unhealthy", lambda: not cohost.healthy(), timeout=30)
    took = cohost.wait("healthy again", lambda: cohost.healthy() and cohost.pids()[first] not in (None, before[first]))
    h.TIMINGS["cohost server: killed instance back (restart + CPU start)"] = took
    after = cohost.pids()
    assert after[first] != before[first]
    others = [n for n in before if n != first]
    assert all(after[n] == before[n] for n in others)  # the other model was never interrupted
    assert {i["name"]: i["restarts"] for i in cohost.status()["instances"]}[first] == 1
    code, _ = chat(cohost, cohost.group.models[0].model_name)
    assert code == 200


def test_update_models_keeps_the_unchanged_instance(cohost: CoHost) -> None:
    before = cohost.pids()
    first, second = (i["name"] for i in cohost.document["instances"])
    new = copy.deepcopy(cohost.document)
    # The second model at 0.2 instead of 0.4: a changed instance, restarted with 1 GiB of KV space.
    inst = new["instances"][1]
    inst["partition"] = 0.2
    args = inst["args"]
    args[args.index("--gpu-memory-utilization") + 1] = "0.2"
    inst["env"]["VLLM_CPU_KVCACHE_SPACE"] = "1"
    put_document(cohost, new)
    took = cohost.wait(
        "the second instance replaced",
        lambda: cohost.pids()[second] not in (None, before[second]) and cohost.states()[second] == "healthy",
    )
    h.TIMINGS["cohost server: update_models (one instance replaced)"] = took
    after = cohost.pids()
    assert after[first] == before[first]  # unchanged release, TP, partition and arguments: the same process
    assert cohost.status()["generation"] is not None
    code, _ = chat(cohost, cohost.group.models[1].model_name)
    assert code == 200
    e = engine_kv(cohost, second)
    assert e["budget_bytes"] == 1 * capacity.GIB  # the new partition's KV space


def test_sigterm_drains_an_in_flight_stream_then_exits_0(cohost: CoHost) -> None:
    model = cohost.group.models[0].model_name
    # 300 tokens: seconds to tens of seconds on 2 shared cores, well inside the instances' --shutdown-timeout (the
    # stream bound, 84 s), at which vLLM would abort what still runs.
    assert h.flag_value(cohost.document["instances"][0]["args"], "--shutdown-timeout") == "84"
    pieces = stream(cohost, model, DRAIN_TOKENS)
    first = next(pieces)
    cohost.proc.send_signal(signal.SIGTERM)
    rest = b"".join(p for _, p in pieces)
    text = first[1] + rest
    assert text.endswith(b"data: [DONE]\n\n"), text[-300:]
    assert completion_tokens(text) == DRAIN_TOKENS and text.count(b'"finish_reason":"length"') == 1
    assert cohost.proc.wait(timeout=WAIT_S) == 0
    assert "cohost: draining 2 instance(s)" in cohost.log.read_text(errors="replace")
