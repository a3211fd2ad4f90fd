"""epp-min-replicas: the endpoint picker runs redundantly (the design: "a clever router that is down is worse than a
simple router that is alive")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import PolicyConfigSchema, ResourceValidationPolicy, Severity

from ._common import HELM_CHART, UNKNOWN, Res, as_int, get, resource_validator
from ._epp import epp_values, is_epp_chart

NAME = "epp-min-replicas"
SEVERITY = Severity.HIGH
FRAMEWORK = None
#: Replicas the inferencepool / llm-d-router charts run when the values do not say.
CHART_DEFAULT_REPLICAS = 1
DEFAULT_MIN = 2
REMEDIATION = f"Set the endpoint picker chart's replicas to at least minReplicas ({DEFAULT_MIN} in prod)."


def epp_replicas(res: Res) -> Any:
    return get(epp_values(res), "replicas", default=CHART_DEFAULT_REPLICAS)


def check(res: Res, cfg: dict[str, Any]) -> Iterator[str]:
    if not is_epp_chart(res):
        return
    raw = epp_replicas(res)
    if raw is UNKNOWN:
        return
    n, need = as_int(raw), int(cfg.get("minReplicas", DEFAULT_MIN))
    if n is None or n < need:
        yield (
            f"endpoint picker replicas is {raw}: run at least {need}, a picker that is down stops all routing "
            "to its pool"
        )


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="The endpoint picker runs with enough replicas to survive the loss of one.",
    validate=resource_validator((HELM_CHART,), check),
    config_schema=PolicyConfigSchema(
        properties={
            "minReplicas": {
                "type": "integer",
                "minimum": 1,
                "default": DEFAULT_MIN,
                "description": "Least endpoint-picker replicas (2 in prod).",
            },
        }
    ),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["availability", "routing"],
)
