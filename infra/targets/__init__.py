"""Serving targets: one composition module per target, each mapping the resolved plan to component Args.

``COMPOSERS`` maps a pool's ``target`` to the function that deploys every pool of that target; the program
dispatches to it. Adding a target = a config pool type, its planning, its rules module and one module here.
"""

from __future__ import annotations

from collections.abc import Callable

from components.project import PLATFORM_SERVICES

from ..resolve import ResolvedStack
from . import cloud_run, gke, vertex

#: target -> compose(resolved, shared) -> the target's stack outputs.
COMPOSERS: dict[str, Callable[..., dict[str, object]]] = {
    gke.TARGET: gke.compose,
    cloud_run.TARGET: cloud_run.compose,
    vertex.TARGET: vertex.compose,
}

#: target -> the Google APIs its resources are created through (the project services enable their union).
SERVICES: dict[str, tuple[str, ...]] = {
    gke.TARGET: PLATFORM_SERVICES,
    cloud_run.TARGET: cloud_run.SERVICES,
    vertex.TARGET: vertex.SERVICES,
}
