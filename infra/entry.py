"""What ``pulumi up`` runs: read the stack's config, resolve it (validate everything, plan once), then compose."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import config as runtime_config

from .config import ConfigError, decode_pulumi_config
from .registry import REGISTRY, Registry
from .resolve import ResolvedStack, resolve_stack

PROJECT_ROOT = Path(__file__).resolve().parent.parent


class StackConfigError(pulumi.RunError):
    """The stack's config is invalid; raised before any resource is registered. ``config_error`` holds the issues
    so callers (the offline CLI) can report them with their key paths."""

    def __init__(self, config_error: ConfigError) -> None:
        super().__init__(config_error.render())
        self.config_error = config_error


def engine_config() -> dict[str, Any]:
    """Every config value the engine handed this program (env bag first, explicit settings win)."""
    merged: dict[str, Any] = dict(runtime_config.get_config_env())
    merged.update(runtime_config.CONFIG.get())
    return decode_pulumi_config(merged)


def engine_secret_keys() -> frozenset[str]:
    """The config keys the engine marks secret (``secure:`` values, ``pulumi config set --secret``): from the
    environment the language host sets and from the config map the SDK holds."""
    keys = set(runtime_config.get_config_secret_keys_env())
    keys |= {
        k
        for k in [*runtime_config.get_config_env(), *runtime_config.CONFIG.get()]
        if runtime_config.is_config_secret(k)
    }
    return frozenset(keys)


def main(on_resolved: Callable[[ResolvedStack], None] | None = None, registry: Registry = REGISTRY) -> None:
    """Resolve the stack once and deploy it. ``on_resolved`` lets the offline runner read the same resolution
    (config + plan) the program deploys, so nothing is validated or planned twice; ``registry``: the serving
    targets (a test adds one)."""
    from .program import deploy

    try:
        resolved = resolve_stack(engine_config(), pulumi.get_stack(), PROJECT_ROOT, engine_secret_keys(), registry)
    except ConfigError as err:
        # Raised before any resource is registered: nothing is half-created.
        raise StackConfigError(err) from None
    refusals = [i for t in registry.targets if t.name in resolved.config.targets() for i in t.deploy_refusals(resolved)]
    if refusals:
        raise StackConfigError(ConfigError(refusals)) from None
    if on_resolved is not None:
        on_resolved(resolved)
    deploy(resolved, registry)
