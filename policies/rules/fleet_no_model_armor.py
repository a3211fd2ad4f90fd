"""fleet-no-model-armor: a fleet served by the multi-cluster GKE Inference Gateway has no Model Armor extension.

GKE "About the multi-cluster GKE Inference Gateway", Limitations: the multi-cluster gateway does not support the
Model Armor integration, so a ``GCPTrafficExtension`` in a fleet stack would screen nothing while looking like it
does. A stack is a fleet when it enables the fleet's ``multiclusteringress`` feature (components/fleet.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import Severity, StackValidationPolicy

from ._common import HUB_FEATURE, Res, get, of_type, stack_validator

NAME = "fleet-no-model-armor"
SEVERITY = Severity.HIGH
FRAMEWORK = None
TRAFFIC_EXTENSION = "kubernetes:networking.gke.io/v1:GCPTrafficExtension"
#: The fleet feature multi-cluster Gateways run on (gcloud ``container fleet ingress enable``).
MULTICLUSTER_INGRESS = "multiclusteringress"
REMEDIATION = (
    "Remove gateway.model_armor from a fleet stack and screen prompts and responses before the gateway (an API front "
    "such as Apigee's Model Armor policies), until the multi-cluster gateway supports the integration."
)


def is_fleet(resources: list[Res]) -> bool:
    return any(get(f.props, "name") == MULTICLUSTER_INGRESS for f in of_type(resources, HUB_FEATURE))


def check(resources: list[Res], cfg: dict[str, Any]) -> Iterator[tuple[str, str]]:
    if not is_fleet(resources):
        return
    for ext in of_type(resources, TRAFFIC_EXTENSION):
        yield (
            ext.urn,
            (
                f"{ext.label}: the multi-cluster GKE Inference Gateway does not support the Model Armor integration "
                "(GKE multi-cluster Inference Gateway, Limitations): this extension would screen nothing"
            ),
        )


POLICY = StackValidationPolicy(
    name=NAME,
    description="A fleet (multi-cluster Inference Gateway) has no Model Armor traffic extension.",
    validate=stack_validator(check, (HUB_FEATURE, TRAFFIC_EXTENSION)),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["security", "multi-region"],
)
