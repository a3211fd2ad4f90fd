"""Rules of the co-hosted groups (``cohosting``): their references resolve, the section of their target exists,
every public model name and endpoint id is the stack's only one, and a group's releases share one weights bucket.
The memory arithmetic (partitions, useful concurrency, the transient reserve) is the planner's
(``infra/planning/cohosting.py``); the machine's topology rules are the Vertex target's (``vertex.py``)."""

from __future__ import annotations

from collections.abc import Iterator

from ..config.stack import StackConfig
from . import Finding, rule


@rule(needs={"cohosting", "accelerators"})
def groups_name_known_accelerators(cfg: StackConfig) -> Iterator[Finding]:
    for key, g in sorted(cfg.cohosting.items()):
        if g.accelerator not in cfg.accelerators:
            yield (("cohosting", key, "accelerator"),
                   f"unknown accelerator {g.accelerator!r}; known: {', '.join(sorted(cfg.accelerators)) or 'none'}")


@rule(needs={"cohosting", "releases"})
def groups_name_known_releases(cfg: StackConfig) -> Iterator[Finding]:
    ids = [r.release for r in cfg.releases]
    for key, g in sorted(cfg.cohosting.items()):
        for i, m in enumerate(g.models):
            if m.release not in ids:
                yield (("cohosting", key, "models", i, "release"), f"unknown release {m.release!r}; known: {', '.join(ids)}")


@rule(needs={"cohosting", "vertex"})
def vertex_section_present_for_groups(cfg: StackConfig) -> Iterator[Finding]:
    keys = [k for k, g in sorted(cfg.cohosting.items()) if g.target == "vertex"]
    if keys and cfg.vertex is None:
        yield (("vertex",), f"required when a co-hosted group targets vertex ({', '.join(keys)}): the endpoints' "
               "access and callers")


@rule(needs={"cohosting", "serving", "releases", "vertex"})
def names_are_the_stacks_only_ones(cfg: StackConfig) -> Iterator[Finding]:
    """A public model name reaches exactly one model, and an endpoint id names exactly one endpoint."""
    names = {cfg.serving.model_name: "serving.model_name"}
    endpoints = {cfg.vertex.endpoint_id: "vertex.endpoint_id"} if cfg.vertex is not None else {}
    releases = {r.release for r in cfg.releases}
    for key, g in sorted(cfg.cohosting.items()):
        for i, m in enumerate(g.models):
            where = f"cohosting.{key}.models[{i}]"
            if m.model_name in names:
                yield (("cohosting", key, "models", i, "model_name"),
                       f"{m.model_name!r} is already {names[m.model_name]}: each public name reaches one model")
            elif m.model_name in releases:
                yield (("cohosting", key, "models", i, "model_name"),
                       f"{m.model_name!r} is also a release id: a response's model (the release id) must tell "
                       "which release served it")
            names.setdefault(m.model_name, f"{where}.model_name")
            if m.endpoint_id in endpoints:
                yield (("cohosting", key, "models", i, "endpoint_id"),
                       f"{m.endpoint_id!r} is already {endpoints[m.endpoint_id]}: one endpoint per model")
            endpoints.setdefault(m.endpoint_id, f"{where}.endpoint_id")


@rule(needs={"cohosting", "releases"})
def group_releases_share_one_weights_bucket(cfg: StackConfig) -> Iterator[Finding]:
    """The resource pool's containers run as one service account, which reads one weights bucket."""
    ids = {r.release for r in cfg.releases}
    for key, g in sorted(cfg.cohosting.items()):
        served = [(i, cfg.release(m.release)) for i, m in enumerate(g.models) if m.release in ids]
        if not served:
            continue
        first = served[0][1].weights_bucket
        for i, rel in served[1:]:
            if rel.weights_bucket != first:
                yield (("cohosting", key, "models", i, "release"),
                       f"release {rel.release!r} is in bucket {rel.weights_bucket!r}, the group's first in {first!r}: "
                       "the resource pool's service account reads exactly one weights bucket")
