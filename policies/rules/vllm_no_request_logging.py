"""vllm-no-request-logging: prompts and completions never reach the logs (the design, "Security")."""

from __future__ import annotations

from typing import Any, Iterator

from pulumi_policy import ResourceValidationPolicy, Severity

from ._common import (DEPLOYMENT, UNKNOWN, Res, argv, env_value, flag_values, is_serving_deployment,
                      resource_validator, serving_container)

NAME = "vllm-no-request-logging"
SEVERITY = Severity.HIGH
FRAMEWORK = None
#: vLLM 0.32 flags that write request prompts / generated outputs to the server log.
LOGGING_FLAGS = ("--enable-log-requests", "--enable-log-outputs")
#: Environment switches that log request or response bodies.
LOGGING_ENV = ("VLLM_DEBUG_LOG_API_SERVER_RESPONSE",)
REMEDIATION = ("Remove --enable-log-requests / --enable-log-outputs and VLLM_DEBUG_LOG_API_SERVER_RESPONSE; log "
               "request ids, token counts, release and timings instead.")


def check(res: Res, _cfg: dict[str, Any]) -> Iterator[str]:
    if not is_serving_deployment(res):
        return
    c = serving_container(res)
    args = argv(c)
    if args is not UNKNOWN:
        for flag in LOGGING_FLAGS:
            vals = flag_values(args, flag)
            if vals and vals[-1] not in ("false", "False", False):
                yield (f"vllm container sets {flag}: remove it, prompts and completions must not be logged "
                       "(log request ids, token counts and timings instead)")
    for name in LOGGING_ENV:
        val = env_value(c, name)
        if isinstance(val, str) and val.lower() in ("1", "true", "yes"):
            yield f"vllm container sets {name}={val}: remove it, response bodies must not be logged"


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="The model server does not log prompts or completions.",
    validate=resource_validator((DEPLOYMENT,), check),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["privacy"],
)
