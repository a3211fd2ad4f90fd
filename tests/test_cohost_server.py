"""The co-host server (components/cohost/server.py): its configuration format, its metrics merge, and the whole server
as a process running fake engines (tests/fake_engine.py stands in for ``vllm serve``: same flags, same start-up
order, same drain), with ``update_models`` against a real Cloud Storage JSON API (gcp-storage-emulator,
tests/gcs_emulator.py). The same server on the real CPU vLLM: tests/integration/test_cohost_server_real.py."""

from __future__ import annotations

import copy
import http.client
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from components.cohost import server as srv

from .gcs_emulator import Gcs, free_port, running_emulator

REPO = Path(__file__).resolve().parents[1]
SERVER = REPO / "components" / "cohost" / "server.py"
FAKE = REPO / "tests" / "fake_engine.py"
#: Longest wait for the server (and its fake engines) to reach a state; each fake start takes ~0.5 s.
WAIT_S = 30.0


def instance(
    name: str, names: list[str], port: int, partition: float = 0.4, gpus: list[int] | None = None
) -> dict[str, Any]:
    gpus = gpus if gpus is not None else [0]
    return {
        "name": name,
        "release": names[0],
        "model_names": names,
        "gpus": gpus,
        "tensor_parallel_size": len(gpus),
        "partition": partition,
        "port": port,
        "args": [
            "--model",
            f"/models/{names[0]}",
            "--served-model-name",
            *names,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--tensor-parallel-size",
            str(len(gpus)),
            "--gpu-memory-utilization",
            f"{partition:g}",
            "--shutdown-timeout",
            "5",
        ],
        "env": {},
    }


def document(*instances: dict[str, Any], port: int = 8000, gpus: int = 1, **top: Any) -> dict[str, Any]:
    return {
        "format": srv.CONFIG_FORMAT,
        "format_version": 1,
        "port": port,
        "gpus": gpus,
        "transient_reserve": 0.1,
        "engine_command": [sys.executable, str(FAKE)],
        "start_timeout_seconds": 20,
        "drain_seconds": 10,
        "health_interval_seconds": 0.2,
        "restart": {"max_restarts": 2, "window_seconds": 60, "backoff_seconds": 0.1, "max_backoff_seconds": 0.5},
        "instances": list(instances),
        **top,
    }


# ---- the configuration format ----------------------------------------------------------------------------------


def test_a_valid_document_parses_and_renders_back_to_the_same_configuration() -> None:
    doc = document(instance("a-0", ["rel-a", "a"], 8100), instance("b-0", ["rel-b", "b"], 8101))
    cfg = srv.parse_config(doc)
    assert [i.name for i in cfg.instances] == ["a-0", "b-0"]
    assert cfg.instances[1].public_name == "b" and cfg.instances[1].gpus == (0,)
    assert cfg.served_names() == ["rel-a", "a", "rel-b", "b"]
    assert srv.parse_config(json.loads(srv.render_config(cfg))) == cfg


def problems(doc: Any) -> list[tuple[str, str]]:
    with pytest.raises(srv.ConfigError) as e:
        srv.parse_config(doc)
    return e.value.problems


def test_every_problem_is_reported_with_its_key_path() -> None:
    a = instance("a-0", ["rel-a", "a"], 8100)
    b = instance("B_0", ["rel-b", "b"], 8100)
    b["partition"] = 1.5
    b["env"] = {"CUDA_VISIBLE_DEVICES": "3"}
    doc = document(a, b, gpus=1, extra=1)
    doc["instances"].append({"name": "c"})
    found = problems(doc)
    keys = [k for k, _ in found]
    assert "extra" in keys  # unknown top-level key
    assert "instances[1].name" in keys  # not a DNS label
    assert "instances[1].partition" in keys
    assert "instances[1].env.CUDA_VISIBLE_DEVICES" in keys
    assert "instances[2].release" in keys and "instances[2].args" in keys  # required keys of the third
    assert len(found) >= 6


def test_the_engine_arguments_must_say_what_the_fields_say() -> None:
    a = instance("a-0", ["rel-a", "a"], 8100)
    a["args"][a["args"].index("--port") + 1] = "8199"
    a["args"][a["args"].index("--host") + 1] = "0.0.0.0"
    a["args"][a["args"].index("--gpu-memory-utilization") + 1] = "0.5"
    a["args"][a["args"].index("--served-model-name") + 2] = "other"
    msgs = [m for k, m in problems(document(a)) if k == "instances[0].args"]
    assert any("--port 8199 differs from port 8100" in m for m in msgs)
    assert any("not loopback" in m for m in msgs)
    assert any("--gpu-memory-utilization 0.5 differs from partition 0.4" in m for m in msgs)
    assert any("--served-model-name" in m for m in msgs)


def test_partitions_on_one_gpu_sum_to_at_most_one_minus_the_reserve() -> None:
    # 0.5 + 0.45 = 0.95 > 1 - 0.1 on GPU 0; GPU 1 holds 0.45 + 0.45 = 0.9 (allowed: equal to the limit).
    a = instance("a-0", ["rel-a", "a"], 8100, 0.5, [0])
    b = instance("b-0", ["rel-b", "b"], 8101, 0.45, [0, 1])
    c = instance("c-0", ["rel-c", "c"], 8102, 0.45, [1])
    found = problems(document(a, b, c, gpus=2))
    assert found == [
        ("instances", "partitions on GPU 0 sum to 0.95 (a-0 0.5 + b-0 0.45) > 1 - transient_reserve = 0.9")
    ]


def test_a_model_name_reaches_one_release_and_data_parallel_instances_share_their_names() -> None:
    a0 = instance("a-0", ["rel-a", "a"], 8100, 0.45)
    a1 = instance("a-1", ["rel-a", "a"], 8101, 0.45)
    assert [i.name for i in srv.parse_config(document(a0, a1)).instances] == ["a-0", "a-1"]
    b = instance("b-0", ["rel-b", "a"], 8102, 0.1)
    found = problems(document(a0, a1, b, transient_reserve=0.0))
    assert any("model name 'a' already reaches a-0" in m for _, m in found)


def test_the_drain_bound_covers_every_instance_s_own_shutdown_timeout() -> None:
    a = instance("a-0", ["rel-a", "a"], 8100)
    found = problems(document(a, drain_seconds=4))  # --shutdown-timeout 5
    assert found == [("drain_seconds", "4 s is shorter than a-0's --shutdown-timeout 5")]


def test_restart_backoff_doubles_up_to_its_ceiling() -> None:
    p = srv.RestartPolicy(3, 600, 10, 60)
    assert [p.backoff(n) for n in (1, 2, 3, 4, 5)] == [10, 20, 40, 60, 60]


# ---- metrics ------------------------------------------------------------------------------------------------------

EXPO = """# HELP vllm:num_requests_waiting Number of requests waiting.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="{m}"}} {w}
# HELP vllm:kv_cache_usage_perc KV-cache usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="{m}"}} {kv}
# HELP vllm:time_to_first_token_seconds TTFT.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{engine="0",le="0.1",model_name="{m}"}} 1.0
vllm:time_to_first_token_seconds_bucket{{engine="0",le="+Inf",model_name="{m}"}} 2.0
vllm:time_to_first_token_seconds_sum{{engine="0",model_name="{m}"}} 0.5
vllm:time_to_first_token_seconds_count{{engine="0",model_name="{m}"}} 2.0
"""


def test_metrics_of_every_instance_are_labelled_with_it_and_aggregated_for_the_picker() -> None:
    cfg = srv.parse_config(
        document(
            instance("a-0", ["rel-a", "a"], 8100, 0.3),
            instance("a-1", ["rel-a", "a"], 8101, 0.3),
            instance("b-0", ["rel-b", "b"], 8102, 0.3),
        )
    )
    a0, a1, b0 = cfg.instances
    texts = [
        (a0, EXPO.format(m="rel-a", w=2, kv=0.5)),
        (a1, EXPO.format(m="rel-a", w=3, kv=0.25)),
        (b0, EXPO.format(m="rel-b", w=1, kv=0.75)),
        (b0, "this is not an exposition {"),
    ]
    body, errors = srv.merge_metrics(texts)
    assert [n for n, _ in errors] == ["b-0"]
    fams = {f.name: f for f in text_string_to_metric_families(body.decode())}
    waiting = fams["vllm:num_requests_waiting"].samples
    assert sorted((s.labels["cohost_instance"], s.labels["cohost_model"], s.value) for s in waiting) == [
        ("a-0", "a", 2.0),
        ("a-1", "a", 3.0),
        ("b-0", "b", 1.0),
    ]
    # Two instances of one model stay two series (without the instance label they would collide).
    assert len({tuple(sorted(s.labels.items())) for s in waiting}) == 3
    buckets = [s for s in fams["vllm:time_to_first_token_seconds"].samples if s.name.endswith("_bucket")]
    assert len(buckets) == 6 and all("le" in s.labels for s in buckets)
    # By hand: waiting 2 + 3 + 1 = 6; the fullest KV cache is b-0's 0.75.
    assert fams["cohost:num_requests_waiting"].samples[0].value == 6.0
    assert fams["cohost:kv_cache_usage_perc"].samples[0].value == 0.75
    assert body.decode().count("# TYPE vllm:num_requests_waiting gauge") == 1


# ---- the server as a process -----------------------------------------------------------------------------------


def get(port: int, path: str, timeout: float = 10) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        body = r.read()
        try:
            return r.status, json.loads(body)
        except ValueError:
            return r.status, body.decode()
    finally:
        conn.close()


def post(port: int, path: str, doc: dict[str, Any], timeout: float = 30) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", path, body=json.dumps(doc), headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, json.loads(r.read())
    finally:
        conn.close()


def stream(port: int, model: str, tokens: int) -> Iterator[tuple[float, bytes]]:
    """(arrival time, bytes) of each piece of a streamed completion as the client receives it."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = {"model": model, "prompt": "hi", "max_tokens": tokens, "stream": True}
    conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    assert r.status == 200
    try:
        while True:
            piece = r.read1(65536)
            if not piece:
                return
            yield time.monotonic(), piece
    finally:
        conn.close()


@dataclass
class Running:
    proc: subprocess.Popen[bytes]
    port: int
    events: Path
    log: Path

    def status(self) -> dict[str, Any]:
        code, doc = get(self.port, "/cohost/status")
        assert code == 200, doc
        assert isinstance(doc, dict)
        return doc

    def pids(self) -> dict[str, int | None]:
        return {i["name"]: i["pid"] for i in self.status()["instances"]}

    def wait(self, what: str, cond: Any, timeout: float = WAIT_S) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited {self.proc.returncode} waiting for {what}:\n{self.tail()}")
            try:
                if cond():
                    return
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}:\n{self.tail()}")

    def healthy(self) -> bool:
        return get(self.port, "/health")[0] == 200

    def states(self) -> dict[str, str]:
        return {i["name"]: i["state"] for i in self.status()["instances"]}

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-40:])

    def read_events(self) -> list[dict[str, Any]]:
        if not self.events.exists():
            return []
        return [json.loads(line) for line in self.events.read_text().splitlines()]


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Any]:
    started: list[Running] = []

    def start(
        doc: dict[str, Any], env: dict[str, str] | None = None, extra: tuple[str, ...] = (), use_file: bool = False
    ) -> Running:
        events = tmp_path / f"events-{len(started)}.jsonl"
        log = tmp_path / f"server-{len(started)}.log"
        if use_file:
            f = tmp_path / "config.json"
            f.write_text(json.dumps(doc))
            src = ["--config-file", str(f)]
        else:
            src = ["--config-json", json.dumps(doc)]
        full_env = {**os.environ, "FAKE_ENGINE_EVENTS": str(events), "FAKE_ENGINE_START_SECONDS": "0.3", **(env or {})}
        proc = subprocess.Popen(
            [sys.executable, str(SERVER), *src, "--host", "127.0.0.1", *extra],
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            env=full_env,
            start_new_session=True,
        )
        r = Running(proc, doc["port"], events, log)
        started.append(r)
        return r

    yield start
    for r in started:
        if r.proc.poll() is None:
            os.killpg(r.proc.pid, signal.SIGKILL)
            r.proc.wait()


def two_models(port: int) -> dict[str, Any]:
    return document(
        instance("a-0", ["rel-a", "model-a"], free_port(), 0.4),
        instance("b-0", ["rel-b", "model-b"], free_port(), 0.4),
        port=port,
    )


def test_instances_start_one_after_the_other_and_each_answers_only_its_names(launch: Any) -> None:
    r = launch(two_models(free_port()))
    r.wait("both healthy", r.healthy)
    ev = r.read_events()
    starts = {e["name"]: e["t"] for e in ev if e["event"] == "start"}
    ready = {e["name"]: e["t"] for e in ev if e["event"] == "ready"}
    # Staggered: b's engine starts only after a's has allocated (fake: served its first /health).
    assert starts["rel-b"] >= ready["rel-a"], ev
    assert {e["gpus"] for e in ev if e["event"] == "start"} == {"0"}
    for name, release in (("model-a", "rel-a"), ("rel-a", "rel-a"), ("model-b", "rel-b")):
        code, body = post(r.port, "/v1/chat/completions", {"model": name, "messages": [], "max_tokens": 1})
        assert code == 200 and body["model"] == release, body
    code, body = post(r.port, "/v1/completions", {"model": "model-c", "prompt": "x"})
    assert code == 404
    assert body["error"]["type"] == "NotFoundError" and body["error"]["param"] == "model"
    assert "Served here: rel-a, model-a, rel-b, model-b." in body["error"]["message"]
    code, body = post(r.port, "/v1/completions", {"prompt": "x"})
    assert code == 400 and "must name a model" in body["error"]["message"]
    code, models = get(r.port, "/v1/models")
    assert code == 200 and [m["id"] for m in models["data"]] == ["rel-a", "model-a", "rel-b", "model-b"]
    code, metrics = get(r.port, "/metrics")
    assert code == 200
    fams = {f.name: f for f in text_string_to_metric_families(metrics)}
    assert {s.labels["cohost_model"] for s in fams["vllm:request_success"].samples} == {"model-a", "model-b"}
    assert {s.labels["cohost_instance"]: s.value for s in fams["cohost:instance_up"].samples} == {"a-0": 1, "b-0": 1}


def test_a_stream_is_relayed_as_it_is_produced(launch: Any) -> None:
    r = launch(two_models(free_port()), env={"FAKE_ENGINE_TOKEN_SECONDS": "0.3"})
    r.wait("healthy", r.healthy)
    t0 = time.monotonic()
    pieces = list(stream(r.port, "model-b", 5))
    text = b"".join(p for _, p in pieces)
    assert text.count(b"data: {") == 5 and text.endswith(b"data: [DONE]\n\n")
    # Five tokens 0.3 s apart take >= 1.5 s; a buffering relay would deliver everything at the end.
    first, last = pieces[0][0] - t0, pieces[-1][0] - t0
    assert last >= 1.5 and first < last - 1.0, (first, last)
    assert len(pieces) >= 5


def test_a_dead_child_turns_health_unhealthy_and_is_restarted(launch: Any) -> None:
    r = launch(two_models(free_port()), env={"FAKE_ENGINE_WORKER": "1"})
    r.wait("healthy", r.healthy)
    before = r.pids()
    worker = next(e["worker"] for e in r.read_events() if e["event"] == "ready" and e["name"] == "rel-a")
    os.kill(before["a-0"], signal.SIGKILL)
    r.wait("unhealthy", lambda: not r.healthy(), timeout=5)
    r.wait("healthy again", r.healthy)
    after = r.pids()
    assert after["a-0"] not in (None, before["a-0"]) and after["b-0"] == before["b-0"]
    # The dead engine's worker (its process group) is gone before the replacement started.
    assert not os.path.exists(f"/proc/{worker}") or "Z" in Path(f"/proc/{worker}/stat").read_text().split()[2]
    assert {i["name"]: i["restarts"] for i in r.status()["instances"]} == {"a-0": 1, "b-0": 0}
    assert post(r.port, "/v1/completions", {"model": "model-a", "prompt": "x", "max_tokens": 1})[0] == 200


def test_a_child_that_keeps_dying_makes_the_server_exit_1(launch: Any) -> None:
    doc = two_models(free_port())
    doc["restart"]["max_restarts"] = 0
    r = launch(doc)
    r.wait("healthy", r.healthy)
    b_pid = r.pids()["b-0"]
    os.kill(r.pids()["a-0"], signal.SIGKILL)
    assert r.proc.wait(timeout=WAIT_S) == 1
    assert "fatal: instance a-0 failed again after 0 restart(s)" in r.log.read_text()
    assert not os.path.exists(f"/proc/{b_pid}")  # the other instance was drained and stopped


def test_an_unhealthy_child_is_replaced(launch: Any, tmp_path: Path) -> None:
    flag = tmp_path / "unhealthy"
    r = launch(two_models(free_port()), env={"FAKE_ENGINE_UNHEALTHY": str(flag)})
    r.wait("healthy", r.healthy)
    before = r.pids()
    flag.write_text("")
    r.wait("unhealthy", lambda: not r.healthy(), timeout=5)
    # Three failed checks 0.2 s apart, then each engine is killed and started again, one at a time (the first to
    # restart holds the start turn until its /health answers 200).
    r.wait("one replaced", lambda: any(r.pids()[n] not in (None, before[n]) for n in before), timeout=10)
    flag.unlink()
    r.wait("healthy again", r.healthy)
    after = r.pids()
    assert after["a-0"] != before["a-0"] and after["b-0"] != before["b-0"]  # both engines read the same flag
    assert "a-0: /health failed (3/3)" in r.log.read_text()


def test_sigterm_drains_in_flight_streams_then_exits_0(launch: Any) -> None:
    # Each engine has a worker that dies at once on a SIGTERM of its own (as vLLM's do): the server must signal the
    # engine's API server only, which drains, then ends its worker.
    r = launch(two_models(free_port()), env={"FAKE_ENGINE_TOKEN_SECONDS": "0.25", "FAKE_ENGINE_WORKER": "1"})
    r.wait("healthy", r.healthy)
    pieces = stream(r.port, "model-a", 8)  # 8 x 0.25 s = 2 s
    first = next(pieces)
    os.killpg(r.proc.pid, 0)
    r.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    code, body = post(r.port, "/v1/completions", {"model": "model-b", "prompt": "x"})
    assert code == 503 and "shutting down" in body["error"]["message"]
    rest = b"".join(p for _, p in pieces)
    text = first[1] + rest
    assert text.count(b"data: {") == 8 and text.endswith(b"data: [DONE]\n\n")
    assert r.proc.wait(timeout=WAIT_S) == 0
    exits = [e for e in r.read_events() if e["event"] == "exit"]
    assert sorted(e["name"] for e in exits) == ["rel-a", "rel-b"] and all(e["in_flight"] == 0 for e in exits)


def test_bad_configuration_exits_2_listing_every_problem(launch: Any) -> None:
    doc = two_models(free_port())
    doc["instances"][1]["partition"] = 0.6
    r = launch(doc, use_file=True)
    assert r.proc.wait(timeout=WAIT_S) == 2
    log = r.log.read_text()
    assert "bad configuration: instances[1].args: --gpu-memory-utilization 0.4 differs from partition 0.6" in log


# ---- update_models from Cloud Storage ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gcs() -> Iterator[Gcs]:
    with running_emulator() as g:
        yield g


def put(gcs: Gcs, name: str, doc: Any) -> None:
    gcs.client(gcs.emulator_url).bucket(gcs.bucket).blob(name).upload_from_string(json.dumps(doc))


def test_update_models_keeps_an_unchanged_instance_and_replaces_the_rest(launch: Any, gcs: Gcs) -> None:
    gcs.wipe()
    port = free_port()
    doc = two_models(port)
    r = launch(
        doc,
        env=Gcs.env(gcs.emulator_url),
        extra=("--watch", f"gs://{gcs.bucket}/cohost/pair.json", "--poll-seconds", "0.3"),
    )
    r.wait("healthy", r.healthy)
    before = r.pids()
    new = copy.deepcopy(doc)
    new["instances"][1] = instance("c-0", ["rel-c", "model-c"], free_port(), 0.4)
    put(gcs, "cohost/pair.json", new)
    r.wait("c-0 serving", lambda: r.states() == {"a-0": "healthy", "c-0": "healthy"})
    after = r.pids()
    assert set(after) == {"a-0", "c-0"}
    assert after["a-0"] == before["a-0"]  # unchanged: the same process, never restarted
    assert not os.path.exists(f"/proc/{before['b-0']}")
    assert post(port, "/v1/completions", {"model": "model-b", "prompt": "x"})[0] == 404
    assert post(port, "/v1/completions", {"model": "model-c", "prompt": "x", "max_tokens": 1})[0] == 200
    gen = r.status()["generation"]
    assert gen is not None
    # A changed partition is a changed instance: a-0 restarts; an invalid document changes nothing.
    bad = copy.deepcopy(new)
    bad["instances"][0]["partition"] = 0.7
    put(gcs, "cohost/pair.json", bad)
    r.wait("refused", lambda: r.status()["generation"] != gen)
    assert r.pids() == after and "not applied" in r.log.read_text()
    # A valid document naming another program (engine or release check) is refused: the object changes the model set,
    # not what the pods run.
    other = copy.deepcopy(new)
    other["engine_command"] = ["/bin/sh", "-c", "exit 0"]
    put(gcs, "cohost/pair.json", other)
    r.wait("engine refused", lambda: "update refused: engine_command ['/bin/sh', '-c', 'exit 0']" in r.log.read_text())
    assert r.pids() == after
    moved = copy.deepcopy(new)
    moved["instances"][0] = instance("a-0", ["rel-a", "model-a"], doc["instances"][0]["port"], 0.3)
    put(gcs, "cohost/pair.json", moved)
    r.wait("a-0 replaced", lambda: r.pids().get("a-0") not in (None, after["a-0"]) and r.states()["a-0"] == "healthy")
    assert r.pids()["c-0"] == after["c-0"]


def test_the_watched_object_is_the_model_set_at_start_up(launch: Any, gcs: Gcs) -> None:
    gcs.wipe()
    port = free_port()
    stored = document(instance("c-0", ["rel-c", "model-c"], free_port(), 0.4), port=port)
    put(gcs, "cohost/start.json", stored)
    r = launch(
        two_models(port),
        env=Gcs.env(gcs.emulator_url),
        extra=("--watch", f"gs://{gcs.bucket}/cohost/start.json", "--poll-seconds", "0.3"),
    )
    r.wait("healthy", r.healthy)
    assert set(r.pids()) == {"c-0"}
    assert "model set from gs://" in r.log.read_text()


def test_an_update_keeps_the_command_lines_programs() -> None:
    base = srv.load_config_bytes(
        json.dumps(
            document(
                {**instance("a-0", ["rel-a", "model-a"], 8100), "verify": ["python3", "/v.py", "gcs", "--bucket", "b"]}
            )
        ).encode(),
        "base",
    )
    assert srv.update_problems(base, base) == []
    # Another release checked by the same program: its own arguments are fine.
    moved = {**instance("c-0", ["rel-c", "model-c"], 8101), "verify": ["python3", "/v.py", "gcs", "--bucket", "c"]}
    assert srv.update_problems(base, srv.load_config_bytes(json.dumps(document(moved)).encode(), "new")) == []
    unchecked = instance("c-0", ["rel-c", "model-c"], 8101)
    other = {**instance("d-0", ["rel-d", "model-d"], 8102), "verify": ["sh", "-c", "true"]}
    doc = document(unchecked, other, gpus=2)
    doc["instances"][1]["gpus"] = [1]
    found = srv.update_problems(base, srv.load_config_bytes(json.dumps(doc).encode(), "new"))
    assert found == [
        "instance c-0: release check none is not one of the command line's (['python3', '/v.py'])",
        "instance d-0: release check ['sh', '-c'] is not one of the command line's (['python3', '/v.py'])",
    ]
    preload = {**moved, "env": {"LD_PRELOAD": "/tmp/x.so"}}
    assert srv.update_problems(base, srv.load_config_bytes(json.dumps(document(preload)).encode(), "new")) == [
        "instance c-0: env LD_PRELOAD is not set by the command line's instances"
    ]
    doc = document(moved)
    doc["engine_command"] = ["vllm", "serve"]
    assert srv.update_problems(base, srv.load_config_bytes(json.dumps(doc).encode(), "new")) == [
        f"engine_command ['vllm', 'serve'] is not the command line's {[sys.executable, str(FAKE)]}"
    ]
