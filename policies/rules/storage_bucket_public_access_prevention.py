"""storage-bucket-public-access-prevention: a bucket can never be made public."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import ResourceValidationPolicy, Severity

from ._common import BUCKET, UNKNOWN, Res, cis_gcp, resource_validator

NAME = "storage-bucket-public-access-prevention"
SEVERITY = Severity.CRITICAL
FRAMEWORK = cis_gcp("5.1", "Ensure that Cloud Storage bucket is not anonymously or publicly accessible")
REMEDIATION = "Set publicAccessPrevention: enforced."


def check(res: Res, _cfg: dict[str, Any]) -> Iterator[str]:
    value = res.props.get("publicAccessPrevention")
    if value is not UNKNOWN and value != "enforced":
        yield f"publicAccessPrevention is {value!r}: set it to 'enforced' so no IAM grant can make the bucket public"


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="Buckets enforce public access prevention.",
    validate=resource_validator((BUCKET,), check),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["storage", "access"],
)
