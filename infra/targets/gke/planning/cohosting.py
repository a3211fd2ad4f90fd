"""The ``gke`` co-hosted groups: seed 003's container-level co-hosting in one pod per node.

Per group: the memory checks of ``cohosting`` (per model, and per GPU of the node: the partitions of every instance
placed on it sum to at most 1 - transient_reserve, the planner placing each instance on its GPU set), then the pod:
the co-host server's configuration (one instance per placement, each with its rendered ``vllm serve`` arguments, its
GPU set, partition and loopback port), the pod's probes sized for the staggered start of every instance in turn, its
HPA within the reservation less the one surge node, and per model its capacity figures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components import naming
from components.cohost.server import CohostConfig, InstanceSpec
from components.observability.views import HpaPlan
from components.serving.spec import ProbeTimings, ReleaseInfo
from infra.config.stack import StackConfig
from infra.planning import capacity
from infra.planning import cohost_server as cs
from infra.planning import cohosting as ch
from infra.planning.plan import MachineIdentity, PlanIssue, layout_inputs, release_info
from infra.planning.probes import ProbeError, plan_probes
from infra.planning.vllm_args import render_vllm_args

from ..config import TARGET, GkeCoHostedGroup, GkePool, WeightLoading
from .autoscaling import plan_hpa, reservation_replica_cap
from .flow_control import FlowControlError, request_ttl_ms
from .pools import gke_vllm_inputs, machine_of, pool_inputs

#: One spare node holds the rollout surge pod of the group (one pod per node).
ROLLOUT_SURGE_NODES = 1


@dataclass(frozen=True)
class GkeCoHostedModelPlan:
    """One model of a GKE co-hosted group: where its instances run and what each holds."""

    model_name: str
    release: ReleaseInfo
    placement: ch.ModelPlacement
    #: The model as a pool of its own would be planned (capacity, cold load): its figures, and vLLM's batch size.
    capacity: capacity.PoolCapacity
    #: Its instances in the server's configuration.
    instances: tuple[InstanceSpec, ...]

    @property
    def role(self) -> str:
        """The model's public name as a DNS label: its instances are named ``<role>-<j>``."""
        return ch.gke_role(self.model_name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_name": self.model_name,
            "release": self.release.release,
            "cold_load_seconds": self.capacity.cold_load_seconds,
            "instances": [
                {"name": i.name, "gpus": list(i.gpus), "port": i.port, "vllm_args": list(i.args)}
                for i in self.instances
            ],
        }


@dataclass(frozen=True)
class GkeCoHostedGroupPlan:
    """A GKE co-hosted group: its pod (the co-host server and its configuration, probes, HPA), its node pool's bounds
    and every model's placement."""

    key: str
    target: str
    accelerator: str
    #: The role of the group's pod: its namespace, Deployment, InferencePool and picker (the group key).
    role: str
    layout: ch.GroupLayout
    models: tuple[GkeCoHostedModelPlan, ...]
    #: Node-pool bounds: the group's warm minimum; its ceiling plus one node for the rollout surge pod.
    min_nodes: int
    max_nodes: int
    #: The pod's image: every release of the group runs in the one container (the rules require one image).
    image: str
    vllm_version: str
    machine: MachineIdentity
    probes: ProbeTimings
    hpa: HpaPlan
    reservation_cap: int | None
    #: The co-host server's configuration and its canonical JSON (what the pod runs with).
    server: CohostConfig
    server_json: str
    #: The node's hourly price (one replica of the group is one node).
    replica_hourly_usd: float
    #: ``gs://<bucket>/<object>`` the pods follow (update_models), and how often; None: the plan's set only.
    watch: str | None
    poll_seconds: int | None

    @property
    def releases(self) -> tuple[ReleaseInfo, ...]:
        return tuple(m.release for m in self.models)

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "accelerator": self.accelerator,
            "role": self.role,
            "min_nodes": self.min_nodes,
            "max_nodes": self.max_nodes,
            "cold_load_seconds": self.probes.cold_load_seconds,
            "startup_window_seconds": self.probes.startup_window_seconds,
            "hpa": {"min_replicas": self.hpa.min_replicas, "max_replicas": self.hpa.max_replicas},
            "watch": self.watch,
            "layout": self.layout.to_dict(),
            "models": [x.to_dict() for x in self.models],
        }


def cohosted_pool(group: GkeCoHostedGroup, index: int) -> GkePool:
    """A GKE co-hosted model as the GKE pool it is sized as: the group's machine bounds, loading and pod options, the
    model's partition as ``gpu_memory_utilization``; weight 0 because no weighted split sends it traffic (requests
    reach it by model name), so no arrival share is invented for it."""
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
    """Each GKE co-hosted group whose references resolve: the placement and memory checks, the server's
    configuration, the pod's probes and HPA."""
    release_ids = {r.release for r in cfg.releases}
    contract = cfg.contract
    mean_ctx = contract.prompt_tokens.mean + contract.output_tokens.mean
    out: dict[str, GkeCoHostedGroupPlan] = {}
    for key, group in cfg.groups():
        if not isinstance(group, GkeCoHostedGroup):
            continue
        acc = cfg.accelerators.get(group.accelerator)
        if acc is None or any(m.release not in release_ids for m in group.models):
            continue  # the rules report dangling references
        try:
            layout = ch.plan_layout(
                layout_inputs(cfg, group), acc.gpus_per_node, acc.gpu_memory_gib, group.transient_reserve, mean_ctx
            )
        except ch.CoHostingError as exc:
            issues.append(PlanIssue(("cohosting", key, *exc.subject), str(exc)))
            continue
        caps: list[capacity.PoolCapacity] = []
        pools: list[GkePool] = []
        for i, m in enumerate(group.models):
            pool = cohosted_pool(group, i)
            try:
                caps.append(capacity.plan_pool(pool_inputs(cfg, ch.gke_role(m.model_name), pool)))
            except capacity.PlanningError as exc:
                issues.append(PlanIssue(("cohosting", key, "models", i), f"{m.model_name}: {exc}"))
                break
            pools.append(pool)
        else:
            o = group.model_server
            # Staggered: each instance starts once the previous one is up, so the pod is up after all of them.
            cold = cs.staggered_cold_load_seconds(
                [c.cold_load_seconds for c in caps], [m.instances for m in group.models]
            )
            try:
                probes = plan_probes(
                    cold_load_seconds=cold,
                    stream_bound_seconds=contract.stream_bound_seconds,
                    ttft_p95_ms=contract.ttft_p95_ms,
                    startup_margin=o.startup_margin,
                    startup_period_seconds=o.startup_period_seconds,
                    max_startup_seconds=o.max_startup_seconds,
                    drain_seconds=o.drain_seconds,
                )
            except ProbeError as exc:
                issues.append(
                    PlanIssue(
                        ("cohosting", key, "model_server", "max_startup_seconds"),
                        f"the group's instances start one after another: {exc}",
                    )
                )
                continue
            try:
                # The group's picker runs flow control: the smallest chunked-prefill budget bounds its prefill.
                request_ttl_ms(contract, min(c.max_num_batched_tokens for c in caps))
            except FlowControlError as exc:
                issues.append(PlanIssue(("contract", "ttft_p95_ms"), f"co-hosted group {key}: {exc}"))
                continue
            out[key] = _group_plan(cfg, key, group, layout, caps, pools, probes)
    return out


def _group_plan(
    cfg: StackConfig,
    key: str,
    group: GkeCoHostedGroup,
    layout: ch.GroupLayout,
    caps: list[capacity.PoolCapacity],
    pools: list[GkePool],
    probes: ProbeTimings,
) -> GkeCoHostedGroupPlan:
    acc = cfg.accelerators[group.accelerator]
    contract = cfg.contract
    auto = cfg.observability.autoscaling
    models: list[GkeCoHostedModelPlan] = []
    planned = []
    for m, placed, cap, pool in zip(group.models, layout.models, caps, pools, strict=True):
        rel = cfg.release(m.release)
        inputs = gke_vllm_inputs(
            rel, pool, cap, probes.shutdown_timeout_seconds, placed.model_name, contract.max_output_tokens
        )
        planned.append(cs.ModelInstances(rel, placed, inputs.served_model_names, tuple(render_vllm_args(inputs))))
    for m, placed, cap, specs in zip(
        group.models, layout.models, caps, cs.group_instances(planned, naming.SCRIPTS_MOUNT_PATH), strict=True
    ):
        models.append(GkeCoHostedModelPlan(m.model_name, release_info(cfg.release(m.release)), placed, cap, specs))
    server, server_json = cs.server_config(
        gpus=acc.gpus_per_node,
        transient_reserve=group.transient_reserve,
        start_timeout=cs.start_timeout_seconds([c.cold_load_seconds for c in caps], group.model_server.startup_margin),
        shutdown_timeout_seconds=probes.shutdown_timeout_seconds,
        startup_window_seconds=probes.startup_window_seconds,
        instances=[i for mp in models for i in mp.instances],
    )
    cap_replicas = (
        None
        if acc.reservation is None
        else reservation_replica_cap(
            reserved_nodes=acc.reservation.count, replicas_per_node=1, other_pools_max=0, pools_on_accelerator=1
        )
    )
    hpa = plan_hpa(
        role=key,
        release=",".join(m.release.release for m in models),
        min_replicas=group.min_replicas,
        pool_max_replicas=group.max_replicas,
        cold_load_seconds=probes.cold_load_seconds,
        stream_bound_seconds=contract.stream_bound_seconds,
        queue_target_per_pod=auto.queue_target_per_pod,
        kv_cache_target=auto.kv_cache_target,
        reservation_cap=cap_replicas,
        # One series per pod: the server's sums over its instances (vLLM's own are one per instance).
        queue_metric=naming.COHOST_NUM_REQUESTS_WAITING,
        kv_cache_metric=naming.COHOST_KV_CACHE_USAGE,
    )
    first = cfg.release(group.models[0].release)
    bucket = first.weights_bucket
    watch = f"gs://{bucket}/{group.update_models.object}" if group.update_models else None
    return GkeCoHostedGroupPlan(
        key=key,
        target=TARGET,
        accelerator=group.accelerator,
        role=key,
        layout=layout,
        models=tuple(models),
        min_nodes=group.min_replicas,
        max_nodes=group.max_replicas + ROLLOUT_SURGE_NODES,
        image=first.image,
        vllm_version=first.vllm_version,
        machine=machine_of(cfg, group.accelerator),
        probes=probes,
        hpa=hpa,
        reservation_cap=cap_replicas,
        server=server,
        server_json=server_json,
        replica_hourly_usd=acc.node_hourly_usd,
        watch=watch,
        poll_seconds=group.update_models.poll_seconds if group.update_models else None,
    )
