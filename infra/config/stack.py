"""The root of the typed stack configuration and its loader.

Pulumi stack config (``stacks/Pulumi.<env>.yaml``) is read as a whole: every ``llm-serving:*`` key is a
field of :class:`StackConfig` (unknown keys are errors), ``gcp:project`` / ``gcp:region`` are shared with
the Google provider. Validation runs in two phases and each reports *all* its problems at once with full
key paths:

1. schema: pydantic models (types, ranges, required keys, per-section rules);
2. cross-section rules and the capacity planner (references between sections, fit, reservation headroom).

Nothing is registered with Pulumi until both phases pass.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any, Literal, Mapping

from pydantic import Field, ValidationError

from ..planning import capacity
from .accelerator import AcceleratorTopology, zone_region
from .base import NAMESPACE, ConfigError, ConfigIssue, FieldErrors, Strict
from .contract import WorkloadContract
from .gateway import GatewayConfig, gateway_issues
from .gke import GkeConfig, platform_issues
from .model_server import model_server_issues
from .observability import Observability
from .release import ReleaseIdentity
from .serving import ServingPool, ServingPools

Environment = Literal["dev", "staging", "prod"]

#: Root fields that come from another package's namespace, and the key they are read from.
FOREIGN_KEYS = {"project": "gcp:project", "region": "gcp:region"}
#: Minimum warm replicas per serving pool in prod (seed 000: scaling from zero is a poor default, and one
#: replica cannot survive its own rollout or node loss).
PROD_MIN_WARM_REPLICAS = 2


class StackConfig(Strict):
    environment: Environment = Field(description="dev | staging | prod; must match the stack name.")
    project: Annotated[str, Field(pattern=r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$")] = Field(description="GCP project id (shared with the Google provider).")
    region: Annotated[str, Field(pattern=r"^[a-z]+-[a-z]+\d+$")] = Field(description="GCP region (shared with the Google provider).")
    zones: Annotated[list[str], Field(min_length=1)] = Field(description="Zones of the region the cluster uses.")
    contract: WorkloadContract = Field(description="The workload contract (target-neutral).")
    releases: Annotated[list[ReleaseIdentity], Field(min_length=1)] = Field(description=(
        "Immutable releases, inline or as JSON file paths relative to the project root."))
    accelerators: Annotated[dict[str, AcceleratorTopology], Field(min_length=1)] = Field(description="Accelerator topologies by key.")
    serving: ServingPools = Field(description="Stable and canary serving pools.")
    gke: GkeConfig = Field(description=(
        "The Google Cloud platform: network, GKE cluster, registry, weight stores (infra/config/gke.py)."))
    observability: Observability = Field(Observability(), description=(
        "Autoscaling targets, scraping, alert thresholds and notification channels (infra/config/observability.py)."))
    gateway: GatewayConfig = Field(description=(
        "GKE Inference Gateway: class, certificate, endpoint picker chart, IAP, Model Armor "
        "(infra/config/gateway.py)."))

    # ---- look-ups -------------------------------------------------------------------------------
    def release(self, release_id: str) -> ReleaseIdentity:
        return next(r for r in self.releases if r.release == release_id)

    def release_index(self, release_id: str) -> int:
        return next(i for i, r in enumerate(self.releases) if r.release == release_id)

    def pools(self) -> list[tuple[str, ServingPool]]:
        return self.serving.items()


# ---- key paths ------------------------------------------------------------------------------------

def key_path(loc: tuple[str | int, ...]) -> str:
    """('contract', 'max_output_tokens') -> 'llm-serving:contract.max_output_tokens';
    ('releases', 0, 'image') -> 'llm-serving:releases[0].image'; ('project',) -> 'gcp:project'."""
    if not loc:
        return f"{NAMESPACE}:<root>"
    head, rest = loc[0], loc[1:]
    out = FOREIGN_KEYS.get(str(head), f"{NAMESPACE}:{head}")
    for part in rest:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _issues_from_validation(err: ValidationError) -> list[ConfigIssue]:
    issues: list[ConfigIssue] = []
    for e in err.errors():
        loc = tuple(e["loc"])
        ctx_err = (e.get("ctx") or {}).get("error")
        if isinstance(ctx_err, FieldErrors):
            for field, msg in ctx_err.problems:
                sub: tuple[str | int, ...] = tuple(field.split(".")) if field else ()
                issues.append(ConfigIssue(key_path(loc + sub), msg))
            continue
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown key (not part of the schema)"
        elif e["type"] == "missing":
            msg = "required key is missing"
        elif "input" in e and e["type"] not in ("missing",):
            shown = e["input"]
            if isinstance(shown, (str, int, float, bool)) or shown is None:
                msg = f"{msg} (got {shown!r})"
        issues.append(ConfigIssue(key_path(loc), msg))
    return issues


# ---- raw config -> typed config ----------------------------------------------------------------------

def decode_pulumi_config(env: Mapping[str, str]) -> dict[str, Any]:
    """Pulumi hands config to programs as strings; structured values are JSON text."""
    out: dict[str, Any] = {}
    for key, value in env.items():
        if isinstance(value, str) and value[:1] in ("{", "["):
            try:
                out[key] = json.loads(value)
                continue
            except json.JSONDecodeError:
                pass
        out[key] = value
    return out


def _resolve_release_files(raw_releases: Any, base_dir: Path, issues: list[ConfigIssue]) -> Any:
    """A release may be given inline or as the path of its JSON file (relative to the project root)."""
    if not isinstance(raw_releases, list):
        return raw_releases
    resolved = []
    for i, item in enumerate(raw_releases):
        if isinstance(item, str):
            path = (base_dir / item).resolve()
            where = key_path(("releases", i))
            try:
                resolved.append(json.loads(path.read_text()))
            except FileNotFoundError:
                issues.append(ConfigIssue(where, f"release file {item!r} not found (resolved to {path})"))
                resolved.append(None)
            except json.JSONDecodeError as exc:
                issues.append(ConfigIssue(where, f"release file {item!r} is not valid JSON: {exc}"))
                resolved.append(None)
        else:
            resolved.append(item)
    return resolved


def build_document(raw: Mapping[str, Any], base_dir: Path, issues: list[ConfigIssue]) -> dict[str, Any]:
    """Map flat Pulumi keys to the model's document; unknown keys in our namespace become errors."""
    doc: dict[str, Any] = {}
    foreign = {v: k for k, v in FOREIGN_KEYS.items()}
    for key, value in raw.items():
        if key in foreign:
            doc[foreign[key]] = value
        elif key.startswith(f"{NAMESPACE}:"):
            doc[key.split(":", 1)[1]] = value
        # Other namespaces (gcp:zone, kubernetes:*) belong to their providers and are not ours to judge.
    if "releases" in doc:
        doc["releases"] = _resolve_release_files(doc["releases"], base_dir, issues)
    return doc


def semantic_issues(cfg: StackConfig) -> list[ConfigIssue]:
    """Phase 2: rules that span sections, plus every planner check."""
    issues: list[ConfigIssue] = []
    add = lambda loc, msg: issues.append(ConfigIssue(key_path(loc), msg))  # noqa: E731

    ids = [r.release for r in cfg.releases]
    for i, rid in enumerate(ids):
        if ids.index(rid) != i:
            add(("releases", i, "release"), f"duplicate release id {rid!r}")
    for i, zone in enumerate(cfg.zones):
        if zone_region(zone) != cfg.region:
            add(("zones", i), f"zone {zone!r} is not in region {cfg.region!r}")
    for name, acc in cfg.accelerators.items():
        if zone_region(acc.zone) != cfg.region:
            add(("accelerators", name, "zone"), f"zone {acc.zone!r} is not in region {cfg.region!r}")
        elif acc.zone not in cfg.zones:
            add(("accelerators", name, "zone"), f"zone {acc.zone!r} is not one of the stack's zones {cfg.zones}")
        if cfg.environment == "prod":
            if acc.spot:
                add(("accelerators", name, "spot"), "Spot VMs are not allowed in prod: they are preempted without notice")
            elif acc.reservation is None:
                add(("accelerators", name, "reservation"),
                    "prod GPU pools must consume a specific zonal reservation (quota is not capacity)")

    for i, rel in enumerate(cfg.releases):
        need = cfg.contract.max_input_tokens + cfg.contract.max_output_tokens
        if rel.max_model_len < need:
            add(("releases", i, "max_model_len"),
                f"{rel.max_model_len} cannot hold the contract's max_input_tokens + max_output_tokens = {need}")
        elif rel.max_model_len > cfg.contract.max_model_len:
            add(("releases", i, "max_model_len"),
                f"{rel.max_model_len} exceeds the contract's max_model_len {cfg.contract.max_model_len}: "
                "context beyond the workload only costs concurrency")

    pool_plans: dict[str, capacity.PoolPlan] = {}
    for role, pool in cfg.pools():
        ok = True
        if pool.release not in ids:
            add(("serving", role, "release"), f"unknown release {pool.release!r}; known: {', '.join(ids)}")
            ok = False
        if pool.accelerator not in cfg.accelerators:
            add(("serving", role, "accelerator"),
                f"unknown accelerator {pool.accelerator!r}; known: {', '.join(sorted(cfg.accelerators))}")
            ok = False
        if cfg.environment == "prod" and pool.min_replicas < PROD_MIN_WARM_REPLICAS:
            add(("serving", role, "min_replicas"),
                f"prod keeps at least {PROD_MIN_WARM_REPLICAS} warm replicas per pool, got {pool.min_replicas}")
        sharing = cfg.accelerators[pool.accelerator].gpu_sharing if pool.accelerator in cfg.accelerators else None
        if sharing is not None:
            total = pool.gpu_memory_utilization * sharing.max_shared_clients_per_gpu
            if total >= 1.0:
                add(("serving", role, "gpu_memory_utilization"),
                    f"{pool.gpu_memory_utilization} x {sharing.max_shared_clients_per_gpu} servers sharing one GPU "
                    f"({pool.accelerator}.gpu_sharing) = {total:g} of its memory: keep the product below 1.0 "
                    f"(at most {math.floor(0.99 / sharing.max_shared_clients_per_gpu * 100) / 100} per server)")
        if not ok:
            continue
        try:
            pool_plans[role] = capacity.plan_pool(pool_inputs(cfg, role, pool))
        except capacity.PlanningError as exc:
            rel_i = cfg.release_index(pool.release)
            field = "max_model_len" if "max_model_len" in str(exc) else "tensor_parallel_size"
            loc = ("releases", rel_i, field) if field == "max_model_len" else ("serving", role)
            add(loc, f"{exc} (release {pool.release!r} on accelerator {pool.accelerator!r})")

    if cfg.serving.canary is not None and not cfg.serving.allow_mixed_split:
        a, b = cfg.serving.stable, cfg.serving.canary
        if a.release in ids and b.release in ids:
            diff = compatibility_differences(cfg.release(a.release), cfg.release(b.release))
            if diff:
                add(("serving", "canary", "release"),
                    f"stable and canary differ in {', '.join(diff)}: KV caches and adapters are not compatible "
                    "across them; set serving.allow_mixed_split: true to split traffic anyway")

    if len(pool_plans) == len(cfg.pools()):
        for name, acc in cfg.accelerators.items():
            plans = [pool_plans[r] for r, p in cfg.pools() if p.accelerator == name]
            if not plans or acc.reservation is None:
                continue
            ap = capacity.plan_accelerator(name, plans, acc.reservation.count)
            if acc.reservation.count < ap.nodes_for_max_plus_surge:
                add(("accelerators", name, "reservation", "count"),
                    f"{acc.reservation.count} reserved node(s) cannot hold max replicas {ap.max_replicas} + "
                    f"rollout surge {ap.surge_replicas} at {ap.replicas_per_node} replica(s)/node = "
                    f"{ap.nodes_for_max_plus_surge} node(s)")

    # ---- model server: the startup probe must cover the planner's cold load (components/serving/probes.py) ----
    for loc, msg in model_server_issues(cfg, pool_plans):
        add(loc, msg)

    # ---- platform (gke): registry, weights bucket, Hyperdisk ML, prod protection (infra/config/gke.py) ----
    for loc, msg in platform_issues(cfg):
        add(loc, msg)

    # ---- observability: notification channels belong to this project; prod must notify someone ----
    channels = cfg.observability.alerts.notification_channels
    for i, channel in enumerate(channels):
        owner = channel.split("/")[1]
        if owner != cfg.project:
            add(("observability", "alerts", "notification_channels"),
                f"[{i}] {channel!r} is in project {owner!r}; alert policies of {cfg.project!r} can only notify its own channels")
    if cfg.environment == "prod" and not channels:
        add(("observability", "alerts", "notification_channels"),
            "prod must name at least one notification channel: an alert nobody receives is not an alert")

    # ---- gateway: picker redundancy, KV metric = what vLLM exports, IAP in prod (infra/config/gateway.py) ----
    for loc, msg in gateway_issues(cfg):
        add(loc, msg)
    return issues


def compatibility_differences(a: ReleaseIdentity, b: ReleaseIdentity) -> list[str]:
    """Fields that make two releases cache-incompatible (different base model or serving configuration)."""
    out = []
    if a.model.resolved() != b.model.resolved() or a.model.catalogue != b.model.catalogue:
        out.append("base model")
    for f in ("quantization", "dtype", "kv_cache_dtype", "tensor_parallel_size", "max_model_len"):
        if getattr(a, f) != getattr(b, f):
            out.append(f)
    return out


def pool_inputs(cfg: StackConfig, role: str, pool: ServingPool) -> capacity.PoolInputs:
    rel = cfg.release(pool.release)
    acc = cfg.accelerators[pool.accelerator]
    params, layers, kv_heads, head_dim = rel.model.resolved()
    return capacity.PoolInputs(
        role=role, release=rel.release, accelerator=pool.accelerator,
        geometry=capacity.Geometry(params, layers, kv_heads, head_dim, rel.bytes_per_weight, rel.bytes_per_kv_element),
        tensor_parallel_size=rel.tensor_parallel_size, max_model_len=rel.max_model_len,
        gpu_memory_gib=acc.gpu_memory_gib, gpus_per_node=acc.gpus_per_node, node_hourly_usd=acc.node_hourly_usd,
        gpu_memory_utilization=pool.gpu_memory_utilization, runtime_overhead_gib=pool.runtime_overhead_gib,
        arrival_rps=cfg.contract.peak_arrival_rate_rps * pool.weight / 100,
        mean_prompt_tokens=cfg.contract.prompt_tokens.mean, mean_output_tokens=cfg.contract.output_tokens.mean,
        target_utilization=cfg.contract.target_utilization,
        load_throughput_mib_s=pool.loading.throughput_mib_s, engine_init_seconds=pool.loading.engine_init_seconds,
        theta_o=pool.measured.output_tokens_per_s if pool.measured else None,
        theta_i=pool.measured.input_tokens_per_s if pool.measured else None,
        min_replicas=pool.min_replicas, max_replicas=pool.max_replicas,
    )


def load_stack_config(raw: Mapping[str, Any], base_dir: Path) -> StackConfig:
    """Validate a whole stack configuration; raise ConfigError listing every problem with its key path."""
    issues: list[ConfigIssue] = []
    doc = build_document(raw, base_dir, issues)
    try:
        cfg = StackConfig.model_validate(doc)
    except ValidationError as err:
        raise ConfigError(issues + _issues_from_validation(err)) from None
    issues += semantic_issues(cfg)
    if issues:
        raise ConfigError(issues)
    return cfg
