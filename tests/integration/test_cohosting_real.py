"""Model co-hosting on the real vLLM 0.32 (CPU): the shipped ``dev-cohost`` (Vertex AI) group's two models, each
started from its instance's rendered ``vllm serve`` arguments in the group's co-host server configuration, served by
two tiny models of different shapes side by side on this machine. The server itself (which starts the instances on
both targets) runs on the real vLLM in tests/integration/test_cohost_server_real.py, from the GKE group's rendered
Deployment; tests/test_vertex_cohost_container.py runs the Vertex container's rendered command line.

The CPU adaptation, and why (everything else is ``vllm_harness.cpu_adapted``'s, documented there):

* **Models.** There are no Llama 3.1 8B / Mistral 7B weights here. Each rendered ``--model`` is mirrored by a tiny
  random-weight Llama of its own shape (``scripts/make_tiny_model.py``): 2 layers x 2 KV heads for the first model,
  3 layers x 1 KV head (grouped-query attention) for the second, so the two KV footprints differ (1,024 and 768
  bytes per token at bfloat16).
* **Partition -> KV space.** On a GPU, ``--gpu-memory-utilization`` = the partition claims ``partition x M_gpu`` for
  weights + KV cache + activations; vLLM's CPU backend ignores it and takes its KV cache from
  ``VLLM_CPU_KVCACHE_SPACE`` (whole GiB) instead. The stand-in for the GPU is a virtual device of
  ``VIRTUAL_GPU_GIB`` = 5 GiB; the tiny weights (~1 MB) live in host memory outside the KV space, so the planner runs
  with weights 0 and overhead 0, and each model's partition (0.4, read from its rendered arguments) gives
  0.4 x 5 GiB = 2 GiB of KV cache, the value each server gets as ``VLLM_CPU_KVCACHE_SPACE``. The planner's sum check
  sees the same 0.4 + 0.4 = 0.8 <= 0.9 as for the H100.
* **Block size.** vLLM's CPU platform allocates KV in blocks of 128 tokens, the planner rounds to 16; the rendered
  ``--max-model-len`` 4096 is a whole number of either, so the concurrencies compare directly.

What is asserted: both servers are up at the same time and each answers its own served names (release id and
public name) and refuses the other's; each server's reported KV capacity (the start-up log's "KV cache size: N
tokens, Maximum concurrency for 4096 tokens per request: Xx" and ``vllm:cache_config_info``) agrees with the
planner's per-model figures for the same budget: pool tokens within one KV block, concurrency at max_model_len
exactly.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from components.serving.spec import ReleaseInfo
from infra.offline.planrun import run_plan
from infra.planning import capacity
from infra.planning import cohosting as ch
from infra.targets.vertex.planning import CoHostedGroupPlan

from . import vllm_harness as h
from .vllm_harness import VllmServer

pytestmark = pytest.mark.integration

#: The shipped stack with a co-hosted group ``pair`` of two models at 0.4 + 0.4 on Vertex AI.
STACKS = ("dev-cohost",)
#: The CPU stand-in for one GPU, GiB: 0.4 of it is a whole 2 GiB of KV space (VLLM_CPU_KVCACHE_SPACE is whole GiB).
VIRTUAL_GPU_GIB = 5
#: (layers, KV heads) of the tiny model standing in for each co-hosted model, in the group's order.
SHAPES = ((2, 2), (3, 1))
LOG_LINE = re.compile(
    r"CPU KV cache size: (?P<tokens>[\d,]+) tokens, Maximum concurrency for (?P<len>[\d,]+) "
    r"tokens per request: (?P<concurrency>[\d.]+)x"
)
CHAT_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Rendered:
    """One co-hosted model as a target rendered it: its server arguments and what the planner derived."""

    model_name: str
    release: ReleaseInfo
    placement: ch.ModelPlacement
    vllm_args: tuple[str, ...]


def rendered(stack: str) -> list[Rendered]:
    """Each model's one instance as the group's co-host server runs it, less the rendered loopback ``--host``
    (``cpu_adapted`` puts it back with a free port: tests/integration/test_cohost_server_real.py does the same)."""
    run = run_plan(stack)
    group = run.resolved.plan.cohosting["pair"]
    assert isinstance(group, CoHostedGroupPlan)
    out = []
    for m in group.models:
        (inst,) = m.instances
        args = list(inst.args)
        at = args.index("--host")
        assert args[at + 1] == "127.0.0.1"  # only the server's port is reachable from outside the container
        del args[at : at + 2]
        out.append(Rendered(m.model_name, m.release, m.placement, tuple(args)))
    return out


@dataclass(frozen=True)
class CoHosted:
    plan: Rendered
    server: VllmServer
    model_dir: Path
    kv_space_gib: int


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


def geometry(model_dir: Path) -> capacity.Geometry:
    """The tiny model's KV geometry (config.json); weights 0: they sit in host memory, outside the KV space."""
    cfg = json.loads((model_dir / "config.json").read_text())
    assert cfg["dtype"] == "bfloat16"
    return capacity.Geometry(0, cfg["num_hidden_layers"], cfg["num_key_value_heads"], cfg["head_dim"], 2.0, 2.0)


def kv_space_gib(partition: float) -> int:
    space = partition * VIRTUAL_GPU_GIB
    assert space == int(space), f"partition {partition} x {VIRTUAL_GPU_GIB} GiB is not a whole GiB"
    return int(space)


@pytest.fixture(scope="module", params=STACKS)
def cohosted(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[CoHosted]]:
    """Both models of the group, each a CPU vLLM from its rendered arguments, started in parallel."""
    h.require_vllm()
    models = rendered(request.param)
    work = tmp_path_factory.mktemp("cohost")
    launched: list[CoHosted] = []
    try:
        for m, (layers, kv_heads) in zip(models, SHAPES, strict=True):
            tiny = tiny_model(work / f"tiny-{m.model_name}", layers, kv_heads)
            rendered_root = h.flag_value(m.vllm_args, "--model")
            base = work / m.model_name
            mirror = h.mirror_release(tiny, base, rendered_root, m.release.model_revision, m.release.tokenizer_revision)
            port = h.free_loopback_port()
            argv = h.cpu_adapted(m.vllm_args, Path(h.local_model_root(rendered_root, base)), port)
            space = kv_space_gib(float(h.flag_value(m.vllm_args, "--gpu-memory-utilization")))
            server = h.launch_vllm_server(
                argv,
                work / f"{m.model_name}.log",
                port=port,
                release_id=m.release.release,
                model_dir=mirror,
                env={"VLLM_CPU_KVCACHE_SPACE": str(space)},
            )
            launched.append(CoHosted(m, server, tiny, space))
        for c in launched:  # both are starting already; each wait overlaps the other's start
            h.TIMINGS[f"cohost: {c.plan.model_name} start from rendered args (to /health 200)"] = h.wait_until_healthy(
                c.server
            )
        yield launched
    finally:
        for c in launched:
            h.stop_vllm_server(c.server.pid)


def chat(server: VllmServer, model: str) -> tuple[int, Any]:
    return h.http_post_json(
        f"{server.base_url}/v1/chat/completions",
        {"model": model, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4},
        timeout=CHAT_TIMEOUT_S,
    )


def test_both_servers_answer_their_own_model_names(cohosted: list[CoHosted]) -> None:
    assert len(cohosted) == 2
    for c in cohosted:
        status, models = h.http_get(f"{c.server.base_url}/v1/models")
        assert status == 200
        served = sorted(m["id"] for m in json.loads(models)["data"])
        assert served == sorted([c.plan.release.release, c.plan.model_name])
        status, body = chat(c.server, c.plan.model_name)
        assert status == 200, body
        assert body["model"] == c.plan.release.release  # the first served name: the release that answered
    # Each refuses the other's public name: the name routes, the servers do not stand in for one another.
    for c, other in ((cohosted[0], cohosted[1]), (cohosted[1], cohosted[0])):
        status, _ = chat(c.server, other.plan.model_name)
        assert status == 404


def engine_kv(server: VllmServer) -> dict[str, Any]:
    m = LOG_LINE.search(server.log_path.read_text(encoding="utf-8", errors="replace"))
    assert m, f"no KV-capacity line in {server.log_path}"
    status, metrics = h.http_get(f"{server.base_url}/metrics")
    assert status == 200
    info = re.search(r"^vllm:cache_config_info\{(?P<labels>[^}]*)\}", metrics, re.M)
    assert info, "vllm:cache_config_info missing from /metrics"
    labels = dict(re.findall(r'(\w+)="([^"]*)"', info.group("labels")))
    return {
        "len": int(m.group("len").replace(",", "")),
        "concurrency": float(m.group("concurrency")),
        "block_size": int(labels["block_size"]),
        "num_blocks": int(labels["num_gpu_blocks"]),
        "budget_bytes": int(labels["kv_cache_memory_bytes"]),
    }


def test_planner_concurrency_agrees_with_each_servers_kv_capacity(cohosted: list[CoHosted]) -> None:
    inputs = [
        ch.ModelInputs(
            c.plan.release.release,
            c.plan.model_name,
            geometry(c.model_dir),
            1,
            c.plan.placement.max_model_len,
            c.plan.placement.partition,
            1,
            1,
            0.0,
        )
        for c in cohosted
    ]
    mean = cohosted[0].plan.placement.mean_context_tokens
    layout = ch.plan_layout(inputs, 1, VIRTUAL_GPU_GIB, 0.1, mean)
    assert mean == 800 and layout.partition_sum_per_gpu == (0.8,)
    # By hand: KV per token = 2 x layers x KV heads x 64 x 2 bytes = 1,024 and 768 bytes; 2 GiB of KV each; a
    # 4096-token sequence takes 4 MiB and 3 MiB: 512 and 682 (= floor(682.67)) sequences at max_model_len.
    expected = ((1024, 512), (768, 682))
    for c, placed, (k, seqs) in zip(cohosted, layout.models, expected, strict=True):
        e = engine_kv(c.server)
        assert e["budget_bytes"] == c.kv_space_gib * capacity.GIB == 2 * capacity.GIB
        assert placed.kv_bytes_per_token_per_gpu == k
        assert e["len"] == placed.max_model_len == 4096
        assert placed.max_seqs_at_max_model_len == seqs == math.floor(e["concurrency"])
        engine_tokens = e["num_blocks"] * e["block_size"]
        assert abs(placed.kv_tokens_per_instance - engine_tokens) < e["block_size"], (placed, e)
    h.NOTES["cohost: engine KV capacity (tokens, concurrency at 4096)"] = ", ".join(
        f"{c.plan.model_name}: {engine_kv(c.server)['num_blocks'] * engine_kv(c.server)['block_size']:,} / "
        f"{engine_kv(c.server)['concurrency']:.2f}x"
        for c in cohosted
    )
