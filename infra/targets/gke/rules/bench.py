"""Rules of the in-cluster benchmark (``gke.bench``): the benchmarked pool exists and runs on GKE, and the bench image
comes from the stack's registry (the only one the cluster's system nodes are granted to pull from for it)."""

from __future__ import annotations

from collections.abc import Iterator

from components.naming import registry_prefix
from infra.config.stack import StackConfig
from infra.rules import Finding, rule

from ..config import TARGET, gke_section


@rule(target=TARGET, needs={"gke", "serving"})
def bench_pool_is_a_gke_pool(cfg: StackConfig) -> Iterator[Finding]:
    """The Job runs in the GKE cluster and reaches its pool through a Service selecting the pool's Deployment."""
    g = gke_section(cfg)
    bench = g.bench if g is not None else None
    if bench is None:
        return
    pools = dict(cfg.pools())
    if bench.pool not in pools:
        yield (("gke", "bench", "pool"), f"no {bench.pool!r} pool to benchmark: serving has {', '.join(sorted(pools))}")
    elif pools[bench.pool].target != TARGET:
        yield (
            ("gke", "bench", "pool"),
            f"serving.{bench.pool} targets {pools[bench.pool].target}; the benchmark Job runs in the GKE cluster "
            "and measures a gke pool",
        )


@rule(target=TARGET, needs={"gke", "project", "region"})
def bench_image_in_stack_registry(cfg: StackConfig) -> Iterator[Finding]:
    """The Job pulls its image on a system node, whose service account the bench grants reader on the stack's
    repository only: an image anywhere else would not pull (or would be pulled from outside the stack's cleanup
    and scanning)."""
    g = gke_section(cfg)
    if g is None or g.bench is None:
        return
    prefix = registry_prefix(cfg.project, cfg.region, g.registry.repository_id)
    if not g.bench.image.startswith(prefix):
        yield (
            ("gke", "bench", "image"),
            f"the bench image must come from the stack's Artifact Registry repository {prefix}..., got {g.bench.image}",
        )
