"""Shared fixtures: each stack is planned once per test session (the real program under the mock monitor)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infra.offline.cli import run_plan
from infra.config import StackConfig
from infra.planning.sizing import CapacityPlan

STACKS = ("dev", "staging", "prod")
REPO = Path(__file__).resolve().parents[1]
#: Upstream reference files (CRD schemas, charts, metric names) that CI places beside the checkout.
REFERENCE = REPO.parent / "shared" / "reference"


def reference(*parts: str) -> Path:
    """Path inside ../shared/reference; skips the calling test with a visible reason when it is absent."""
    path = REFERENCE.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"reference file {path} is absent (CI places ../shared/reference beside the checkout)")
    return path


_cache: dict[str, tuple[StackConfig, CapacityPlan, dict[str, Any]]] = {}


def planned(stack: str) -> tuple[StackConfig, CapacityPlan, dict[str, Any]]:
    if stack not in _cache:
        _cache[stack] = run_plan(stack)
    return _cache[stack]


@pytest.fixture(scope="session")
def plans() -> dict[str, tuple[StackConfig, CapacityPlan, dict[str, Any]]]:
    return {s: planned(s) for s in STACKS}


def resources(inventory: dict[str, Any], typ: str) -> list[dict[str, Any]]:
    return [r for r in inventory["resources"] if r["type"] == typ]


def one(inventory: dict[str, Any], typ: str, name: str | None = None) -> dict[str, Any]:
    found = [r for r in resources(inventory, typ) if name is None or r["name"] == name]
    assert len(found) == 1, f"expected one {typ} named {name!r}, found {[r['name'] for r in found]}"
    return found[0]
