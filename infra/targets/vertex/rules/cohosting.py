"""Rules of the ``vertex`` co-hosted groups: the ``vertex`` section exists for them, and every endpoint id (the
stack's endpoint and one per co-hosted group) names one endpoint. The machine's topology rules are in
``endpoint.py``; the memory arithmetic is the planner's."""

from __future__ import annotations

from collections.abc import Iterator

from infra.config.stack import StackConfig
from infra.rules import Finding, rule

from ..config import TARGET, CoHostedGroup, vertex_section


def vertex_groups(cfg: StackConfig) -> list[tuple[str, CoHostedGroup]]:
    return [(k, g) for k, g in cfg.groups() if isinstance(g, CoHostedGroup)]


@rule(target=TARGET, needs={"cohosting", "vertex"})
def vertex_section_present_for_groups(cfg: StackConfig) -> Iterator[Finding]:
    keys = [k for k, _ in vertex_groups(cfg)]
    if keys and vertex_section(cfg) is None:
        yield (
            ("vertex",),
            f"required when a co-hosted group targets vertex ({', '.join(keys)}): the endpoints' access and callers",
        )


@rule(target=TARGET, needs={"cohosting", "vertex"})
def endpoint_ids_are_the_stacks_only_ones(cfg: StackConfig) -> Iterator[Finding]:
    """An endpoint id names exactly one endpoint: the stack's own, and one per co-hosted group."""
    v = vertex_section(cfg)
    endpoints = {v.endpoint_id: "vertex.endpoint_id"} if v is not None else {}
    for key, g in vertex_groups(cfg):
        if g.endpoint_id in endpoints:
            yield (
                ("cohosting", key, "endpoint_id"),
                f"{g.endpoint_id!r} is already {endpoints[g.endpoint_id]}: one endpoint per group",
            )
        endpoints.setdefault(g.endpoint_id, f"cohosting.{key}.endpoint_id")
