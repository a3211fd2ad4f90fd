"""Raw stack config -> validated config + the one resolved plan, with every problem reported together.

Order: schema validation per section; the plan, when the sections it reads validated; then every applicable
rule on the sections that validated (and on the pools that planned). Nothing is registered with Pulumi until all
of it passes, so a bad stack never half-creates anything.

The planner runs exactly once per resolution; the program, the CLI and the tests all read the same
:class:`ResolvedStack`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .config import ConfigError, ConfigIssue, key_path, validate_schema
from .config.measurement import Measurement, MeasurementError, load_measurement_file
from .planning.plan import StackPlan, build_plan
from .registry import REGISTRY, Registry
from .rules import run_rules
from .targets.base import ResolvedStack

__all__ = ["PLANNER_CALLS", "PLAN_NEEDS", "ResolvedStack", "resolve_stack"]

#: Sections the planner reads; it runs only when all of them validated.
PLAN_NEEDS = frozenset({"contract", "releases", "accelerators", "serving", "observability"})

#: Calls of :func:`build_plan` made through :func:`resolve_stack` (tests assert the planner runs once per plan).
PLANNER_CALLS = [0]


def _environment_matches(stack: str, environment: str) -> bool:
    """A stack is named after its environment, optionally with a suffix (``prod``, ``prod-eu``)."""
    return stack == environment or bool(re.match(rf"^{re.escape(environment)}-", stack))


def resolve_stack(
    raw: Mapping[str, Any],
    stack: str,
    base_dir: Path,
    secret_keys: frozenset[str] = frozenset(),
    registry: Registry = REGISTRY,
) -> ResolvedStack:
    """Validate a stack's config and plan it; raise :class:`ConfigError` listing every problem. ``secret_keys``:
    the config keys the engine marks secret (they may only hold fields declared secret). ``registry``: the serving
    targets (tests add one)."""
    schema = validate_schema(raw, base_dir, registry.model, secret_keys)
    issues: list[ConfigIssue] = list(schema.issues)
    cfg = schema.config
    measurements: dict[str, Measurement] = {}
    if "serving" in schema.valid:
        for role, pool in cfg.pools():
            if pool.measured is None:
                continue
            try:
                measurements[role] = load_measurement_file(pool.measured, base_dir)
            except MeasurementError as err:
                issues.append(ConfigIssue(key_path(("serving", role, "measured")), str(err)))
    plan: StackPlan | None = None
    if PLAN_NEEDS <= schema.valid:
        PLANNER_CALLS[0] += 1
        plan = build_plan(cfg, registry.targets, measurements)
        issues += [ConfigIssue(key_path(i.loc), i.message) for i in plan.issues]
    issues += run_rules(cfg, schema.valid, plan, registry.rules())
    if "environment" in schema.valid and not _environment_matches(stack, cfg.environment):
        issues.append(
            ConfigIssue(
                key_path(("environment",)),
                f"{cfg.environment!r} does not match stack {stack!r} (expected the stack name or its prefix)",
            )
        )
    if issues:
        raise ConfigError(issues)
    assert plan is not None  # no issue means every section, and so the plan's inputs, validated
    return ResolvedStack(stack=stack, config=cfg, plan=plan)
