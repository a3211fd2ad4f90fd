"""Planner unit tests: hand-computed cases with the arithmetic written out."""

from __future__ import annotations

import math
from typing import Any

import pytest

from infra.planning import capacity as c
from infra.planning.capacity import GIB, MIB, Geometry, PlanningError, PoolInputs

QWEN3_32B_FP8 = Geometry(
    parameters=32_800_000_000, layers=64, kv_heads=8, head_dim=128, bytes_per_weight=1.0, bytes_per_kv_element=2.0
)


def inputs(**over) -> PoolInputs:
    base: dict[str, Any] = dict(
        role="stable",
        release="r1",
        accelerator="h100",
        geometry=QWEN3_32B_FP8,
        tensor_parallel_size=2,
        max_model_len=16384,
        gpu_memory_gib=80.0,
        gpus_per_node=2,
        node_hourly_usd=22.06,
        gpu_memory_utilization=0.9,
        runtime_overhead_gib=2.0,
        arrival_rps=8.0,
        mean_prompt_tokens=1800,
        mean_output_tokens=350,
        target_utilization=0.7,
        load_throughput_mib_s=1000,
        engine_init_seconds=150,
        verify_read_mib_s=None,
        theta_o=None,
        theta_i=None,
        min_replicas=2,
        max_replicas=4,
    )
    base.update(over)
    return PoolInputs(**base)


def test_weights_and_kv_bytes_per_token():
    # W = P * b_w = 32.8e9 * 1 byte
    assert c.weight_bytes(QWEN3_32B_FP8) == 32_800_000_000
    # k = 2 * L * H_KV * d_h * b_KV = 2 * 64 * 8 * 128 * 2 = 262,144 B/token (256 KiB)
    assert c.kv_bytes_per_token(QWEN3_32B_FP8) == 262_144
    # TP 2 <= 8 KV heads: 4 heads per device -> 2 * 64 * 4 * 128 * 2 = 131,072 B/token per GPU
    assert c.kv_bytes_per_token_per_device(QWEN3_32B_FP8, 2) == 131_072


def test_tp_greater_than_kv_heads_replicates_one_head_per_device():
    g = Geometry(
        parameters=1_000_000_000, layers=10, kv_heads=2, head_dim=64, bytes_per_weight=2.0, bytes_per_kv_element=2.0
    )
    # TP 4 > 2 KV heads: each rank keeps one (replicated) head -> 2 * 10 * 1 * 64 * 2 = 2,560 B/token
    assert c.kv_heads_per_device(2, 4) == 1
    assert c.kv_bytes_per_token_per_device(g, 4) == 2_560
    # ... which is more than the 2 * 10 * 2 * 64 * 2 / 4 = 1,280 an even split would suggest.
    assert c.kv_bytes_per_token(g) / 4 == 1_280


@pytest.mark.parametrize(
    "kv_heads,tp,message",
    [
        (8, 3, "8 KV heads cannot be split evenly across tensor_parallel_size 3"),
        (3, 4, "tensor_parallel_size 4 is not a multiple of the 3 KV heads"),
    ],
)
def test_uneven_head_split_is_an_error(kv_heads, tp, message):
    with pytest.raises(PlanningError, match=message):
        c.kv_heads_per_device(kv_heads, tp)


def test_pool_plan_for_seed_deployment():
    p = c.plan_pool(inputs())
    # B = 80 GiB * 0.9 - 32.8e9 / 2 - 2 GiB = 75,161,927,680 - 16,400,000,000 = 58,761,927,680 B
    budget = 80 * 0.9 * GIB - 16_400_000_000 - 2 * GIB
    assert budget == 58_761_927_680
    assert p.kv_budget_gib_per_device == pytest.approx(budget / GIB)
    # tokens per replica = floor(B / 131,072) = floor(448,317.7) = 448,317
    assert p.kv_tokens_per_replica == 448_317
    # at max_model_len: 16384 tokens = 1024 blocks exactly; floor(B / (131,072 * 16,384)) = floor(27.36) = 27
    assert p.max_seqs_at_max_model_len == 27
    # mean context 1800 + 350 = 2150 -> 135 blocks of 16 = 2160 tokens; floor(B / (131,072 * 2160)) = 207
    assert p.mean_context_tokens == 2150
    assert p.max_seqs_at_mean_context == 207
    assert p.max_num_seqs == 207  # rendered as --max-num-seqs
    assert p.max_num_batched_tokens == 8192  # >= 70 GiB GPU
    # cold load = 32.8e9 / (1000 * 1,048,576) + 10 s metadata verification (gs:// stream) + 150
    #           = 31.28 + 10 + 150 = 191.28 s
    assert p.verify_seconds == 10
    assert p.cold_load_seconds == pytest.approx(32.8e9 / (1000 * MIB) + 10 + 150)
    assert p.cold_load_seconds == pytest.approx(191.28, abs=0.01)
    # a 2-GPU node at $22.06/h carries exactly one TP-2 replica
    assert p.replica_hourly_usd == pytest.approx(22.06)
    assert p.replicas_per_node == 1
    assert p.throughput == "unmeasured"
    assert p.decode_replicas is None and p.required_replicas is None
    assert p.cost_per_million_output_tokens_usd is None


def test_measured_throughput_sizes_replicas_and_cost():
    p = c.plan_pool(inputs(theta_o=2500.0, theta_i=20000.0))
    # decode: ceil(8 * 350 / (2500 * 0.7)) = ceil(2800 / 1750) = ceil(1.6) = 2
    assert p.decode_replicas == 2
    # prefill: ceil(8 * 1800 / (20000 * 0.7)) = ceil(14400 / 14000) = ceil(1.03) = 2
    assert p.prefill_replicas == 2
    # provision max(2, 2) + 1 for one replica failure = 3
    assert p.required_replicas == 3
    # cost = 22.06 * 1e6 / (3600 * 2500) = 22,060,000 / 9,000,000 = 2.4511 $/M output tokens
    assert p.cost_per_million_output_tokens_usd == pytest.approx(2.4511, abs=1e-4)
    assert p.throughput == "measured"
    assert p.warnings == ()


def test_prefill_can_dominate():
    # decode ceil(8*350/(5000*0.7)) = ceil(0.8) = 1; prefill ceil(8*1800/(4000*0.7)) = ceil(5.14) = 6 -> 7
    p = c.plan_pool(inputs(theta_o=5000.0, theta_i=4000.0, max_replicas=8))
    assert (p.decode_replicas, p.prefill_replicas, p.required_replicas) == (1, 6, 7)


def test_required_above_max_replicas_warns():
    p = c.plan_pool(inputs(theta_o=1000.0, theta_i=20000.0, max_replicas=3))
    # decode ceil(2800 / 700) = 4 -> required 5 > 3
    assert p.required_replicas == 5
    assert any("below the 5 replicas" in w for w in p.warnings)


def test_cost_formula_directly():
    # $4.00/h at 1000 tok/s: 4 * 1e6 / 3.6e6 = 1.111 $/M
    assert c.cost_per_million_output_tokens(4.0, 1000.0) == pytest.approx(1.1111, abs=1e-4)


def test_model_that_does_not_fit():
    g70 = Geometry(
        parameters=70_600_000_000, layers=80, kv_heads=8, head_dim=128, bytes_per_weight=2.0, bytes_per_kv_element=2.0
    )
    # W = 141.2e9 B = 131.5 GiB on one 80 GiB GPU: 80 * 0.9 = 72 GiB usable < 131.5 + 2
    with pytest.raises(PlanningError, match=r"weights do not fit: 131\.5 GiB / TP 1 = 131\.5 GiB per GPU"):
        c.plan_pool(inputs(geometry=g70, tensor_parallel_size=1, gpus_per_node=1))


def test_max_model_len_with_zero_concurrency():
    # Llama-70B BF16 on TP 2 x 80 GiB: B = 72 GiB - 65.76 GiB - 2 GiB = 4.24 GiB per GPU;
    # k_dev = 2*80*4*128*2 = 163,840 B/token; 131072 tokens need 20 GiB -> zero sequences
    g70 = Geometry(
        parameters=70_600_000_000, layers=80, kv_heads=8, head_dim=128, bytes_per_weight=2.0, bytes_per_kv_element=2.0
    )
    with pytest.raises(PlanningError, match="max_model_len 131072 leaves zero concurrency"):
        c.plan_pool(inputs(geometry=g70, max_model_len=131072))


def test_tp_beyond_node_is_an_error():
    with pytest.raises(PlanningError, match="tensor_parallel_size 4 exceeds the 2 GPU"):
        c.plan_pool(inputs(tensor_parallel_size=4))


def test_accelerator_plan_counts_surge():
    a = c.plan_pool(inputs(max_replicas=4))
    b = c.plan_pool(inputs(role="canary", max_replicas=2))
    ap = c.plan_accelerator("h100", [a, b], reserved_nodes=8)
    # 1 replica per node: 4 + 2 = 6 nodes at max; + 1 surge replica per pool = 8
    assert (ap.nodes_for_max_replicas, ap.nodes_for_max_plus_surge) == (6, 8)
    # 8-GPU node carries 4 TP-2 replicas: ceil((4 + 2 + 2) / 4) = 2 nodes
    a8 = c.plan_pool(inputs(gpus_per_node=8, node_hourly_usd=88.24))
    assert a8.replicas_per_node == 4
    assert a8.replica_hourly_usd == pytest.approx(88.24 / 4)
    assert c.plan_accelerator(
        "h100x8", [a8, c.plan_pool(inputs(role="canary", gpus_per_node=8, max_replicas=2))], None
    ).nodes_for_max_plus_surge == math.ceil((4 + 2 + 2) / 4)


def test_a_mounted_copy_is_hashed_at_the_slower_of_disk_and_threads():
    # 32.8e9 B read once more for SHA-256: at min(1000 MiB/s disk, 4 threads x 800 MiB/s) = 1000 MiB/s -> 31.28 s
    p = c.plan_pool(inputs(verify_read_mib_s=1000.0))
    assert p.verify_seconds == pytest.approx(32.8e9 / (1000 * MIB))
    assert p.cold_load_seconds == pytest.approx(2 * 31.28 + 150, abs=0.01)
