"""epp-flow-control-bounded: the endpoint picker runs flow control with bounded queues (staging and prod).

Without flow control a saturated pool queues every non-sheddable request inside vLLM with no wait bound. With it
(llm-d Router v0.10.0: feature gate ``flowControl``, pkg/epp/flowcontrol/config.go; off by default,
cmd/epp/runner/runner.go) every request waits in a per-priority band, is answered 429 ``rejected-saturated`` when
its band is full and 429 ``rejected-ttl-expired`` after ``defaultRequestTTL`` (pkg/epp/requestcontrol/admission.go
``translateFlowControlOutcome``). The bounds must be stated: a band's ``maxRequests`` of 0 or none means the router's
default of 5000, a TTL of ``0s`` disables it and a missing TTL means 60 s
(apix/config/v1alpha1/endpointpickerconfig_types.go), all far beyond an interactive TTFT objective.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pulumi_policy import PolicyConfigSchema, ResourceValidationPolicy, Severity

from ._common import HELM_CHART, UNKNOWN, Res, resource_validator
from ._epp import is_epp_chart, is_llm_d_router, picker_config

NAME = "epp-flow-control-bounded"
SEVERITY = Severity.HIGH
FRAMEWORK = None
GATE = "flowControl"
REMEDIATION = (
    "Turn on the picker's flow control (featureGates: [flowControl]) with a flowControl block stating "
    "defaultRequestTTL and a maxRequests for every priorityBands entry (gateway.epp.flow_control: true)."
)
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m)$")


def _positive_duration(text: Any) -> bool:
    m = _DURATION.match(text) if isinstance(text, str) else None
    return m is not None and float(m.group(1)) > 0


def _positive_quantity(text: Any) -> bool:
    return isinstance(text, str) and text.isdigit() and int(text) > 0


def check(res: Res, cfg: dict[str, Any]) -> Iterator[str]:
    if not cfg.get("required", True) or not is_epp_chart(res):
        return
    if not is_llm_d_router(res):
        yield "the picker is not the llm-d Router: its flow control cannot be checked; install llm-d-router-gateway"
        return
    conf = picker_config(res)
    if conf is UNKNOWN:
        return
    if not isinstance(conf, dict):
        yield "the picker runs the chart's default config, which leaves flow control off: state flowControl"
        return
    gates = conf.get("featureGates") or []
    if GATE not in gates and f"{GATE}=true" not in gates:
        yield f"feature gate {GATE} is off: queued requests have no wait bound and no 429 beyond it"
        return
    fc = conf.get("flowControl")
    if not isinstance(fc, dict):
        yield "flowControl is not stated: the router's defaults (60 s TTL, 5000 requests per band) apply"
        return
    if not _positive_duration(fc.get("defaultRequestTTL")):
        yield f"flowControl.defaultRequestTTL is {fc.get('defaultRequestTTL')!r}: state a positive queue-wait bound"
    bands = fc.get("priorityBands") or []
    if not bands:
        yield "flowControl.priorityBands is empty: every priority gets the default 5000-request band"
    for band in bands:
        if isinstance(band, dict) and not _positive_quantity(band.get("maxRequests")):
            yield (
                f"flowControl band {band.get('priority')!r}: maxRequests {band.get('maxRequests')!r} means the "
                "default 5000: state the bound"
            )


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="The endpoint picker runs flow control with a stated queue-wait TTL and per-band capacity.",
    validate=resource_validator((HELM_CHART,), check),
    config_schema=PolicyConfigSchema(
        properties={
            "required": {
                "type": "boolean",
                "default": True,
                "description": "Whether flow control is required (staging and prod: true).",
            },
        }
    ),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["availability", "routing"],
)
