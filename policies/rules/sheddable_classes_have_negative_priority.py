"""sheddable-classes-have-negative-priority: a class described as sheddable is one the picker can shed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import ResourceValidationPolicy, Severity

from ._common import INFERENCE_OBJECTIVES, SHEDDABLE_ANNOTATION, UNKNOWN, Res, as_int, get, resource_validator

NAME = "sheddable-classes-have-negative-priority"
SEVERITY = Severity.MEDIUM
FRAMEWORK = None
REMEDIATION = (
    f"Give every InferenceObjective the {SHEDDABLE_ANNOTATION} annotation, and a negative priority exactly "
    'when it is "true": the endpoint picker sheds only priority < 0 (a request without a class gets 0).'
)


def check(res: Res, _cfg: dict[str, Any]) -> Iterator[str]:
    marked = get(res.props, "metadata", "annotations", SHEDDABLE_ANNOTATION)
    raw = get(res.props, "spec", "priority", default=0)  # the picker treats an unset priority as 0
    if marked is UNKNOWN or raw is UNKNOWN:
        return
    priority = as_int(raw)
    if priority is None:
        return
    name = res.k8s_name
    if marked is None:
        yield (
            f"InferenceObjective {name} has no {SHEDDABLE_ANNOTATION} annotation: state whether its class may be "
            "shed under saturation (priority < 0) or not"
        )
    elif marked == "true" and priority >= 0:
        yield (
            f"InferenceObjective {name} is marked sheddable but has priority {priority}: the endpoint picker sheds "
            "only priority < 0, so under saturation this class queues with everyone else; give it a negative "
            "priority"
        )
    elif marked == "false" and priority < 0:
        yield (
            f"InferenceObjective {name} has priority {priority}, which the endpoint picker sheds under saturation, "
            f'but is not marked sheddable: set {SHEDDABLE_ANNOTATION}: "true" or a priority >= 0'
        )
    elif marked not in ("true", "false"):
        yield f'InferenceObjective {name}: {SHEDDABLE_ANNOTATION} is {marked!r}; use "true" or "false"'


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="Sheddable priority classes have a negative priority, the only kind the endpoint picker sheds.",
    validate=resource_validator(INFERENCE_OBJECTIVES, check),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["admission", "overload"],
)
