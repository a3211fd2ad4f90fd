"""hpa-scale-up-damped: a serving HPA ignores bursts shorter than a new replica's time to ready."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from pulumi_policy import PolicyConfigSchema, Severity, StackValidationPolicy

from ._common import (
    COLD_LOAD_ANNOTATION,
    DEPLOYMENT,
    HPA,
    UNKNOWN,
    Res,
    annotation,
    as_float,
    as_int,
    fmt,
    get,
    is_serving_deployment,
    of_type,
    same_namespace,
    stack_validator,
)

NAME = "hpa-scale-up-damped"
SEVERITY = Severity.MEDIUM
FRAMEWORK = None
REMEDIATION = (
    "Set the serving HPA's behavior.scaleUp.stabilizationWindowSeconds to at least the pool's cold-load "
    f"estimate ({COLD_LOAD_ANNOTATION}): only a queue that outlasts a new replica's time to ready is worth "
    "a replica."
)


def check(resources: list[Res], cfg: dict[str, Any]) -> Iterator[tuple[str, str]]:
    deployments = [d for d in resources if is_serving_deployment(d)]
    for hpa in of_type(resources, HPA):
        ref = get(hpa.props, "spec", "scaleTargetRef")
        if ref is UNKNOWN or not isinstance(ref, dict) or ref.get("kind") != "Deployment":
            continue
        target = ref.get("name")
        if target is UNKNOWN:
            continue
        dep = next((d for d in deployments if d.k8s_name == target and same_namespace(d, hpa)), None)
        if dep is None:
            continue
        window = get(hpa.props, "spec", "behavior", "scaleUp", "stabilizationWindowSeconds", default=0)
        if window is UNKNOWN:
            continue
        w = as_int(window)
        if w is None:
            continue
        raw = annotation(dep, COLD_LOAD_ANNOTATION)
        if raw is UNKNOWN:
            continue
        if raw is None:
            raw = (cfg.get("coldLoadSeconds") or {}).get(target)
        cold = as_float(raw)
        if cold is None:
            if w == 0:
                yield (
                    hpa.urn,
                    (
                        f"HPA {hpa.k8s_name} scales Deployment {target} up undamped (stabilizationWindowSeconds "
                        "0, the Kubernetes default): every burst adds replicas that arrive after it is over"
                    ),
                )
            continue
        if w < cold:
            yield (
                hpa.urn,
                (
                    f"HPA {hpa.k8s_name} scale-up stabilizationWindowSeconds is {w} s, below the {fmt(cold)} s "
                    f"a new replica of Deployment {target} takes to become ready: a burst shorter than that is "
                    "over before the replica can help, so it only creates a late pod; set it to at least "
                    f"{math.ceil(cold)}"
                ),
            )


POLICY = StackValidationPolicy(
    name=NAME,
    description="Serving HPAs do not scale up for bursts shorter than a replica's cold load.",
    validate=stack_validator(check, (DEPLOYMENT, HPA)),
    config_schema=PolicyConfigSchema(
        properties={
            "coldLoadSeconds": {
                "type": "object",
                "additionalProperties": {"type": "number", "minimum": 0},
                "default": {},
                "description": f"Cold-load estimate (s) by Deployment name, for Deployments without the "
                f"{COLD_LOAD_ANNOTATION} annotation (the offline policy command fills it "
                "from the capacity planner).",
            },
        }
    ),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["autoscaling"],
)
