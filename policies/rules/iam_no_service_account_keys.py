"""iam-no-service-account-keys: no exportable long-lived credentials; pods authenticate by Workload Identity."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import ResourceValidationPolicy, Severity

from ._common import SA_KEY, Res, cis_gcp, resource_validator

NAME = "iam-no-service-account-keys"
SEVERITY = Severity.CRITICAL
FRAMEWORK = cis_gcp("1.4", "Ensure that there are only GCP-managed service account keys for each service account")
REMEDIATION = "Delete the key resource; give the workload a Kubernetes service account and grant its WIF principal."


def check(res: Res, _cfg: dict[str, Any]) -> Iterator[str]:
    yield (
        "service account keys must not be created: authenticate the workload with Workload Identity Federation "
        "(its Kubernetes service account's principal) instead"
    )


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="No user-managed service account keys.",
    validate=resource_validator((SA_KEY,), check),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["identity"],
)
