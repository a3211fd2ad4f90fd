"""The one component convention: ``Component(name, args, opts)``.

* a type token ``llm-serving:<area>:<Name>`` per component (``TYPE``);
* ``args`` is a small frozen dataclass of primitives, frozen dataclasses and ``pulumi.Input`` values (never a
  config section); input errors are raised when the Args are built and name the argument;
* providers and ``depends_on`` arrive only through ``opts``;
* every child is created with :meth:`Component.child_opts`, which sets ``parent=self`` and keeps the
  component's own ``depends_on``. Pulumi does not pass a component's ``depends_on`` down to the resources it
  creates, so a component created "after the project services" would otherwise let its children race the API
  enablement. Providers need no such help: children inherit their parent's providers.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pulumi


def _as_list(deps: Any) -> list[Any]:
    if deps is None:
        return []
    return list(deps) if isinstance(deps, (list, tuple)) else [deps]


class Component(pulumi.ComponentResource):
    """Base of every component; subclasses set ``TYPE`` and build children with :meth:`child_opts`."""

    TYPE: ClassVar[str]

    def __init__(self, name: str, args: Any, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        self.args = args
        self._inherited: list[Any] = _as_list(opts.depends_on if opts is not None else None)

    def child_opts(self, *, depends_on: Any = None, **kwargs: Any) -> pulumi.ResourceOptions:
        """``ResourceOptions(parent=self, depends_on=<component's depends_on> + depends_on, **kwargs)``."""
        return pulumi.ResourceOptions(parent=self, depends_on=[*self._inherited, *_as_list(depends_on)], **kwargs)
