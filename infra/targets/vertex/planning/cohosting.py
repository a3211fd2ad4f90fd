"""The ``vertex`` co-hosted groups: the layout and memory checks of ``cohosting``, then per model the streamed cold
load and probes, and the machine's replica bounds within the reservation it shares with the Vertex pools and other
groups on it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components.serving.spec import ReleaseInfo
from infra.config.stack import StackConfig
from infra.planning import capacity
from infra.planning import cohosting as ch
from infra.planning.plan import PlanIssue, PoolPlanningError, layout_inputs, release_geometry, release_info
from infra.planning.vllm_args import render_vllm_args

from ..config import TARGET, CoHostedGroup, VertexPool
from . import pools as vx


@dataclass(frozen=True)
class CoHostedModelPlan:
    """One model of a co-hosted group: its release, public name, placement and the arguments of its vLLM server."""

    release: ReleaseInfo
    model_name: str
    endpoint_id: str
    placement: ch.ModelPlacement
    vllm_args: tuple[str, ...]
    cold_load_seconds: float
    startup_failure_threshold: int
    startup_window_seconds: int
    deployment_timeout_seconds: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "release": self.release.release,
            "model_name": self.model_name,
            "endpoint_id": self.endpoint_id,
            "cold_load_seconds": self.cold_load_seconds,
            "startup_window_seconds": self.startup_window_seconds,
            "deployment_timeout_seconds": self.deployment_timeout_seconds,
            "vllm_args": list(self.vllm_args),
        }


@dataclass(frozen=True)
class CoHostedGroupPlan:
    """A co-hosted group: the machine its models share, the pool's replica bounds and every model's plan."""

    key: str
    target: str
    accelerator: str
    machine: vx.VertexPlan
    layout: ch.GroupLayout
    models: tuple[CoHostedModelPlan, ...]

    def to_dict(self) -> dict[str, Any]:
        m = self.machine
        return {
            "target": self.target,
            "accelerator": self.accelerator,
            "machine_type": m.machine_type,
            "gpu_type": m.gpu_type,
            "accelerator_count": m.accelerator_count,
            "reservation": m.reservation_resource,
            "min_replicas": m.min_replicas,
            "max_replicas": m.max_replicas,
            "max_reason": m.max_reason,
            "layout": self.layout.to_dict(),
            "models": [x.to_dict() for x in self.models],
        }


def plan_groups(cfg: StackConfig, issues: list[PlanIssue]) -> dict[str, CoHostedGroupPlan]:
    """Each co-hosted group whose references resolve: the layout and memory checks of ``cohosting``, then per model
    the streamed cold load and probes, and the machine's replica bounds within the reservation it shares with the
    Vertex pools and other groups on it."""
    release_ids = {r.release for r in cfg.releases}
    contract = cfg.contract
    mean_ctx = contract.prompt_tokens.mean + contract.output_tokens.mean
    out: dict[str, CoHostedGroupPlan] = {}
    for key, group in cfg.groups():
        if not isinstance(group, CoHostedGroup):
            continue
        if group.accelerator not in cfg.accelerators or any(m.release not in release_ids for m in group.models):
            continue  # the rules report dangling references
        acc = cfg.accelerators[group.accelerator]
        try:
            layout = ch.plan_layout(
                layout_inputs(cfg, group), acc.gpus_per_node, acc.gpu_memory_gib, group.transient_reserve, mean_ctx
            )
        except ch.CoHostingError as exc:
            issues.append(PlanIssue(("cohosting", key, *exc.subject), str(exc)))
            continue
        others = [
            (vx.replacement_room(p), p.max_replicas)
            for _, p in vx.vertex_pools(cfg)
            if p.accelerator == group.accelerator
        ]
        others += vx.groups_on(cfg, group.accelerator, but=key)
        cap_replicas = (
            None if acc.reservation is None else vx.reservation_cap(acc.reservation.count, group.min_replicas, others)
        )
        models: list[CoHostedModelPlan] = []
        machine: vx.VertexPlan | None = None
        for m, placed in zip(group.models, layout.models, strict=True):
            rel = cfg.release(m.release)
            # The group's machine as a Vertex pool of this model: the same cold-load, probe and bound arithmetic.
            as_pool = VertexPool(
                target=TARGET,
                release=m.release,
                weight=0,
                accelerator=group.accelerator,
                min_replicas=group.min_replicas,
                max_replicas=group.max_replicas,
                loading=group.loading,
                shm_gib=group.shm_gib,
                startup_margin=group.startup_margin,
                gpu_memory_utilization=m.gpu_memory_partition,
                runtime_overhead_gib=m.runtime_overhead_gib,
            )
            geometry = release_geometry(rel)
            w = capacity.weight_bytes(geometry)
            cold = capacity.cold_load_seconds(
                w, group.loading.throughput_mib_s, group.loading.engine_init_seconds, capacity.verify_seconds(w, None)
            )
            cap = _cohosted_capacity(placed, cold)
            try:
                plan = vx.plan_vertex(
                    as_pool,
                    acc,
                    cfg.project,
                    cap,
                    w,
                    contract.stream_bound_seconds,
                    cfg.observability.autoscaling.queue_target_per_pod,
                    cap_replicas,
                )
            except PoolPlanningError as exc:
                issues.append(PlanIssue(("cohosting", key, "loading"), f"{m.model_name}: {exc}"))
                break
            machine = machine or plan
            args = render_vllm_args(
                vx.vllm_inputs(
                    rel, as_pool, cap, contract.stream_bound_seconds, m.model_name, contract.max_output_tokens
                )
            )
            assert m.endpoint_id is not None  # required on vertex (CoHostedGroup's validator)
            models.append(
                CoHostedModelPlan(
                    release=release_info(rel),
                    model_name=m.model_name,
                    endpoint_id=m.endpoint_id,
                    placement=placed,
                    vllm_args=tuple(args),
                    cold_load_seconds=cold,
                    startup_failure_threshold=plan.startup_failure_threshold,
                    startup_window_seconds=plan.startup_window_seconds,
                    deployment_timeout_seconds=plan.deployment_timeout_seconds,
                )
            )
        else:
            assert machine is not None
            out[key] = CoHostedGroupPlan(
                key=key,
                target=group.target,
                accelerator=group.accelerator,
                machine=machine,
                layout=layout,
                models=tuple(models),
            )
    return out


def _cohosted_capacity(p: ch.ModelPlacement, cold_load_seconds: float) -> capacity.PoolCapacity:
    """The capacity figures the Vertex planner and the vLLM renderer read, from the co-hosting layout."""
    return capacity.PoolCapacity(
        role=p.model_name,
        release=p.release,
        accelerator="",
        tensor_parallel_size=p.tensor_parallel_size,
        gpus_per_replica=p.tensor_parallel_size,
        replicas_per_node=p.instances,
        weights_gib=p.weights_gib,
        weight_shard_gib_per_device=p.weight_shard_gib_per_gpu,
        kv_bytes_per_token=0.0,
        kv_bytes_per_token_per_device=p.kv_bytes_per_token_per_gpu,
        kv_budget_gib_per_device=p.kv_budget_gib_per_gpu,
        kv_tokens_per_replica=p.kv_tokens_per_instance,
        max_model_len=p.max_model_len,
        mean_context_tokens=p.mean_context_tokens,
        max_seqs_at_max_model_len=p.max_seqs_at_max_model_len,
        max_seqs_at_mean_context=p.max_seqs_at_mean_context,
        max_num_seqs=p.max_num_seqs,
        max_num_batched_tokens=max(
            capacity.default_max_num_batched_tokens(p.preallocated_gib_per_gpu / p.partition), p.max_num_seqs
        ),
        verify_seconds=capacity.METADATA_VERIFY_SECONDS,
        cold_load_seconds=cold_load_seconds,
        replica_hourly_usd=0.0,
        throughput="unmeasured",
        decode_replicas=None,
        prefill_replicas=None,
        required_replicas=None,
        cost_per_million_output_tokens_usd=None,
        cost_per_million_input_tokens_usd=None,
        min_replicas=1,
        max_replicas=1,
    )
