"""Rules of the co-hosted groups (``cohosting``) whatever their target: their references resolve, every public model
name is the stack's only one, and a group's releases share one weights bucket. The memory arithmetic (partitions,
useful concurrency, the transient reserve) is the planner's (``infra/planning/cohosting.py``); what a group needs of
its target lives in the target's rules (``infra/targets/<target>/rules/cohosting.py``)."""

from __future__ import annotations

from collections.abc import Iterator

from ..config.stack import StackConfig
from . import Finding, rule


@rule(needs={"cohosting", "accelerators"})
def groups_name_known_accelerators(cfg: StackConfig) -> Iterator[Finding]:
    for key, g in cfg.groups():
        if g.accelerator not in cfg.accelerators:
            yield (
                ("cohosting", key, "accelerator"),
                f"unknown accelerator {g.accelerator!r}; known: {', '.join(sorted(cfg.accelerators)) or 'none'}",
            )


@rule(needs={"cohosting", "releases"})
def groups_name_known_releases(cfg: StackConfig) -> Iterator[Finding]:
    ids = [r.release for r in cfg.releases]
    for key, g in cfg.groups():
        for i, m in enumerate(g.models):
            if m.release not in ids:
                yield (
                    ("cohosting", key, "models", i, "release"),
                    f"unknown release {m.release!r}; known: {', '.join(ids)}",
                )


@rule(needs={"cohosting", "serving", "releases"})
def names_are_the_stacks_only_ones(cfg: StackConfig) -> Iterator[Finding]:
    """A public model name reaches exactly one model."""
    names = {cfg.serving.model_name: "serving.model_name"}
    releases = {r.release for r in cfg.releases}
    for key, g in cfg.groups():
        for i, m in enumerate(g.models):
            if m.model_name in names:
                yield (
                    ("cohosting", key, "models", i, "model_name"),
                    f"{m.model_name!r} is already {names[m.model_name]}: each public name reaches one model",
                )
            elif m.model_name in releases:
                yield (
                    ("cohosting", key, "models", i, "model_name"),
                    f"{m.model_name!r} is also a release id: a response's model (the release id) must tell "
                    "which release served it",
                )
            names.setdefault(m.model_name, f"cohosting.{key}.models[{i}].model_name")


@rule(needs={"cohosting", "releases"})
def group_releases_share_one_weights_bucket(cfg: StackConfig) -> Iterator[Finding]:
    """The resource pool's containers run as one service account, which reads one weights bucket."""
    ids = {r.release for r in cfg.releases}
    for key, g in cfg.groups():
        served = [(i, cfg.release(m.release)) for i, m in enumerate(g.models) if m.release in ids]
        if not served:
            continue
        first = served[0][1].weights_bucket
        for i, rel in served[1:]:
            if rel.weights_bucket != first:
                yield (
                    ("cohosting", key, "models", i, "release"),
                    f"release {rel.release!r} is in bucket {rel.weights_bucket!r}, the group's first in {first!r}: "
                    "the resource pool's service account reads exactly one weights bucket",
                )
