"""vllm-output-capped: vLLM caps every request's output at the contract's max_output_tokens."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from pulumi_policy import PolicyConfigSchema, ResourceValidationPolicy, Severity

from ._common import (
    CONTRACT_MAX_OUTPUT_TOKENS_ANNOTATION,
    DEPLOYMENT,
    UNKNOWN,
    Res,
    annotation,
    as_int,
    flag_value,
    is_serving_deployment,
    resource_validator,
    vllm_command_lines,
)

NAME = "vllm-output-capped"
SEVERITY = Severity.HIGH
FRAMEWORK = None
FLAG = "--override-generation-config"
REMEDIATION = (
    f"Start vLLM with {FLAG} '{{\"max_new_tokens\": <contract max_output_tokens>}}': vLLM 0.32 then "
    "caps every request's max_tokens at that value."
)


def check(res: Res, cfg: dict[str, Any]) -> Iterator[str]:
    if not is_serving_deployment(res):
        return
    raw_limit = annotation(res, CONTRACT_MAX_OUTPUT_TOKENS_ANNOTATION)
    if raw_limit is UNKNOWN:
        return
    limit = as_int(raw_limit) if raw_limit is not None else as_int(cfg.get("maxOutputTokens"))
    # A co-host server runs several vLLM instances: each command line is capped.
    for who, args in vllm_command_lines(res):
        if args is not UNKNOWN:
            yield from (who + m for m in _check_line(args, limit))


def _check_line(args: list[Any], limit: int | None) -> Iterator[str]:
    value = flag_value(args, FLAG)
    if value is UNKNOWN:
        return
    want = f"{FLAG} '{{\"max_new_tokens\": {limit if limit is not None else '<max_output_tokens>'}}}'"
    if value is None:
        yield (
            "no server-side output cap: vLLM generates as many tokens as a request asks for (up to the context), "
            f"past the stream bound the load balancer timeout and the drain are sized for; add {want}"
        )
        return
    try:
        doc = json.loads(value)
    except (TypeError, ValueError):
        yield f"{FLAG} is not JSON ({value!r}): use {want}"
        return
    cap = doc.get("max_new_tokens") if isinstance(doc, dict) else None
    if not isinstance(cap, int) or isinstance(cap, bool):
        yield f"{FLAG} sets no max_new_tokens, so output is not capped: use {want}"
        return
    if limit is None:
        yield (
            f"the contract's max_output_tokens is unknown: render annotation {CONTRACT_MAX_OUTPUT_TOKENS_ANNOTATION} "
            "or set this policy's maxOutputTokens"
        )
    elif cap > limit:
        yield (
            f"output is capped at {cap} tokens, above the contract's max_output_tokens {limit}: a longer stream "
            f"outlives the timeouts sized for the contract; use {want}"
        )


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="vLLM caps every request's output at the contract's max_output_tokens.",
    validate=resource_validator((DEPLOYMENT,), check),
    config_schema=PolicyConfigSchema(
        properties={
            "maxOutputTokens": {
                "type": "integer",
                "minimum": 1,
                "description": f"The contract's max_output_tokens for Deployments without the "
                f"{CONTRACT_MAX_OUTPUT_TOKENS_ANNOTATION} annotation (the offline policy "
                "command fills it from the contract).",
            },
        }
    ),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["contract", "admission"],
)
