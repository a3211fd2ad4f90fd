"""networkpolicy-selects-serving-pods: every model-server pod is isolated by an ingress NetworkPolicy."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import Severity, StackValidationPolicy

from ._common import (
    DEPLOYMENT,
    NETWORK_POLICY,
    UNKNOWN,
    Res,
    cis_gke,
    get,
    is_serving_deployment,
    of_type,
    pod_labels,
    same_namespace,
    selector_matches,
    stack_validator,
)

NAME = "networkpolicy-selects-serving-pods"
SEVERITY = Severity.HIGH
FRAMEWORK = cis_gke("4.3.2", "Ensure that all Namespaces have Network Policies defined")
REMEDIATION = (
    "Add a NetworkPolicy with policyTypes [Ingress] whose podSelector selects the model-server pods and "
    "admits only the gateway proxies, the endpoint picker and the metrics collector on port 8000."
)


def _isolates_ingress(np: Res) -> bool | None:
    types = get(np.props, "spec", "policyTypes")
    if types is UNKNOWN:
        return None
    if isinstance(types, list):
        return "Ingress" in types
    return True  # policyTypes unset: Kubernetes always includes Ingress


def check(resources: list[Res], _cfg: dict[str, Any]) -> Iterator[tuple[str, str]]:
    nps = of_type(resources, NETWORK_POLICY)
    for dep in (r for r in resources if is_serving_deployment(r)):
        verdicts = []
        for np in nps:
            if not same_namespace(np, dep):
                continue
            sel = selector_matches(get(np.props, "spec", "podSelector", default={}), pod_labels(dep))
            ing = _isolates_ingress(np)
            verdicts.append(None if sel is None or ing is None else sel and ing)
        if True in verdicts or None in verdicts:
            continue
        yield (
            dep.urn,
            (
                f"pods of Deployment {dep.k8s_name} are selected by no NetworkPolicy with policyTypes "
                "Ingress: add one selecting them that admits only the gateway, the endpoint picker and "
                "the metrics collector"
            ),
        )


POLICY = StackValidationPolicy(
    name=NAME,
    description="A NetworkPolicy isolates ingress to every model-server pod.",
    validate=stack_validator(check, (DEPLOYMENT, NETWORK_POLICY)),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["network"],
)
