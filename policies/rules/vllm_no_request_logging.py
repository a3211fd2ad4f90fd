"""vllm-no-request-logging: prompts and completions never reach the logs (the design, "Security")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import ResourceValidationPolicy, Severity

from ._common import (
    DEPLOYMENT,
    UNKNOWN,
    Res,
    argv,
    env_value,
    is_serving_deployment,
    prompt_logging_env,
    prompt_logging_flags,
    resource_validator,
    serving_container,
)

NAME = "vllm-no-request-logging"
SEVERITY = Severity.HIGH
FRAMEWORK = None
REMEDIATION = (
    "Remove --enable-log-requests / --enable-log-outputs and VLLM_DEBUG_LOG_API_SERVER_RESPONSE; log "
    "request ids, token counts, release and timings instead."
)


def check(res: Res, _cfg: dict[str, Any]) -> Iterator[str]:
    if not is_serving_deployment(res):
        return
    c = serving_container(res)
    args = argv(c)
    for flag in prompt_logging_flags(args) if args is not UNKNOWN else ():
        yield (
            f"vllm container sets {flag}: remove it, prompts and completions must not be logged "
            "(log request ids, token counts and timings instead)"
        )
    for name, val in prompt_logging_env(lambda n: env_value(c, n)):
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
