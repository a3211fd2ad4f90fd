"""What a serving target is to the rest of the program: one small interface, implemented once per target package.

A target (``infra/targets/<name>/``) owns everything that only makes sense on it: its pool type (and co-hosted group
type), the root config sections it adds, its planning, its rules, its composition into components and its rows of
the capacity report. The registry (``infra/registry.py``) lists the targets; the root config model, the stack plan,
the rules run, the program's composition and the capacity table iterate it, so nothing outside a target's package
switches on target types. Target packages never import each other (an import-linter contract).

Adding a target: ``docs/architecture.md``, "Adding a target".
"""

from __future__ import annotations

import typing
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from components.project import ProjectServices

from ..config.base import ConfigIssue
from ..config.cohosting import CoHostedGroupCommon
from ..config.measurement import Measurement
from ..config.pool import PoolCommon
from ..config.stack import Section, StackConfig
from ..planning.cohosting import Recipe
from ..planning.plan import StackPlan, TargetPlan
from ..rules import Rule


@dataclass(frozen=True)
class ResolvedStack:
    """A stack's validated config and its one plan: what composition and the offline tools read."""

    stack: str
    config: StackConfig
    plan: StackPlan


@dataclass(frozen=True)
class ReportRow:
    """One row of the capacity table: a label and the value for each pool of the target (by role)."""

    label: str
    values: Mapping[str, str]


class Target(ABC):
    """A serving target. Subclasses set the class attributes and implement :meth:`plan` and :meth:`compose`."""

    #: The ``target`` value its pools and groups carry in config.
    name: ClassVar[str]
    #: The Google APIs its resources are created through (the project services enable the union of the stack's).
    services: ClassVar[tuple[str, ...]]
    pool_type: ClassVar[type[PoolCommon]]
    #: Its co-hosted group type, if it hosts groups.
    group_type: ClassVar[type[CoHostedGroupCommon] | None] = None
    #: The root config keys it owns.
    sections: ClassVar[tuple[Section, ...]] = ()

    def __init__(self) -> None:
        for kind in (self.pool_type, self.group_type):
            if kind is not None and typing.get_args(kind.model_fields["target"].annotation) != (self.name,):
                raise TypeError(f"{type(self).__name__}: {kind.__name__}.target must be Literal[{self.name!r}]")

    @abstractmethod
    def rules(self) -> Sequence[Rule]:
        """Its rules (each marked ``target=<name>``)."""

    @abstractmethod
    def plan(self, cfg: StackConfig, measurements: Mapping[str, Measurement]) -> TargetPlan:
        """Its share of the stack plan: its pools (and groups), with a :class:`PlanIssue` for each that cannot work."""

    @abstractmethod
    def compose(self, resolved: ResolvedStack, services: ProjectServices) -> dict[str, object]:
        """Create its components for a stack that has its pools or groups; returns the stack outputs it adds."""

    def report_rows(self, plan: StackPlan) -> Sequence[ReportRow]:
        """Its rows of the capacity table (beside the rows every pool has); none by default."""
        return ()

    def deploy_refusals(self, resolved: ResolvedStack) -> Sequence[ConfigIssue]:
        """What of a valid, planned stack this target cannot deploy yet: checked before anything is registered
        (``infra/entry.py``), so ``capacity`` still sizes such a stack while ``plan`` / ``up`` refuse it whole."""
        return ()

    def report_lines(self, plan: StackPlan) -> Sequence[str]:
        """Lines below the capacity table (node arithmetic, co-hosted groups); none by default."""
        return ()

    def recipe_forms(self, recipe: Recipe) -> tuple[str, ...]:
        """How this target deploys a layout of one release on one machine (``capacity --recipes``), or nothing when
        it cannot. By default one container runs on each machine and its vLLM is the machine's only server: a layout
        of one instance, as a pool or (a target with groups) as one model of a group."""
        if recipe.instances != 1:
            return ()
        return (f"{self.name} pool",) + ((f"{self.name} group",) if self.group_type is not None else ())
