"""Synthetic inventory rows in the exact shape `infra.offline` writes to inventory.json, for tests of the
tools that read inventories (plan diff, policy runner)."""

from __future__ import annotations

import copy
from typing import Any

STACK = "dev"
PROJECT = "llm-serving"
#: Options as `infra.offline._registration` records them for a resource registered with no options.
DEFAULT_OPTIONS: dict[str, Any] = {
    "protect": False,
    "delete_before_replace": False,
    "ignore_changes": [],
    "replace_on_changes": [],
    "retain_on_delete": False,
    "additional_secret_outputs": [],
}


def urn(type_: str, name: str) -> str:
    return f"urn:pulumi:{STACK}::{PROJECT}::{type_}::{name}"


def resource(
    type_: str,
    name: str,
    inputs: dict[str, Any],
    *,
    options: dict[str, Any] | None = None,
    parent: str | None = None,
    provider: str = "",
    dependencies: list[str] | None = None,
    property_dependencies: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    return {
        "urn": urn(type_, name),
        "type": type_,
        "name": name,
        "custom": True,
        "parent": parent,
        "provider": provider,
        "inputs": inputs,
        "dependencies": dependencies or [],
        "property_dependencies": property_dependencies or {},
        "options": {**DEFAULT_OPTIONS, **(options or {})},
    }


def inventory(*resources: dict[str, Any], outputs: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "project": PROJECT,
        "stack": STACK,
        "resources": sorted(copy.deepcopy(list(resources)), key=lambda r: r["urn"]),
        "outputs": outputs or {},
    }
