"""hpa-min-replicas: keep warm replicas (the design: "scaling from zero is a poor default for an interactive SLO")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import PolicyConfigSchema, ResourceValidationPolicy, Severity

from ._common import HPA, UNKNOWN, Res, as_int, get, resource_validator

NAME = "hpa-min-replicas"
SEVERITY = Severity.HIGH
FRAMEWORK = None
DEFAULT_MIN = 2
REMEDIATION = f"Set the HPA's minReplicas to at least minReplicas ({DEFAULT_MIN} in prod)."


def check(res: Res, cfg: dict[str, Any]) -> Iterator[str]:
    raw = get(res.props, "spec", "minReplicas", default=1)  # autoscaling/v2 default
    if raw is UNKNOWN:
        return
    n, need = as_int(raw), int(cfg.get("minReplicas", DEFAULT_MIN))
    if n is None or n < need:
        yield (
            f"minReplicas is {raw}: keep at least {need} warm replicas; a new GPU replica takes minutes "
            "to obtain a node and load weights"
        )


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="Serving autoscalers keep a minimum of warm replicas.",
    validate=resource_validator((HPA,), check),
    config_schema=PolicyConfigSchema(
        properties={
            "minReplicas": {
                "type": "integer",
                "minimum": 1,
                "default": DEFAULT_MIN,
                "description": "Least HPA minReplicas (2 in prod).",
            },
        }
    ),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["availability", "autoscaling"],
)
