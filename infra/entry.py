"""What ``pulumi up`` runs: read the stack's config, validate all of it, then compose the platform."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import config as runtime_config

from .config import ConfigError, ConfigIssue, StackConfig, decode_pulumi_config, load_stack_config

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def engine_config() -> dict[str, Any]:
    """Every config value the engine handed this program (env bag first, explicit settings win)."""
    merged: dict[str, Any] = dict(runtime_config.get_config_env())
    merged.update(runtime_config.CONFIG.get())
    return decode_pulumi_config(merged)


def validated_config(stack: str) -> StackConfig:
    cfg = load_stack_config(engine_config(), PROJECT_ROOT)
    if not (stack == cfg.environment or stack.startswith(cfg.environment + "-")):
        raise ConfigError([ConfigIssue("llm-serving:environment",
                                       f"{cfg.environment!r} does not match stack {stack!r} (expected the stack "
                                       f"name or its prefix)")])
    return cfg


def main() -> None:
    from .program import deploy

    try:
        cfg = validated_config(pulumi.get_stack())
    except ConfigError as err:
        # Raised before any resource is registered: nothing is half-created.
        raise pulumi.RunError(err.render()) from None
    deploy(cfg)
