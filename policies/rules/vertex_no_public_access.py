"""vertex-no-public-access: no Vertex AI endpoint is callable by allUsers / allAuthenticatedUsers, and every
endpoint is dedicated or Private Service Connect (not the shared public endpoint domain)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import ResourceValidationPolicy, Severity

from ._common import PUBLIC_MEMBERS, UNKNOWN, Res, get, iam_grants, resource_validator
from ._vertex import ENDPOINT, ENDPOINT_IAM

NAME = "vertex-no-public-access"
SEVERITY = Severity.CRITICAL
FRAMEWORK = None  # CIS GCP has no Vertex AI endpoint section; iam-no-public-members covers the other IAM types.
REMEDIATION = (
    "Grant the endpoint's caller role to named principals only (vertex.caller_members), and serve from a "
    "dedicated endpoint or through Private Service Connect: a public GPU endpoint lets anyone spend the "
    "GPUs."
)


def check(res: Res, _cfg: dict[str, Any]) -> Iterator[str]:
    if res.type == ENDPOINT:
        dedicated = get(res.props, "dedicatedEndpointEnabled")
        psc = get(res.props, "privateServiceConnectConfig", "enablePrivateServiceConnect")
        if dedicated is UNKNOWN or psc is UNKNOWN:
            return
        if dedicated is not True and psc is not True:
            yield (
                "the endpoint is neither dedicated (dedicatedEndpointEnabled) nor Private Service Connect: set one "
                "of them, so it has its own DNS name or is reachable only from the allowed projects"
            )
        return
    for role, member in iam_grants(res):
        if member in PUBLIC_MEMBERS:
            yield (
                f"{role} is granted to {member}: the endpoint would answer anyone, spending its GPUs; grant it to "
                "named principals only"
            )


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="Vertex AI endpoints have no public callers and are dedicated or Private Service Connect.",
    validate=resource_validator((ENDPOINT, *ENDPOINT_IAM), check),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["identity", "authentication", "vertex"],
)
