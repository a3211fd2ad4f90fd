"""Rules of the ``gke`` co-hosted groups: they ride on the stack's cluster and gateway, on a node pool of their own
with GPU time-sharing, one slot per pod; every release fits one time-shared GPU; each model's role names its objects;
the reservation holds the group's nodes plus the surge node. The memory arithmetic (partitions, the worst case of
time-shared slots) is the planner's."""

from __future__ import annotations

from collections.abc import Iterator

from infra.config.stack import StackConfig
from infra.planning.cohosting import GKE_ROLE_MAX_LENGTH, gke_role, shared_slots_needed
from infra.planning.plan import StackPlan
from infra.rules import Finding, rule

from ..config import TARGET, GkeCoHostedGroup
from ..planning import gke_part

#: Roles the serving pools take: a co-hosted model's role must not collide with them.
POOL_ROLES = ("stable", "canary")


def _gke_groups(cfg: StackConfig) -> list[tuple[str, GkeCoHostedGroup]]:
    return [(k, g) for k, g in cfg.groups() if isinstance(g, GkeCoHostedGroup)]


@rule(target=TARGET, needs={"cohosting", "serving"})
def gke_groups_ride_on_the_stacks_cluster(cfg: StackConfig) -> Iterator[Finding]:
    """A GKE group's pods run in the cluster, and are reached through the gateway, of the stack's GKE pools."""
    if cfg.serving.stable.target == "gke":
        return
    for key, _ in _gke_groups(cfg):
        yield (
            ("cohosting", key, "target"),
            f"gke groups use the cluster and gateway of the stack's gke pools; the "
            f"stable pool targets {cfg.serving.stable.target!r}",
        )


@rule(target=TARGET, needs={"cohosting", "accelerators", "serving"})
def gke_group_node_pool_time_shares_its_gpus(cfg: StackConfig) -> Iterator[Finding]:
    """The group's node pool is its own (a pool's whole-GPU pods would take time-shared slots of it), shares each GPU
    by time-sharing (every process sees the whole GPU, so a partition is a fraction of it; MPS caps each client's
    memory at a share of the GPU instead), with slots enough for one pod of every model per node."""
    pool_accs: dict[str, str] = {}
    for role, p in cfg.pools():
        key_of = p.accelerator_key()
        if key_of is not None:
            pool_accs.setdefault(key_of, role)
    for key, g in _gke_groups(cfg):
        acc = cfg.accelerators.get(g.accelerator)
        if acc is None:
            continue  # groups_name_known_accelerators
        others = [k for k, o in cfg.groups() if k != key and o.accelerator == g.accelerator]
        if g.accelerator in pool_accs:
            yield (
                ("cohosting", key, "accelerator"),
                f"{g.accelerator!r} is also the accelerator of serving."
                f"{pool_accs[g.accelerator]}: a gke group needs a node pool of its own",
            )
        elif others:
            yield (
                ("cohosting", key, "accelerator"),
                f"{g.accelerator!r} is also the accelerator of cohosting."
                f"{others[0]}: a gke group needs a node pool of its own",
            )
        sharing = acc.gpu_sharing
        if sharing is None or sharing.strategy != "TIME_SHARING":
            yield (
                ("accelerators", g.accelerator, "gpu_sharing"),
                f"cohosting.{key} runs its models as pods sharing GPUs: needs strategy TIME_SHARING (every "
                "process sees the whole GPU, so --gpu-memory-utilization is the partition the planner sized; MPS "
                f"caps each client's memory at a share of the GPU instead), got "
                f"{'none' if sharing is None else sharing.strategy}",
            )
            continue
        need = shared_slots_needed(len(g.models), acc.gpus_per_node)
        if sharing.max_shared_clients_per_gpu < need:
            yield (
                ("accelerators", g.accelerator, "gpu_sharing", "max_shared_clients_per_gpu"),
                f"one pod of each of cohosting.{key}'s {len(g.models)} models per node needs ceil("
                f"{len(g.models)} / {acc.gpus_per_node} GPU(s)) = {need} clients per GPU, got "
                f"{sharing.max_shared_clients_per_gpu}",
            )


@rule(target=TARGET, needs={"cohosting", "releases"})
def gke_group_models_fit_one_gpu(cfg: StackConfig) -> Iterator[Finding]:
    """A container on a time-shared GPU node gets one GPU slot: "at most 1 nvidia.com/gpu can be requested" (GKE,
    GPU time-sharing), so every co-hosted release on GKE runs on tensor_parallel_size 1."""
    ids = {r.release for r in cfg.releases}
    for key, g in _gke_groups(cfg):
        for i, m in enumerate(g.models):
            if m.release in ids and cfg.release(m.release).tensor_parallel_size != 1:
                yield (
                    ("cohosting", key, "models", i, "release"),
                    f"release {m.release!r} runs on tensor_parallel_size "
                    f"{cfg.release(m.release).tensor_parallel_size}; a pod on a time-shared GPU gets one GPU: "
                    "co-host it on vertex or serve it as a pool",
                )


@rule(target=TARGET, needs={"cohosting"})
def gke_group_roles_are_distinct_names(cfg: StackConfig) -> Iterator[Finding]:
    """A GKE co-hosted model's role (its model name as a DNS label) names its namespace, Deployment, InferencePool
    and picker release: unique, not a pool's role, short enough for a Helm release name."""
    seen: dict[str, str] = {}
    for key, g in _gke_groups(cfg):
        for i, m in enumerate(g.models):
            role, loc = gke_role(m.model_name), ("cohosting", key, "models", i, "model_name")
            if role in POOL_ROLES:
                yield loc, f"{m.model_name!r} would name the namespace of serving.{role}"
            elif len(role) > GKE_ROLE_MAX_LENGTH:
                yield (
                    loc,
                    (
                        f"{m.model_name!r} names the namespace llm-serving-{role} and the picker release "
                        f"vllm-{role}: at most {GKE_ROLE_MAX_LENGTH} characters on gke, got {len(role)}"
                    ),
                )
            elif role in seen and seen[role] != m.model_name:
                yield loc, f"{m.model_name!r} and {seen[role]!r} both name the role {role!r} ('.' and '_' become '-')"
            seen.setdefault(role, m.model_name)


@rule(target=TARGET, needs={"cohosting", "accelerators"}, plan=True)
def gke_group_reservation_holds_max_plus_surge(cfg: StackConfig, plan: StackPlan) -> Iterator[Finding]:
    """Reserved nodes cover the group's max nodes plus the one node its models' rollout surge pods share."""
    for key, gg in gke_part(plan).gke_groups().items():
        r = cfg.accelerators[gg.accelerator].reservation
        if r is not None and r.count < gg.max_nodes:
            yield (
                ("accelerators", gg.accelerator, "reservation", "count"),
                f"{r.count} reserved node(s) cannot hold cohosting.{key}'s max_replicas {gg.max_nodes - 1} + 1 "
                f"rollout surge node = {gg.max_nodes}",
            )
