"""Planning of one co-hosted group (pure): several releases on one accelerator set, each in its GPU-memory partition.

Per model (the capacity formulas of ``capacity``, with the partition as ``gpu_memory_utilization``):

    KV budget per GPU        B = M_gpu * partition - W / TP - overhead
    useful concurrency fits  floor(B / (k_dev * T_mean)) >= useful_concurrency   (T_mean in whole KV blocks)
    max concurrency          N(max_model_len) = floor(B / (k_dev * T_max))  >= 1

Per GPU of the machine: the partitions of every instance placed on it sum to at most ``1 - transient_reserve``.

Placement: instance ``j`` of a model with tensor parallelism ``TP`` uses GPUs ``[(j * TP) mod G, ... + TP)`` of the
machine's ``G``, so instances of one model spread over the machine and each model starts at GPU 0. The co-host server
(GKE) starts each instance with exactly these GPUs visible (``CUDA_VISIBLE_DEVICES``); on Vertex each deployed model
is one container that sees every GPU of the machine, and vLLM's ranks take the first ``TP`` of them: this placement
with one instance per model.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from . import capacity


class CoHostingError(ValueError):
    """A co-hosted group the planner proves cannot work; ``subject`` is the group key path it concerns."""

    def __init__(self, subject: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.subject = subject


@dataclass(frozen=True)
class ModelInputs:
    release: str
    model_name: str
    geometry: capacity.Geometry
    tensor_parallel_size: int
    max_model_len: int
    partition: float
    instances: int
    useful_concurrency: int
    runtime_overhead_gib: float


@dataclass(frozen=True)
class ModelPlacement:
    """What the planner derived for one co-hosted model."""

    release: str
    model_name: str
    partition: float
    tensor_parallel_size: int
    instances: int
    #: The GPUs of the machine each instance uses.
    gpus: tuple[tuple[int, ...], ...]
    #: Pre-allocated memory per GPU: partition x M_gpu (weights shard + KV budget + overhead).
    preallocated_gib_per_gpu: float
    weights_gib: float
    weight_shard_gib_per_gpu: float
    kv_bytes_per_token_per_gpu: float
    kv_budget_gib_per_gpu: float
    kv_tokens_per_instance: int
    useful_concurrency: int
    mean_context_tokens: float
    max_seqs_at_mean_context: int
    max_model_len: int
    #: Concurrent sequences at ``max_model_len`` per instance: what vLLM reports as "maximum concurrency for
    #: <max_model_len> tokens per request".
    max_seqs_at_max_model_len: int
    #: --max-num-seqs: the sequences at mean context, within vLLM's cap.
    max_num_seqs: int


@dataclass(frozen=True)
class GroupLayout:
    gpus_per_machine: int
    gpu_memory_gib: float
    transient_reserve: float
    #: Sum of the partitions placed on each GPU of the machine.
    partition_sum_per_gpu: tuple[float, ...]
    models: tuple[ModelPlacement, ...]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["partition_sum_per_gpu"] = list(self.partition_sum_per_gpu)
        d["models"] = [{**asdict(m), "gpus": [list(g) for g in m.gpus]} for m in self.models]
        return d


def instance_gpus(instances: int, tp: int, gpus: int) -> tuple[tuple[int, ...], ...]:
    """GPUs of each instance: ``[(j * TP) mod G, ..., + TP)``."""
    return tuple(tuple(((j * tp) % gpus) + r for r in range(tp)) for j in range(instances))


def plan_layout(
    models: list[ModelInputs],
    gpus_per_machine: int,
    gpu_memory_gib: float,
    transient_reserve: float,
    mean_context_tokens: float,
) -> GroupLayout:
    """Place and size every model; raises CoHostingError (``("models", i, <key>)`` or ``("models",)``)."""
    placements: list[ModelPlacement] = []
    sums = [0.0] * gpus_per_machine
    for i, m in enumerate(models):
        tp = m.tensor_parallel_size
        if tp > gpus_per_machine or gpus_per_machine % tp:
            raise CoHostingError(
                ("models", i, "release"),
                (
                    f"release {m.release!r} runs on tensor_parallel_size {tp}, which does not divide the machine's "
                    f"{gpus_per_machine} GPU(s): its instances cannot be placed on whole GPU sets"
                ),
            )
        g = m.geometry
        w = capacity.weight_bytes(g)
        k_dev = capacity.kv_bytes_per_token_per_device(g, tp)
        budget = capacity.kv_budget_bytes_per_device(gpu_memory_gib, m.partition, w, tp, m.runtime_overhead_gib)
        part_gib = gpu_memory_gib * m.partition
        if budget <= 0:
            raise CoHostingError(
                ("models", i, "gpu_memory_partition"),
                (
                    f"{m.model_name}: the weights do not fit the partition: {w / capacity.GIB:.2f} GiB / TP {tp} = "
                    f"{w / tp / capacity.GIB:.2f} GiB per GPU + {m.runtime_overhead_gib:g} GiB overhead > "
                    f"{gpu_memory_gib:g} GiB x {m.partition:g} = {part_gib:.2f} GiB"
                ),
            )
        need = m.useful_concurrency * k_dev * capacity.blocks_rounded(mean_context_tokens)
        seqs_mean = capacity.max_sequences(budget, k_dev, mean_context_tokens)
        if seqs_mean < m.useful_concurrency:
            raise CoHostingError(
                ("models", i, "gpu_memory_partition"),
                (
                    f"{m.model_name}: weights + KV for {m.useful_concurrency} sequences of "
                    f"{mean_context_tokens:g} tokens do not fit the partition: {w / tp / capacity.GIB:.2f} GiB weights + "
                    f"{need / capacity.GIB:.2f} GiB KV + {m.runtime_overhead_gib:g} GiB overhead > {gpu_memory_gib:g} GiB "
                    f"x {m.partition:g} = {part_gib:.2f} GiB per GPU (it holds {seqs_mean}); raise the partition or "
                    "lower useful_concurrency"
                ),
            )
        seqs_max = capacity.max_sequences(budget, k_dev, m.max_model_len)
        if seqs_max == 0:
            raise CoHostingError(
                ("models", i, "gpu_memory_partition"),
                (
                    f"{m.model_name}: max_model_len {m.max_model_len} leaves zero concurrency in the partition: one "
                    f"sequence needs {k_dev * capacity.blocks_rounded(m.max_model_len) / capacity.GIB:.2f} GiB of KV per "
                    f"GPU, the budget is {budget / capacity.GIB:.2f} GiB"
                ),
            )
        placed = instance_gpus(m.instances, tp, gpus_per_machine)
        for gpu_set in placed:
            for gpu in gpu_set:
                sums[gpu] += m.partition
        placements.append(
            ModelPlacement(
                release=m.release,
                model_name=m.model_name,
                partition=m.partition,
                tensor_parallel_size=tp,
                instances=m.instances,
                gpus=placed,
                preallocated_gib_per_gpu=part_gib,
                weights_gib=w / capacity.GIB,
                weight_shard_gib_per_gpu=w / tp / capacity.GIB,
                kv_bytes_per_token_per_gpu=k_dev,
                kv_budget_gib_per_gpu=budget / capacity.GIB,
                kv_tokens_per_instance=math.floor(budget / k_dev),
                useful_concurrency=m.useful_concurrency,
                mean_context_tokens=mean_context_tokens,
                max_seqs_at_mean_context=seqs_mean,
                max_model_len=m.max_model_len,
                max_seqs_at_max_model_len=seqs_max,
                max_num_seqs=max(1, min(seqs_mean, capacity.MAX_NUM_SEQS_CAP)),
            )
        )
    limit = 1 - transient_reserve
    sums = [round(s, 9) for s in sums]
    for gpu, total in enumerate(sums):
        if total > round(limit, 9):
            on_it = [f"{p.model_name} {p.partition:g}" for p in placements for gs in p.gpus if gpu in gs]
            raise CoHostingError(
                ("models",),
                (
                    f"the partitions on GPU {gpu} sum to {total:g} ({' + '.join(on_it)}), above 1 - transient_reserve "
                    f"{transient_reserve:g} = {limit:g}: lower the partitions or place fewer instances"
                ),
            )
    return GroupLayout(
        gpus_per_machine=gpus_per_machine,
        gpu_memory_gib=gpu_memory_gib,
        transient_reserve=transient_reserve,
        partition_sum_per_gpu=tuple(sums),
        models=tuple(placements),
    )


# ---- GKE: the co-host pod ----------------------------------------------------------------------------------------

#: A co-hosted model's public name as a DNS label names its instances in the co-host server (``<role>-<j>``, a DNS
#: label of at most 63 characters with the index): this long at most.
GKE_ROLE_MAX_LENGTH = 40


def gke_role(model_name: str) -> str:
    """A co-hosted model's public name as a DNS label ('.' and '_' become '-')."""
    return model_name.replace(".", "-").replace("_", "-")


# ---- recipes: (instances x TP) layouts of one model on one machine shape ------------------------------------------


@dataclass(frozen=True)
class Recipe:
    """One candidate layout of a model on a machine: ``instances`` servers of ``tensor_parallel_size`` GPUs, each
    with ``partition`` of every GPU it uses (``instances_per_gpu_set`` servers share each set of TP GPUs)."""

    instances: int
    tensor_parallel_size: int
    instances_per_gpu_set: int
    partition: float
    kv_budget_gib_per_gpu: float
    max_seqs_at_mean_context: int
    max_seqs_at_max_model_len: int

    @property
    def machine_seqs_at_mean_context(self) -> int:
        """Sequences the whole machine holds at the mean context: instances x per-instance concurrency."""
        return self.instances * self.max_seqs_at_mean_context


def recipes(
    geometry: capacity.Geometry,
    max_model_len: int,
    gpus_per_machine: int,
    gpu_memory_gib: float,
    mean_context_tokens: float,
    runtime_overhead_gib: float = 2.0,
    transient_reserve: float = 0.1,
    max_instances_per_gpu_set: int = 2,
) -> list[Recipe]:
    """Every layout that fits memory: TP over the divisors of the machine's GPU count the model's KV heads allow,
    ``G / TP`` GPU sets, ``k`` = 1..``max_instances_per_gpu_set`` servers per set, each with partition
    ``(1 - transient_reserve) / k``; kept when the weights fit and a sequence of ``max_model_len`` still does.
    Which one serves best depends on the load (seed: high TP wins at low concurrency, many TP-1 instances at high);
    the benchmark measures each candidate's operating point (``llm-serving bench``, GPU needed)."""
    out: list[Recipe] = []
    for tp in (t for t in range(1, gpus_per_machine + 1) if gpus_per_machine % t == 0):
        try:
            k_dev = capacity.kv_bytes_per_token_per_device(geometry, tp)
        except capacity.PlanningError:
            continue  # KV heads cannot be split across (or replicated onto) this many ranks
        w = capacity.weight_bytes(geometry)
        for k in range(1, max_instances_per_gpu_set + 1):
            partition = round((1 - transient_reserve) / k, 6)
            budget = capacity.kv_budget_bytes_per_device(gpu_memory_gib, partition, w, tp, runtime_overhead_gib)
            seqs_max = capacity.max_sequences(budget, k_dev, max_model_len)
            if budget <= 0 or seqs_max == 0:
                continue
            out.append(
                Recipe(
                    instances=(gpus_per_machine // tp) * k,
                    tensor_parallel_size=tp,
                    instances_per_gpu_set=k,
                    partition=partition,
                    kv_budget_gib_per_gpu=budget / capacity.GIB,
                    max_seqs_at_mean_context=capacity.max_sequences(budget, k_dev, mean_context_tokens),
                    max_seqs_at_max_model_len=seqs_max,
                )
            )
    return out
