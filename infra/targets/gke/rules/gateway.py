"""Rules of the GKE Inference Gateway section: picker redundancy, flow control in staging and prod, the KV metric
the picker scrapes is one the pools' vLLM exports, identity-aware access in prod, and Model Armor's region and
latency budget."""

from __future__ import annotations

from collections.abc import Iterator

from components.gateway.charts import vllm_kv_cache_metrics
from infra.config.stack import StackConfig
from infra.rules import Finding, rule

from ..config import TARGET, gateway_section
from ..config.gateway import MODEL_ARMOR_TEMPLATE_RE
from ..planning import gke_pools


@rule(target=TARGET, needs={"gateway", "environment"})
def picker_redundancy(cfg: StackConfig) -> Iterator[Finding]:
    gw = gateway_section(cfg)
    if gw is None:
        return
    if cfg.environment in ("staging", "prod") and gw.epp.replicas < 2:
        yield (
            ("gateway", "epp", "replicas"),
            f"{cfg.environment} runs the endpoint picker redundantly (>= 2 replicas), got {gw.epp.replicas}",
        )
    if gw.epp.failure_mode == "FailClose" and gw.epp.replicas < 2:
        yield (
            ("gateway", "epp", "failure_mode"),
            "FailClose with a single picker replica turns every picker restart into an outage",
        )


@rule(target=TARGET, needs={"gateway", "environment"})
def flow_control_in_staging_and_prod(cfg: StackConfig) -> Iterator[Finding]:
    gw = gateway_section(cfg)
    if gw is not None and cfg.environment in ("staging", "prod") and not gw.epp.flow_control:
        yield (
            ("gateway", "epp", "flow_control"),
            f"{cfg.environment} runs the picker's flow control (bounded queues while saturated, 429 beyond them); "
            "without it queued interactive requests have no wait bound",
        )


@rule(target=TARGET, needs={"gateway", "environment"})
def prod_requires_iap(cfg: StackConfig) -> Iterator[Finding]:
    gw = gateway_section(cfg)
    if gw is not None and cfg.environment == "prod" and not gw.iap.enabled:
        yield ("gateway", "iap", "enabled"), "prod requires identity-aware access (IAP) on the backends"


@rule(target=TARGET, needs={"gateway", "serving", "releases"})
def picker_scrapes_exported_kv_metric(cfg: StackConfig) -> Iterator[Finding]:
    gw = gateway_section(cfg)
    if gw is None:
        return
    ids = {r.release for r in cfg.releases}
    for role, pool in gke_pools(cfg):
        if pool.release not in ids:
            continue  # reported by the serving rules
        rel = cfg.release(pool.release)
        exported = vllm_kv_cache_metrics(rel.vllm_version)
        if gw.epp.kv_cache_metric not in exported:
            yield (
                ("gateway", "epp", "kv_cache_metric"),
                f"{gw.epp.kv_cache_metric!r} is not exported by vLLM {rel.vllm_version} ({role} pool, release "
                f"{rel.release!r}), which exports {', '.join(exported)}",
            )


@rule(target=TARGET, needs={"gateway", "region", "contract"})
def model_armor_in_region_and_budget(cfg: StackConfig) -> Iterator[Finding]:
    gw = gateway_section(cfg)
    if gw is None or gw.model_armor is None:
        return
    m = MODEL_ARMOR_TEMPLATE_RE.match(gw.model_armor.template)
    if m and m.group("location") != cfg.region:
        yield (
            ("gateway", "model_armor", "template"),
            f"template is in {m.group('location')!r}; the regional gateway calls "
            f"modelarmor.{cfg.region}.rep.googleapis.com, so it must be in {cfg.region!r}",
        )
    if m and gw.model_armor.timeout_ms >= cfg.contract.ttft_p95_ms:
        yield (
            ("gateway", "model_armor", "timeout_ms"),
            f"{gw.model_armor.timeout_ms} ms screening timeout leaves no TTFT budget "
            f"(contract.ttft_p95_ms = {cfg.contract.ttft_p95_ms})",
        )
