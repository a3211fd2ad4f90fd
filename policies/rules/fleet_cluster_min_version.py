"""fleet-cluster-min-version: every cluster of a fleet runs at least the multi-cluster Inference Gateway's minimum.

GKE "Set up the GKE multi-cluster Inference Gateway", Requirements: "Use GKE version 1.34.1-gke.1127000 or later".
A bare minor (``1.34``) lets the release channel pick any 1.34 patch, possibly an earlier one, so it does not prove
the minimum. A stack is a fleet when it enables the ``multiclusteringress`` feature (components/fleet.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pulumi_policy import Severity, StackValidationPolicy

from ._common import CLUSTER, HUB_FEATURE, UNKNOWN, Res, get, of_type, stack_validator
from .fleet_no_model_armor import is_fleet

NAME = "fleet-cluster-min-version"
SEVERITY = Severity.HIGH
FRAMEWORK = None
MINIMUM = "1.34.1-gke.1127000"
#: ``<major>.<minor>.<patch>-gke.<build>``, the form GKE versions take (GKE release notes; gcloud
#: ``container get-server-config``).
_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)-gke\.(\d+)$")
REMEDIATION = f"Set gke.min_version to {MINIMUM} or a later full GKE version (not a bare minor such as 1.34)."


def parse(version: str) -> tuple[int, ...] | None:
    m = _VERSION.match(version)
    return tuple(int(g) for g in m.groups()) if m else None


def check(resources: list[Res], cfg: dict[str, Any]) -> Iterator[tuple[str, str]]:
    if not is_fleet(resources):
        return
    floor = parse(MINIMUM)
    assert floor is not None
    for cluster in of_type(resources, CLUSTER):
        version = get(cluster.props, "minMasterVersion")
        if version is UNKNOWN:
            continue
        parsed = parse(version) if isinstance(version, str) else None
        if parsed is None:
            yield (
                cluster.urn,
                (
                    f"{cluster.label}: minMasterVersion {version!r} is not a full GKE version: the fleet's clusters must "
                    f"run at least {MINIMUM}, which only a full version proves"
                ),
            )
        elif parsed < floor:
            yield (
                cluster.urn,
                (
                    f"{cluster.label}: minMasterVersion {version} is below {MINIMUM}, the multi-cluster Inference "
                    "Gateway's minimum"
                ),
            )


POLICY = StackValidationPolicy(
    name=NAME,
    description=f"Every cluster of a fleet runs GKE {MINIMUM} or later.",
    validate=stack_validator(check, (HUB_FEATURE, CLUSTER)),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["multi-region", "availability"],
)
