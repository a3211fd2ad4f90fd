"""Cross-section validation rules: each reads the validated config (and, when it needs it, the resolved plan) and
yields problems with the config location they concern.

A rule is a function decorated with :func:`rule`, which declares

* ``target``: the serving target it applies to (``None``: every stack); a rule for ``gke`` runs only when a
  pool targets ``gke``;
* ``needs``: the root config sections it reads. It runs only when all of them passed schema validation, so a
  broken section never hides another section's problems and a rule never reads a section that failed;
* ``plan``: whether it reads the :class:`~infra.planning.plan.StackPlan` (it then runs whenever the plan could
  be built, on the pools that planned).

Rule modules in this package are discovered, so adding a rule touches only its module.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..config.base import ConfigIssue
from ..config.stack import StackConfig, key_path
from ..planning.plan import StackPlan

Loc = tuple[str | int, ...]
Finding = tuple[Loc, str]
Check = Callable[..., Iterable[Finding]]


@dataclass(frozen=True)
class Rule:
    name: str
    target: str | None
    needs: frozenset[str]
    plan: bool
    check: Check


_REGISTRY: list[Rule] = []
_DISCOVERED: list[bool] = []


def rule(*, needs: Iterable[str], target: str | None = None, plan: bool = False) -> Callable[[Check], Check]:
    """Register ``check(cfg)`` (or ``check(cfg, plan)`` with ``plan=True``) yielding ``(location, message)``."""

    def register(fn: Check) -> Check:
        _REGISTRY.append(Rule(f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__name__}", target, frozenset(needs), plan, fn))
        return fn

    return register


def _discover() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        importlib.import_module(f"{__name__}.{info.name}")


def rules() -> list[Rule]:
    """Every registered rule, in a stable order."""
    if not _DISCOVERED:  # not "registry empty": importing one rule module directly must not hide the others
        _discover()
        _DISCOVERED.append(True)
    return sorted(_REGISTRY, key=lambda r: r.name)


def targets_of(cfg: StackConfig, valid: frozenset[str]) -> frozenset[str]:
    return cfg.targets() if "serving" in valid else frozenset()


def run_rules(cfg: StackConfig, valid: frozenset[str], plan: StackPlan | None) -> list[ConfigIssue]:
    """Every applicable rule on the sections that validated; returns the issues with full key paths."""
    targets = targets_of(cfg, valid)
    issues: list[ConfigIssue] = []
    for r in rules():
        if r.target is not None and r.target not in targets:
            continue
        if not r.needs <= valid or (r.plan and plan is None):
            continue
        args: tuple[Any, ...] = (cfg, plan) if r.plan else (cfg,)
        issues += [ConfigIssue(key_path(loc), message) for loc, message in r.check(*args)]
    return issues
