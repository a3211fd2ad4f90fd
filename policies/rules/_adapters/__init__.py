"""Per-target adapters: one module per serving target (``gke``, ``cloud_run``, ``vertex``), each exporting
``ADAPTER``, an :class:`~.facts.Adapter` whose readers turn that target's resources into the typed facts of
:mod:`.facts`. A cross-target policy iterates :data:`ADAPTERS` and never reads a target's resource shape itself:
adding a target means adding its adapter, not a copy of each policy.

A policy module that judges facts names them in ``FACTS`` (the :class:`~.facts.Adapter` reader names it iterates);
the tests use it to require a failing case per policy and per target that has such facts.
"""

from __future__ import annotations

from typing import Any

from . import cloud_run, gke, vertex
from .facts import Adapter, FactKind, Reader, StackReader

#: Every serving target's adapter, in a fixed order (findings come out in this order within a resource).
ADAPTERS: tuple[Adapter, ...] = (gke.ADAPTER, cloud_run.ADAPTER, vertex.ADAPTER)


def reader(adapter: Adapter, kind: FactKind) -> Reader[Any] | StackReader[Any]:
    found = getattr(adapter, kind)
    assert isinstance(found, (Reader, StackReader))
    return found


def types_of(*kinds: FactKind) -> tuple[str, ...]:
    """The resource types any adapter reads these facts from (what a policy asks the engine's resources for)."""
    seen: dict[str, None] = {}
    for adapter in ADAPTERS:
        for kind in kinds:
            seen.update(dict.fromkeys(reader(adapter, kind).types))
    return tuple(seen)


def targets_with(kind: FactKind) -> tuple[str, ...]:
    """The targets whose adapter has facts of ``kind``."""
    return tuple(a.target for a in ADAPTERS if reader(a, kind).types)
