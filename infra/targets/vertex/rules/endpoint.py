"""Rules of the ``vertex`` target: its section exists, each pool names a known accelerator topology whose GPU
Vertex AI offers and whose GPUs the release uses, the topology fits the region and the environment (prod: a
specific reservation, no Spot), the reservation is an existing one and holds every pool's max replicas plus a
replacement, the releases share one weights bucket, prod protects the endpoint, and the images come from the stack's
registry when one is named. (The warm minimum and the one-target split are the neutral rules',
``infra/rules/common.py``.)"""

from __future__ import annotations

from collections.abc import Iterator

from components.naming import registry_prefix
from components.vertex.requests import GKE_TO_VERTEX_ACCELERATOR, serving_quota_metric
from infra.config.accelerator import MACHINE_FAMILY_GPU, machine_family
from infra.config.stack import StackConfig
from infra.planning.plan import StackPlan
from infra.rules import Finding, rule
from infra.rules.common import placement_findings

from ..config import TARGET, CoHostedGroup, VertexPool, vertex_section
from ..planning import vertex_pools
from ..planning.pools import replacement_room


def _vertex_pools(cfg: StackConfig) -> list[tuple[str, VertexPool]]:
    return vertex_pools(cfg)


def _vertex_accelerators(cfg: StackConfig) -> list[str]:
    """The topologies Vertex machines run on: the Vertex pools' and the co-hosted groups'."""
    keys = {pool.accelerator for _, pool in _vertex_pools(cfg)}
    keys |= {g.accelerator for _, g in cfg.groups() if isinstance(g, CoHostedGroup)}
    return sorted(k for k in keys if k in cfg.accelerators)


@rule(target=TARGET, needs={"serving", "vertex"})
def vertex_section_present(cfg: StackConfig) -> Iterator[Finding]:
    if vertex_section(cfg) is None and _vertex_pools(cfg):
        roles = ", ".join(role for role, _ in _vertex_pools(cfg))
        yield (
            ("vertex",),
            f"required when a pool targets vertex ({roles}): the endpoint id, its access and its callers",
        )


@rule(target=TARGET, needs={"serving", "accelerators"})
def vertex_pools_name_known_accelerators(cfg: StackConfig) -> Iterator[Finding]:
    for role, pool in _vertex_pools(cfg):
        if pool.accelerator not in cfg.accelerators:
            yield (
                ("serving", role, "accelerator"),
                f"unknown accelerator {pool.accelerator!r}; known: {', '.join(sorted(cfg.accelerators))}",
            )


@rule(target=TARGET, needs={"serving", "accelerators", "cohosting"})
def accelerator_offered_by_vertex(cfg: StackConfig) -> Iterator[Finding]:
    for name in _vertex_accelerators(cfg):
        gpu = cfg.accelerators[name].gpu_type
        if gpu not in GKE_TO_VERTEX_ACCELERATOR:
            yield (
                ("accelerators", name, "gpu_type"),
                f"{gpu} has no known Vertex AI MachineSpec.acceleratorType; known: "
                f"{', '.join(sorted(GKE_TO_VERTEX_ACCELERATOR))}",
            )


@rule(target=TARGET, needs={"serving", "accelerators", "releases"})
def release_fills_the_machine(cfg: StackConfig) -> Iterator[Finding]:
    """A Vertex replica is one machine running one vLLM server: GPUs its tensor parallelism leaves out would idle
    (co-hosting is the way to share a machine between models)."""
    ids = {r.release for r in cfg.releases}
    for role, pool in _vertex_pools(cfg):
        if pool.release not in ids or pool.accelerator not in cfg.accelerators:
            continue
        tp, gpus = cfg.release(pool.release).tensor_parallel_size, cfg.accelerators[pool.accelerator].gpus_per_node
        if tp != gpus:
            yield (
                ("serving", role, "accelerator"),
                f"release {pool.release!r} runs on tensor_parallel_size {tp} GPU(s), a {pool.accelerator} replica "
                f"({cfg.accelerators[pool.accelerator].machine_type}) has {gpus}: one Vertex replica is one "
                "machine, so pick the topology whose GPU count equals the release's tensor parallelism",
            )


@rule(target=TARGET, needs={"serving", "accelerators", "cohosting", "region", "zones", "environment"})
def vertex_accelerators_fit_stack(cfg: StackConfig) -> Iterator[Finding]:
    yield from placement_findings(cfg, _vertex_accelerators(cfg), "Vertex pools")


@rule(target=TARGET, needs={"serving", "accelerators", "cohosting"})
def vertex_reservation_exists(cfg: StackConfig) -> Iterator[Finding]:
    """The Vertex target consumes a reservation by name (``reservationAffinity``); it creates none."""
    for name in _vertex_accelerators(cfg):
        r = cfg.accelerators[name].reservation
        if r is not None and r.mode != "existing":
            yield (
                ("accelerators", name, "reservation", "mode"),
                "Vertex pools consume an existing reservation by name (mode: existing); the vertex target does "
                "not create one, and the Vertex AI service agent needs compute.reservations read on its project",
            )


@rule(target=TARGET, needs={"serving", "accelerators", "cohosting"}, plan=True)
def vertex_reservation_holds_max_plus_replacement(cfg: StackConfig, plan: StackPlan) -> Iterator[Finding]:
    """Reserved machines cover every Vertex pool's and co-hosted group's max replicas plus the replacement
    transient: a ``create_first`` pool's replaced deployment starts its min replicas beside the old one (Pulumi's
    create-before-delete; components/vertex/provider.py), a co-hosted group's new resource pool likewise; a
    ``delete_first`` pool needs no room (its old deployment goes first). A deployment that finds the reservation full
    fails and its replacement with it, so this is checked before anything is sent. Checked only when everything on
    the topology planned."""
    for name in _vertex_accelerators(cfg):
        r = cfg.accelerators[name].reservation
        on_it = [(role, pool) for role, pool in _vertex_pools(cfg) if pool.accelerator == name]
        groups = [(key, g) for key, g in cfg.groups() if g.accelerator == name and isinstance(g, CoHostedGroup)]
        if (
            r is None
            or any(role not in plan.pools for role, _ in on_it)
            or any(key not in plan.cohosting for key, _ in groups)
        ):
            continue
        mx = sum(p.max_replicas for _, p in on_it) + sum(g.max_replicas for _, g in groups)
        rooms = [(role, replacement_room(p)) for role, p in on_it] + [(key, g.min_replicas) for key, g in groups]
        mn = sum(n for _, n in rooms)
        if r.count < mx + mn:
            terms = " + ".join(f"{k} {n}" for k, n in rooms if n) or "0"
            delete_first = [role for role, p in on_it if p.replacement == "delete_first"]
            yield (
                ("accelerators", name, "reservation", "count"),
                f"{r.count} reserved machine(s) cannot hold the Vertex pools' max replicas {mx} + the replacement "
                f"transient ({terms}) = {mx + mn}: a create-first replacement would find the reservation full"
                + (f" (co-hosted groups {', '.join(k for k, _ in groups)} included)" if groups else "")
                + (f"; {', '.join(delete_first)} replace(s) delete-first" if delete_first else "")
                + "; reserve more machines, lower max_replicas, or set the pool's replacement: delete_first",
            )


@rule(target=TARGET, needs={"serving", "environment"})
def delete_first_never_empties_a_prod_pool(cfg: StackConfig) -> Iterator[Finding]:
    """A ``delete_first`` pool serves nothing between its old deployment's undeploy and its successor's deploy (a
    cold load and more): prod keeps its serving pools create-first and holds the room in the reservation."""
    if cfg.environment != "prod":
        return
    for role, pool in _vertex_pools(cfg):
        if pool.replacement == "delete_first" and pool.weight > 0:
            yield (
                ("serving", role, "replacement"),
                f"delete_first would leave pool {role} ({pool.weight} % of traffic) without a deployment during every "
                "replacement; prod replaces create-first (reserve the min replicas once more)",
            )


@rule(target=TARGET, needs={"vertex", "serving", "accelerators", "cohosting"})
def vertex_pricing_covers_the_machines(cfg: StackConfig) -> Iterator[Finding]:
    """Every Vertex machine type and GPU has a Vertex AI prediction price (the cost figures are Vertex's, never the
    Compute Engine ``node_hourly_usd`` of the topology)."""
    v = vertex_section(cfg)
    if v is None:
        return
    for name in _vertex_accelerators(cfg):
        acc = cfg.accelerators[name]
        if acc.machine_type not in v.pricing.machine_hour_usd:
            yield (
                ("vertex", "pricing", "machine_hour_usd"),
                f"no Vertex AI prediction price for {acc.machine_type} (accelerators.{name}.machine_type): add its "
                f"node-hour price from {v.pricing.source_url}",
            )
        if acc.gpu_type not in v.pricing.accelerator_hour_usd:
            yield (
                ("vertex", "pricing", "accelerator_hour_usd"),
                f"no Vertex AI prediction price for {acc.gpu_type} (accelerators.{name}.gpu_type): add its "
                f"accelerator-hour price from {v.pricing.source_url} (0 if the machine's price includes it)",
            )


@rule(target=TARGET, needs={"serving", "accelerators", "cohosting"})
def vertex_serves_the_machine_family(cfg: StackConfig) -> Iterator[Finding]:
    """Vertex inference offers a machine family when its GPU has a Vertex serving quota: the GPU types the Google
    Cloud SDK knows a ``custom_model_serving_*`` quota for (components/vertex/requests.py SERVING_QUOTA_METRIC),
    joined with the family each GPU comes on (Compute Engine's accelerator-optimized machine family;
    infra/config/accelerator.py MACHINE_FAMILY_GPU). Whether a region has that GPU for Vertex is not listed in any
    source read here: it is a precondition (docs/deploying.md)."""
    for name in _vertex_accelerators(cfg):
        acc = cfg.accelerators[name]
        family = machine_family(acc.machine_type)
        if acc.gpu_type in GKE_TO_VERTEX_ACCELERATOR and serving_quota_metric(acc.gpu_type) is None:
            yield (
                ("accelerators", name, "gpu_type"),
                f"{acc.gpu_type} has no Vertex AI serving quota (custom_model_serving_*): Vertex inference is not known "
                "to offer it; serve it on GKE",
            )
        elif family in MACHINE_FAMILY_GPU and MACHINE_FAMILY_GPU[family] != acc.gpu_type:
            yield (
                ("accelerators", name, "machine_type"),
                f"{acc.machine_type} carries {MACHINE_FAMILY_GPU[family]}, not {acc.gpu_type}",
            )


@rule(target=TARGET, needs={"serving", "releases"})
def releases_share_one_weights_bucket(cfg: StackConfig) -> Iterator[Finding]:
    """The serving account reads one bucket (objectViewer on it only)."""
    ids = {r.release for r in cfg.releases}
    served = [(role, cfg.release(pool.release)) for role, pool in _vertex_pools(cfg) if pool.release in ids]
    if len({rel.weights_bucket for _, rel in served}) > 1:
        first = served[0][1].weights_bucket
        for _role, rel in served[1:]:
            if rel.weights_bucket != first:
                yield (
                    ("releases", cfg.release_index(rel.release), "weight_manifest"),
                    f"bucket {rel.weights_bucket!r} differs from {first!r} of the stable release: the Vertex "
                    "serving account reads exactly one weights bucket",
                )


@rule(target=TARGET, needs={"vertex", "environment"})
def vertex_prod_protects_the_endpoint(cfg: StackConfig) -> Iterator[Finding]:
    v = vertex_section(cfg)
    if v is not None and cfg.environment == "prod" and not v.protect:
        yield ("vertex", "protect"), "prod must protect the Vertex endpoint and its serving account from deletion"


@rule(target=TARGET, needs={"vertex", "releases", "serving", "project", "region"})
def vertex_images_come_from_the_stack_registry(cfg: StackConfig) -> Iterator[Finding]:
    """With ``vertex.repository`` the upload runs as the serving account, which reads only that repository."""
    v = vertex_section(cfg)
    if v is None or v.repository is None:
        return
    prefix = registry_prefix(cfg.project, cfg.region, v.repository)
    served = {pool.release for _, pool in _vertex_pools(cfg)}
    for i, rel in enumerate(cfg.releases):
        if rel.release in served and not rel.image.startswith(prefix):
            yield (
                ("releases", i, "image"),
                f"the Vertex serving account reads the stack's repository {prefix}... only, got {rel.image}",
            )
