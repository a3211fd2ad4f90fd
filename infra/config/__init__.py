"""Typed stack configuration (pydantic v2): the schema only. :mod:`infra.config.stack` holds the root model and
per-section validation; cross-section rules live in :mod:`infra.rules`, planning in :mod:`infra.planning`."""

from .base import NAMESPACE, ConfigError, ConfigIssue
from .stack import SchemaResult, StackConfig, decode_pulumi_config, key_path, validate_schema

__all__ = [
    "NAMESPACE",
    "ConfigError",
    "ConfigIssue",
    "SchemaResult",
    "StackConfig",
    "decode_pulumi_config",
    "key_path",
    "validate_schema",
]
