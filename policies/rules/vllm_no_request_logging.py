"""vllm-no-request-logging: no vLLM server logs prompts or completions (the design, "Security"): on every target the
container's output lands in Cloud Logging."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import ResourceValidationPolicy, Severity

from ._adapters import ADAPTERS, types_of
from ._adapters.facts import FactKind
from ._common import UNKNOWN, Res, prompt_logging_env, prompt_logging_flags, resource_validator

NAME = "vllm-no-request-logging"
SEVERITY = Severity.HIGH
FRAMEWORK = None
REMEDIATION = (
    "Remove --enable-log-requests / --enable-log-outputs and VLLM_DEBUG_LOG_API_SERVER_RESPONSE from every vLLM "
    "container (GKE, Cloud Run, Vertex AI); log request ids, token counts, release and timings instead."
)
FACTS: tuple[FactKind, ...] = ("vllm_servers",)


def check(res: Res, _cfg: dict[str, Any]) -> Iterator[str]:
    for adapter in ADAPTERS:
        for server in adapter.vllm_servers(res):
            args = server.args
            for flag in prompt_logging_flags(args) if isinstance(args, list) else ():
                yield (
                    f"{server.container} sets {flag}: prompts and completions would reach Cloud Logging with the "
                    "container's output; remove it (log request ids, token counts and timings instead)"
                )
            env = server.env
            if env is UNKNOWN or not isinstance(env, dict):
                continue
            for name, val in prompt_logging_env(env.get):
                yield f"{server.container} sets {name}={val}: response bodies would reach Cloud Logging; remove it"


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="No vLLM server logs prompts or completions.",
    validate=resource_validator(types_of(*FACTS), check),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["privacy"],
)
