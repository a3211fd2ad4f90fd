"""pdb-for-serving-workloads: voluntary disruptions (node upgrades, drains) never take all replicas at once, and
never stall.

* Every model-server Deployment has a PodDisruptionBudget selecting its pods.
* An endpoint picker with more than one replica runs with leader election, and its readiness probe passes only on
  the leader (the GAIE chart points it at the gRPC health service ``readiness``). A PodDisruptionBudget counts
  the standby as unavailable, so none can ever allow evicting the leader: every drain of the leader's node would
  stall. Such a picker must have no PodDisruptionBudget, and must spread its replicas over nodes (required or
  preferred pod anti-affinity on ``kubernetes.io/hostname``) so one drain takes at most one of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import Severity, StackValidationPolicy

from ._common import (
    DEPLOYMENT,
    HELM_CHART,
    PDB,
    UNKNOWN,
    Res,
    as_int,
    get,
    is_serving_deployment,
    of_type,
    pod_labels,
    same_namespace,
    selector_matches,
    stack_validator,
)
from ._epp import chart_namespace, epp_deployment_labels, epp_values, epp_values_key, is_epp_chart, release_name

NAME = "pdb-for-serving-workloads"
SEVERITY = Severity.HIGH
FRAMEWORK = None
REMEDIATION = (
    "Add a PodDisruptionBudget (maxUnavailable: 1) selecting the pods of every model-server Deployment; "
    "give a leader-elected endpoint picker pod anti-affinity on kubernetes.io/hostname instead of a PDB."
)
HOSTNAME = "kubernetes.io/hostname"


def _selects(pdb: Res, labels: Any) -> bool | None:
    return selector_matches(get(pdb.props, "spec", "selector", default={}), labels)


def _spreads_over_nodes(epp: Any) -> bool | None:
    anti = get(epp, "affinity", "podAntiAffinity", default=None)
    if anti is UNKNOWN:
        return None
    if not isinstance(anti, dict):
        return False
    terms = list(get(anti, "requiredDuringSchedulingIgnoredDuringExecution", default=[]) or [])
    terms += [
        get(t, "podAffinityTerm", default={})
        for t in get(anti, "preferredDuringSchedulingIgnoredDuringExecution", default=[]) or []
    ]
    return any(isinstance(t, dict) and t.get("topologyKey") == HOSTNAME for t in terms)


def check(resources: list[Res], _cfg: dict[str, Any]) -> Iterator[tuple[str, str]]:
    pdbs = of_type(resources, PDB)
    for dep in (r for r in resources if is_serving_deployment(r)):
        results = [_selects(p, pod_labels(dep)) for p in pdbs if same_namespace(p, dep)]
        if True in results or None in results:
            continue
        yield (
            dep.urn,
            (
                f"Deployment {dep.k8s_name} has no PodDisruptionBudget selecting its pods: add one with "
                "maxUnavailable: 1"
            ),
        )
    for chart in (r for r in resources if is_epp_chart(r)):
        epp = epp_values(chart)
        replicas = as_int(get(epp, "replicas", default=1))
        if replicas is None or replicas < 2:
            continue  # a single picker has no leader election; epp-min-replicas judges its count
        ns = chart_namespace(chart)
        selecting = sorted(
            {
                p.k8s_name
                for p in pdbs
                if (p.namespace or "default") == ns
                and any(_selects(p, labels) for labels in epp_deployment_labels(chart))
            }
        )
        if selecting:
            yield (
                chart.urn,
                (
                    f"endpoint picker {release_name(chart)} runs {replicas} leader-elected replicas, of which "
                    f"only the leader is ready: PodDisruptionBudget {', '.join(selecting)} can never allow "
                    "evicting it and would stall every drain of its node; remove the PodDisruptionBudget"
                ),
            )
        if _spreads_over_nodes(epp) is False:
            yield (
                chart.urn,
                (
                    f"endpoint picker {release_name(chart)} runs {replicas} replicas without pod anti-affinity "
                    f"on {HOSTNAME}: one node drain could take every replica; set "
                    f"{epp_values_key(chart)}.affinity.podAntiAffinity"
                ),
            )


POLICY = StackValidationPolicy(
    name=NAME,
    description="Model servers have a PodDisruptionBudget; leader-elected endpoint pickers spread over nodes instead.",
    validate=stack_validator(check, (DEPLOYMENT, PDB, HELM_CHART)),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["availability"],
)
