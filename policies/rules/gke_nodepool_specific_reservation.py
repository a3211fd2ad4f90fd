"""gke-nodepool-specific-reservation: GPU node pools consume a named zonal reservation (quota is not capacity)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import PolicyConfigSchema, ResourceValidationPolicy, Severity

from ._common import NODE_POOL, RESERVATION_KEY, UNKNOWN, Res, get, is_gpu_node_pool, resource_validator

NAME = "gke-nodepool-specific-reservation"
SEVERITY = Severity.HIGH
FRAMEWORK = None
REMEDIATION = (
    "Set nodeConfig.reservationAffinity to consumeReservationType SPECIFIC_RESERVATION, key "
    f"{RESERVATION_KEY}, values [<reservation name>]."
)


def check(res: Res, cfg: dict[str, Any]) -> Iterator[str]:
    if not cfg.get("required", True) or not is_gpu_node_pool(res):
        return
    aff = get(res.props, "nodeConfig", "reservationAffinity")
    if aff is UNKNOWN:
        return
    if not isinstance(aff, dict):
        yield (
            "GPU node pool has no reservationAffinity: set consumeReservationType SPECIFIC_RESERVATION with key "
            f"{RESERVATION_KEY} and the reservation's name"
        )
        return
    kind, key, values = aff.get("consumeReservationType"), aff.get("key"), aff.get("values")
    if kind is not UNKNOWN and kind != "SPECIFIC_RESERVATION":
        yield (
            f"GPU node pool consumes reservation type {kind!r}: set SPECIFIC_RESERVATION with key "
            f"{RESERVATION_KEY} and the reservation's name"
        )
        return
    if key is not UNKNOWN and key != RESERVATION_KEY:
        yield f"reservationAffinity key is {key!r}: set it to {RESERVATION_KEY}"
    if values is not UNKNOWN and not (isinstance(values, list) and len(values) == 1 and values[0]):
        yield f"reservationAffinity values is {values!r}: name exactly one reservation"


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="GPU node pools consume a specific, named reservation.",
    validate=resource_validator((NODE_POOL,), check),
    config_schema=PolicyConfigSchema(
        properties={
            "required": {
                "type": "boolean",
                "default": True,
                "description": "Whether GPU pools must consume a specific reservation (prod: true).",
            },
        }
    ),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["capacity"],
)
