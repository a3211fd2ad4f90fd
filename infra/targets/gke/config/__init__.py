"""The ``gke`` target's configuration: its pool type, its co-hosted group type and the root sections it owns
(``gke``: network, cluster, registry, weight stores; ``gateway``: the GKE Inference Gateway)."""

from __future__ import annotations

from infra.config.stack import Section, StackConfig, section_of

from .cohosting import GkeCoHostedGroup
from .fleet import FleetConfig, FleetRegion, RegionAccelerator
from .gateway import GatewayConfig
from .model_server import ModelServerOptions
from .platform import GkeConfig
from .pool import TARGET, GkePool, LoadingPath, WeightLoading

__all__ = [
    "SECTIONS",
    "TARGET",
    "FleetConfig",
    "FleetRegion",
    "GatewayConfig",
    "GkeCoHostedGroup",
    "GkeConfig",
    "GkePool",
    "LoadingPath",
    "ModelServerOptions",
    "RegionAccelerator",
    "WeightLoading",
    "fleet_section",
    "gateway_section",
    "gke_section",
]

SECTIONS = (
    Section(
        "gke",
        GkeConfig,
        (
            "The Google Cloud platform of the ``gke`` target: network, GKE cluster, registry, weight stores; required "
            "when a pool targets ``gke``."
        ),
    ),
    Section(
        "gateway",
        GatewayConfig,
        (
            "GKE Inference Gateway: class, certificate, endpoint picker chart, IAP, Model Armor; required when a pool "
            "targets ``gke``."
        ),
    ),
    Section(
        "fleet",
        FleetConfig,
        (
            "More serving regions behind GKE's multi-cluster Inference Gateway: per region a cluster, ranges, zones and "
            "a zone + reservation per accelerator, and the share of the peak it serves; the stack's own region is the "
            "config cluster. Absent: one region."
        ),
    ),
)


def gke_section(cfg: StackConfig) -> GkeConfig | None:
    """The stack's ``gke`` section (None when absent)."""
    return section_of(cfg, "gke", GkeConfig)


def gateway_section(cfg: StackConfig) -> GatewayConfig | None:
    """The stack's ``gateway`` section (None when absent)."""
    return section_of(cfg, "gateway", GatewayConfig)


def fleet_section(cfg: StackConfig) -> FleetConfig | None:
    """The stack's ``fleet`` section (None: a single-region stack)."""
    return section_of(cfg, "fleet", FleetConfig)
