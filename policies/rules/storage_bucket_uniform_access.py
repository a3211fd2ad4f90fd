"""storage-bucket-uniform-access: IAM alone governs bucket access (no object ACLs)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import ResourceValidationPolicy, Severity

from ._common import BUCKET, UNKNOWN, Res, cis_gcp, resource_validator

NAME = "storage-bucket-uniform-access"
SEVERITY = Severity.HIGH
FRAMEWORK = cis_gcp("5.2", "Ensure that Cloud Storage buckets have uniform bucket-level access enabled")
REMEDIATION = "Set uniformBucketLevelAccess: true."


def check(res: Res, _cfg: dict[str, Any]) -> Iterator[str]:
    value = res.props.get("uniformBucketLevelAccess")
    if value is not UNKNOWN and value is not True:
        yield f"uniformBucketLevelAccess is {value!r}: set it to true so only bucket-level IAM grants access"


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="Buckets use uniform bucket-level access.",
    validate=resource_validator((BUCKET,), check),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["storage", "access"],
)
