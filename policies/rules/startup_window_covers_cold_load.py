"""startup-window-covers-cold-load: a vLLM container's startup probe outlasts the cold load, within what its target
accepts; on Kubernetes startup and readiness also differ.

Read where the program renders the cold-load estimate (annotation ``llm-serving.io/cold-load-seconds``): GKE
model-server Deployments and Cloud Run revision templates. A Vertex AI deployed model carries no estimate (see
``_adapters/vertex.py``): the program sizes its startup probe from the planner itself.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from pulumi_policy import PolicyConfigSchema, ResourceValidationPolicy, Severity

from ._adapters import ADAPTERS, types_of
from ._adapters.facts import FactKind, StartupWindow
from ._common import COLD_LOAD_ANNOTATION, UNKNOWN, Res, as_float, as_int, fmt, resource_validator

NAME = "startup-window-covers-cold-load"
SEVERITY = Severity.HIGH
FRAMEWORK = None
REMEDIATION = (
    "Give the vLLM container a startupProbe whose window (initialDelaySeconds + periodSeconds x "
    f"failureThreshold) is at least the {COLD_LOAD_ANNOTATION} estimate: on GKE beside a separate, fast-failing "
    "readinessProbe; on Cloud Run at least twice the estimate, an HTTP probe with periodSeconds x failureThreshold "
    "at most 1800 s (load faster if that cannot hold)."
)
FACTS: tuple[FactKind, ...] = ("startup_windows",)


def _window(w: StartupWindow, cfg: dict[str, Any]) -> Iterator[str]:
    container = w.container
    startup = w.probe
    if startup is UNKNOWN or (w.readiness_required and w.readiness is UNKNOWN):
        return
    if not startup:
        yield f"{container} has no startupProbe: {w.without_probe}; add one whose window covers the cold load"
    if w.readiness_required and not w.readiness:
        yield f"{container} has no readinessProbe: add one that fails fast when the server cannot take traffic"
    if w.readiness_required and startup and startup == w.readiness:
        yield (
            "startupProbe is identical to readinessProbe: the startup probe must tolerate a cold load while "
            "readiness fails fast; give them different thresholds"
        )
    if not startup or not isinstance(startup, dict):
        return
    values = {k: as_int(startup.get(k, d)) for k, d in w.defaults.items()}
    delay, period, failures = (values[k] for k in ("initialDelaySeconds", "periodSeconds", "failureThreshold"))
    # None: unknown at preview (or not a number): the window cannot be known, the estimate is still checked.
    probe = None if delay is None or period is None or failures is None else (delay, period, failures)
    if probe is not None and w.limit is not None and probe[1] * probe[2] > w.limit.seconds:
        yield (
            f"startupProbe periodSeconds {probe[1]} x failureThreshold {probe[2]} = {probe[1] * probe[2]} s exceeds "
            f"the {w.limit.seconds} s {w.limit.rule}"
        )
    raw = w.cold_load
    if raw is UNKNOWN:
        return
    if raw is None:
        raw = (cfg.get("coldLoadSeconds") or {}).get(w.key)
    cold = as_float(raw)
    if cold is None:
        yield (
            f"the cold-load estimate is unknown: render annotation {COLD_LOAD_ANNOTATION} (seconds) on "
            f"{w.rendered_on} or set this policy's coldLoadSeconds for {w.key!r}"
        )
        return
    if probe is None:
        return
    delay, period, failures = probe
    window = delay + period * failures
    need = cold * w.min_factor
    if window < need:
        what = f"the cold-load estimate of {fmt(cold)} s"
        if w.min_factor != 1:
            what = f"{fmt(w.min_factor)} x {what} ({fmt(round(need, 3))} s)"
        yield (
            f"startupProbe window is {window} s (initialDelaySeconds {delay} + periodSeconds {period} x "
            f"failureThreshold {failures}), below {what}: set failureThreshold "
            f"to at least {math.ceil((need - delay) / max(period, 1))}"
        )


def check(res: Res, cfg: dict[str, Any]) -> Iterator[str]:
    for adapter in ADAPTERS:
        for window in adapter.startup_windows(res):
            yield from _window(window, cfg)


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="The startup probe window covers the cold-load estimate within the target's limit, and startup "
    "differs from readiness.",
    validate=resource_validator(types_of(*FACTS), check),
    config_schema=PolicyConfigSchema(
        properties={
            "coldLoadSeconds": {
                "type": "object",
                "additionalProperties": {"type": "number", "minimum": 0},
                "default": {},
                "description": "Cold-load estimate (s) by Deployment or Cloud Run service name, for a workload "
                f"without the {COLD_LOAD_ANNOTATION} annotation (the offline policy command fills it from the "
                "capacity planner).",
            },
        }
    ),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["availability", "probes"],
)
