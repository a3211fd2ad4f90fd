"""The ``vertex`` co-hosted groups: the layout and memory checks of ``cohosting``, then per model the streamed cold
load and its ``vllm serve`` arguments (the Vertex renderer's, as for a pool), and for the group the co-host server's
configuration (one loopback instance per placement) and the machine's plan: its startup window sized for every
instance starting in turn, its replica bounds within the reservation it shares with the Vertex pools and other
groups on it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from components import naming
from components.cohost.server import CohostConfig, InstanceSpec
from components.serving.spec import ReleaseInfo
from infra.config.stack import StackConfig
from infra.planning import capacity
from infra.planning import cohost_server as cs
from infra.planning import cohosting as ch
from infra.planning.plan import PlanIssue, PoolPlanningError, layout_inputs, release_geometry, release_info
from infra.planning.vllm_args import render_vllm_args

from ..config import TARGET, CoHostedGroup, VertexPool
from . import pools as vx


@dataclass(frozen=True)
class CoHostedModelPlan:
    """One model of a co-hosted group: its release, public name, placement, its cold load and its instances in the
    server's configuration."""

    release: ReleaseInfo
    model_name: str
    placement: ch.ModelPlacement
    cold_load_seconds: float
    instances: tuple[InstanceSpec, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "release": self.release.release,
            "model_name": self.model_name,
            "cold_load_seconds": self.cold_load_seconds,
            "instances": [
                {"name": i.name, "gpus": list(i.gpus), "port": i.port, "vllm_args": list(i.args)}
                for i in self.instances
            ],
        }


@dataclass(frozen=True)
class CoHostedGroupPlan:
    """A co-hosted group: its endpoint, the machine its one deployed model runs on (startup window for the whole
    staggered start), the server's configuration and every model's plan."""

    key: str
    target: str
    accelerator: str
    endpoint_id: str
    machine: vx.VertexPlan
    layout: ch.GroupLayout
    models: tuple[CoHostedModelPlan, ...]
    #: The co-host server's configuration and its canonical JSON (what the container runs with).
    server: CohostConfig
    server_json: str
    #: The one image every instance runs (by digest: the rules require one image per group) and its vLLM version.
    image: str
    vllm_version: str
    #: ``gs://<bucket>/<object>`` the server follows (update_models), the object's name, and the poll period; None:
    #: the plan's set only.
    watch: str | None = None
    watch_object: str | None = None
    poll_seconds: int | None = None

    @property
    def releases(self) -> tuple[ReleaseInfo, ...]:
        return tuple(m.release for m in self.models)

    def to_dict(self) -> dict[str, Any]:
        m = self.machine
        return {
            "target": self.target,
            "accelerator": self.accelerator,
            "endpoint_id": self.endpoint_id,
            "machine_type": m.machine_type,
            "gpu_type": m.gpu_type,
            "accelerator_count": m.accelerator_count,
            "reservation": m.reservation_resource,
            "min_replicas": m.min_replicas,
            "max_replicas": m.max_replicas,
            "max_reason": m.max_reason,
            "cold_load_seconds": m.cold_load_seconds,
            "startup_window_seconds": m.startup_window_seconds,
            "deployment_timeout_seconds": m.deployment_timeout_seconds,
            "watch": self.watch,
            "layout": self.layout.to_dict(),
            "models": [x.to_dict() for x in self.models],
        }


def as_pool(group: CoHostedGroup, index: int) -> VertexPool:
    """A co-hosted model as the Vertex pool it is sized as: the group's machine bounds, loading and container
    options, the model's partition as ``gpu_memory_utilization``; weight 0 because no traffic split sends it
    requests (they reach it by model name)."""
    m = group.models[index]
    return VertexPool(
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


def plan_groups(cfg: StackConfig, issues: list[PlanIssue]) -> dict[str, CoHostedGroupPlan]:
    """Each co-hosted group whose references resolve: the layout and memory checks of ``cohosting``, per model its
    cold load and arguments, then the server's configuration and the machine's plan."""
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
        shutdown = vx.inference_timeout_seconds(contract.stream_bound_seconds)
        planned: list[cs.ModelInstances] = []
        colds: list[float] = []
        for i, (m, placed) in enumerate(zip(group.models, layout.models, strict=True)):
            rel = cfg.release(m.release)
            pool = as_pool(group, i)
            w = capacity.weight_bytes(release_geometry(rel))
            cold = capacity.cold_load_seconds(
                w, group.loading.throughput_mib_s, group.loading.engine_init_seconds, capacity.verify_seconds(w, None)
            )
            inputs = vx.vllm_inputs(
                rel,
                pool,
                _cohosted_capacity(placed, cold),
                contract.stream_bound_seconds,
                m.model_name,
                contract.max_output_tokens,
            )
            planned.append(cs.ModelInstances(rel, placed, inputs.served_model_names, tuple(render_vllm_args(inputs))))
            colds.append(cold)
        # The machine as the first model's pool, with the whole staggered start as its cold load: its startup probe
        # and deployment timeout wait for every instance in turn.
        staggered = cs.staggered_cold_load_seconds(colds, [m.instances for m in group.models])
        first_rel = cfg.release(group.models[0].release)
        try:
            machine = vx.plan_vertex(
                as_pool(group, 0),
                acc,
                cfg.project,
                replace(_cohosted_capacity(layout.models[0], colds[0]), cold_load_seconds=staggered),
                capacity.weight_bytes(release_geometry(first_rel)),
                contract.stream_bound_seconds,
                cfg.observability.autoscaling.queue_target_per_pod,
                cap_replicas,
            )
        except PoolPlanningError as exc:
            issues.append(PlanIssue(("cohosting", key, "loading"), f"the group's instances start in turn: {exc}"))
            continue
        specs = cs.group_instances(planned, naming.VERTEX_SCRIPTS_DIR)
        server, server_json = cs.server_config(
            gpus=acc.gpus_per_node,
            transient_reserve=group.transient_reserve,
            start_timeout=cs.start_timeout_seconds(colds, group.startup_margin),
            shutdown_timeout_seconds=shutdown,
            startup_window_seconds=machine.startup_window_seconds,
            instances=[i for s in specs for i in s],
        )
        out[key] = CoHostedGroupPlan(
            key=key,
            target=group.target,
            accelerator=group.accelerator,
            endpoint_id=group.endpoint_id,
            machine=machine,
            layout=layout,
            models=tuple(
                CoHostedModelPlan(release_info(p.release), m.model_name, p.placement, cold, s)
                for m, p, cold, s in zip(group.models, planned, colds, specs, strict=True)
            ),
            server=server,
            server_json=server_json,
            image=first_rel.image,
            vllm_version=first_rel.vllm_version,
            watch=f"gs://{first_rel.weights_bucket}/{um.object}" if (um := group.update_models) else None,
            watch_object=um.object if um else None,
            poll_seconds=um.poll_seconds if um else None,
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
