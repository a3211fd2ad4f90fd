"""The ``gke`` target's share of the stack plan: its pools (capacity, probes, HPA bounds, reservation cap), the node
arithmetic of each accelerator topology it runs a node pool on, its co-hosted groups and its Hyperdisk ML volumes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from infra.config.measurement import Measurement
from infra.config.stack import StackConfig
from infra.planning.plan import PlanIssue, StackPlan, TargetPlan

from ..config import TARGET, fleet_section
from .cohosting import ROLLOUT_SURGE_NODES, GkeCoHostedGroupPlan, GkeCoHostedModelPlan, cohosted_pool, plan_groups
from .fleet import RegionLoss, Site, region_losses, regional_config, sites
from .pools import (
    GkePoolPlan,
    gke_pools,
    gke_vllm_inputs,
    hyperdisk_releases,
    machine_of,
    plan_pools,
    pool_inputs,
    verify_read_mib_s,
    verify_workers,
)

__all__ = [
    "ROLLOUT_SURGE_NODES",
    "GkeCoHostedGroupPlan",
    "GkeCoHostedModelPlan",
    "GkePlan",
    "GkePoolPlan",
    "RegionLoss",
    "Site",
    "cohosted_pool",
    "gke_part",
    "gke_pools",
    "gke_vllm_inputs",
    "machine_of",
    "plan_gke",
    "pool_inputs",
    "regional_config",
    "sites",
    "verify_read_mib_s",
    "verify_workers",
]


@dataclass(frozen=True)
class GkePlan(TargetPlan):
    """What the ``gke`` target planned."""

    #: Release id -> zone of its Hyperdisk ML volume, for every release a pool loads via ``hyperdisk_ml``.
    hyperdisk_releases: Mapping[str, str] = field(default_factory=dict)
    #: A fleet stack's other serving regions (``fleet.regions``), each planned for its share; empty: one region.
    #: This plan's own pools are the config cluster's region's.
    regions: Mapping[str, GkePlan] = field(default_factory=dict)
    #: Per measured pool and region: the fleet with that region lost (planning/fleet.py); empty: one region.
    region_losses: tuple[RegionLoss, ...] = ()
    #: A fleet stack's serving regions, the config cluster's first, with their shares; empty: one region.
    sites: tuple[Site, ...] = ()

    def gke_pools(self) -> dict[str, GkePoolPlan]:
        return {r: p for r, p in self.pools.items() if isinstance(p, GkePoolPlan)}

    def gke_groups(self) -> dict[str, GkeCoHostedGroupPlan]:
        return {k: g for k, g in sorted(self.groups.items()) if isinstance(g, GkeCoHostedGroupPlan)}

    def cohosted(self) -> dict[str, GkeCoHostedGroupPlan]:
        """Every co-hosted group by the role of its pod (namespace, Deployment, InferencePool), in key order."""
        return {g.role: g for g in self.gke_groups().values()}


def plan_gke(cfg: StackConfig, measurements: Mapping[str, Measurement]) -> GkePlan:
    fleet = fleet_section(cfg)
    if fleet is None:
        return _plan_region(cfg, measurements)
    own = _plan_region(regional_config(cfg, fleet, cfg.region), measurements)
    regions = {r: _plan_region(regional_config(cfg, fleet, r), measurements) for r in sorted(fleet.regions)}
    issues = list(own.issues)
    for r, part in regions.items():
        # A region's refusal names the stack key it comes from; the message says which region's numbers failed.
        issues += [PlanIssue(i.loc, f"in region {r}: {i.message}") for i in part.issues]
    pools = {cfg.region: own.gke_pools(), **{r: p.gke_pools() for r, p in regions.items()}}
    return replace(
        own,
        issues=tuple(issues),
        regions=regions,
        region_losses=tuple(region_losses(cfg, pools, measurements)),
        sites=sites(cfg),
    )


def _plan_region(cfg: StackConfig, measurements: Mapping[str, Measurement]) -> GkePlan:
    issues: list[PlanIssue] = []
    pools, accelerators = plan_pools(cfg, measurements, issues)
    groups = plan_groups(cfg, issues)
    return GkePlan(
        target=TARGET,
        pools=pools,
        groups=groups,
        accelerators=accelerators,
        issues=tuple(issues),
        hyperdisk_releases=hyperdisk_releases(cfg),
    )


def gke_part(plan: StackPlan) -> GkePlan:
    """The ``gke`` target's share of a stack plan."""
    return plan.part(TARGET, GkePlan)
