"""pdb-for-serving-workloads: voluntary disruptions (node upgrades, drains) never take all replicas at once."""

from __future__ import annotations

from typing import Any, Iterator

from pulumi_policy import Severity, StackValidationPolicy

from ._common import PDB, Res, get, is_serving_deployment, of_type, pod_labels, same_namespace, selector_matches, stack_validator
from ._common import DEPLOYMENT, HELM_CHART
from ._epp import chart_namespace, epp_deployment_labels, is_epp_chart, release_name

NAME = "pdb-for-serving-workloads"
SEVERITY = Severity.HIGH
FRAMEWORK = None
REMEDIATION = ("Add a PodDisruptionBudget (maxUnavailable: 1) selecting the pods of every model-server Deployment "
               "and every endpoint picker.")


def _selects(pdb: Res, labels: Any) -> bool | None:
    return selector_matches(get(pdb.props, "spec", "selector", default={}), labels)


def check(resources: list[Res], _cfg: dict[str, Any]) -> Iterator[tuple[str, str]]:
    pdbs = of_type(resources, PDB)
    for dep in (r for r in resources if is_serving_deployment(r)):
        results = [_selects(p, pod_labels(dep)) for p in pdbs if same_namespace(p, dep)]
        if True in results or None in results:
            continue
        yield dep.urn, (f"Deployment {dep.k8s_name} has no PodDisruptionBudget selecting its pods: add one with "
                        "maxUnavailable: 1")
    for chart in (r for r in resources if is_epp_chart(r)):
        ns = chart_namespace(chart)
        candidates = [p for p in pdbs if (p.namespace or "default") == ns]
        results = [_selects(p, labels) for p in candidates for labels in epp_deployment_labels(chart)]
        if True in results or None in results:
            continue
        yield chart.urn, (f"endpoint picker {release_name(chart)} has no PodDisruptionBudget selecting its pods: add "
                          "one with maxUnavailable: 1")


POLICY = StackValidationPolicy(
    name=NAME,
    description="Every model-server Deployment and endpoint picker has a PodDisruptionBudget.",
    validate=stack_validator(check, (DEPLOYMENT, PDB, HELM_CHART)),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["availability"],
)
