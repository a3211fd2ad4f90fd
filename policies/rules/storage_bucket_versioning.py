"""storage-bucket-versioning: an overwritten or deleted object (a weight shard, a manifest) stays recoverable."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import ResourceValidationPolicy, Severity

from ._common import BUCKET, UNKNOWN, Res, get, resource_validator

NAME = "storage-bucket-versioning"
SEVERITY = Severity.MEDIUM
FRAMEWORK = None
REMEDIATION = "Set versioning: {enabled: true}."


def check(res: Res, _cfg: dict[str, Any]) -> Iterator[str]:
    value = get(res.props, "versioning", "enabled")
    if value is not UNKNOWN and value is not True:
        yield (
            f"versioning.enabled is {value!r}: set it to true so an overwritten or deleted weight file or "
            "manifest can be restored"
        )


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="Buckets keep object versions.",
    validate=resource_validator((BUCKET,), check),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["storage", "release-identity"],
)
