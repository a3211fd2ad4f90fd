"""Child resource options that keep the component's ``depends_on``.

Pulumi does not pass a component's ``depends_on`` down to the resources it creates, so a component created
"after the project services" would still let its children race the API enablement. Every platform
component builds its children's options here.
"""

from __future__ import annotations

from typing import Any

import pulumi


def inherited_dependencies(opts: pulumi.ResourceOptions | None) -> list[Any]:
    deps = opts.depends_on if opts is not None else None
    if deps is None:
        return []
    return list(deps) if isinstance(deps, (list, tuple)) else [deps]


def child_options(parent: pulumi.Resource, opts: pulumi.ResourceOptions | None, *,
                  depends_on: list[Any] | None = None, **kwargs: Any) -> pulumi.ResourceOptions:
    """``ResourceOptions(parent=parent, depends_on=<component's depends_on> + depends_on, **kwargs)``."""
    return pulumi.ResourceOptions(parent=parent, depends_on=inherited_dependencies(opts) + list(depends_on or []),
                                  **kwargs)
