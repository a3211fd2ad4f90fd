"""Composition: the resolved stack -> the project's shared services and the serving target's components."""

from __future__ import annotations

import pulumi

from components.project import ProjectServices, ProjectServicesArgs

from .planning.plan import release_info
from .resolve import ResolvedStack
from .targets import COMPOSERS, SERVICES


def deploy(resolved: ResolvedStack) -> None:
    cfg, plan = resolved.config, resolved.plan
    # The APIs of the stack's targets only: a Cloud Run stack does not switch on GKE, Compute or DNS.
    apis = tuple(sorted({api for target in cfg.targets() for api in SERVICES[target]}))
    services = ProjectServices("platform-services", ProjectServicesArgs(project=cfg.project, services=apis))
    outputs: dict[str, object] = {}
    for target in sorted(cfg.targets()):
        outputs.update(COMPOSERS[target](resolved, services))

    pulumi.export("environment", cfg.environment)
    pulumi.export("releases", {r.release: release_info(r).export() for r in cfg.releases})
    pulumi.export("capacity", plan.to_dict())
    pulumi.export("enabled_services", services.enabled)
    for key, value in sorted(outputs.items()):
        pulumi.export(key, value)
