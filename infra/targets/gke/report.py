"""The ``gke`` target's lines of the capacity report: node arithmetic per accelerator topology, and each co-hosted
group's node pool, its pod and where its instances run."""

from __future__ import annotations

from infra.planning.plan import StackPlan
from infra.targets.common import placement_lines

from .planning import GkePlan, gke_part


def report_lines(plan: StackPlan) -> list[str]:
    part = gke_part(plan)
    out: list[str] = []
    for name, ap in sorted(part.accelerators.items()):
        a = ap.capacity
        reserved = "no reservation" if a.reserved_nodes is None else f"{a.reserved_nodes} reserved"
        out.append(
            f"nodes on {name}: {a.nodes_for_max_replicas} at max replicas ({a.max_replicas}), "
            f"{a.nodes_for_max_plus_surge} with rollout surge; {reserved}"
        )
    for key, gg in part.gke_groups().items():
        lay = gg.layout
        sums = ", ".join(f"{s:g}" for s in lay.partition_sum_per_gpu)
        out.append(
            f"co-hosted group {key} ({gg.target}) on accelerator {gg.accelerator}: one co-host pod per node owning its "
            f"{lay.gpus_per_machine} GPU(s), {len(gg.server.instances)} instance(s) started one after another "
            f"(startup window {gg.probes.startup_window_seconds} s for {gg.probes.cold_load_seconds:.0f} s of cold "
            f"loads), {gg.min_nodes}..{gg.max_nodes} node(s) incl. one rollout surge node; partitions per GPU {sums} "
            f"(at most 1 - transient reserve {lay.transient_reserve:g} = {1 - lay.transient_reserve:g})"
        )
        out += placement_lines(lay)
    out += fleet_lines(part)
    return out


def fleet_lines(part: GkePlan) -> list[str]:
    """A fleet stack: each region's share and what its pools were sized to, then the fleet with each region lost."""
    if not part.sites:
        return []
    out: list[str] = []
    for site in part.sites:
        here = part if site.config_cluster else part.regions[site.region]
        bounds = ", ".join(
            f"{r} {p.hpa.min_replicas}..{p.hpa.max_replicas}" for r, p in sorted(here.gke_pools().items())
        )
        role = "config cluster " if site.config_cluster else ""
        out.append(f"region {site.region} ({role}{site.cluster_name}): share {site.share:g} of the peak; {bounds}")
    losses = {(x.role, x.lost_region): x for x in part.region_losses}
    for role in sorted(part.gke_pools()):
        for site in part.sites:
            x = losses.get((role, site.region))
            if x is None:
                out.append(f"region loss {site.region}: {role} unmeasured: not checked")
            else:
                verdict = "holds" if x.holds else "does NOT hold"
                out.append(
                    f"region loss {site.region}: {role} needs {x.needed_replicas} replica(s) for the whole peak, the "
                    f"other regions reach {x.surviving_max_replicas}: {verdict}"
                )
    return out
