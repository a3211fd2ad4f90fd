"""Cross-section validation rules: each reads the validated config (and, when it needs it, the resolved plan) and
yields problems with the config location they concern.

A rule is a function decorated with :func:`rule`, which declares

* ``target``: the serving target it applies to (``None``: every stack); a rule for ``gke`` runs only when a
  pool or co-hosted group targets ``gke``;
* ``needs``: the root config sections it reads. It runs only when all of them passed schema validation, so a
  broken section never hides another section's problems and a rule never reads a section that failed;
* ``plan``: whether it reads the :class:`~infra.planning.plan.StackPlan` (it then runs whenever the plan could
  be built, on the pools that planned).

The target-neutral rules are the modules of this package (:func:`neutral_rules` discovers them); each serving
target lists its own rule modules (``infra/targets/<target>/rules``). The decorator only marks a function:
:func:`collect` reads the marks of a module, so importing a rule module registers nothing anywhere.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ..config.base import ConfigIssue
from ..config.stack import StackConfig, key_path
from ..planning.plan import StackPlan

Loc = tuple[str | int, ...]
Finding = tuple[Loc, str]
Check = Callable[..., Iterable[Finding]]

#: The attribute :func:`rule` sets on a rule function.
_MARK = "__llm_serving_rule__"


@dataclass(frozen=True)
class Rule:
    name: str
    target: str | None
    needs: frozenset[str]
    plan: bool
    check: Check


def rule(*, needs: Iterable[str], target: str | None = None, plan: bool = False) -> Callable[[Check], Check]:
    """Mark ``check(cfg)`` (or ``check(cfg, plan)`` with ``plan=True``) yielding ``(location, message)`` as a rule."""

    def mark(fn: Check) -> Check:
        setattr(
            fn, _MARK, Rule(f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__name__}", target, frozenset(needs), plan, fn)
        )
        return fn

    return mark


def collect(modules: Iterable[ModuleType]) -> list[Rule]:
    """The rules marked in ``modules`` (functions defined there, not imported from elsewhere), in a stable order."""
    found = [
        getattr(fn, _MARK)
        for m in modules
        for fn in vars(m).values()
        if callable(fn) and hasattr(fn, _MARK) and getattr(fn, "__module__", None) == m.__name__
    ]
    return sorted(found, key=lambda r: (r.name, r.target or ""))


def neutral_rules() -> list[Rule]:
    """The rules every stack obeys, whatever its targets: the modules of this package."""
    return collect(
        importlib.import_module(f"{__name__}.{m.name}")
        for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name)
    )


def targets_of(cfg: StackConfig, valid: frozenset[str]) -> frozenset[str]:
    return cfg.targets() if "serving" in valid else frozenset()


def run_rules(
    cfg: StackConfig, valid: frozenset[str], plan: StackPlan | None, rules: Sequence[Rule]
) -> list[ConfigIssue]:
    """Every applicable rule of ``rules`` on the sections that validated; returns the issues with full key paths."""
    targets = targets_of(cfg, valid)
    issues: list[ConfigIssue] = []
    for r in rules:
        if r.target is not None and r.target not in targets:
            continue
        if not r.needs <= valid or (r.plan and plan is None):
            continue
        args: tuple[Any, ...] = (cfg, plan) if r.plan else (cfg,)
        issues += [ConfigIssue(key_path(loc), message) for loc, message in r.check(*args)]
    return issues
