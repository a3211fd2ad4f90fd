"""Rules of the ``vertex`` target: its section exists, each pool names a known accelerator topology whose GPU
Vertex AI offers and whose GPUs the release uses, the topology fits the region and the environment (prod: a
specific reservation, no Spot), the reservation is an existing one and holds every pool's max replicas plus a
replacement, the releases share one weights bucket, prod protects the endpoint, and the images come from the stack's
registry when one is named. (The warm minimum and the one-target split are the neutral rules',
``infra/rules/common.py``.)"""

from __future__ import annotations

from collections.abc import Iterator

from components.naming import registry_prefix
from components.vertex.requests import GKE_TO_VERTEX_ACCELERATOR
from infra.config.stack import StackConfig
from infra.planning.plan import StackPlan
from infra.rules import Finding, rule
from infra.rules.common import placement_findings

from ..config import TARGET, CoHostedGroup, VertexPool, vertex_section
from ..planning import vertex_pools


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
    """Reserved machines cover every Vertex pool's and co-hosted group's max replicas plus, per pool or group, its
    min replicas once more (a replaced deployed model starts beside the old one). Checked only when everything on
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
        bounds = [(p.min_replicas, p.max_replicas) for _, p in on_it] + [
            (g.min_replicas, g.max_replicas) for _, g in groups
        ]
        mx, mn = sum(b[1] for b in bounds), sum(b[0] for b in bounds)
        if r.count < mx + mn:
            yield (
                ("accelerators", name, "reservation", "count"),
                f"{r.count} reserved machine(s) cannot hold the Vertex pools' max replicas {mx} + a replacement "
                f"deployment's min replicas {mn} = {mx + mn}"
                + (f" (co-hosted groups {', '.join(k for k, _ in groups)} included)" if groups else ""),
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
