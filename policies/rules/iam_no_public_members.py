"""iam-no-public-members: no IAM grant to allUsers / allAuthenticatedUsers on anything the stack owns."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import ResourceValidationPolicy, Severity

from ._common import PUBLIC_MEMBERS, Res, cis_gcp, resource_validator

NAME = "iam-no-public-members"
SEVERITY = Severity.CRITICAL
FRAMEWORK = cis_gcp("5.1", "Ensure that Cloud Storage bucket is not anonymously or publicly accessible")
IAM_TYPES = (
    "gcp:projects/iAMMember:IAMMember",
    "gcp:projects/iAMBinding:IAMBinding",
    "gcp:storage/bucketIAMMember:BucketIAMMember",
    "gcp:storage/bucketIAMBinding:BucketIAMBinding",
    "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember",
    "gcp:artifactregistry/repositoryIamBinding:RepositoryIamBinding",
    "gcp:secretmanager/secretIamMember:SecretIamMember",
    "gcp:secretmanager/secretIamBinding:SecretIamBinding",
)
REMEDIATION = "Remove allUsers / allAuthenticatedUsers; grant named principals only."


def check(res: Res, _cfg: dict[str, Any]) -> Iterator[str]:
    members = res.props.get("members") if "members" in res.props else [res.props.get("member")]
    if not isinstance(members, list):
        return
    for member in members:
        if member in PUBLIC_MEMBERS:
            yield (
                f"role {res.props.get('role')} is granted to {member}: grant it to named principals only, "
                "nothing in this stack may be reachable without authentication"
            )


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="No IAM grant to allUsers or allAuthenticatedUsers.",
    validate=resource_validator(IAM_TYPES, check),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["identity", "authentication"],
)
