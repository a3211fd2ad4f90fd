"""cloudrun-min-instances: a Cloud Run serving revision keeps warm instances (prod: at least one; dev and staging may
scale to zero, by this policy's config)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import PolicyConfigSchema, ResourceValidationPolicy, Severity

from ._common import CLOUD_RUN_SERVICE, UNKNOWN, Res, as_int, cloud_run_serving_container, get, resource_validator

NAME = "cloudrun-min-instances"
SEVERITY = Severity.HIGH
FRAMEWORK = None
DEFAULT_MIN = 1
REMEDIATION = (
    f"Set the revision's scaling.minInstanceCount to at least minInstances ({DEFAULT_MIN} in prod): from "
    "zero, the first request after idle waits a whole GPU cold load."
)


def check(res: Res, cfg: dict[str, Any]) -> Iterator[str]:
    if cloud_run_serving_container(res) is None:
        return  # not a GPU serving service
    raw = get(res.props, "template", "scaling", "minInstanceCount", default=0)  # run.v2: unset = 0
    if raw is UNKNOWN:
        return
    n, need = as_int(raw), int(cfg.get("minInstances", DEFAULT_MIN))
    if n is None or n < need:
        yield (
            f"template.scaling.minInstanceCount is {raw}: keep at least {need} warm instance(s); a cold GPU instance "
            "loads its weights for minutes before it answers"
        )


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="Cloud Run serving revisions keep a minimum of warm instances.",
    validate=resource_validator((CLOUD_RUN_SERVICE,), check),
    config_schema=PolicyConfigSchema(
        properties={
            "minInstances": {
                "type": "integer",
                "minimum": 0,
                "default": DEFAULT_MIN,
                "description": "Least minInstanceCount of a serving revision (1 in prod, 0 = scale to zero).",
            },
        }
    ),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["availability", "autoscaling", "cloud-run"],
)
