"""Rules of the ``cloud_run`` target: its section exists, a pool's release fits one Cloud Run GPU, the GPU is offered
in the stack's region, the service-wide settings the pools share agree, prod protects the service, the images come
from the stack's registry, and a canary is a revision of its own. (The instance shape, the startup window and the
request timeout are the planner's: ``planning.py``.) (The warm minimum and the one-target split are the neutral rules', ``infra/rules/common.py``.)"""

from __future__ import annotations

from collections.abc import Iterator

from components.naming import registry_prefix
from infra.config.stack import StackConfig
from infra.rules import Finding, rule

from .config import GPU_SHAPES, TARGET, cloud_run_section
from .planning import run_pools

#: Pool keys a revision's template does not depend on: a canary equal to stable in everything else renders the
#: very same revision.
NOT_IN_REVISION = frozenset({"weight", "measured", "measured_with_adapted_args", "pricing"})


@rule(target=TARGET, needs={"serving", "cloud_run"})
def cloud_run_section_present(cfg: StackConfig) -> Iterator[Finding]:
    if cloud_run_section(cfg) is None:
        roles = ", ".join(role for role, _ in run_pools(cfg))
        yield (
            ("cloud_run",),
            f"required when a pool targets cloud_run ({roles}): the service name, image repository "
            "and metrics collector image",
        )


@rule(target=TARGET, needs={"serving", "releases"})
def release_fits_one_gpu(cfg: StackConfig) -> Iterator[Finding]:
    ids = {r.release for r in cfg.releases}
    for role, pool in run_pools(cfg):
        if pool.release not in ids:
            continue  # reported by the common rules
        tp = cfg.release(pool.release).tensor_parallel_size
        if tp != pool.gpu_count:
            yield (
                ("serving", role, "release"),
                f"release {pool.release!r} runs on tensor_parallel_size {tp} GPUs; a Cloud Run instance attaches "
                f"{pool.gpu_count} (gpu_count): serve it on gke, or release it for one GPU",
            )


@rule(target=TARGET, needs={"serving", "region"})
def gpu_offered_in_the_region(cfg: StackConfig) -> Iterator[Finding]:
    """Cloud Run offers each GPU type in a few regions only ("GPU support for services", supported regions; the
    table in config.py). A type whose region list could not be confirmed is left to the preconditions
    (docs/cloud-run.md)."""
    for role, pool in run_pools(cfg):
        regions = GPU_SHAPES[pool.gpu].regions
        if regions is not None and cfg.region not in regions:
            yield (
                ("serving", role, "gpu"),
                f"Cloud Run offers {pool.gpu} in {', '.join(regions)} (asia-south1 by invitation), not in "
                f"{cfg.region}: choose one of those regions for the stack, or serve this pool on gke",
            )


@rule(target=TARGET, needs={"serving"})
def service_settings_agree(cfg: StackConfig) -> Iterator[Finding]:
    """Ingress and invoker IAM belong to the service, which both pools' revisions share."""
    pools = dict(run_pools(cfg))
    if "stable" not in pools or "canary" not in pools:
        return
    stable, canary = pools["stable"], pools["canary"]
    if canary.ingress != stable.ingress:
        yield (
            ("serving", "canary", "ingress"),
            f"{canary.ingress} differs from stable's {stable.ingress}: both pools are revisions of one Cloud Run "
            "service, whose ingress setting is service-wide",
        )
    if sorted(canary.invoker_members) != sorted(stable.invoker_members):
        yield (
            ("serving", "canary", "invoker_members"),
            "differ from stable's: both pools are revisions of one Cloud Run service, whose invoker IAM is "
            "service-wide; list the same members",
        )


@rule(target=TARGET, needs={"serving", "releases"})
def canary_is_another_revision(cfg: StackConfig) -> Iterator[Finding]:
    pools = dict(run_pools(cfg))
    if "stable" not in pools or "canary" not in pools:
        return
    a, b = (pools[r].model_dump(exclude=set(NOT_IN_REVISION)) for r in ("stable", "canary"))
    if a == b:
        yield (
            ("serving", "canary"),
            "renders the same revision as stable (same release and settings): after a promotion, remove the canary "
            "pool; the stable tag then points at the revision the canary tested",
        )


@rule(target=TARGET, needs={"cloud_run", "environment"})
def prod_protects_the_service(cfg: StackConfig) -> Iterator[Finding]:
    c = cloud_run_section(cfg)
    if c is not None and cfg.environment == "prod" and not c.protect:
        yield ("cloud_run", "protect"), "prod must protect the Cloud Run service from deletion"


@rule(target=TARGET, needs={"cloud_run", "releases", "serving", "project", "region"})
def images_come_from_the_stack_registry(cfg: StackConfig) -> Iterator[Finding]:
    """Cloud Run pulls a same-project Artifact Registry image with its own service agent; the image must be the team's
    own build, pinned by digest (the release identity already refuses tags)."""
    c = cloud_run_section(cfg)
    if c is None:
        return
    prefix = registry_prefix(cfg.project, cfg.region, c.repository)
    served = {pool.release for _, pool in run_pools(cfg)}
    for i, rel in enumerate(cfg.releases):
        if rel.release in served and not rel.image.startswith(prefix):
            yield (
                ("releases", i, "image"),
                f"Cloud Run pools pull from the stack's Artifact Registry repository {prefix}..., got {rel.image}",
            )
