"""What the policies need to know about an endpoint-picker Helm release: its name, pods, scraped metric, image and
EndpointPickerConfig (the GAIE ``inferencepool`` charts keep the picker's values under ``inferenceExtension``, the
llm-d Router's ``llm-d-router-gateway`` chart under ``router.epp``)."""

from __future__ import annotations

import json
import re
from typing import Any

from . import _naming as naming
from ._common import HELM_CHART, UNKNOWN, Res, get, is_serving_deployment, pod_labels, selector_matches

#: KV-cache metric the EPP scrapes when not told otherwise: GAIE <= v1.2.x defaults to the old vLLM name,
#: v1.3.0+ (and the llm-d-router charts) to the new one.
OLD_KV_METRIC = naming.VLLM_KV_CACHE_USAGE_LEGACY
NEW_KV_METRIC = naming.VLLM_KV_CACHE_USAGE
KV_FLAG = "kv-cache-usage-percentage-metric"


def is_epp_chart(res: Res) -> bool:
    values = res.props.get("values")
    return (
        res.type == HELM_CHART
        and isinstance(values, dict)
        and ("inferenceExtension" in values or isinstance(get(values, "router", "epp"), dict))
    )


def release_name(chart: Res) -> str:
    name = chart.props.get("name")
    return name if isinstance(name, str) and name else chart.name


def chart_namespace(chart: Res) -> Any:
    return chart.props.get("namespace") or "default"


def pod_name_candidates(chart: Res) -> set[str]:
    """Names the chart gives the EPP Deployment/pods (``<release>-epp`` in the GAIE charts; the release itself
    when the release is already named ``…-epp``)."""
    rel = release_name(chart)
    return {rel, f"{rel}-epp"}


def is_llm_d_router(chart: Res) -> bool:
    name = chart.props.get("chart")
    return isinstance(name, str) and "llm-d-router" in name


def epp_values(chart: Res) -> Any:
    """The picker's own values block: ``router.epp`` (llm-d Router) or ``inferenceExtension`` (GAIE)."""
    values = chart.props.get("values") or {}
    if is_llm_d_router(chart) or "inferenceExtension" not in values:
        return get(values, "router", "epp", default={})
    return get(values, "inferenceExtension", default={})


def epp_values_key(chart: Res) -> str:
    return "router.epp" if is_llm_d_router(chart) else "inferenceExtension"


def picker_config(chart: Res) -> Any:
    """The EndpointPickerConfig the values hand the picker (``pluginsCustomConfig[pluginsConfigFile]``, JSON as this
    program writes it); None when the chart's own default config applies or the text is not JSON."""
    epp = epp_values(chart)
    if epp is UNKNOWN or not isinstance(epp, dict):
        return UNKNOWN if epp is UNKNOWN else None
    name, files = epp.get("pluginsConfigFile"), epp.get("pluginsCustomConfig")
    if name is UNKNOWN or files is UNKNOWN:
        return UNKNOWN
    if not isinstance(files, dict) or name not in files:
        return None
    text = files[name]
    if text is UNKNOWN:
        return UNKNOWN
    try:
        return json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None


def pool_selector(chart: Res) -> Any:
    values = chart.props.get("values") or {}
    sel = get(values, "inferencePool", "modelServers", "matchLabels")
    if sel is None:
        sel = get(values, "router", "modelServers", "matchLabels")
    return sel


def served_deployments(chart: Res, resources: list[Res]) -> list[Res]:
    """Serving Deployments the picker routes to: by the chart's pool selector, else by name (``vllm-<role>``)."""
    deps = [r for r in resources if is_serving_deployment(r) and (r.namespace or "default") == chart_namespace(chart)]
    sel = pool_selector(chart)
    if isinstance(sel, dict) and sel:
        return [d for d in deps if selector_matches({"matchLabels": sel}, pod_labels(d))]
    pool = watched_pool(chart)
    base = pool[:-4] if pool.endswith("-epp") else pool
    return [d for d in deps if d.k8s_name == base]


def watched_pool(chart: Res) -> str:
    """The InferencePool the picker watches: its ``pool-name`` flag (rendered after the chart's own
    ``--pool-name <release>``, so it wins), else the release name (llm-d-router v0.10.0 and GAIE charts alike)."""
    extra = flags(chart)
    name = extra.get("pool-name") if isinstance(extra, dict) else None
    return name if isinstance(name, str) and name else release_name(chart)


def flags(chart: Res) -> Any:
    """The chart's extra EPP flags as a dict (v1.1.0 lists of {name, value}; v1.5.0 / llm-d maps)."""
    values = chart.props.get("values") or {}
    raw = get(values, "inferenceExtension", "flags")
    if raw is None:
        raw = get(values, "router", "epp", "flags")
    if raw is UNKNOWN:
        return UNKNOWN
    if isinstance(raw, list):
        return {f.get("name"): f.get("value") for f in raw if isinstance(f, dict)}
    return raw if isinstance(raw, dict) else {}


def _version_tuple(text: Any) -> tuple[int, ...] | None:
    m = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", text) if isinstance(text, str) else None
    return tuple(int(g or 0) for g in m.groups()) if m else None


def extractor_kv_metric(chart: Res) -> Any:
    """The llm-d Router's KV metric: the ``vllm`` engine mapping's ``kvUsageSpec`` of its ``core-metrics-extractor``
    (pkg/epp/framework/plugins/datalayer/extractor/metrics/factories.go); None when the config does not state it."""
    conf = picker_config(chart)
    if conf is UNKNOWN or not isinstance(conf, dict):
        return conf if conf is UNKNOWN else None
    for plugin in conf.get("plugins") or []:
        if isinstance(plugin, dict) and plugin.get("type") == "core-metrics-extractor":
            for engine in get(plugin, "parameters", "engineConfigs", default=[]) or []:
                if isinstance(engine, dict) and engine.get("name") == "vllm":
                    return engine.get("kvUsageSpec")
    return None


def default_kv_metric(chart: Res) -> str | None:
    """The metric name the chart's EPP uses when no flag overrides it; None if the version is unknown."""
    if is_llm_d_router(chart):
        return NEW_KV_METRIC
    version = _version_tuple(chart.props.get("version"))
    if version is None:
        return None
    return OLD_KV_METRIC if version < (1, 3, 0) else NEW_KV_METRIC


def accepted_kv_metrics(vllm_version: Any) -> tuple[str, ...] | None:
    """Names a vLLM version exports (vLLM vllm/v1/metrics/loggers.py): <= 0.9.1 old only; 0.9.2-0.10.x both; >= 0.11 the new name (the
    old one is hidden in 0.11 and gone from 0.12)."""
    v = _version_tuple(vllm_version)
    if v is None:
        return None
    if v < (0, 9, 2):
        return (OLD_KV_METRIC,)
    if v < (0, 11, 0):
        return (NEW_KV_METRIC, OLD_KV_METRIC)
    return (NEW_KV_METRIC,)


def epp_deployment_labels(chart: Res) -> list[dict[str, str]]:
    """Label sets the GAIE / llm-d charts put on EPP pods, for matching PodDisruptionBudgets."""
    out = []
    for n in sorted(pod_name_candidates(chart)):
        out += [
            {"inferencepool": n},
            {"app.kubernetes.io/name": n},
            {"epp": n},
            {"llm-d-router-standalone": n},
            {"llm-d-router-gateway": n},
        ]
    return out
