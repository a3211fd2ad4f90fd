"""cloudrun-startup-window-covers-cold-load: the vLLM container's startup probe outlasts the cold load, within what
Cloud Run accepts for GPU services."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from pulumi_policy import PolicyConfigSchema, ResourceValidationPolicy, Severity

from ._common import (
    CLOUD_RUN_PROBE_DEFAULTS,
    CLOUD_RUN_SERVICE,
    COLD_LOAD_ANNOTATION,
    UNKNOWN,
    Res,
    as_float,
    as_int,
    cloud_run_serving_container,
    fmt,
    get,
    resource_validator,
)

NAME = "cloudrun-startup-window-covers-cold-load"
SEVERITY = Severity.HIGH
FRAMEWORK = None
#: Cloud Run's bound on failureThreshold x periodSeconds of a startup probe of a GPU service (Cloud Run "Configure
#: container health checks": "can't exceed 600 seconds (1800 for GPU)").
MAX_GPU_PROBE_SECONDS = 1800
REMEDIATION = (
    "Give the vLLM container an HTTP startup probe whose window (initialDelaySeconds + periodSeconds x "
    f"failureThreshold) is at least the {COLD_LOAD_ANNOTATION} estimate, with periodSeconds x "
    f"failureThreshold at most {MAX_GPU_PROBE_SECONDS} s; load faster if that cannot hold."
)


def check(res: Res, cfg: dict[str, Any]) -> Iterator[str]:
    c = cloud_run_serving_container(res)
    if c is None:
        return
    probe = c.get("startupProbe")
    if probe is UNKNOWN:
        return
    if not isinstance(probe, dict) or not probe:
        yield (
            f"container {c.get('name')!r} has no startupProbe: Cloud Run's default TCP probe gives up long before "
            "a GPU cold load ends; add an HTTP probe on /health whose window covers it"
        )
        return
    raw = get(res.props, "template", "annotations", COLD_LOAD_ANNOTATION)
    if raw is UNKNOWN:
        return
    if raw is None:
        service = res.props.get("name")
        raw = (cfg.get("coldLoadSeconds") or {}).get(service if isinstance(service, str) else res.name)
    cold = as_float(raw)
    values = {k: probe.get(k, d) for k, d in CLOUD_RUN_PROBE_DEFAULTS.items()}
    if any(v is UNKNOWN for v in values.values()):
        return
    delay, period, failures = (as_int(values[k]) for k in ("initialDelaySeconds", "periodSeconds", "failureThreshold"))
    if delay is None or period is None or failures is None:
        return
    if period * failures > MAX_GPU_PROBE_SECONDS:
        yield (
            f"startupProbe periodSeconds {period} x failureThreshold {failures} = {period * failures} s exceeds "
            f"the {MAX_GPU_PROBE_SECONDS} s Cloud Run accepts for GPU services: the revision would be refused"
        )
    if cold is None:
        yield (
            f"the cold-load estimate is unknown: render annotation {COLD_LOAD_ANNOTATION} (seconds) on the "
            "revision template or set this policy's coldLoadSeconds for the service"
        )
        return
    window = delay + period * failures
    if window < cold:
        yield (
            f"startupProbe window is {window} s (initialDelaySeconds {delay} + periodSeconds {period} x "
            f"failureThreshold {failures}), below the cold-load estimate of {fmt(cold)} s: set failureThreshold "
            f"to at least {math.ceil((cold - delay) / period)}"
        )


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="The Cloud Run startup probe window covers the cold-load estimate within Cloud Run's GPU limit.",
    validate=resource_validator((CLOUD_RUN_SERVICE,), check),
    config_schema=PolicyConfigSchema(
        properties={
            "coldLoadSeconds": {
                "type": "object",
                "additionalProperties": {"type": "number", "minimum": 0},
                "default": {},
                "description": f"Cold-load estimate (s) by service name, for revisions without the "
                f"{COLD_LOAD_ANNOTATION} annotation.",
            },
        }
    ),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["availability", "probes", "cloud-run"],
)
