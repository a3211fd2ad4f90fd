"""cloudrun-no-public-invoker: no Cloud Run service is callable by allUsers / allAuthenticatedUsers, and none turns
its invoker IAM check off (outside dev, unless this policy's config allows it)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import PolicyConfigSchema, ResourceValidationPolicy, Severity

from ._common import CLOUD_RUN_IAM, CLOUD_RUN_SERVICE, PUBLIC_MEMBERS, Res, get, iam_grants, resource_validator

NAME = "cloudrun-no-public-invoker"
SEVERITY = Severity.CRITICAL
FRAMEWORK = None  # CIS GCP has no Cloud Run invoker section; iam-no-public-members covers the other IAM types.
#: The Cloud Run Admin API v1 IAM resources grant on the same services as the run.v2 ones (the provider's usual
#: "public Cloud Run service" example is a v1 IamMember to allUsers), and iam-no-public-members does not cover them.
CLOUD_RUN_V1_IAM = (
    "gcp:cloudrun/iamMember:IamMember",
    "gcp:cloudrun/iamBinding:IamBinding",
    "gcp:cloudrun/iamPolicy:IamPolicy",
)
REMEDIATION = (
    "Grant roles/run.invoker to named principals only (serving.<pool>.invoker_members) and keep the invoker "
    "IAM check on (invokerIamDisabled false): a public GPU endpoint lets anyone spend the GPUs."
)


def check(res: Res, cfg: dict[str, Any]) -> Iterator[str]:
    if cfg.get("allowPublicInvoker"):
        return
    if res.type == CLOUD_RUN_SERVICE:
        if get(res.props, "invokerIamDisabled") is True:
            yield (
                "invokerIamDisabled is true: the service answers anyone who reaches its URL; set it to false and "
                "grant roles/run.invoker to named principals"
            )
        return
    for role, member in iam_grants(res):
        if member in PUBLIC_MEMBERS:
            yield (
                f"{role} is granted to {member}: the service would answer anyone, spending its GPUs; grant it to "
                "named principals only"
            )


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="Cloud Run services have no public invoker and keep the invoker IAM check on.",
    validate=resource_validator((CLOUD_RUN_SERVICE, *CLOUD_RUN_IAM, *CLOUD_RUN_V1_IAM), check),
    config_schema=PolicyConfigSchema(
        properties={
            "allowPublicInvoker": {
                "type": "boolean",
                "default": False,
                "description": "Accept a public invoker (dev prototypes only; never staging or prod).",
            },
        }
    ),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["identity", "authentication", "cloud-run"],
)
