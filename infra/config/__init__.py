"""Typed stack configuration (pydantic v2): see :mod:`infra.config.stack` for the root and the loader."""

from .base import NAMESPACE, ConfigError, ConfigIssue
from .stack import StackConfig, decode_pulumi_config, load_stack_config, pool_inputs

__all__ = ["NAMESPACE", "ConfigError", "ConfigIssue", "StackConfig", "decode_pulumi_config",
           "load_stack_config", "pool_inputs"]
