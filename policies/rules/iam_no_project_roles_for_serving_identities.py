"""iam-no-project-roles-for-serving-identities: Kubernetes identities get resource-level grants only."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pulumi_policy import ResourceValidationPolicy, Severity

from ._common import UNKNOWN, Res, resource_validator

NAME = "iam-no-project-roles-for-serving-identities"
SEVERITY = Severity.HIGH
FRAMEWORK = None  # least privilege; no CIS control names project-level roles for workload identities.
PROJECT_IAM = ("gcp:projects/iAMMember:IAMMember", "gcp:projects/iAMBinding:IAMBinding")
#: Workload Identity Federation principals of Kubernetes service accounts (Workload Identity Federation for GKE docs).
KSA_PRINCIPAL_RE = re.compile(
    r"^principal(Set)?://iam\.googleapis\.com/projects/[^/]+/locations/global/"
    r"workloadIdentityPools/[^/]+\.svc\.id\.goog/(?P<subject>.+)$"
)
#: The documented exception: the Custom Metrics Stackdriver Adapter reads metrics project-wide (GKE inference autoscaling guide and samples).
EXCEPTIONS = {("subject/ns/custom-metrics/sa/custom-metrics-stackdriver-adapter", "roles/monitoring.viewer")}
REMEDIATION = (
    "Grant serving identities roles on the exact resource (bucket, repository, secret) instead of the "
    "project; only the metrics adapter's roles/monitoring.viewer is allowed at project level."
)


def check(res: Res, _cfg: dict[str, Any]) -> Iterator[str]:
    role = res.props.get("role")
    members = res.props.get("members") if "members" in res.props else [res.props.get("member")]
    if role is UNKNOWN or not isinstance(members, list):
        return
    for member in members:
        if not isinstance(member, str):
            continue
        m = KSA_PRINCIPAL_RE.match(member)
        if not m or (m.group("subject"), role) in EXCEPTIONS:
            continue
        yield (
            f"project-level role {role} is granted to Kubernetes identity {m.group('subject')}: grant it on the "
            "specific resource instead (only the metrics adapter's roles/monitoring.viewer may be project-level)"
        )


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="Serving identities hold no project-level IAM roles.",
    validate=resource_validator(PROJECT_IAM, check),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["identity", "least-privilege"],
)
