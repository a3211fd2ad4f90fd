"""The serving targets this program deploys, and what is derived from the list: the root config model, every rule
and the planners.

One line per target in :data:`REGISTRY`; nothing else in the program names a target package. :class:`Registry` lets a
test register one more (``tests/test_target_registry.py`` plans a stub fourth target through the real resolver).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .config.stack import StackConfig, stack_model
from .rules import Rule, neutral_rules
from .targets.base import Target
from .targets.cloud_run.target import CloudRunTarget
from .targets.gke.target import GkeTarget
from .targets.vertex.target import VertexTarget


@dataclass(frozen=True)
class Registry:
    """A set of serving targets, in the order their pool types form the ``target`` union."""

    targets: tuple[Target, ...]
    model: type[StackConfig] = field(init=False)

    def __post_init__(self) -> None:
        names = [t.name for t in self.targets]
        if len(set(names)) != len(names):
            raise ValueError(f"Registry: target names {names} must be unique")
        model = stack_model(
            [t.pool_type for t in self.targets],
            [t.group_type for t in self.targets if t.group_type is not None],
            [s for t in self.targets for s in t.sections],
        )
        object.__setattr__(self, "model", model)

    def target(self, name: str) -> Target:
        return next(t for t in self.targets if t.name == name)

    def rules(self) -> list[Rule]:
        """The neutral rules and every target's."""
        return [*neutral_rules(), *(r for t in self.targets for r in t.rules())]

    def services(self, names: Sequence[str]) -> tuple[str, ...]:
        """The Google APIs the named targets create resources through, sorted."""
        return tuple(sorted({api for t in self.targets if t.name in names for api in t.services}))

    def with_target(self, extra: Target) -> Registry:
        return Registry((*self.targets, extra))


#: The targets of this program.
REGISTRY = Registry((GkeTarget(), CloudRunTarget(), VertexTarget()))
#: The root config model: :class:`StackConfig` with every target's pools, groups and sections.
STACK_CONFIG = REGISTRY.model
