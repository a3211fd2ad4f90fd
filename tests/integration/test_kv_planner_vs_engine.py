"""The capacity planner's KV-cache arithmetic against what the real vLLM 0.32 engine allocates.

A CPU vLLM is started with a known KV-cache budget (``VLLM_CPU_KVCACHE_SPACE``, whole GiB) serving the tiny model
with ``--max-model-len 200``; its start-up log and its ``/metrics`` then state what the engine made of it:

- ``vllm/v1/core/kv_cache_utils.py`` (``update_kv_cache_capacity``) logs
  ``"%s KV cache size: %s tokens, Maximum concurrency for %s tokens per request: %.2fx"`` — device name
  ``CPU`` here (``GPU`` on CUDA). In 0.32 the token figure is ``int(concurrency * max_model_len)``, not the raw
  pool size: with a max_model_len that is not a whole number of blocks it is smaller than the pool.
- ``vllm:cache_config_info`` carries ``block_size`` and ``num_gpu_blocks`` (the pool) as labels.

The planner's functions (infra/planning/capacity.py) applied to the tiny model's geometry (its config.json) and
the same budget must agree with the engine within one KV block. Block size: vLLM's CPU platform defaults to 128
tokens per block (``vllm/platforms/cpu.py``: ``cache_config.block_size = 128`` unless the user sets one), while the
planner rounds to the 16-token CUDA default (``KV_BLOCK_TOKENS``). Pool size does not depend on the block size
(whole blocks of a budget that is a multiple of the block), but concurrency does, through the rounding of
max_model_len up to whole blocks. The comparison therefore runs the planner with the engine's block size
(read from /metrics) — and shows that the planner's 16-token default would overstate CPU concurrency at this
max_model_len, which is why the planner takes the engine's block size (``kv_block_tokens``, default 16).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TypedDict

import pytest

from infra.planning import capacity
from infra.planning.capacity import (
    GIB,
    Geometry,
    PoolInputs,
    blocks_rounded,
    kv_bytes_per_token_per_device,
    max_sequences,
    plan_pool,
)

from . import vllm_harness
from .vllm_harness import VllmServer, http_get, start_vllm_server, stop_vllm_server

pytestmark = pytest.mark.integration

#: KV budget given to the engine, GiB: 2, not the harness's 1, so a pass shows the engine used our number.
KV_BUDGET_GIB = 2
#: Not a multiple of the CPU block (128) or of the CUDA block (16): the rounding to whole blocks shows.
MAX_MODEL_LEN = 200
LOG_LINE = re.compile(
    r"(?P<device>[A-Z]+(?: \+ host)?) KV cache size: (?P<tokens>[\d,]+) tokens, Maximum concurrency "
    r"for (?P<len>[\d,]+) tokens per request: (?P<concurrency>[\d.]+)x"
)
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


@pytest.fixture(scope="module")
def kv_server(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(vllm_harness.SERVER_ENV, "VLLM_CPU_KVCACHE_SPACE", str(KV_BUDGET_GIB))
        # The last --max-model-len wins in vLLM's argparse parser, overriding the harness's 256.
        server = start_vllm_server(
            tiny_model_dir,
            tmp_path_factory.mktemp("kv-vllm") / "server.log",
            extra_args=("--max-model-len", str(MAX_MODEL_LEN)),
        )
    try:
        yield server
    finally:
        stop_vllm_server(server.pid)


class EngineFacts(TypedDict):
    """What the engine's startup log line and its ``vllm:cache_config_info`` metric say about the KV cache."""

    device: str
    log_tokens: int
    log_len: int
    concurrency: float
    block_size: int
    num_blocks: int
    budget_bytes: int


def engine_facts(server: VllmServer) -> EngineFacts:
    m = LOG_LINE.search(server.log_path.read_text(encoding="utf-8", errors="replace"))
    assert m, f"no KV-capacity line in {server.log_path}"
    status, metrics = http_get(f"{server.base_url}/metrics")
    assert status == 200
    info = re.search(r"^vllm:cache_config_info\{(?P<labels>[^}]*)\}", metrics, re.M)
    assert info, "vllm:cache_config_info missing from /metrics"
    labels = dict(re.findall(r'(\w+)="([^"]*)"', info.group("labels")))
    return {
        "device": m.group("device"),
        "log_tokens": int(m.group("tokens").replace(",", "")),
        "log_len": int(m.group("len").replace(",", "")),
        "concurrency": float(m.group("concurrency")),
        "block_size": int(labels["block_size"]),
        "num_blocks": int(labels["num_gpu_blocks"]),
        "budget_bytes": int(labels["kv_cache_memory_bytes"]),
    }


def tiny_geometry(model_dir: Path) -> Geometry:
    cfg = json.loads((model_dir / "config.json").read_text())
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    return Geometry(
        parameters=0,  # weights play no part in a budget that is given explicitly
        layers=cfg["num_hidden_layers"],
        kv_heads=cfg["num_key_value_heads"],
        head_dim=head_dim,
        bytes_per_weight=DTYPE_BYTES[cfg["dtype"]],
        bytes_per_kv_element=DTYPE_BYTES[cfg["dtype"]],
    )


def test_planner_matches_engine_kv_capacity(kv_server: VllmServer):
    e = engine_facts(kv_server)
    assert e["device"] == "CPU" and e["log_len"] == MAX_MODEL_LEN
    assert e["block_size"] == 128, "vLLM 0.32's CPU default block size"
    budget = KV_BUDGET_GIB * GIB
    assert e["budget_bytes"] == budget, "the engine took the budget we set"

    g = tiny_geometry(kv_server.model_dir)
    # Tiny model: 2 layers, 2 KV heads of 64, bfloat16:
    # k = 2 (K and V) * 2 layers * 2 heads * 64 * 2 bytes = 1024 bytes per token.
    assert (g.layers, g.kv_heads, g.head_dim, g.bytes_per_kv_element) == (2, 2, 64, 2)
    k_dev = kv_bytes_per_token_per_device(g, tp=1)
    assert k_dev == 1024

    # Pool: B / k = 2 GiB / 1024 B = 2,097,152 tokens; the engine: 16,384 blocks x 128 = 2,097,152.
    planner_tokens = math.floor(budget / k_dev)
    engine_tokens = e["num_blocks"] * e["block_size"]
    assert abs(planner_tokens - engine_tokens) < e["block_size"], (planner_tokens, engine_tokens)

    # Concurrency at max_model_len with the engine's block size: 200 tokens round up to 2 blocks = 256 tokens,
    # floor(2 GiB / (1024 B * 256)) = 8192 sequences; the engine logs 16,384 blocks / 2 = 8192.00x.
    assert blocks_rounded(MAX_MODEL_LEN, e["block_size"]) == 256
    planner_seqs = max_sequences(budget, k_dev, MAX_MODEL_LEN, e["block_size"])
    assert planner_seqs == math.floor(e["concurrency"]) == 8192
    # The log's token figure is concurrency x max_model_len = 8192 x 200 = 1,638,400; the planner's equivalent
    # agrees within one block.
    assert abs(planner_seqs * MAX_MODEL_LEN - e["log_tokens"]) < e["block_size"]

    # The same through plan_pool: a "GPU" whose whole memory is the budget (utilisation 1, no weights, no
    # overhead), so the planner's B is exactly the engine's.
    plan = plan_pool(
        PoolInputs(
            role="stable",
            release=kv_server.release_id,
            accelerator="cpu",
            geometry=g,
            tensor_parallel_size=1,
            max_model_len=MAX_MODEL_LEN,
            gpu_memory_gib=KV_BUDGET_GIB,
            gpus_per_node=1,
            node_hourly_usd=0.0,
            gpu_memory_utilization=1.0,
            runtime_overhead_gib=0.0,
            arrival_rps=1.0,
            mean_prompt_tokens=40,
            mean_output_tokens=20,
            target_utilization=0.7,
            load_throughput_mib_s=1.0,
            engine_init_seconds=0,
            verify_read_mib_s=None,
            theta_o=None,
            theta_i=None,
            min_replicas=1,
            max_replicas=1,
            kv_block_tokens=e["block_size"],
        )
    )
    assert abs(plan.kv_tokens_per_replica - engine_tokens) < e["block_size"]
    assert plan.max_seqs_at_max_model_len == math.floor(e["concurrency"])


def test_planner_cuda_block_default_overstates_cpu_concurrency(kv_server: VllmServer):
    # With the planner's 16-token blocks, 200 tokens round to 208: floor(2 GiB / (1024 B * 208)) = 10,082
    # sequences, 23 % more than the 8192 the CPU engine (128-token blocks) can hold.
    e = engine_facts(kv_server)
    g = tiny_geometry(kv_server.model_dir)
    assert capacity.KV_BLOCK_TOKENS == 16
    default = max_sequences(KV_BUDGET_GIB * GIB, kv_bytes_per_token_per_device(g, 1), MAX_MODEL_LEN)
    assert default == 10_082
    assert default > math.floor(e["concurrency"]) == 8192
