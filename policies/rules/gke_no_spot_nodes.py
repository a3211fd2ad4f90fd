"""gke-no-spot-nodes: no Spot or preemptible VMs where the environment forbids them (prod)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import PolicyConfigSchema, ResourceValidationPolicy, Severity

from ._common import CLUSTER, NODE_POOL, Res, get, resource_validator

NAME = "gke-no-spot-nodes"
SEVERITY = Severity.HIGH
FRAMEWORK = None
REMEDIATION = "Set nodeConfig.spot and nodeConfig.preemptible to false (or leave them unset)."


def check(res: Res, cfg: dict[str, Any]) -> Iterator[str]:
    if cfg.get("allowSpot", False):
        return
    for field in ("spot", "preemptible"):
        if get(res.props, "nodeConfig", field) is True:
            yield (
                f"nodeConfig.{field} is true: set it to false, {field} VMs are reclaimed without notice and "
                "cannot consume a reservation"
            )


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="Node pools do not use Spot or preemptible VMs.",
    validate=resource_validator((NODE_POOL, CLUSTER), check),
    config_schema=PolicyConfigSchema(
        properties={
            "allowSpot": {"type": "boolean", "default": False, "description": "Allow Spot VMs (dev only)."},
        }
    ),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["capacity", "availability"],
)
