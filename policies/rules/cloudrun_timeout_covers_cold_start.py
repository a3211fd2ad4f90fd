"""cloudrun-timeout-covers-cold-start: where a Cloud Run revision's instances can be cold, its request timeout covers
the cold load and the longest stream.

Cloud Run's request deadline includes the instance's start: "the container must send a response within the time
specified in the request timeout setting after it receives the request, including the container startup time.
Otherwise the request is ended and a 504 error is returned" (Cloud Run container runtime contract, Responses). An
instance can be cold for a request whenever the revision scales to zero (``scaling.minInstanceCount`` 0: the first
request after idle, every tagged request to an idle 0 % canary) or can scale out (``maxInstanceCount`` above the
minimum: requests wait for the new instance). The estimate and the stream bound are the template's annotations
(``llm-serving.io/cold-load-seconds``, ``llm-serving.io/stream-bound-seconds``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import ResourceValidationPolicy, Severity

from ._common import (
    CLOUD_RUN_REVISION,
    COLD_LOAD_ANNOTATION,
    STREAM_BOUND_ANNOTATION,
    UNKNOWN,
    Res,
    as_float,
    as_int,
    fmt,
    get,
    resource_validator,
)

NAME = "cloudrun-timeout-covers-cold-start"
SEVERITY = Severity.HIGH
FRAMEWORK = None
#: Cloud Run's longest request timeout ("Configure request timeout": up to 60 minutes).
MAX_TIMEOUT_SECONDS = 3600
REMEDIATION = (
    "Set template.timeout to at least the cold load plus the stream bound (the program renders the startup window "
    "plus the stream bound, at most 3600 s), or keep the revision warm and fixed (minInstanceCount = "
    "maxInstanceCount >= 1)."
)


def seconds(duration: Any) -> float | None:
    """A google-duration (``"324s"``, ``"1.5s"``) in seconds; None when it is not one."""
    if isinstance(duration, str) and duration.endswith("s"):
        return as_float(duration[:-1])
    return None


def check(res: Res, _cfg: dict[str, Any]) -> Iterator[str]:
    template = res.props.get("template")
    if not isinstance(template, dict):
        return
    # UNKNOWN is falsy: read each value before defaulting an absent one.
    scaling, raw_timeout, annotations = (template.get(k) for k in ("scaling", "timeout", "annotations"))
    if scaling is UNKNOWN or raw_timeout is UNKNOWN or annotations is UNKNOWN:
        return
    scaling, annotations = scaling or {}, annotations or {}
    low = as_int(get(scaling, "minInstanceCount", default=0))
    high = as_int(get(scaling, "maxInstanceCount", default=None))
    if low is None or (high is None and scaling.get("maxInstanceCount") is not None):
        return  # unknown at preview
    if low >= 1 and high is not None and high == low:
        return  # always warm, never scales out: no request meets a starting instance
    why = "scales to zero" if low == 0 else f"scales out above {low} instance(s)"
    raw_cold, raw_stream = annotations.get(COLD_LOAD_ANNOTATION), annotations.get(STREAM_BOUND_ANNOTATION)
    if raw_cold is UNKNOWN or raw_stream is UNKNOWN or raw_cold is None:
        return  # no estimate: startup-window-covers-cold-load reports it
    cold, stream = as_float(raw_cold), as_float(raw_stream)
    if cold is None:
        return
    if stream is None:
        yield (
            f"the revision {why}, so a request can wait for an instance's start, but its template states no "
            f"{STREAM_BOUND_ANNOTATION} (seconds): the timeout cannot be shown to cover the start and the stream"
        )
        return
    timeout = 300.0 if raw_timeout is None else seconds(raw_timeout)  # run.v2: 300 s when unset
    if timeout is None:
        yield f"template.timeout {raw_timeout!r} is not a duration in seconds"
        return
    need = cold + stream
    if timeout < need:
        yield (
            f"template.timeout is {fmt(timeout)} s, but the revision {why}: a request can wait the cold load "
            f"({fmt(cold)} s) and then stream for the stream bound ({fmt(stream)} s), {fmt(round(need, 3))} s; Cloud "
            "Run's deadline includes the instance's start, so such requests end in 504"
            + ("" if need <= MAX_TIMEOUT_SECONDS else f" (and {fmt(round(need))} s exceeds Cloud Run's 3600 s)")
        )


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="A Cloud Run revision that can be cold has a request timeout covering the cold load and the stream.",
    validate=resource_validator((CLOUD_RUN_REVISION,), check),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["availability", "cloud-run"],
)
