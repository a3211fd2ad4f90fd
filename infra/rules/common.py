"""Rules every stack obeys, whatever its serving target: releases, zones, pools and their references, prod warm
capacity, cache compatibility of a weight split, and who alerts notify."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from components.traffic import split_problem

from ..config.accelerator import zone_region
from ..config.environment import WARM_MINIMUM
from ..config.release import ReleaseIdentity
from ..config.stack import StackConfig
from . import Finding, rule


@rule(needs={"releases"})
def unique_release_ids(cfg: StackConfig) -> Iterator[Finding]:
    ids = [r.release for r in cfg.releases]
    for i, rid in enumerate(ids):
        if ids.index(rid) != i:
            yield ("releases", i, "release"), f"duplicate release id {rid!r}"


@rule(needs={"zones", "region"})
def zones_in_region(cfg: StackConfig) -> Iterator[Finding]:
    for i, zone in enumerate(cfg.zones):
        if zone_region(zone) != cfg.region:
            yield ("zones", i), f"zone {zone!r} is not in region {cfg.region!r}"


@rule(needs={"releases", "contract"})
def release_context_within_contract(cfg: StackConfig) -> Iterator[Finding]:
    need = cfg.contract.max_input_tokens + cfg.contract.max_output_tokens
    for i, rel in enumerate(cfg.releases):
        if rel.max_model_len < need:
            yield (
                ("releases", i, "max_model_len"),
                f"{rel.max_model_len} cannot hold the contract's max_input_tokens + max_output_tokens = {need}",
            )
        elif rel.max_model_len > cfg.contract.max_model_len:
            yield (
                ("releases", i, "max_model_len"),
                f"{rel.max_model_len} exceeds the contract's max_model_len {cfg.contract.max_model_len}: "
                "context beyond the workload only costs concurrency",
            )
        elif rel.max_model_len > need:
            # vLLM 0.32 has no prompt-length limit of its own: it rejects a prompt longer than --max-model-len and
            # caps the output at max_model_len - prompt. The context is therefore the only input cap there is.
            yield (
                ("releases", i, "max_model_len"),
                f"{rel.max_model_len} admits prompts of up to {rel.max_model_len - 1} tokens, above the contract's "
                f"max_input_tokens {cfg.contract.max_input_tokens}: vLLM's only prompt limit is --max-model-len, so "
                f"it must equal max_input_tokens + max_output_tokens = {need}",
            )


@rule(needs={"serving", "releases"})
def public_name_is_not_a_release_id(cfg: StackConfig) -> Iterator[Finding]:
    """Responses name the release id, requests the public name: the two must be told apart."""
    if cfg.serving.model_name in {r.release for r in cfg.releases}:
        yield (
            ("serving", "model_name"),
            f"{cfg.serving.model_name!r} is also a release id: the public name must differ from every release id, "
            "so a response's model (the release id) tells which release served it",
        )


@rule(needs={"serving", "releases"})
def pools_name_known_releases(cfg: StackConfig) -> Iterator[Finding]:
    ids = [r.release for r in cfg.releases]
    for role, pool in cfg.pools():
        if pool.release not in ids:
            yield ("serving", role, "release"), f"unknown release {pool.release!r}; known: {', '.join(ids)}"


@rule(needs={"serving", "environment"})
def pools_keep_the_environments_warm_minimum(cfg: StackConfig) -> Iterator[Finding]:
    """Every pool keeps the warm floor its environment requires (``infra/config/environment.py``), counted in the
    unit its target keeps warm (replicas, or Cloud Run instances)."""
    minimum = WARM_MINIMUM[cfg.environment]
    for role, pool in cfg.pools():
        need, got = pool.warm_floor(minimum), pool.warm_count()
        if got < need:
            unit = pool.WARM_UNIT[:-1] if need == 1 else pool.WARM_UNIT
            yield (
                ("serving", role, pool.WARM_KEY),
                f"{cfg.environment} keeps at least {need} warm {unit} per {pool.TARGET_LABEL}, got {got}"
                + (f": {pool.WARM_REASON}" if pool.WARM_REASON else ""),
            )


@rule(needs={"serving"})
def weights_form_one_split(cfg: StackConfig) -> Iterator[Finding]:
    """The pools' weights are one split of the stack's traffic (``components/traffic.py``, the definition every
    target's split is checked against)."""
    problem = split_problem({role: pool.weight for role, pool in cfg.pools()})
    if problem is not None:
        yield ("serving", "canary" if cfg.serving.canary else "stable", "weight"), problem


@rule(needs={"serving"})
def split_stays_in_one_target(cfg: StackConfig) -> Iterator[Finding]:
    """A weight split is an HTTPRoute between InferencePools (gke), a traffic split between revisions of one service
    (cloud_run) or between the deployed models of one endpoint (vertex): nothing splits one stream of requests across
    two targets."""
    stable, canary = cfg.serving.stable, cfg.serving.canary
    if canary is not None and canary.target != stable.target:
        yield (
            ("serving", "canary", "target"),
            f"stable targets {stable.target} and canary {canary.target}: a traffic split works within one target "
            f"({stable.SPLIT_MECHANISM} or {canary.SPLIT_MECHANISM}); put both pools on one",
        )


def compatibility_differences(a: ReleaseIdentity, b: ReleaseIdentity) -> list[str]:
    """Fields that make two releases cache-incompatible (different base model or serving configuration)."""
    out = []
    if a.model.resolved() != b.model.resolved() or a.model.catalogue != b.model.catalogue:
        out.append("base model")
    for f in ("quantization", "dtype", "kv_cache_dtype", "tensor_parallel_size", "max_model_len"):
        if getattr(a, f) != getattr(b, f):
            out.append(f)
    return out


@rule(needs={"serving", "releases"})
def split_is_cache_compatible(cfg: StackConfig) -> Iterator[Finding]:
    """KV caches and adapters belong to one base model and serving configuration: a weight split between
    incompatible releases must be asked for explicitly."""
    if cfg.serving.canary is None or cfg.serving.allow_mixed_split:
        return
    ids = {r.release for r in cfg.releases}
    a, b = cfg.serving.stable, cfg.serving.canary
    if a.release in ids and b.release in ids:
        diff = compatibility_differences(cfg.release(a.release), cfg.release(b.release))
        if diff:
            yield (
                ("serving", "canary", "release"),
                f"stable and canary differ in {', '.join(diff)}: KV caches and adapters are not compatible "
                "across them; set serving.allow_mixed_split: true to split traffic anyway",
            )


@rule(needs={"observability", "project"})
def channels_belong_to_project(cfg: StackConfig) -> Iterator[Finding]:
    for i, channel in enumerate(cfg.observability.alerts.notification_channels):
        if not channel.existing or channel.name is None:
            continue
        owner = channel.name.split("/")[1]
        if owner != cfg.project:
            yield (
                ("observability", "alerts", "notification_channels", i, "name"),
                f"{channel.name!r} is in project {owner!r}; alert policies of {cfg.project!r} can only notify "
                "its own channels",
            )


@rule(needs={"observability", "environment"})
def prod_notifies_someone(cfg: StackConfig) -> Iterator[Finding]:
    if cfg.environment == "prod" and not cfg.observability.alerts.notification_channels:
        yield (
            ("observability", "alerts", "notification_channels"),
            "prod must name at least one notification channel: an alert nobody receives is not an alert",
        )


def placement_findings(cfg: StackConfig, names: Iterable[str], pools: str) -> Iterator[Finding]:
    """The named accelerators sit in the stack's region and zones; in prod they are neither Spot nor without a
    specific reservation. ``pools`` names what consumes them in the message ("GPU pools", "Vertex pools")."""
    for name in names:
        acc = cfg.accelerators[name]
        if zone_region(acc.zone) != cfg.region:
            yield ("accelerators", name, "zone"), f"zone {acc.zone!r} is not in region {cfg.region!r}"
        elif acc.zone not in cfg.zones:
            yield ("accelerators", name, "zone"), f"zone {acc.zone!r} is not one of the stack's zones {cfg.zones}"
        if cfg.environment == "prod":
            if acc.spot:
                yield (
                    ("accelerators", name, "spot"),
                    "Spot VMs are not allowed in prod: they are preempted without notice",
                )
            elif acc.reservation is None:
                yield (
                    ("accelerators", name, "reservation"),
                    f"prod {pools} must consume a specific zonal reservation (quota is not capacity)",
                )
