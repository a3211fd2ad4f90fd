"""grace-period-covers-stream-bound: a terminating replica may finish its longest allowed stream."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from pulumi_policy import PolicyConfigSchema, ResourceValidationPolicy, Severity

from ._common import (
    DEPLOYMENT,
    STREAM_BOUND_ANNOTATION,
    UNKNOWN,
    Res,
    annotation,
    as_float,
    as_int,
    fmt,
    get,
    is_serving_deployment,
    pod_spec,
    prestop_sleep_seconds,
    resource_validator,
    serving_container,
)

NAME = "grace-period-covers-stream-bound"
SEVERITY = Severity.HIGH
FRAMEWORK = None
REMEDIATION = (
    "Set terminationGracePeriodSeconds >= preStop drain + the stream bound (TTFT objective + "
    "max_output_tokens x ITL objective), so scale-down never cuts a stream the contract allows."
)

#: Kubernetes' default terminationGracePeriodSeconds.
DEFAULT_GRACE_SECONDS = 30


def check(res: Res, cfg: dict[str, Any]) -> Iterator[str]:
    if not is_serving_deployment(res):
        return
    raw = annotation(res, STREAM_BOUND_ANNOTATION)
    if raw is UNKNOWN:
        return
    if raw is None:
        raw = cfg.get("streamBoundSeconds")
    bound = as_float(raw)
    if bound is None:
        yield (
            f"the stream bound is unknown: render annotation {STREAM_BOUND_ANNOTATION} (seconds) on the "
            "Deployment or set this policy's streamBoundSeconds"
        )
        return
    grace_raw = get(pod_spec(res), "terminationGracePeriodSeconds", default=DEFAULT_GRACE_SECONDS)
    grace = as_int(grace_raw)
    drain = prestop_sleep_seconds(serving_container(res))
    if grace is None or drain is None:
        return
    need = math.ceil(drain + bound)
    if grace < need:
        yield (
            f"terminationGracePeriodSeconds is {grace} s, below preStop drain {drain} s + stream bound "
            f"{fmt(bound)} s = {need} s: set it to at least {need}"
        )


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="terminationGracePeriodSeconds covers the preStop drain plus the longest allowed stream.",
    validate=resource_validator((DEPLOYMENT,), check),
    config_schema=PolicyConfigSchema(
        properties={
            "streamBoundSeconds": {
                "type": "number",
                "minimum": 0,
                "description": f"The contract's stream bound (s) for Deployments without the "
                f"{STREAM_BOUND_ANNOTATION} annotation (the offline policy command "
                "fills it from the contract).",
            },
        }
    ),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["availability", "streaming"],
)
