"""Rules of the ``gke`` co-hosted groups: they ride on the stack's cluster and gateway, on a node pool of their own
whose GPUs each pod owns whole (no GPU sharing); the group's role is not a pool's; the reservation holds the group's
nodes plus the surge node (one image per group and the instances' names are every target's rules,
``infra/rules/cohosting.py``). The memory arithmetic (partitions per GPU, the placement) is the planner's."""

from __future__ import annotations

from collections.abc import Iterator

from infra.config.stack import StackConfig
from infra.planning.plan import StackPlan
from infra.rules import Finding, rule

from ..config import TARGET, GkeCoHostedGroup
from ..planning import gke_part

#: Roles the serving pools take: a group's role (its key) must not collide with them.
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
def gke_group_pod_owns_its_nodes_gpus(cfg: StackConfig) -> Iterator[Finding]:
    """The group's node pool is its own, and its GPUs are not shared: the co-host pod requests every GPU of its node
    (``nvidia.com/gpu`` = GPUs per node) and places the instances on them itself. On a GPU-sharing node pool a
    container gets one shared slot at most ("at most 1 nvidia.com/gpu can be requested on GPU nodes", GKE, "About
    GPU sharing strategies in GKE" / time-sharing GPUs), and GPU requests are whole GPUs anyway ("Pod manifests must
    request GPU resources in integers", GKE, time-sharing GPUs)."""
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
        if acc.gpu_sharing is not None:
            yield (
                ("accelerators", g.accelerator, "gpu_sharing"),
                f"cohosting.{key}'s pod requests all {acc.gpus_per_node} GPU(s) of its node and places its instances "
                f"on them itself; on a {acc.gpu_sharing.strategy} node pool a container may request at most one "
                "shared GPU: remove gpu_sharing",
            )


@rule(target=TARGET, needs={"cohosting"})
def gke_group_key_is_not_a_pool_role(cfg: StackConfig) -> Iterator[Finding]:
    """A group's key is its pod's role (namespace ``llm-serving-<key>``, Deployment, InferencePool, picker): not a
    pool's role."""
    for key, _ in _gke_groups(cfg):
        if key in POOL_ROLES:
            yield ("cohosting", key), f"the group key {key!r} would name the namespace of serving.{key}"


@rule(target=TARGET, needs={"cohosting", "accelerators"}, plan=True)
def gke_group_reservation_holds_max_plus_surge(cfg: StackConfig, plan: StackPlan) -> Iterator[Finding]:
    """Reserved nodes cover the group's max nodes plus the one node its rollout surge pod takes."""
    for key, gg in gke_part(plan).gke_groups().items():
        r = cfg.accelerators[gg.accelerator].reservation
        if r is not None and r.count < gg.max_nodes:
            yield (
                ("accelerators", gg.accelerator, "reservation", "count"),
                f"{r.count} reserved node(s) cannot hold cohosting.{key}'s max_replicas {gg.max_nodes - 1} + 1 "
                f"rollout surge node = {gg.max_nodes}",
            )
