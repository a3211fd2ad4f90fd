"""The ``gke`` target's rules, one module per concern: the platform section (cluster, node pools, reservations,
registry and weight stores), the Inference Gateway, the in-cluster benchmark, the co-hosted groups."""

from __future__ import annotations

from . import bench, cohosting, fleet, gateway, platform, tenants

MODULES = (bench, cohosting, fleet, gateway, platform, tenants)
