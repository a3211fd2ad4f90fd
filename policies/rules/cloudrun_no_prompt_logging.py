"""cloudrun-no-prompt-logging: a Cloud Run vLLM does not log prompts or completions (they would land in Cloud
Logging with the container's stdout)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import ResourceValidationPolicy, Severity

from ._common import (
    CLOUD_RUN_SERVICE,
    UNKNOWN,
    Res,
    cloud_run_argv,
    cloud_run_env,
    cloud_run_serving_container,
    prompt_logging_env,
    prompt_logging_flags,
    resource_validator,
    vllm_serve_args,
)

NAME = "cloudrun-no-prompt-logging"
SEVERITY = Severity.HIGH
FRAMEWORK = None
REMEDIATION = (
    "Remove --enable-log-requests / --enable-log-outputs and VLLM_DEBUG_LOG_API_SERVER_RESPONSE from the "
    "Cloud Run vLLM container; log request ids, token counts, release and timings instead."
)


def check(res: Res, _cfg: dict[str, Any]) -> Iterator[str]:
    c = cloud_run_serving_container(res)
    if c is None:
        return
    argv = cloud_run_argv(c)
    serve = vllm_serve_args(argv) if argv is not UNKNOWN else None
    for flag in prompt_logging_flags(serve) if serve is not None else ():
        yield (
            f"vllm serve sets {flag}: prompts and completions would reach Cloud Logging with the container's "
            "output; remove it"
        )
    for name, val in prompt_logging_env(lambda n: cloud_run_env(c, n)):
        yield f"the vLLM container sets {name}={val}: response bodies would reach Cloud Logging; remove it"


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="Cloud Run vLLM does not log prompts or completions.",
    validate=resource_validator((CLOUD_RUN_SERVICE,), check),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["privacy", "cloud-run"],
)
