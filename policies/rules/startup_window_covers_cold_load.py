"""startup-window-covers-cold-load: the startup probe outlasts the cold load; startup and readiness differ."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from pulumi_policy import PolicyConfigSchema, ResourceValidationPolicy, Severity

from ._common import (
    COLD_LOAD_ANNOTATION,
    DEPLOYMENT,
    UNKNOWN,
    Res,
    as_float,
    as_int,
    fmt,
    get,
    is_serving_deployment,
    probe_window,
    resource_validator,
    serving_container,
)

NAME = "startup-window-covers-cold-load"
SEVERITY = Severity.HIGH
FRAMEWORK = None
REMEDIATION = (
    "Give the vLLM container a startupProbe whose window (initialDelaySeconds + periodSeconds x "
    f"failureThreshold) is at least the {COLD_LOAD_ANNOTATION} estimate, and a separate, fast-failing "
    "readinessProbe."
)


def annotation(res: Res, key: str) -> Any:
    """A Deployment annotation, falling back to the pod template's."""
    val = get(res.props, "metadata", "annotations", key)
    if val is None:
        val = get(res.props, "spec", "template", "metadata", "annotations", key)
    return val


def check(res: Res, cfg: dict[str, Any]) -> Iterator[str]:
    if not is_serving_deployment(res):
        return
    c = serving_container(res)
    if c is None:
        return
    startup, readiness = c.get("startupProbe"), c.get("readinessProbe")
    if startup is UNKNOWN or readiness is UNKNOWN:
        return
    name = c.get("name")
    if not startup:
        yield (
            f"container {name!r} has no startupProbe: add one whose window covers the cold load, so the "
            "liveness and readiness probes do not judge a pod that is still loading weights"
        )
    if not readiness:
        yield f"container {name!r} has no readinessProbe: add one that fails fast when the server cannot take traffic"
    if startup and readiness and startup == readiness:
        yield (
            "startupProbe is identical to readinessProbe: the startup probe must tolerate a cold load while "
            "readiness fails fast; give them different thresholds"
        )
    if not startup:
        return
    raw = annotation(res, COLD_LOAD_ANNOTATION)
    if raw is UNKNOWN:
        return
    if raw is None:
        raw = (cfg.get("coldLoadSeconds") or {}).get(res.k8s_name)
    cold = as_float(raw)
    if cold is None:
        yield (
            f"the cold-load estimate is unknown: render annotation {COLD_LOAD_ANNOTATION} (seconds) on the "
            "Deployment or set this policy's coldLoadSeconds for it"
        )
        return
    window = probe_window(startup)
    if window is None:
        return
    if window < cold:
        delay = as_int(startup.get("initialDelaySeconds", 0)) or 0
        period = as_int(startup.get("periodSeconds", 10)) or 10
        need = math.ceil((cold - delay) / period)
        yield (
            f"startupProbe window is {window} s (initialDelaySeconds {delay} + periodSeconds {period} x "
            f"failureThreshold {as_int(startup.get('failureThreshold', 3))}), below the cold-load estimate of "
            f"{fmt(cold)} s: set failureThreshold to at least {need}"
        )


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="The startup probe window covers the cold-load estimate, and startup differs from readiness.",
    validate=resource_validator((DEPLOYMENT,), check),
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
    tags=["availability", "probes"],
)
