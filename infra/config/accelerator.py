"""Accelerator topology: the GPU machine shape a pool runs on, its price, and the zonal reservation it
consumes (the design, "Autoscaling Has Two Clocks": quota is not capacity)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, model_validator

from .base import MAX_NODES, PROJECT_ID_PATTERN, Strict, check

ZONE_RE = re.compile(r"^(?P<region>[a-z]+-[a-z]+[0-9]+)-[a-z]\Z")

#: Known machine families and the GKE accelerator type each one carries (Compute Engine GPU machine
#: types documentation): a pair outside this table needs ``allow_unknown_machine_pair: true``.
MACHINE_FAMILY_GPU: dict[str, str] = {
    "a3-highgpu": "nvidia-h100-80gb",
    "a3-megagpu": "nvidia-h100-mega-80gb",
    "a3-ultragpu": "nvidia-h200-141gb",
    "a2-ultragpu": "nvidia-a100-80gb",
    "a2-highgpu": "nvidia-tesla-a100",
    "g2-standard": "nvidia-l4",
}

#: GPUs attached to each fixed-shape G2 machine type (g2 sizes are vCPU counts, not GPU counts).
G2_GPUS: dict[str, int] = {
    "g2-standard-4": 1,
    "g2-standard-8": 1,
    "g2-standard-12": 1,
    "g2-standard-16": 1,
    "g2-standard-24": 2,
    "g2-standard-32": 1,
    "g2-standard-48": 4,
    "g2-standard-96": 8,
}


#: Machine families whose boot disk must be Hyperdisk (A3 Ultra and A4 support no Persistent Disk).
HYPERDISK_BOOT_FAMILIES = frozenset({"a3-ultragpu", "a4-highgpu"})


def machine_family(machine_type: str) -> str:
    return machine_type.rsplit("-", 1)[0]


def boot_disk_type(machine_type: str) -> str:
    """Boot disk type a GPU node of this machine type can use."""
    return "hyperdisk-balanced" if machine_family(machine_type) in HYPERDISK_BOOT_FAMILIES else "pd-balanced"


def gpus_of_machine_type(machine_type: str) -> int | None:
    """GPU count implied by the machine type name (``a3-highgpu-2g`` -> 2, ``g2-standard-24`` -> 2)."""
    if machine_type in G2_GPUS:
        return G2_GPUS[machine_type]
    m = re.match(r"^[a-z0-9]+-[a-z]+-([0-9]+)g\Z", machine_type)
    return int(m.group(1)) if m else None


def zone_region(zone: str) -> str | None:
    m = ZONE_RE.match(zone)
    return m.group("region") if m else None


class Reservation(Strict):
    """A zonal Compute Engine reservation the GPU pool consumes by name (SPECIFIC_RESERVATION).

    ``mode: create`` makes the stack own it (``specific_reservation_required``, so nothing else eats it);
    ``mode: existing`` references one by name, optionally shared from ``owner_project``.
    """

    mode: Literal["create", "existing"] = Field(
        description=("create: the stack owns the reservation; existing: consume one by name.")
    )
    name: Annotated[str, Field(pattern=r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")] = Field(
        description="Reservation name (the node pool targets it by name)."
    )
    count: Annotated[int, Field(gt=0, le=MAX_NODES)] = Field(
        description=(
            "Number of VMs (nodes) in the reservation; at most the 1,000 nodes a GKE node pool holds per zone."
        )
    )
    owner_project: Annotated[str, Field(pattern=PROJECT_ID_PATTERN)] | None = Field(
        None, description=("Project that owns a shared existing reservation (a project id).")
    )

    @model_validator(mode="after")
    def _owner_only_for_existing(self) -> Reservation:
        check(
            [("owner_project", "only an existing (shared) reservation can live in another project")]
            if self.owner_project is not None and self.mode == "create"
            else []
        )
        return self


class GpuSharing(Strict):
    """GPU sharing for co-hosting pools (Vertex AI model co-hosting): several small servers share one physical GPU."""

    strategy: Literal["MPS", "TIME_SHARING"] = Field(description="GKE GPU sharing strategy.")
    max_shared_clients_per_gpu: Annotated[int, Field(ge=2, le=48)] = Field(description="Containers sharing one GPU.")


class AcceleratorTopology(Strict):
    machine_type: Annotated[str, Field(pattern=r"^[a-z0-9]+-[a-z]+-[0-9]+g?$")] = Field(
        description=("Compute Engine GPU machine type (a3-highgpu-2g, g2-standard-12, ...).")
    )
    gpu_type: Annotated[str, Field(pattern=r"^nvidia-[a-z0-9-]+$")] = Field(
        description="GKE accelerator type; must match the machine family."
    )
    gpus_per_node: Annotated[int, Field(gt=0, le=16)] = Field(description="GPUs per node; must match the machine type.")
    # 1,024 GiB: five times the largest GPU memory sold (192 GB); MiB typed as GiB is caught.
    gpu_memory_gib: Annotated[float, Field(gt=0, le=1024)] = Field(
        description=("Usable HBM per GPU in GiB (H100 80GB = 80, L4 = 24 as sold; the planner applies utilisation).")
    )
    # $1,000/h: ten times the most expensive GPU machine type's list price; cents typed as dollars are caught.
    node_hourly_usd: Annotated[float, Field(gt=0, le=1000)] = Field(
        description=("On-demand (or committed) price of one node per hour in USD, for cost per million tokens.")
    )
    zone: str = Field(description="Zone the GPU nodes (and the reservation) live in.")
    spot: bool = Field(False, description=("Spot VMs (never in prod; cannot consume a reservation)."))
    reservation: Reservation | None = Field(
        None, description=("Zonal reservation the GPU pool consumes (required in prod).")
    )
    gpu_sharing: GpuSharing | None = Field(None, description="Optional GPU sharing for co-hosted pools.")
    allow_unknown_machine_pair: bool = Field(
        False, description=("Set to accept a machine/accelerator pair outside MACHINE_FAMILY_GPU (e.g. a new family).")
    )

    @model_validator(mode="after")
    def _checks(self) -> AcceleratorTopology:
        problems = []
        family = machine_family(self.machine_type)
        expected = MACHINE_FAMILY_GPU.get(family)
        if not self.allow_unknown_machine_pair:
            if expected is None:
                problems.append(
                    (
                        "machine_type",
                        f"unknown GPU machine family {family!r}; known: "
                        f"{', '.join(sorted(MACHINE_FAMILY_GPU))} (set allow_unknown_machine_pair to override)",
                    )
                )
            elif expected != self.gpu_type:
                problems.append(
                    (
                        "gpu_type",
                        f"{self.machine_type} carries {expected}, not {self.gpu_type} "
                        "(set allow_unknown_machine_pair to override)",
                    )
                )
            implied = gpus_of_machine_type(self.machine_type)
            if implied is not None and implied != self.gpus_per_node:
                problems.append(
                    ("gpus_per_node", f"{self.machine_type} has {implied} GPU(s), got {self.gpus_per_node}")
                )
        if zone_region(self.zone) is None:
            problems.append(("zone", f"not a zone name like us-central1-a: {self.zone!r}"))
        if self.spot and self.reservation is not None:
            problems.append(("reservation", "Spot VMs cannot consume a reservation: drop spot or the reservation"))
        check(problems)
        return self
