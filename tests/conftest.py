"""Shared fixtures: each stack is planned once per test session (the real program under the mock monitor)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infra.config import StackConfig
from infra.offline.planrun import PlanRun, run_plan
from infra.planning.plan import StackPlan
from infra.resolve import ResolvedStack
from infra.targets.gke.planning import gke_part

STACKS = ("dev", "staging", "prod")
#: The GKE stacks: the three environments and the GKE co-hosting example (every generic GKE check runs on it too).
GKE_STACKS = (*STACKS, "dev-cohost-gke")
#: The shipped Cloud Run stack, and a prod Cloud Run fixture (canary, staging, VPC egress, hub token) under
#: tests/fixtures/cloud-run/ that no stack ships.
CLOUD_RUN_STACK = "dev-cloudrun"
CLOUD_RUN_FIXTURE = "prod-cloudrun"
REPO = Path(__file__).resolve().parents[1]
#: Upstream reference files (CRD schemas, charts, metric names) that CI places beside the checkout.
REFERENCE = REPO.parent / "shared" / "reference"
CLOUD_RUN_FIXTURES = REPO / "tests" / "fixtures" / "cloud-run"


def reference(*parts: str) -> Path:
    """Path inside ../shared/reference; skips the calling test with a visible reason when it is absent."""
    path = REFERENCE.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"reference file {path} is absent (CI places ../shared/reference beside the checkout)")
    return path


_runs: dict[str, PlanRun] = {}
_cache: dict[str, tuple[StackConfig, StackPlan, dict[str, Any]]] = {}


def plan_run(stack: str) -> PlanRun:
    """The offline plan of a shipped stack (or of the Cloud Run fixture), run once per session."""
    if stack not in _runs:
        _runs[stack] = run_plan(stack, CLOUD_RUN_FIXTURES if stack == CLOUD_RUN_FIXTURE else None)
    return _runs[stack]


def planned(stack: str) -> tuple[StackConfig, StackPlan, dict[str, Any]]:
    """(validated config, resolved plan, inventory as JSON) of a shipped stack."""
    if stack not in _cache:
        run = plan_run(stack)
        _cache[stack] = (run.resolved.config, run.resolved.plan, run.inventory.to_dict())
    return _cache[stack]


@pytest.fixture(scope="session")
def plans() -> dict[str, tuple[StackConfig, StackPlan, dict[str, Any]]]:
    return {s: planned(s) for s in GKE_STACKS}


def serving_roles(cfg: StackConfig, plan: StackPlan) -> dict[str, str]:
    """role -> release of every vLLM server set a GKE stack deploys: its pools, then its co-hosted groups (a group's
    first release)."""
    return {
        **{role: pool.release for role, pool in cfg.pools()},
        **{role: g.models[0].release.release for role, g in gke_part(plan).cohosted().items()},
    }


def member_resource(prefix: str, member: str) -> str:
    """The resource name of one member of a configured list (IAM members, notification channels): keyed by the
    member (components.naming.member_key), not by its position."""
    from components.naming import member_key

    return f"{prefix}-{member_key(member)}"


VERTEX_CALLERS = (
    "group:llm-serving-team@acme.example",
    "serviceAccount:loadgen@acme-llm-staging.iam.gserviceaccount.com",
)
#: staging-vertex's callers (stacks/Pulumi.staging-vertex.yaml), in order.
VERTEX_CALLER = tuple(member_resource("vertex-caller", m) for m in VERTEX_CALLERS)
#: The Cloud Run fixture's invokers (tests/fixtures/cloud-run/Pulumi.prod-cloudrun.yaml), in order.
CLOUD_RUN_INVOKER = tuple(
    member_resource("cloud-run-invoker", m)
    for m in ("group:llm-clients@acme.example", "serviceAccount:gateway@acme-llm-prod.iam.gserviceaccount.com")
)


def resources(inventory: dict[str, Any], typ: str) -> list[dict[str, Any]]:
    return [r for r in inventory["resources"] if r["type"] == typ]


def one(inventory: dict[str, Any], typ: str, name: str | None = None) -> dict[str, Any]:
    found = [r for r in resources(inventory, typ) if name is None or r["name"] == name]
    assert len(found) == 1, f"expected one {typ} named {name!r}, found {[r['name'] for r in found]}"
    return found[0]


def resolve_values(values: dict[str, Any], stack: str | None = None) -> ResolvedStack:
    """Resolve decoded stack-file values (as ``read_stack_file(...).values`` gives them); the stack name defaults
    to the config's environment. Raises ConfigError like the program does."""
    from infra.offline.stackfile import ROOT
    from infra.resolve import resolve_stack

    return resolve_stack(values, stack or str(values.get("llm-serving:environment")), ROOT)


def load_config(values: dict[str, Any], stack: str | None = None) -> StackConfig:
    """The validated config of decoded stack-file values (see :func:`resolve_values`)."""
    return resolve_values(values, stack).config
