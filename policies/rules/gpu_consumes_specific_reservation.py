"""gpu-consumes-specific-reservation: GPU machines consume a named zonal reservation (quota is not capacity): GKE GPU
node pools and Vertex AI deployments, co-hosted groups' included (Cloud Run GPUs take no reservation).
Required in prod, by this policy's config elsewhere."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import PolicyConfigSchema, ResourceValidationPolicy, Severity

from ._adapters import ADAPTERS, types_of
from ._adapters.facts import FactKind, ReservationClaim
from ._common import RESERVATION_KEY, UNKNOWN, Res, resource_validator

NAME = "gpu-consumes-specific-reservation"
SEVERITY = Severity.HIGH
FRAMEWORK = None
REMEDIATION = (
    "Consume the accelerator topology's reservation by name: on GKE set nodeConfig.reservationAffinity to "
    f"consumeReservationType SPECIFIC_RESERVATION, key {RESERVATION_KEY}, values [<reservation name>]; on Vertex "
    "AI set dedicatedResources.machineSpec.reservationAffinity to reservationAffinityType SPECIFIC_RESERVATION, key "
    f"{RESERVATION_KEY}, values [projects/<p>/zones/<z>/reservations/<name>]."
)
FACTS: tuple[FactKind, ...] = ("reservations",)


def _names_one(claim: ReservationClaim, values: Any) -> bool:
    if not (isinstance(values, list) and len(values) == 1 and isinstance(values[0], str) and values[0]):
        return False
    return claim.resource_form is None or "/reservations/" in values[0]


def _claim(claim: ReservationClaim) -> Iterator[str]:
    aff = claim.affinity
    if aff is UNKNOWN:
        return
    how = f"with key {RESERVATION_KEY} and the reservation's {claim.by}"
    if not isinstance(aff, dict):
        yield f"{claim.machines} has no reservationAffinity: set {claim.type_field} SPECIFIC_RESERVATION {how}"
        return
    kind, key, values = aff.get(claim.type_field), aff.get("key"), aff.get("values")
    if kind is not UNKNOWN and kind != "SPECIFIC_RESERVATION":
        yield f"{claim.machines} consumes reservation type {kind!r}: set SPECIFIC_RESERVATION {how}"
        return
    if key is not UNKNOWN and key != RESERVATION_KEY:
        yield f"reservationAffinity key is {key!r}: set it to {RESERVATION_KEY}"
    if values is UNKNOWN or (isinstance(values, list) and UNKNOWN in values):
        return
    if not _names_one(claim, values):
        form = f" by {claim.by} ({claim.resource_form})" if claim.resource_form else ""
        yield f"reservationAffinity values is {values!r}: name exactly one reservation{form}"


def check(res: Res, cfg: dict[str, Any]) -> Iterator[str]:
    if not cfg.get("required", True):
        return
    for adapter in ADAPTERS:
        for claim in adapter.reservations(res):
            yield from _claim(claim)


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="GPU machines (GKE node pools, Vertex AI deployments) consume a specific, named reservation.",
    validate=resource_validator(types_of(*FACTS), check),
    config_schema=PolicyConfigSchema(
        properties={
            "required": {
                "type": "boolean",
                "default": True,
                "description": "Whether GPU machines must consume a specific reservation (prod: true).",
            },
        }
    ),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["capacity"],
)
