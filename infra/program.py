"""Composition: the resolved stack -> the project's shared services and the components of each serving target the
stack uses (the registry's targets, in registry order)."""

from __future__ import annotations

import pulumi

from components.project import ProjectServices, ProjectServicesArgs

from .planning.plan import release_info
from .registry import REGISTRY, Registry
from .targets.base import ResolvedStack


def deploy(resolved: ResolvedStack, registry: Registry = REGISTRY) -> None:
    cfg, plan = resolved.config, resolved.plan
    used = cfg.targets()
    # The APIs of the stack's targets only: a Cloud Run stack does not switch on GKE, Compute or DNS.
    services = ProjectServices(
        "platform-services", ProjectServicesArgs(project=cfg.project, services=registry.services(sorted(used)))
    )
    outputs: dict[str, object] = {}
    for target in sorted(registry.targets, key=lambda t: t.name):
        if target.name in used:
            outputs.update(target.compose(resolved, services))

    pulumi.export("environment", cfg.environment)
    pulumi.export("releases", {r.release: release_info(r).export() for r in cfg.releases})
    pulumi.export("capacity", plan.to_dict())
    # What the pools are sized for: `llm-serving diff` warns when these move for a pool sized "unmeasured".
    pulumi.export(
        "traffic",
        {
            "contract": cfg.contract.model_dump(mode="json"),
            "weights": {role: pool.weight for role, pool in cfg.pools()},
        },
    )
    pulumi.export("enabled_services", services.enabled)
    for key, value in sorted(outputs.items()):
        pulumi.export(key, value)
