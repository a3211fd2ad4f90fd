"""Read ``stacks/Pulumi.<env>.yaml`` the way the Pulumi CLI hands config to a program.

Pulumi passes every config value to the program as a string; structured values as JSON text. ``secure:``
values cannot be decrypted offline: they become an opaque marked placeholder and their top-level key is
listed as secret (as the engine does), so nothing prints them and the program wraps them as secrets.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
STACKS_DIR = ROOT / "stacks"
SECRET_PLACEHOLDER = "<secret:{}>"


@dataclass(frozen=True)
class StackFile:
    stack: str
    path: Path
    values: dict[str, Any]  # decoded values (what the loader validates)
    config: dict[str, str]  # what the engine hands the program
    secret_keys: list[str]


class StackFileError(Exception):
    pass


def _opaque_secrets(key: str, value: Any, found: list[bool]) -> Any:
    if isinstance(value, dict):
        if set(value) == {"secure"}:
            found.append(True)
            return SECRET_PLACEHOLDER.format(key)
        return {k: _opaque_secrets(key, v, found) for k, v in value.items()}
    if isinstance(value, list):
        return [_opaque_secrets(key, v, found) for v in value]
    return value


def _as_engine_string(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def available_stacks(stacks_dir: Path = STACKS_DIR) -> list[str]:
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in stacks_dir.glob("Pulumi.*.yaml"))


def read_stack_file(stack: str, stacks_dir: Path = STACKS_DIR) -> StackFile:
    path = stacks_dir / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        raise StackFileError(f"no stack file {path} (available: {', '.join(available_stacks(stacks_dir)) or 'none'})")
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise StackFileError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(doc, dict) or set(doc) - {"config", "secretsprovider", "encryptedkey", "encryptionsalt"}:
        raise StackFileError(f"{path}: expected a mapping with a 'config' key")
    values: dict[str, Any] = {}
    config: dict[str, str] = {}
    secret_keys: list[str] = []
    for key, value in sorted((doc.get("config") or {}).items()):
        found: list[bool] = []
        decoded = _opaque_secrets(key, value, found)
        values[key] = decoded
        config[key] = _as_engine_string(decoded)
        if found:
            secret_keys.append(key)
    return StackFile(stack=stack, path=path, values=values, config=config, secret_keys=secret_keys)
