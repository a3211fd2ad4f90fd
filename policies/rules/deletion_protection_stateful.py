"""deletion-protection-stateful: a preview can never delete the cluster, reservations, weights, disks, or a fleet's
registration (its Hub memberships and multi-cluster Ingress feature, which the fleet's Gateway depends on)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import PolicyConfigSchema, ResourceValidationPolicy, Severity

from ._common import BUCKET, CLUSTER, DISK, HUB_FEATURE, HUB_MEMBERSHIP, RESERVATION, Res, resource_validator

NAME = "deletion-protection-stateful"
SEVERITY = Severity.HIGH
FRAMEWORK = None
STATEFUL = (CLUSTER, RESERVATION, BUCKET, DISK, HUB_MEMBERSHIP, HUB_FEATURE)
REMEDIATION = (
    "Set the Pulumi protect option on the cluster, reservations, buckets, disks and a fleet's Hub memberships and "
    "multi-cluster Ingress feature; keep the cluster's "
    "deletionProtection true and never set forceDestroy on buckets."
)


def check(res: Res, cfg: dict[str, Any]) -> Iterator[str]:
    if not cfg.get("required", True):
        return
    kind = res.type.rsplit(":", 1)[-1]
    if not res.protect:
        yield f"{kind} is not protected: set the Pulumi protect option so no update can delete it"
    if res.type == CLUSTER and res.props.get("deletionProtection") is False:
        yield "deletionProtection is false: set it to true"
    if res.type == BUCKET and res.props.get("forceDestroy") is True:
        yield "forceDestroy is true: set it to false so deleting the bucket never deletes its objects"


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="Stateful resources are protected from deletion.",
    validate=resource_validator(STATEFUL, check),
    config_schema=PolicyConfigSchema(
        properties={
            "required": {
                "type": "boolean",
                "default": True,
                "description": "Whether protection is required (prod: true).",
            },
        }
    ),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["data-protection"],
)
