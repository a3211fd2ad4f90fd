"""Rules of the co-hosted groups (``cohosting``): their references resolve, the section of their target exists,
every public model name and endpoint id is the stack's only one, and a group's releases share one weights bucket.
GKE groups ride on the stack's cluster and gateway, on a node pool of their own with GPU time-sharing, one slot per
pod. The memory arithmetic (partitions, useful concurrency, the transient reserve, the worst case of time-shared
slots) is the planner's (``infra/planning/cohosting.py``); the machine's topology rules are the Vertex target's
(``vertex.py``) and the GKE target's (``gke.py``)."""

from __future__ import annotations

from collections.abc import Iterator

from ..config.cohosting import GkeCoHostedGroup
from ..config.stack import StackConfig
from ..planning.plan import StackPlan
from ..planning.cohosting import GKE_ROLE_MAX_LENGTH, gke_role, shared_slots_needed
from . import Finding, rule

#: Roles the serving pools take: a co-hosted model's role must not collide with them.
POOL_ROLES = ("stable", "canary")


@rule(needs={"cohosting", "accelerators"})
def groups_name_known_accelerators(cfg: StackConfig) -> Iterator[Finding]:
    for key, g in sorted(cfg.cohosting.items()):
        if g.accelerator not in cfg.accelerators:
            yield (("cohosting", key, "accelerator"),
                   f"unknown accelerator {g.accelerator!r}; known: {', '.join(sorted(cfg.accelerators)) or 'none'}")


@rule(needs={"cohosting", "releases"})
def groups_name_known_releases(cfg: StackConfig) -> Iterator[Finding]:
    ids = [r.release for r in cfg.releases]
    for key, g in sorted(cfg.cohosting.items()):
        for i, m in enumerate(g.models):
            if m.release not in ids:
                yield (("cohosting", key, "models", i, "release"), f"unknown release {m.release!r}; known: {', '.join(ids)}")


@rule(needs={"cohosting", "vertex"})
def vertex_section_present_for_groups(cfg: StackConfig) -> Iterator[Finding]:
    keys = [k for k, g in sorted(cfg.cohosting.items()) if g.target == "vertex"]
    if keys and cfg.vertex is None:
        yield (("vertex",), f"required when a co-hosted group targets vertex ({', '.join(keys)}): the endpoints' "
               "access and callers")


@rule(needs={"cohosting", "serving", "releases", "vertex"})
def names_are_the_stacks_only_ones(cfg: StackConfig) -> Iterator[Finding]:
    """A public model name reaches exactly one model, and an endpoint id names exactly one endpoint."""
    names = {cfg.serving.model_name: "serving.model_name"}
    endpoints = {cfg.vertex.endpoint_id: "vertex.endpoint_id"} if cfg.vertex is not None else {}
    releases = {r.release for r in cfg.releases}
    for key, g in sorted(cfg.cohosting.items()):
        for i, m in enumerate(g.models):
            where = f"cohosting.{key}.models[{i}]"
            if m.model_name in names:
                yield (("cohosting", key, "models", i, "model_name"),
                       f"{m.model_name!r} is already {names[m.model_name]}: each public name reaches one model")
            elif m.model_name in releases:
                yield (("cohosting", key, "models", i, "model_name"),
                       f"{m.model_name!r} is also a release id: a response's model (the release id) must tell "
                       "which release served it")
            names.setdefault(m.model_name, f"{where}.model_name")
            if m.endpoint_id is not None and m.endpoint_id in endpoints:
                yield (("cohosting", key, "models", i, "endpoint_id"),
                       f"{m.endpoint_id!r} is already {endpoints[m.endpoint_id]}: one endpoint per model")
            if m.endpoint_id is not None:
                endpoints.setdefault(m.endpoint_id, f"{where}.endpoint_id")


@rule(needs={"cohosting", "releases"})
def group_releases_share_one_weights_bucket(cfg: StackConfig) -> Iterator[Finding]:
    """The resource pool's containers run as one service account, which reads one weights bucket."""
    ids = {r.release for r in cfg.releases}
    for key, g in sorted(cfg.cohosting.items()):
        served = [(i, cfg.release(m.release)) for i, m in enumerate(g.models) if m.release in ids]
        if not served:
            continue
        first = served[0][1].weights_bucket
        for i, rel in served[1:]:
            if rel.weights_bucket != first:
                yield (("cohosting", key, "models", i, "release"),
                       f"release {rel.release!r} is in bucket {rel.weights_bucket!r}, the group's first in {first!r}: "
                       "the resource pool's service account reads exactly one weights bucket")


# ---- GKE groups ----------------------------------------------------------------------------------------------

def _gke_groups(cfg: StackConfig) -> list[tuple[str, GkeCoHostedGroup]]:
    return [(k, g) for k, g in sorted((cfg.cohosting or {}).items()) if isinstance(g, GkeCoHostedGroup)]


@rule(needs={"cohosting", "serving"})
def gke_groups_ride_on_the_stacks_cluster(cfg: StackConfig) -> Iterator[Finding]:
    """A GKE group's pods run in the cluster, and are reached through the gateway, of the stack's GKE pools."""
    if cfg.serving.stable.target == "gke":
        return
    for key, _ in _gke_groups(cfg):
        yield (("cohosting", key, "target"), f"gke groups use the cluster and gateway of the stack's gke pools; the "
               f"stable pool targets {cfg.serving.stable.target!r}")


@rule(needs={"cohosting", "accelerators", "serving"})
def gke_group_node_pool_time_shares_its_gpus(cfg: StackConfig) -> Iterator[Finding]:
    """The group's node pool is its own (a pool's whole-GPU pods would take time-shared slots of it), shares each GPU
    by time-sharing (every process sees the whole GPU, so a partition is a fraction of it; MPS caps each client's
    memory at a share of the GPU instead), with slots enough for one pod of every model per node."""
    pool_accs: dict[str, str] = {}
    for role, p in cfg.pools():
        if isinstance(getattr(p, "accelerator", None), str):
            pool_accs.setdefault(p.accelerator, role)
    for key, g in _gke_groups(cfg):
        acc = cfg.accelerators.get(g.accelerator)
        if acc is None:
            continue  # groups_name_known_accelerators
        others = [k for k, o in sorted((cfg.cohosting or {}).items()) if k != key and o.accelerator == g.accelerator]
        if g.accelerator in pool_accs:
            yield (("cohosting", key, "accelerator"), f"{g.accelerator!r} is also the accelerator of serving."
                   f"{pool_accs[g.accelerator]}: a gke group needs a node pool of its own")
        elif others:
            yield (("cohosting", key, "accelerator"), f"{g.accelerator!r} is also the accelerator of cohosting."
                   f"{others[0]}: a gke group needs a node pool of its own")
        sharing = acc.gpu_sharing
        if sharing is None or sharing.strategy != "TIME_SHARING":
            yield (("accelerators", g.accelerator, "gpu_sharing"),
                   f"cohosting.{key} runs its models as pods sharing GPUs: needs strategy TIME_SHARING (every "
                   "process sees the whole GPU, so --gpu-memory-utilization is the partition the planner sized; MPS "
                   f"caps each client's memory at a share of the GPU instead), got "
                   f"{'none' if sharing is None else sharing.strategy}")
            continue
        need = shared_slots_needed(len(g.models), acc.gpus_per_node)
        if sharing.max_shared_clients_per_gpu < need:
            yield (("accelerators", g.accelerator, "gpu_sharing", "max_shared_clients_per_gpu"),
                   f"one pod of each of cohosting.{key}'s {len(g.models)} models per node needs ceil("
                   f"{len(g.models)} / {acc.gpus_per_node} GPU(s)) = {need} clients per GPU, got "
                   f"{sharing.max_shared_clients_per_gpu}")


@rule(needs={"cohosting", "releases"})
def gke_group_models_fit_one_gpu(cfg: StackConfig) -> Iterator[Finding]:
    """A container on a time-shared GPU node gets one GPU slot: "at most 1 nvidia.com/gpu can be requested" (GKE,
    GPU time-sharing), so every co-hosted release on GKE runs on tensor_parallel_size 1."""
    ids = {r.release for r in cfg.releases}
    for key, g in _gke_groups(cfg):
        for i, m in enumerate(g.models):
            if m.release in ids and cfg.release(m.release).tensor_parallel_size != 1:
                yield (("cohosting", key, "models", i, "release"),
                       f"release {m.release!r} runs on tensor_parallel_size "
                       f"{cfg.release(m.release).tensor_parallel_size}; a pod on a time-shared GPU gets one GPU: "
                       "co-host it on vertex or serve it as a pool")


@rule(needs={"cohosting"})
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
                yield loc, (f"{m.model_name!r} names the namespace llm-serving-{role} and the picker release "
                            f"vllm-{role}: at most {GKE_ROLE_MAX_LENGTH} characters on gke, got {len(role)}")
            elif role in seen and seen[role] != m.model_name:
                yield loc, f"{m.model_name!r} and {seen[role]!r} both name the role {role!r} ('.' and '_' become '-')"
            seen.setdefault(role, m.model_name)


@rule(needs={"cohosting", "accelerators"}, plan=True)
def gke_group_reservation_holds_max_plus_surge(cfg: StackConfig, plan: StackPlan) -> Iterator[Finding]:
    """Reserved nodes cover the group's max nodes plus the one node its models' rollout surge pods share."""
    for key, gg in sorted(plan.gke_groups().items()):
        r = cfg.accelerators[gg.accelerator].reservation
        if r is not None and r.count < gg.max_nodes:
            yield (("accelerators", gg.accelerator, "reservation", "count"),
                   f"{r.count} reserved node(s) cannot hold cohosting.{key}'s max_replicas {gg.max_nodes - 1} + 1 "
                   f"rollout surge node = {gg.max_nodes}")
