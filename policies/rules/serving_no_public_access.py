"""serving-no-public-access: no serving endpoint (a Cloud Run service, a Vertex AI endpoint) is callable by
allUsers / allAuthenticatedUsers or without an IAM check, outside dev unless this policy's config allows it; and no
Vertex AI endpoint sits on the shared public endpoint domain.

GKE serving has no endpoint IAM: it is reached through its Gateway, which ``serving-requires-authentication``
judges (IAP, an internal gateway or an API key); ``iam-no-public-members`` covers every other IAM type.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import PolicyConfigSchema, ResourceValidationPolicy, Severity

from ._adapters import ADAPTERS, types_of
from ._adapters.facts import FactKind
from ._common import PUBLIC_MEMBERS, Res, resource_validator

NAME = "serving-no-public-access"
SEVERITY = Severity.CRITICAL
FRAMEWORK = None  # CIS GCP has no Cloud Run invoker or Vertex AI endpoint section.
REMEDIATION = (
    "Grant the caller role (Cloud Run roles/run.invoker: serving.<pool>.invoker_members; the Vertex AI endpoint's "
    "caller role: vertex.caller_members) to named principals only, keep Cloud Run's invoker IAM check on "
    "(invokerIamDisabled false), and serve Vertex AI from a dedicated endpoint or through Private Service Connect: "
    "a public GPU endpoint lets anyone spend the GPUs."
)
FACTS: tuple[FactKind, ...] = ("caller_grants", "endpoints")


def check(res: Res, cfg: dict[str, Any]) -> Iterator[str]:
    allow_public = bool(cfg.get("allowPublicCallers"))
    for adapter in ADAPTERS:
        for grant in adapter.caller_grants(res):
            if grant.member in PUBLIC_MEMBERS and not allow_public:
                yield (
                    f"{grant.role} is granted to {grant.member}: the {grant.noun} would answer anyone, spending its "
                    "GPUs; grant it to named principals only"
                )
        for endpoint in adapter.endpoints(res):
            switch = endpoint.iam_check_switch
            if switch is not None and switch.value is True and not allow_public:
                yield (
                    f"{switch.field} is true: the {endpoint.noun} answers anyone who reaches its URL; set it to false "
                    f"and grant {switch.caller_role} to named principals"
                )
            if endpoint.private is False:
                yield (
                    f"the {endpoint.noun} is neither dedicated (dedicatedEndpointEnabled) nor Private Service "
                    "Connect: set one of them, so it has its own DNS name or is reachable only from the allowed "
                    "projects"
                )


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="Serving endpoints (Cloud Run services, Vertex AI endpoints) have no public callers, keep their IAM "
    "check on and are not on a shared public domain.",
    validate=resource_validator(types_of(*FACTS), check),
    config_schema=PolicyConfigSchema(
        properties={
            "allowPublicCallers": {
                "type": "boolean",
                "default": False,
                "description": "Accept public callers of a serving endpoint (dev prototypes only; never staging or "
                "prod). The Vertex AI shared-domain check still applies.",
            },
        }
    ),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["identity", "authentication"],
)
