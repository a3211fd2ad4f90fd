"""max-model-len-within-contract: vLLM serves no more context than the workload contract promises."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import PolicyConfigSchema, ResourceValidationPolicy, Severity

from ._common import (
    CONTRACT_MAX_INPUT_TOKENS_ANNOTATION,
    CONTRACT_MAX_MODEL_LEN_ANNOTATION,
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

NAME = "max-model-len-within-contract"
SEVERITY = Severity.MEDIUM
FRAMEWORK = None
REMEDIATION = (
    "Start vLLM with --max-model-len at most the contract's max_model_len and at most max_input_tokens + "
    "max_output_tokens: vLLM's only prompt limit is the context, so a longer context admits longer prompts."
)


def check(res: Res, cfg: dict[str, Any]) -> Iterator[str]:
    if not is_serving_deployment(res):
        return
    raw = annotation(res, CONTRACT_MAX_MODEL_LEN_ANNOTATION)
    if raw is UNKNOWN:
        return
    limit = as_int(raw) if raw is not None else as_int(cfg.get("maxModelLen"))
    if limit is None:
        yield (
            f"the contract's max_model_len is unknown: render annotation {CONTRACT_MAX_MODEL_LEN_ANNOTATION} or "
            "set this policy's maxModelLen"
        )
        return
    raw_in = annotation(res, CONTRACT_MAX_INPUT_TOKENS_ANNOTATION)
    raw_out = annotation(res, CONTRACT_MAX_OUTPUT_TOKENS_ANNOTATION)
    # A co-host server runs several vLLM instances: each command line is checked.
    for who, args in vllm_command_lines(res):
        if args is not UNKNOWN:
            yield from (who + m for m in _check_line(args, limit, raw_in, raw_out, cfg))


def _check_line(args: list[Any], limit: int, raw_in: Any, raw_out: Any, cfg: dict[str, Any]) -> Iterator[str]:
    value = flag_value(args, "--max-model-len")
    if value is UNKNOWN:
        return
    if value is None:
        yield f"--max-model-len is not set (vLLM would serve the model's full context): set it to at most {limit}"
        return
    n = as_int(value)
    if n is None or n > limit:
        yield (
            f"--max-model-len is {value}, above the contract's max_model_len {limit}: set it to at most {limit}, "
            "context beyond the workload only costs concurrency"
        )
        return
    if raw_in is UNKNOWN or raw_out is UNKNOWN:
        return
    max_in = as_int(raw_in) if raw_in is not None else as_int(cfg.get("maxInputTokens"))
    max_out = as_int(raw_out) if raw_out is not None else as_int(cfg.get("maxOutputTokens"))
    if max_in is None or max_out is None:
        return  # the older annotation set: the context bound above is all that can be checked
    if n > max_in + max_out:
        yield (
            f"--max-model-len is {n}, above max_input_tokens + max_output_tokens = {max_in + max_out}: vLLM's only "
            f"prompt limit is the context, so prompts of up to {n - 1} tokens are admitted against the contract's "
            f"{max_in}; set it to {max_in + max_out}"
        )


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="--max-model-len stays within the workload contract and is the contract's input + output budget.",
    validate=resource_validator((DEPLOYMENT,), check),
    config_schema=PolicyConfigSchema(
        properties={
            "maxModelLen": {
                "type": "integer",
                "minimum": 1,
                "description": f"The contract's max_model_len for Deployments without the "
                f"{CONTRACT_MAX_MODEL_LEN_ANNOTATION} annotation (the offline policy command "
                "fills it from the contract).",
            },
        }
    ),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["capacity", "contract"],
)
