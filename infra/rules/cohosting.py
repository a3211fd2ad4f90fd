"""Rules of the co-hosted groups (``cohosting``) whatever their target: their references resolve, every public model
name is the stack's only one, and a group's releases share one weights bucket and one image (every target runs a
group in one co-host container), and its instances' names are distinct. The memory arithmetic (partitions,
useful concurrency, the transient reserve) is the planner's (``infra/planning/cohosting.py``); what a group needs of
its target lives in the target's rules (``infra/targets/<target>/rules/cohosting.py``)."""

from __future__ import annotations

from collections.abc import Iterator

from ..config.stack import StackConfig
from ..planning.cohosting import GKE_ROLE_MAX_LENGTH, gke_role
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
    """A group's one container runs as one service account (GKE: the group's Kubernetes service account; Vertex AI:
    its deployed model's), which reads one weights bucket."""
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
                    "the group's service account reads exactly one weights bucket",
                )


@rule(needs={"cohosting", "releases"})
def group_releases_share_one_image(cfg: StackConfig) -> Iterator[Finding]:
    """Every instance of a group runs in the one co-host container, so every release names the same serving image
    (digest) and hence the same vLLM."""
    ids = {r.release for r in cfg.releases}
    for key, g in cfg.groups():
        served = [(i, cfg.release(m.release)) for i, m in enumerate(g.models) if m.release in ids]
        if not served:
            continue
        first = served[0][1]
        for i, rel in served[1:]:
            if rel.image != first.image:
                yield (
                    ("cohosting", key, "models", i, "release"),
                    f"release {rel.release!r} runs image {rel.image}, the group's first {first.image}: the group's "
                    "instances run in one container",
                )


@rule(needs={"cohosting"})
def group_instance_names_are_distinct(cfg: StackConfig) -> Iterator[Finding]:
    """A model's public name as a DNS label names its instances in the server's configuration (``<role>-<j>``, its
    ``cohost_instance`` label): distinct within the group, short enough for the instance names."""
    for key, g in cfg.groups():
        seen: dict[str, str] = {}
        for i, m in enumerate(g.models):
            role, loc = gke_role(m.model_name), ("cohosting", key, "models", i, "model_name")
            if len(role) > GKE_ROLE_MAX_LENGTH:
                yield (
                    loc,
                    f"{m.model_name!r} names the instances {role}-<n>: at most {GKE_ROLE_MAX_LENGTH} characters, "
                    f"got {len(role)}",
                )
            elif role in seen and seen[role] != m.model_name:
                yield (
                    loc,
                    f"{m.model_name!r} and {seen[role]!r} both name the instances {role}-<n> ('.' and '_' become '-')",
                )
            seen.setdefault(role, m.model_name)
