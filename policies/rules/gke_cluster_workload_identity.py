"""gke-cluster-workload-identity: the cluster has a workload pool, so pods get their own identities."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import ResourceValidationPolicy, Severity

from ._common import CLUSTER, UNKNOWN, Res, cis_gke, get, resource_validator

NAME = "gke-cluster-workload-identity"
SEVERITY = Severity.HIGH
FRAMEWORK = cis_gke("5.2.2", "Prefer using dedicated GCP Service Accounts and Workload Identity")
REMEDIATION = "Set workloadIdentityConfig.workloadPool to '<project>.svc.id.goog'."


def check(res: Res, _cfg: dict[str, Any]) -> Iterator[str]:
    pool = get(res.props, "workloadIdentityConfig", "workloadPool")
    project = res.props.get("project")
    if pool is UNKNOWN:
        return
    want = f"{project}.svc.id.goog" if isinstance(project, str) else "<project>.svc.id.goog"
    if not isinstance(pool, str) or not pool:
        yield f"workloadIdentityConfig.workloadPool is not set: set it to {want!r}"
    elif isinstance(project, str) and pool != want:
        yield f"workloadIdentityConfig.workloadPool is {pool!r}: set it to {want!r}"
    elif not pool.endswith(".svc.id.goog"):
        yield f"workloadIdentityConfig.workloadPool is {pool!r}: set it to {want!r}"


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="GKE clusters enable Workload Identity.",
    validate=resource_validator((CLUSTER,), check),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["identity"],
)
