"""Rules of the ``gke`` target: its sections exist, the accelerator topologies fit the region and the
environment, reserved nodes hold max replicas plus rollout surge, and the platform section agrees with the
releases (registry, weights bucket, Hyperdisk ML volumes)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

from components.naming import registry_prefix
from infra.config.stack import StackConfig
from infra.planning import capacity
from infra.planning.plan import StackPlan, release_geometry
from infra.rules import Finding, rule
from infra.rules.common import placement_findings

from ..config import TARGET, GkePool, gateway_section, gke_section
from ..planning import gke_part, gke_pools

#: Accelerator keys become resource names: node pool ``gpu-<key>`` (<= 40 chars) and node service account
#: ``gke-gpu-<key>`` (<= 30 chars), so a key is a short lowercase name.
ACCELERATOR_KEY_RE = re.compile(r"^[a-z]([-a-z0-9]{0,20}[a-z0-9])?\Z")


def _gke_roles(cfg: StackConfig) -> str:
    return ", ".join(role for role, _ in _gke_pools(cfg))


def _gke_pools(cfg: StackConfig) -> list[tuple[str, GkePool]]:
    """The pools of this target (a stack may also have pools of another target)."""
    return gke_pools(cfg)


# An absent optional section validates as None; a section that failed is not "valid", so these rules stay
# silent about it (its own errors are already reported).
@rule(target=TARGET, needs={"serving", "gke"})
def gke_section_present(cfg: StackConfig) -> Iterator[Finding]:
    if gke_section(cfg) is None:
        yield (
            ("gke",),
            f"required when a pool targets gke ({_gke_roles(cfg)}): network, cluster, registry and weight stores",
        )


@rule(target=TARGET, needs={"serving", "gateway"})
def gateway_section_present(cfg: StackConfig) -> Iterator[Finding]:
    if gateway_section(cfg) is None:
        yield (
            ("gateway",),
            f"required when a pool targets gke ({_gke_roles(cfg)}): the Inference Gateway in front of the pools",
        )


@rule(target=TARGET, needs={"serving", "accelerators"})
def pools_name_known_accelerators(cfg: StackConfig) -> Iterator[Finding]:
    for role, pool in _gke_pools(cfg):
        if pool.accelerator not in cfg.accelerators:
            yield (
                ("serving", role, "accelerator"),
                f"unknown accelerator {pool.accelerator!r}; known: {', '.join(sorted(cfg.accelerators))}",
            )


@rule(target=TARGET, needs={"accelerators", "project"})
def reservation_names_are_unique(cfg: StackConfig) -> Iterator[Finding]:
    """A reservation name is unique per project and zone: two topologies naming the same one would either create
    it twice or make two node pools of different machine types consume one reservation."""
    first: dict[tuple[str, str, str], str] = {}
    for name, acc in sorted(cfg.accelerators.items()):
        r = acc.reservation
        if r is None:
            continue
        key = (r.owner_project or cfg.project, acc.zone, r.name)
        if key in first:
            yield (
                ("accelerators", name, "reservation", "name"),
                f"reservation {r.name!r} in {acc.zone} is already used by accelerators.{first[key]}: each topology "
                "needs its own reservation",
            )
        else:
            first[key] = name


@rule(target=TARGET, needs={"accelerators", "region", "zones", "environment"})
def accelerators_fit_stack(cfg: StackConfig) -> Iterator[Finding]:
    yield from placement_findings(cfg, cfg.accelerators, "GPU pools")
    for name in cfg.accelerators:
        if not ACCELERATOR_KEY_RE.match(name):
            yield (
                ("accelerators", name),
                "accelerator keys name the node pool gpu-<key> and its service account "
                "gke-gpu-<key>: lowercase letters, digits and '-', at most 22 characters",
            )


@rule(target=TARGET, needs={"serving", "accelerators"})
def shared_gpu_memory_below_one(cfg: StackConfig) -> Iterator[Finding]:
    """Servers sharing one physical GPU each take their --gpu-memory-utilization share of it."""
    for role, pool in _gke_pools(cfg):
        acc = cfg.accelerators.get(pool.accelerator)
        sharing = acc.gpu_sharing if acc is not None else None
        if sharing is None:
            continue
        total = pool.gpu_memory_utilization * sharing.max_shared_clients_per_gpu
        if total >= 1.0:
            yield (
                ("serving", role, "gpu_memory_utilization"),
                f"{pool.gpu_memory_utilization} x {sharing.max_shared_clients_per_gpu} servers sharing one GPU "
                f"({pool.accelerator}.gpu_sharing) = {total:g} of its memory: keep the product below 1.0 "
                f"(at most {math.floor(0.99 / sharing.max_shared_clients_per_gpu * 100) / 100} per server)",
            )


@rule(target=TARGET, needs={"accelerators", "serving"}, plan=True)
def reservation_holds_max_plus_surge(cfg: StackConfig, plan: StackPlan) -> Iterator[Finding]:
    """ "maxSurge: 1 cannot manufacture a GPU": reserved nodes cover every pool's max replicas plus one rollout
    surge replica per pool. Checked only when every pool on the topology planned."""
    for name, ap in sorted(gke_part(plan).accelerators.items()):
        acc = cfg.accelerators[name]
        on_it = [role for role, pool in _gke_pools(cfg) if pool.accelerator == name]
        if acc.reservation is None or any(role not in plan.pools for role in on_it):
            continue
        a = ap.capacity
        if acc.reservation.count < a.nodes_for_max_plus_surge:
            yield (
                ("accelerators", name, "reservation", "count"),
                f"{acc.reservation.count} reserved node(s) cannot hold max replicas {a.max_replicas} + "
                f"rollout surge {a.surge_replicas} at {a.replicas_per_node} replica(s)/node = "
                f"{a.nodes_for_max_plus_surge} node(s)",
            )


@rule(target=TARGET, needs={"gke", "environment", "zones"})
def cluster_fits_environment(cfg: StackConfig) -> Iterator[Finding]:
    g = gke_section(cfg)
    if g is None:
        return
    if cfg.environment == "prod":
        if g.location_type != "regional":
            yield (
                ("gke", "location_type"),
                "prod needs a regional cluster: a zonal control plane is a single point of failure",
            )
        if not g.protect:
            yield ("gke", "protect"), "prod must protect the cluster, reservations, weights bucket and disks"
    if g.location_type == "regional" and len(cfg.zones) < 2:
        yield ("zones",), f"a regional cluster spreads its system pool over at least 2 zones, got {cfg.zones}"


@rule(target=TARGET, needs={"gke", "releases", "project", "region"})
def releases_live_in_stack_stores(cfg: StackConfig) -> Iterator[Finding]:
    """Images come from the stack's registry (pulled by digest, kept by its cleanup policy), weights from its
    bucket (readable by the model-server identity only)."""
    g = gke_section(cfg)
    if g is None:
        return
    prefix = registry_prefix(cfg.project, cfg.region, g.registry.repository_id)
    digests: dict[str, set[str]] = {}
    for i, rel in enumerate(cfg.releases):
        if rel.weights_bucket != g.weights.bucket:
            yield (
                ("releases", i, "weight_manifest"),
                f"weights must live in the stack's weights bucket gs://{g.weights.bucket}/, got gs://{rel.weights_bucket}/",
            )
        if not rel.image.startswith(prefix):
            yield (
                ("releases", i, "image"),
                f"serving images must come from the stack's Artifact Registry repository {prefix}..., got {rel.image}",
            )
        else:
            package = rel.image[len(prefix) :].split("@", 1)[0]
            digests.setdefault(package, set()).add(rel.digest)
    most = max((len(d) for d in digests.values()), default=0)
    if g.registry.keep_recent_versions < most:
        yield (
            ("gke", "registry", "keep_recent_versions"),
            f"{g.registry.keep_recent_versions} is fewer than the {most} image versions the stack's releases pin: "
            "the cleanup policy must keep every deployed digest",
        )


@rule(target=TARGET, needs={"gke", "releases", "serving", "accelerators"}, plan=True)
def hyperdisk_volumes_fit(cfg: StackConfig, plan: StackPlan) -> Iterator[Finding]:
    """Every release loading via Hyperdisk ML has a hydrated snapshot, a volume large and fast enough, and its
    pools in the volume's zone."""
    g = gke_section(cfg)
    if g is None:
        return
    hd = g.weights.hyperdisk_ml
    disks = gke_part(plan).hyperdisk_releases
    ids = {r.release for r in cfg.releases}
    for role, pool in _gke_pools(cfg):
        if pool.loading.path != "hyperdisk_ml":
            continue
        if hd is None:
            yield ("serving", role, "loading", "path"), "hyperdisk_ml loading needs gke.weights.hyperdisk_ml"
            continue
        if pool.loading.throughput_mib_s > hd.provisioned_throughput_mib_s:
            yield (
                ("serving", role, "loading", "throughput_mib_s"),
                f"{pool.loading.throughput_mib_s:g} MiB/s exceeds the Hyperdisk ML volume's provisioned "
                f"throughput ({hd.provisioned_throughput_mib_s} MiB/s)",
            )
        zone = disks.get(pool.release)
        acc = cfg.accelerators.get(pool.accelerator)
        if zone is not None and acc is not None and acc.zone != zone:
            yield (
                ("serving", role, "accelerator"),
                f"release {pool.release!r} loads from one Hyperdisk ML volume in {zone}; accelerator "
                f"{pool.accelerator!r} is in {acc.zone}",
            )
    if hd is None:
        return
    for rid in disks:
        if rid not in ids:
            continue
        if rid not in hd.snapshots:
            yield (
                ("gke", "weights", "hyperdisk_ml", "snapshots"),
                f"release {rid!r} loads via hyperdisk_ml but names no hydrated source snapshot",
            )
        need_gib = capacity.weight_bytes(release_geometry(cfg.release(rid))) / capacity.GIB
        if hd.size_gib < need_gib:
            yield (
                ("gke", "weights", "hyperdisk_ml", "size_gib"),
                f"{hd.size_gib} GiB cannot hold release {rid!r} ({need_gib:.1f} GiB of weights)",
            )
    for rid in hd.snapshots:
        if rid not in disks:
            yield ("gke", "weights", "hyperdisk_ml", "snapshots", rid), "no pool loads this release via hyperdisk_ml"
