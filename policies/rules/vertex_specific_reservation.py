"""vertex-specific-reservation: Vertex AI machines (dedicated deployments and co-hosting resource pools) consume a
named zonal reservation (quota is not capacity); required in prod, by this policy's config elsewhere."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import PolicyConfigSchema, ResourceValidationPolicy, Severity

from ._common import RESERVATION_KEY, UNKNOWN, Res, get, resource_validator
from ._vertex import DEPLOYED_MODEL, RESOURCE_POOL, dedicated_resources

NAME = "vertex-specific-reservation"
SEVERITY = Severity.HIGH
FRAMEWORK = None
REMEDIATION = (
    "Set dedicatedResources.machineSpec.reservationAffinity to reservationAffinityType "
    f"SPECIFIC_RESERVATION, key {RESERVATION_KEY}, values [projects/<p>/zones/<z>/reservations/<name>] "
    "(the accelerator topology's reservation)."
)


def check(res: Res, cfg: dict[str, Any]) -> Iterator[str]:
    if not cfg.get("required", True):
        return
    resources = dedicated_resources(res)
    if resources is UNKNOWN or (res.type == DEPLOYED_MODEL and resources is None):
        return  # unknown at preview, or a co-hosted deployment (its resource pool is checked)
    aff = get(resources, "machineSpec", "reservationAffinity")
    if aff is UNKNOWN:
        return
    if not isinstance(aff, dict):
        yield (
            "machineSpec has no reservationAffinity: consume the stack's reservation (SPECIFIC_RESERVATION, key "
            f"{RESERVATION_KEY}, its resource name)"
        )
        return
    kind, key, values = aff.get("reservationAffinityType"), aff.get("key"), aff.get("values")
    if kind is not UNKNOWN and kind != "SPECIFIC_RESERVATION":
        yield (
            f"machineSpec consumes reservation type {kind!r}: set SPECIFIC_RESERVATION with key {RESERVATION_KEY} "
            "and the reservation's resource name"
        )
        return
    if key is not UNKNOWN and key != RESERVATION_KEY:
        yield f"reservationAffinity key is {key!r}: set it to {RESERVATION_KEY}"
    if values is UNKNOWN or (isinstance(values, list) and len(values) == 1 and values[0] is UNKNOWN):
        return
    if not (
        isinstance(values, list) and len(values) == 1 and isinstance(values[0], str) and "/reservations/" in values[0]
    ):
        yield (
            f"reservationAffinity values is {values!r}: name exactly one reservation by resource name "
            "(projects/<p>/zones/<z>/reservations/<name>)"
        )


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="Vertex AI deployments and resource pools consume a specific, named reservation.",
    validate=resource_validator((DEPLOYED_MODEL, RESOURCE_POOL), check),
    config_schema=PolicyConfigSchema(
        properties={
            "required": {
                "type": "boolean",
                "default": True,
                "description": "Whether Vertex machines must consume a specific reservation (prod: true).",
            },
        }
    ),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["capacity", "vertex"],
)
