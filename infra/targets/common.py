"""Helpers every serving target shares: the labels of what a stack creates, its notification channels, its alert
thresholds (the workload contract's objectives and the observability section), and the capacity report's lines of a
co-hosted group's placements."""

from __future__ import annotations

from components.monitoring.alerts import Thresholds
from components.monitoring.component import CHANNEL_TYPES, ChannelSpec

from ..config.observability import NotificationChannel
from ..config.stack import StackConfig
from ..planning.cohosting import GroupLayout


def platform_labels(cfg: StackConfig) -> dict[str, str]:
    return {"app": "llm-serving", "environment": cfg.environment, "managed-by": "pulumi"}


def channel_spec(c: NotificationChannel) -> ChannelSpec:
    if c.existing:
        return ChannelSpec(existing_name=c.name)
    assert c.type is not None  # validated: a created channel names its type
    if c.type == "email":
        return ChannelSpec(
            type=CHANNEL_TYPES["email"], display_name=c.display_name, labels=(("email_address", str(c.email_address)),)
        )
    if c.type == "pagerduty":
        return ChannelSpec(
            type=CHANNEL_TYPES["pagerduty"],
            display_name=c.display_name,
            sensitive_labels=(("service_key", str(c.service_key)),),
        )
    return ChannelSpec(type=CHANNEL_TYPES["webhook"], display_name=c.display_name, secret_labels=(("url", str(c.url)),))


def thresholds(cfg: StackConfig) -> Thresholds:
    a = cfg.observability.alerts
    return Thresholds(
        ttft_p95_seconds=cfg.contract.ttft_p95_ms / 1000.0,
        itl_p95_seconds=cfg.contract.itl_p95_ms / 1000.0,
        kv_cache_usage=a.kv_cache_usage,
        kv_cache_for_minutes=a.kv_cache_for_minutes,
        canary_ttft_ratio=a.canary_ttft_ratio,
        no_traffic_minutes=a.no_traffic_minutes,
    )


def placement_lines(lay: GroupLayout) -> list[str]:
    """One line per co-hosted model: its partition, where its instances run, weights and KV budget per GPU, and its
    concurrency."""
    out = []
    for p in lay.models:
        where = f"{p.instances} x TP {p.tensor_parallel_size} on GPUs {' '.join(str(list(x)) for x in p.gpus)}"
        out.append(
            f"  {p.model_name} ({p.release}): partition {p.partition:g} = {p.preallocated_gib_per_gpu:.2f} "
            f"GiB/GPU, {where}; weights {p.weight_shard_gib_per_gpu:.2f} GiB/GPU, "
            f"KV budget {p.kv_budget_gib_per_gpu:.2f} GiB/GPU; {p.max_seqs_at_mean_context} seqs @ "
            f"{p.mean_context_tokens:g} (useful {p.useful_concurrency}), {p.max_seqs_at_max_model_len} seqs "
            f"@ max_model_len {p.max_model_len}"
        )
    return out
