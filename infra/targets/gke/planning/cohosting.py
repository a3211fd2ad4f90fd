"""The ``gke`` co-hosted groups: the memory checks of ``cohosting`` (per model, and the worst case of the time-shared
slots on one GPU), then per model the GKE pool plan (capacity, probes, HPA within the reservation less the one surge
node the group's rollouts share, the vLLM arguments)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infra.config.stack import StackConfig
from infra.planning import capacity
from infra.planning import cohosting as ch
from infra.planning.plan import PlanIssue, layout_inputs, release_info
from infra.planning.probes import ProbeError, plan_probes
from infra.planning.vllm_args import render_vllm_args

from ..config import TARGET, GkeCoHostedGroup, GkePool, WeightLoading
from .autoscaling import plan_hpa, reservation_replica_cap
from .pools import GkePoolPlan, gke_vllm_inputs, machine_of, pool_inputs

#: One spare node holds the rollout surge pod of every model of a GKE group (one pod of each model fits a node).
ROLLOUT_SURGE_NODES = 1


@dataclass(frozen=True)
class GkeCoHostedModelPlan:
    """One model of a GKE co-hosted group: planned as a GKE pool of its own role (namespace, Deployment,
    InferencePool, picker, HPA) whose vLLM takes its partition of a time-shared GPU."""

    role: str
    model_name: str
    placement: ch.ModelPlacement
    pool: GkePoolPlan
    #: The GKE pool this model is planned and rendered as (:func:`cohosted_pool`), built once here.
    pool_config: GkePool

    def to_dict(self) -> dict[str, Any]:
        p = self.pool
        return {
            "role": self.role,
            "release": p.release.release,
            "model_name": self.model_name,
            "cold_load_seconds": p.capacity.cold_load_seconds,
            "startup_window_seconds": p.probes.startup_window_seconds,
            "hpa": {"min_replicas": p.hpa.min_replicas, "max_replicas": p.hpa.max_replicas},
            "vllm_args": list(p.vllm_args),
        }


@dataclass(frozen=True)
class GkeCoHostedGroupPlan:
    """A GKE co-hosted group: its node pool's bounds, the time-sharing slots per GPU and the worst-case memory
    asked of one GPU, and every model's pool plan."""

    key: str
    target: str
    accelerator: str
    layout: ch.GroupLayout
    models: tuple[GkeCoHostedModelPlan, ...]
    #: Node-pool bounds: the group's warm minimum; its ceiling plus one node the models' rollout surge pods share.
    min_nodes: int
    max_nodes: int
    clients_per_gpu: int
    #: Sum of the ``clients_per_gpu`` largest partitions: what one GPU holds if the device plugin puts them together.
    worst_case_partition_sum: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "accelerator": self.accelerator,
            "min_nodes": self.min_nodes,
            "max_nodes": self.max_nodes,
            "clients_per_gpu": self.clients_per_gpu,
            "worst_case_partition_sum": self.worst_case_partition_sum,
            "layout": self.layout.to_dict(),
            "models": [x.to_dict() for x in self.models],
        }


def cohosted_pool(group: GkeCoHostedGroup, index: int) -> GkePool:
    """A GKE co-hosted model as the GKE pool it is planned and rendered as: the group's machine bounds, loading and
    pod options, the model's partition as ``gpu_memory_utilization``; weight 0 because no weighted split sends it
    traffic (requests reach it by model name), so no arrival share is invented for it."""
    m = group.models[index]
    loading = WeightLoading(
        path="gcs_streaming",
        throughput_mib_s=group.loading.throughput_mib_s,
        engine_init_seconds=group.loading.engine_init_seconds,
        streamer_concurrency=group.loading.streamer_concurrency,
    )
    return GkePool(
        target=TARGET,
        release=m.release,
        weight=0,
        accelerator=group.accelerator,
        min_replicas=group.min_replicas,
        max_replicas=group.max_replicas,
        loading=loading,
        model_server=group.model_server,
        gpu_memory_utilization=m.gpu_memory_partition,
        runtime_overhead_gib=m.runtime_overhead_gib,
    )


def plan_groups(cfg: StackConfig, issues: list[PlanIssue]) -> dict[str, GkeCoHostedGroupPlan]:
    """Each GKE co-hosted group whose references resolve: the memory checks of ``cohosting`` (per model, and the
    worst case of the time-shared slots on one GPU), then per model the GKE pool plan (capacity, probes, HPA within
    the reservation less the one surge node the group's rollouts share, the vLLM arguments)."""
    release_ids = {r.release for r in cfg.releases}
    contract = cfg.contract
    mean_ctx = contract.prompt_tokens.mean + contract.output_tokens.mean
    auto = cfg.observability.autoscaling
    out: dict[str, GkeCoHostedGroupPlan] = {}
    for key, group in cfg.groups():
        if not isinstance(group, GkeCoHostedGroup):
            continue
        acc = cfg.accelerators.get(group.accelerator)
        if acc is None or acc.gpu_sharing is None or any(m.release not in release_ids for m in group.models):
            continue  # the rules report dangling references and a node pool without time-sharing
        try:
            layout = ch.plan_layout(
                layout_inputs(cfg, group),
                acc.gpus_per_node,
                acc.gpu_memory_gib,
                group.transient_reserve,
                mean_ctx,
                check_gpu_sums=False,
            )
        except ch.CoHostingError as exc:
            issues.append(PlanIssue(("cohosting", key, *exc.subject), str(exc)))
            continue
        clients = acc.gpu_sharing.max_shared_clients_per_gpu
        worst = ch.worst_case_partition_sum([m.gpu_memory_partition for m in group.models], clients)
        if worst > round(1 - group.transient_reserve, 9):
            issues.append(
                PlanIssue(
                    ("cohosting", key, "models"),
                    (
                        f"{clients} time-shared clients per GPU ({group.accelerator}.gpu_sharing) may put the {clients} largest "
                        f"partitions on one GPU: {worst:g} > 1 - transient_reserve {group.transient_reserve:g}; the device "
                        "plugin, not the planner, picks each pod's GPU: lower the partitions or the clients per GPU"
                    ),
                )
            )
            continue
        cap_replicas = (
            None
            if acc.reservation is None
            else reservation_replica_cap(
                reserved_nodes=acc.reservation.count, replicas_per_node=1, other_pools_max=0, pools_on_accelerator=1
            )
        )
        models: list[GkeCoHostedModelPlan] = []
        for i, (m, placed) in enumerate(zip(group.models, layout.models, strict=True)):
            role = ch.gke_role(m.model_name)
            pool = cohosted_pool(group, i)
            rel = cfg.release(m.release)
            try:
                cap = capacity.plan_pool(pool_inputs(cfg, role, pool))
                probes = plan_probes(
                    cold_load_seconds=cap.cold_load_seconds,
                    stream_bound_seconds=contract.stream_bound_seconds,
                    ttft_p95_ms=contract.ttft_p95_ms,
                    startup_margin=pool.model_server.startup_margin,
                    startup_period_seconds=pool.model_server.startup_period_seconds,
                    max_startup_seconds=pool.model_server.max_startup_seconds,
                    drain_seconds=pool.model_server.drain_seconds,
                )
            except (capacity.PlanningError, ProbeError) as exc:
                issues.append(PlanIssue(("cohosting", key, "models", i), f"{m.model_name}: {exc}"))
                break
            hpa = plan_hpa(
                role=role,
                release=m.release,
                min_replicas=group.min_replicas,
                pool_max_replicas=group.max_replicas,
                cold_load_seconds=cap.cold_load_seconds,
                stream_bound_seconds=contract.stream_bound_seconds,
                queue_target_per_pod=auto.queue_target_per_pod,
                kv_cache_target=auto.kv_cache_target,
                reservation_cap=cap_replicas,
            )
            inputs = gke_vllm_inputs(
                rel, pool, cap, probes.shutdown_timeout_seconds, m.model_name, contract.max_output_tokens
            )
            models.append(
                GkeCoHostedModelPlan(
                    role=role,
                    model_name=m.model_name,
                    placement=placed,
                    pool_config=pool,
                    pool=GkePoolPlan(
                        role=role,
                        target=TARGET,
                        release=release_info(rel),
                        weight=0,
                        min_replicas=group.min_replicas,
                        capacity=cap,
                        vllm_args=tuple(render_vllm_args(inputs)),
                        model_root=inputs.model,
                        accelerator=group.accelerator,
                        machine=machine_of(cfg, group.accelerator),
                        probes=probes,
                        hpa=hpa,
                        reservation_cap=cap_replicas,
                    ),
                )
            )
        else:
            out[key] = GkeCoHostedGroupPlan(
                key=key,
                target=TARGET,
                accelerator=group.accelerator,
                layout=layout,
                models=tuple(models),
                min_nodes=group.min_replicas,
                max_nodes=group.max_replicas + ROLLOUT_SURGE_NODES,
                clients_per_gpu=clients,
                worst_case_partition_sum=worst,
            )
    return out


#: One spare node holds the rollout surge pod of every model of a GKE group (one pod of each model fits a node).
ROLLOUT_SURGE_NODES = 1
