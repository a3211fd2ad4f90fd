"""A fleet stack's regions as the planner sees them: each region is the stack's configuration with that region's
place (region, zones, cluster, ranges, accelerator zones and reservations) and its share of the contract's peak;
every region is planned with the same formulas and measurements as a single-region stack.

Region loss (the fleet-level N+1): with any one region down, the others must hold the whole peak. For a measured
pool of weight ``w`` (θ_o, θ_i at its operating point, ρ the target utilisation, λ the stack's peak):

    needed   R = max(ceil(λ·w/100 · E[O] / (θ_o·ρ)), ceil(λ·w/100 · E[I] / (θ_i·ρ)))    (capacity.decode/prefill)
    holds    sum over the surviving regions of the pool's HPA ceiling (reservation-capped) >= R

No replica spare is added on top of R: the lost region *is* the failure this check plans for (each region keeps its
own one-replica spare for a node loss inside it, ``capacity.FAILURE_HEADROOM_REPLICAS``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from infra.config.measurement import Measurement
from infra.config.stack import StackConfig
from infra.planning import capacity

from ..config import FleetConfig, GkePool, fleet_section, gke_section
from .pools import GkePoolPlan, gke_pools


@dataclass(frozen=True)
class Site:
    """One serving region of the stack: the config cluster's (the stack's own region) or one of ``fleet.regions``."""

    region: str
    share: float
    config_cluster: bool
    cluster_name: str


def sites(cfg: StackConfig) -> tuple[Site, ...]:
    """Every serving region, the config cluster first, then ``fleet.regions`` in name order; one site without a
    fleet."""
    g, fleet = gke_section(cfg), fleet_section(cfg)
    assert g is not None
    own = Site(cfg.region, fleet.share if fleet else 1.0, True, g.cluster_name)
    if fleet is None:
        return (own,)
    return (own, *(Site(r, x.share, False, x.cluster_name) for r, x in sorted(fleet.regions.items())))


def regional_config(cfg: StackConfig, fleet: FleetConfig, region: str) -> StackConfig:
    """The stack as ``region`` runs it: its share of the peak (every other contract number is the stack's), and for
    a ``fleet.regions`` entry its region, zones, cluster name, ranges and each accelerator's zone + reservation."""
    contract = cfg.contract.model_copy(
        update={"peak_arrival_rate_rps": cfg.contract.peak_arrival_rate_rps * share_of(fleet, cfg.region, region)}
    )
    if region == cfg.region:
        return cfg.model_copy(update={"contract": contract})
    r = fleet.regions[region]
    g = gke_section(cfg)
    assert g is not None
    accelerators = {
        key: acc.model_copy(
            update={
                "zone": r.accelerators[key].zone if key in r.accelerators else acc.zone,
                "reservation": r.accelerators[key].reservation if key in r.accelerators else acc.reservation,
            }
        )
        for key, acc in cfg.accelerators.items()
    }
    return cfg.model_copy(
        update={
            "region": region,
            "zones": list(r.zones),
            "contract": contract,
            "accelerators": accelerators,
            "gke": g.model_copy(update={"cluster_name": r.cluster_name, "ranges": r.ranges, "bench": None}),
        }
    )


def share_of(fleet: FleetConfig, own_region: str, region: str) -> float:
    return fleet.share if region == own_region else fleet.regions[region].share


@dataclass(frozen=True)
class RegionLoss:
    """One pool with one region lost: the replicas the whole peak needs and what the surviving regions can reach."""

    role: str
    lost_region: str
    needed_replicas: int
    surviving_max_replicas: int

    @property
    def holds(self) -> bool:
        return self.surviving_max_replicas >= self.needed_replicas


def peak_replicas(cfg: StackConfig, pool: GkePool, record: Measurement | None) -> int | None:
    """Replicas a pool needs for the stack's whole peak at its measured operating point (None: unmeasured)."""
    op = record.operating_point if record is not None else None
    if op is None:
        return None
    c = cfg.contract
    rps = c.peak_arrival_rate_rps * pool.weight / 100
    return max(
        capacity.decode_replicas(rps, c.output_tokens.mean, op.output_tokens_per_s, c.target_utilization),
        capacity.prefill_replicas(rps, c.prompt_tokens.mean, op.input_tokens_per_s, c.target_utilization),
    )


def region_losses(
    cfg: StackConfig, regions: Mapping[str, Mapping[str, GkePoolPlan]], measurements: Mapping[str, Measurement]
) -> list[RegionLoss]:
    """For every measured pool and every region: the fleet with that region lost (``regions``: each region's
    planned pools)."""
    out: list[RegionLoss] = []
    for role, pool in gke_pools(cfg):
        needed = peak_replicas(cfg, pool, measurements.get(role))
        if needed is None or any(role not in p for p in regions.values()):
            continue
        for lost in regions:
            surviving = sum(p[role].hpa.max_replicas for r, p in regions.items() if r != lost)
            out.append(RegionLoss(role, lost, needed, surviving))
    return out
