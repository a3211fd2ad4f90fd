"""Serving from several regions: the ``fleet`` section of a ``gke`` stack.

The stack's own region (``gcp:region``, ``zones``, ``gke.*``, ``accelerators``) is the fleet's **config cluster**:
it serves like any region and also holds the multi-cluster Gateway and its HTTPRoute over the pools every cluster
exports (GKE "About the multi-cluster GKE Inference Gateway"). ``fleet.regions`` adds the other serving regions,
each with its own cluster, ranges and a zone + reservation per accelerator the pools run on; pools, releases,
contract and gateway are the stack's, the same in every region. The contract's peak is split between the regions
by ``share`` (each region's pools are sized for its share, from the same measurement), and the fleet must hold the
whole peak with its largest region lost (a rule with the numbers, ``rules/fleet.py``).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from infra.config.accelerator import Reservation, zone_region
from infra.config.base import Strict, check

from .platform import Name, NetworkRanges

#: Region names as ``gcp:region`` accepts them.
REGION_PATTERN = r"^[a-z]+-[a-z]+[0-9]+$"


class RegionAccelerator(Strict):
    """Where an accelerator topology of the stack runs in one region: the zone of its GPU nodes and the zonal
    reservation they consume there (a reservation is zonal, so every region names its own)."""

    zone: str = Field(description="Zone of the region the GPU nodes (and the reservation) live in.")
    reservation: Reservation | None = Field(
        None, description="The zonal reservation in that zone (required in prod, like the stack's own)."
    )


class FleetRegion(Strict):
    """One more serving region: its cluster, network ranges, zones and per-accelerator zone + reservation."""

    share: Annotated[float, Field(gt=0, le=1)] = Field(
        description=(
            "Fraction of the contract's peak this region serves when every region is up (its pools are sized for "
            "share x peak); the stack's own share plus every region's must be 1."
        )
    )
    zones: Annotated[list[str], Field(min_length=1)] = Field(description="Zones of this region the cluster uses.")
    cluster_name: Name = Field(description="This region's GKE cluster name (<= 23 characters), unique in the fleet.")
    ranges: NetworkRanges = Field(
        description=(
            "IPv4 ranges of this region's VPC, Pods, Services, proxy-only subnet and control plane; disjoint from "
            "every other region's (one fleet, one routable address plan)."
        )
    )
    accelerators: dict[str, RegionAccelerator] = Field(
        description="Per accelerator key the stack's pools use: its zone and reservation in this region."
    )


class FleetConfig(Strict):
    """The stack's regions beyond its own, served through GKE's multi-cluster Inference Gateway."""

    share: Annotated[float, Field(gt=0, le=1)] = Field(
        description="Fraction of the peak the stack's own region (the config cluster) serves when every region is up."
    )
    regions: Annotated[
        dict[Annotated[str, Field(pattern=REGION_PATTERN)], FleetRegion], Field(min_length=1, max_length=8)
    ] = Field(description="The other serving regions by region name (at least one).")

    @model_validator(mode="after")
    def _zones_in_region(self) -> FleetConfig:
        found: list[tuple[str, str]] = []
        for region, r in self.regions.items():
            dup = sorted({z for z in r.zones if r.zones.count(z) > 1})
            if dup:
                found.append((f"regions.{region}.zones", f"listed twice: {dup}"))
            for i, z in enumerate(r.zones):
                if zone_region(z) != region:
                    found.append((f"regions.{region}.zones.{i}", f"{z!r} is not a zone of {region}"))
            for key, acc in r.accelerators.items():
                if zone_region(acc.zone) != region:
                    found.append((f"regions.{region}.accelerators.{key}.zone", f"{acc.zone!r} is not in {region}"))
                elif acc.zone not in r.zones:
                    found.append(
                        (
                            f"regions.{region}.accelerators.{key}.zone",
                            f"{acc.zone!r} is not one of the region's zones {r.zones}",
                        )
                    )
        check(found)
        return self
