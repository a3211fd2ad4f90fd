"""Capacity planner: the design's sizing formulas as pure functions (no Pulumi import).

Memory ("Memory Before Throughput"):
    weights            W      = (P - E) * b_w + E * b_e          (b_w: the quantised layers' bytes per parameter;
                                                                  E: embedding + output head parameters, kept at the
                                                                  dtype's b_e by every quantisation)
    KV bytes per token k      = 2 * L * H_KV * d_h * b_KV        (2 = keys + values)
    per device under TP       k_dev = 2 * L * h_dev * d_h * b_KV  with h_dev = H_KV / TP when H_KV >= TP,
                                                                  and 1 (heads replicated) when TP > H_KV
    KV budget per device      B  = M_gpu * u - W / TP - overhead
    concurrent sequences      N(T) = floor(B / (k_dev * T_blocks)), T rounded up to whole KV blocks

Throughput ("Capacity and Cost From Measured Tokens"):
    decode replicas           R_d = ceil(lambda * E[O] / (theta_o * rho))
    prefill replicas          R_p = ceil(lambda * E[I] / (theta_i * rho))
    provisioned               R   = max(R_d, R_p) + 1     (+1: absorb one replica failure)
    cost per 1M output tokens C   = C_h * 1e6 / (3600 * theta_o)

Cold load: weight bytes / stated path throughput + stated engine init time.

Throughput figures are never invented: without a measurement the plan says "unmeasured".
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

GIB = 1024**3
MIB = 1024**2
#: vLLM's default KV-cache block size on CUDA (tokens per block): allocations are whole blocks.
KV_BLOCK_TOKENS = 16
#: Replicas a rolling update may add above the desired count (Deployment maxSurge). The reservation must
#: hold the nodes for them: "maxSurge: 1 cannot manufacture a GPU" (the design).
ROLLOUT_SURGE_REPLICAS = 1
#: Replica failures the provisioned count absorbs (N+1).
FAILURE_HEADROOM_REPLICAS = 1
#: Cap on --max-num-seqs: vLLM 0.32's own default for >=70 GiB GPUs; beyond it scheduling overhead
#: per step grows with no latency benefit for interactive traffic.
MAX_NUM_SEQS_CAP = 1024


class PlanningError(ValueError):
    """A configuration the formulas prove cannot work; the message names the numbers and ``subject`` names the
    planner input it concerns (``tensor_parallel_size``, ``max_model_len`` or ``weights``), so the caller can
    point at the right config key without reading the message."""

    def __init__(self, subject: str, message: str) -> None:
        super().__init__(message)
        self.subject = subject


@dataclass(frozen=True)
class Geometry:
    parameters: int
    layers: int
    kv_heads: int
    head_dim: int
    bytes_per_weight: float
    bytes_per_kv_element: float
    #: E: parameters of the input embedding and output head (vocab x hidden, once when tied), which a quantised
    #: release keeps at its dtype (``bytes_per_embedding_weight``); 0 counts every parameter at ``bytes_per_weight``.
    embedding_parameters: int = 0
    bytes_per_embedding_weight: float = 0.0


# ---- memory ---------------------------------------------------------------------------------------


def weight_bytes(g: Geometry) -> float:
    """W = (P - E) * b_w + E * b_e: the quantised layers at the release's precision, the embedding and output head
    at the dtype's (E = 0: every parameter at b_w)."""
    return (g.parameters - g.embedding_parameters) * g.bytes_per_weight + (
        g.embedding_parameters * g.bytes_per_embedding_weight
    )


def kv_bytes_per_token(g: Geometry) -> float:
    """k = 2 * L * H_KV * d_h * b_KV (whole model, one token)."""
    return 2 * g.layers * g.kv_heads * g.head_dim * g.bytes_per_kv_element


def kv_heads_per_device(kv_heads: int, tp: int) -> int:
    """KV heads each tensor-parallel rank holds: split when H_KV >= TP, one replicated head when TP > H_KV."""
    if kv_heads >= tp:
        if kv_heads % tp:
            raise PlanningError(
                "tensor_parallel_size", f"{kv_heads} KV heads cannot be split evenly across tensor_parallel_size {tp}"
            )
        return kv_heads // tp
    if tp % kv_heads:
        raise PlanningError(
            "tensor_parallel_size",
            f"tensor_parallel_size {tp} is not a multiple of the {kv_heads} KV heads to replicate",
        )
    return 1


def kv_bytes_per_token_per_device(g: Geometry, tp: int) -> float:
    return 2 * g.layers * kv_heads_per_device(g.kv_heads, tp) * g.head_dim * g.bytes_per_kv_element


def kv_budget_bytes_per_device(
    gpu_memory_gib: float, utilization: float, weights: float, tp: int, overhead_gib: float
) -> float:
    """B = M_gpu * u - W/TP - overhead (may be negative: the caller reports it)."""
    return gpu_memory_gib * GIB * utilization - weights / tp - overhead_gib * GIB


def blocks_rounded(tokens: float, block_tokens: int = KV_BLOCK_TOKENS) -> int:
    """Tokens a sequence of ``tokens`` occupies: whole KV blocks (``block_tokens`` is the engine's block size:
    16 with vLLM on CUDA, 128 with vLLM's CPU backend)."""
    return math.ceil(tokens / block_tokens) * block_tokens


def max_sequences(
    budget_bytes: float, per_token_bytes: float, tokens_per_sequence: float, block_tokens: int = KV_BLOCK_TOKENS
) -> int:
    if budget_bytes <= 0:
        return 0
    return math.floor(budget_bytes / (per_token_bytes * blocks_rounded(tokens_per_sequence, block_tokens)))


# ---- throughput and cost --------------------------------------------------------------------------


def decode_replicas(arrival_rps: float, mean_output_tokens: float, theta_o: float, rho: float) -> int:
    """R_d = ceil(lambda * E[O] / (theta_o * rho))."""
    return math.ceil(arrival_rps * mean_output_tokens / (theta_o * rho))


def prefill_replicas(arrival_rps: float, mean_prompt_tokens: float, theta_i: float, rho: float) -> int:
    """R_p = ceil(lambda * E[I] / (theta_i * rho))."""
    return math.ceil(arrival_rps * mean_prompt_tokens / (theta_i * rho))


def cost_per_million_output_tokens(replica_hourly_usd: float, theta_o: float) -> float:
    """C = C_h * 10^6 / (3600 * theta_o): accelerator-only cost at the measured operating point."""
    return replica_hourly_usd * 1e6 / (3600 * theta_o)


#: SHA-256 per hashing thread, MiB/s, stated below what one 2020s x86 core does with SHA extensions (measured
#: 1,090 MiB/s here: ``python -c "import hashlib,os,time; b=os.urandom(64<<20); t=time.time(); [hashlib.sha256(b)
#: for _ in range(16)]; print(1024/(time.time()-t))"``); re-measure on the serving nodes and change with the CPU.
HASH_MIB_S_PER_WORKER = 800
#: Verifying a streamed release reads metadata only (the manifest and one paginated object listing): a few
#: requests, stated as 10 s including the token fetch and the verifier's bounded retries.
METADATA_VERIFY_SECONDS = 10.0


#: Reading a staged copy from an in-memory volume into the GPU, MiB/s, stated well below one core's memcpy (~10 GiB/s)
#: and PCIe Gen4 x16 (~25 GB/s): vLLM's default safetensors loader copies tensor by tensor from one process.
#: Re-measure on the serving shape (the startup log's "Loading weights took" line) and change it with the loader.
STAGED_READ_MIB_S = 2000


def verify_seconds(weights: float, read_mib_s: float | None) -> float:
    """Time the release verification adds before vLLM starts: every byte hashed once at ``read_mib_s`` (the
    slower of the volume and the hashing threads), or a metadata check (``read_mib_s`` None: gs:// streaming)."""
    return METADATA_VERIFY_SECONDS if read_mib_s is None else weights / (read_mib_s * MIB)


def cold_load_seconds(
    weights: float,
    throughput_mib_s: float,
    engine_init_seconds: float,
    verify: float = 0.0,
    staged_read_mib_s: float | None = None,
) -> float:
    """Weight bytes over the loading path's stated throughput, plus the release verification before the server
    starts, plus stated engine initialisation. ``staged_read_mib_s``: the path first copies the weights into memory
    (at ``throughput_mib_s``) and vLLM then reads the copy at this rate, a second pass over the bytes."""
    staged = 0.0 if staged_read_mib_s is None else weights / (staged_read_mib_s * MIB)
    return weights / (throughput_mib_s * MIB) + verify + staged + engine_init_seconds


def nodes_for(replicas: int, replicas_per_node: int) -> int:
    return math.ceil(replicas / replicas_per_node)


# ---- the plan for one pool ------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolInputs:
    """Everything the planner needs for one serving pool, already resolved from config."""

    role: str
    release: str
    accelerator: str
    geometry: Geometry
    tensor_parallel_size: int
    max_model_len: int
    gpu_memory_gib: float
    gpus_per_node: int
    node_hourly_usd: float
    gpu_memory_utilization: float
    runtime_overhead_gib: float
    arrival_rps: float  # traffic share of this pool: lambda * weight / 100
    mean_prompt_tokens: float
    mean_output_tokens: float
    target_utilization: float
    load_throughput_mib_s: float
    engine_init_seconds: float
    #: Read rate of the release verification (MiB/s) when it hashes a mounted copy; None: metadata check only.
    verify_read_mib_s: float | None
    theta_o: float | None
    theta_i: float | None
    min_replicas: int
    max_replicas: int
    #: The engine's KV block size in tokens (16: vLLM on CUDA; vLLM's CPU backend uses 128).
    kv_block_tokens: int = KV_BLOCK_TOKENS
    #: Read rate of a copy staged in memory before vLLM loads it (MiB/s); None: vLLM reads the loading path itself.
    staged_read_mib_s: float | None = None


@dataclass(frozen=True)
class PoolCapacity:
    role: str
    release: str
    accelerator: str
    tensor_parallel_size: int
    gpus_per_replica: int
    replicas_per_node: int
    weights_gib: float
    weight_shard_gib_per_device: float
    kv_bytes_per_token: float
    kv_bytes_per_token_per_device: float
    kv_budget_gib_per_device: float
    kv_tokens_per_replica: int
    max_model_len: int
    mean_context_tokens: float
    max_seqs_at_max_model_len: int
    max_seqs_at_mean_context: int
    max_num_seqs: int
    max_num_batched_tokens: int
    #: Release verification before vLLM starts (hashing a mounted copy, or a metadata check).
    verify_seconds: float
    cold_load_seconds: float
    replica_hourly_usd: float
    throughput: str  # "measured" | "unmeasured"
    decode_replicas: int | None
    prefill_replicas: int | None
    required_replicas: int | None
    cost_per_million_output_tokens_usd: float | None
    #: C_h * 10^6 / (3600 * theta_i), given when prefill replicas outnumber decode replicas (prefill dominates).
    cost_per_million_input_tokens_usd: float | None
    min_replicas: int
    max_replicas: int
    warnings: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["warnings"] = list(self.warnings)
        return d


def default_max_num_batched_tokens(gpu_memory_gib: float) -> int:
    """vLLM 0.32's own per-GPU default (vLLM engine arguments): 8192 on >= 70 GiB GPUs, 2048 below. Stated explicitly in
    the rendered args so a vLLM upgrade cannot silently change the chunked-prefill budget."""
    return 8192 if gpu_memory_gib >= 70 else 2048


def plan_pool(p: PoolInputs) -> PoolCapacity:
    """Size one pool; raises PlanningError naming the numbers when the model or context cannot fit."""
    g = p.geometry
    tp = p.tensor_parallel_size
    if tp > p.gpus_per_node:
        raise PlanningError(
            "tensor_parallel_size",
            f"tensor_parallel_size {tp} exceeds the {p.gpus_per_node} GPU(s) of one node "
            f"({p.accelerator}); multi-node serving is not supported",
        )
    w = weight_bytes(g)
    k = kv_bytes_per_token(g)
    k_dev = kv_bytes_per_token_per_device(g, tp)
    budget = kv_budget_bytes_per_device(p.gpu_memory_gib, p.gpu_memory_utilization, w, tp, p.runtime_overhead_gib)
    if budget <= 0:
        raise PlanningError(
            "weights",
            f"weights do not fit: {w / GIB:.1f} GiB / TP {tp} = {w / tp / GIB:.1f} GiB per GPU + "
            f"{p.runtime_overhead_gib:.1f} GiB overhead > {p.gpu_memory_gib:.0f} GiB x "
            f"{p.gpu_memory_utilization} = {p.gpu_memory_gib * p.gpu_memory_utilization:.1f} GiB usable",
        )
    seqs_max = max_sequences(budget, k_dev, p.max_model_len, p.kv_block_tokens)
    if seqs_max == 0:
        raise PlanningError(
            "max_model_len",
            f"max_model_len {p.max_model_len} leaves zero concurrency: one sequence needs "
            f"{k_dev * blocks_rounded(p.max_model_len, p.kv_block_tokens) / GIB:.2f} GiB of KV cache per GPU, the budget is "
            f"{budget / GIB:.2f} GiB",
        )
    mean_ctx = p.mean_prompt_tokens + p.mean_output_tokens
    seqs_mean = max_sequences(budget, k_dev, mean_ctx, p.kv_block_tokens)
    max_num_seqs = max(1, min(seqs_mean, MAX_NUM_SEQS_CAP))
    batched = max(default_max_num_batched_tokens(p.gpu_memory_gib), max_num_seqs)
    replica_hourly = p.node_hourly_usd * tp / p.gpus_per_node
    warnings: list[str] = []
    if p.gpus_per_node % tp:
        warnings.append(
            f"{p.gpus_per_node % tp} GPU(s) per node idle: {p.gpus_per_node} GPUs/node is not a multiple of TP {tp}"
        )
    r_d = r_p = required = None
    cost = cost_in = None
    if p.theta_o is not None and p.theta_i is not None:
        r_d = decode_replicas(p.arrival_rps, p.mean_output_tokens, p.theta_o, p.target_utilization)
        r_p = prefill_replicas(p.arrival_rps, p.mean_prompt_tokens, p.theta_i, p.target_utilization)
        required = max(r_d, r_p) + FAILURE_HEADROOM_REPLICAS
        cost = cost_per_million_output_tokens(replica_hourly, p.theta_o)
        if r_p > r_d:  # prefill sizes the pool: what a million prompt tokens cost is the figure that matters
            cost_in = cost_per_million_output_tokens(replica_hourly, p.theta_i)
        if required > p.max_replicas:
            warnings.append(
                f"max_replicas {p.max_replicas} is below the {required} replicas the measured "
                f"throughput requires at peak (incl. one failure)"
            )
    return PoolCapacity(
        role=p.role,
        release=p.release,
        accelerator=p.accelerator,
        tensor_parallel_size=tp,
        gpus_per_replica=tp,
        replicas_per_node=p.gpus_per_node // tp,
        weights_gib=w / GIB,
        weight_shard_gib_per_device=w / tp / GIB,
        kv_bytes_per_token=k,
        kv_bytes_per_token_per_device=k_dev,
        kv_budget_gib_per_device=budget / GIB,
        kv_tokens_per_replica=math.floor(budget / k_dev),
        max_model_len=p.max_model_len,
        mean_context_tokens=mean_ctx,
        max_seqs_at_max_model_len=seqs_max,
        max_seqs_at_mean_context=seqs_mean,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=batched,
        verify_seconds=verify_seconds(w, p.verify_read_mib_s),
        cold_load_seconds=cold_load_seconds(
            w,
            p.load_throughput_mib_s,
            p.engine_init_seconds,
            verify_seconds(w, p.verify_read_mib_s),
            p.staged_read_mib_s,
        ),
        replica_hourly_usd=replica_hourly,
        throughput="measured" if p.theta_o is not None else "unmeasured",
        decode_replicas=r_d,
        prefill_replicas=r_p,
        required_replicas=required,
        cost_per_million_output_tokens_usd=cost,
        cost_per_million_input_tokens_usd=cost_in,
        min_replicas=p.min_replicas,
        max_replicas=p.max_replicas,
        warnings=tuple(warnings),
    )


@dataclass(frozen=True)
class AcceleratorCapacity:
    """Node arithmetic for one accelerator topology shared by one or more pools."""

    name: str
    pools: tuple[str, ...]
    replicas_per_node: int
    max_replicas: int
    surge_replicas: int
    nodes_for_max_replicas: int
    nodes_for_max_plus_surge: int
    reserved_nodes: int | None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["pools"] = list(self.pools)
        return d


def plan_accelerator(name: str, pools: list[PoolCapacity], reserved_nodes: int | None) -> AcceleratorCapacity:
    """Nodes needed when every pool on this topology is at max replicas, plus one surge replica per pool."""
    per_node = min(p.replicas_per_node for p in pools)
    max_r = sum(p.max_replicas for p in pools)
    surge = ROLLOUT_SURGE_REPLICAS * len(pools)
    return AcceleratorCapacity(
        name=name,
        pools=tuple(p.role for p in pools),
        replicas_per_node=per_node,
        max_replicas=max_r,
        surge_replicas=surge,
        nodes_for_max_replicas=nodes_for(max_r, per_node),
        nodes_for_max_plus_surge=nodes_for(max_r + surge, per_node),
        reserved_nodes=reserved_nodes,
    )
