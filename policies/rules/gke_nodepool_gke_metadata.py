"""gke-nodepool-gke-metadata: nodes run the GKE metadata server (hides node credentials, serves WI tokens)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import ResourceValidationPolicy, Severity

from ._common import NODE_POOL, UNKNOWN, Res, cis_gke, get, resource_validator

NAME = "gke-nodepool-gke-metadata"
SEVERITY = Severity.HIGH
FRAMEWORK = cis_gke("5.4.2", "Ensure the GKE Metadata Server is Enabled")
REMEDIATION = "Set nodeConfig.workloadMetadataConfig.mode to GKE_METADATA."


def check(res: Res, _cfg: dict[str, Any]) -> Iterator[str]:
    mode = get(res.props, "nodeConfig", "workloadMetadataConfig", "mode")
    if mode is UNKNOWN:
        return
    if mode != "GKE_METADATA":
        shown = "not set" if mode is None else repr(mode)
        yield (
            f"nodeConfig.workloadMetadataConfig.mode is {shown}: set it to 'GKE_METADATA' so pods cannot read the "
            "node's credentials and get Workload Identity tokens"
        )


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="Node pools run the GKE metadata server.",
    validate=resource_validator((NODE_POOL,), check),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["identity"],
)
