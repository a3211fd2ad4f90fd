"""epp-kv-metric-matches-vllm: the endpoint picker scrapes a KV-cache metric the served vLLM version exports.

vLLM renamed ``vllm:gpu_cache_usage_perc`` to ``vllm:kv_cache_usage_perc`` (deprecated 0.9.2, hidden 0.11, gone
0.12), while GAIE charts <= v1.2.x still default the picker to the old name (vLLM vllm/v1/metrics/loggers.py). The
llm-d Router (v0.10.0) reads the gauge through its data-layer ``core-metrics-extractor``, whose ``vllm`` engine
mapping (``kvUsageSpec``) names it in the picker's EndpointPickerConfig. A mismatch does not fail loudly: the picker
just sees no KV pressure and routes blind.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import Severity, StackValidationPolicy

from ._common import DEPLOYMENT, HELM_CHART, UNKNOWN, VERSION_LABEL, Res, pod_labels, stack_validator
from ._epp import (
    KV_FLAG,
    accepted_kv_metrics,
    default_kv_metric,
    extractor_kv_metric,
    flags,
    is_epp_chart,
    is_llm_d_router,
    release_name,
    served_deployments,
)

NAME = "epp-kv-metric-matches-vllm"
SEVERITY = Severity.HIGH
FRAMEWORK = None
REMEDIATION = (
    "Point the picker at the metric the pool's vLLM version exports (vllm:kv_cache_usage_perc from vLLM 0.11 on): "
    f"the core-metrics-extractor's vllm kvUsageSpec (llm-d Router), or flag {KV_FLAG} (GAIE charts)."
)


def check(resources: list[Res], _cfg: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for chart in sorted((r for r in resources if is_epp_chart(r)), key=lambda r: r.urn):
        if is_llm_d_router(chart):
            metric, source, fix = extractor_kv_metric(chart), "core-metrics-extractor vllm kvUsageSpec", "kvUsageSpec"
        else:
            fl = flags(chart)
            if fl is UNKNOWN:
                continue
            metric, source, fix = fl.get(KV_FLAG), f"flag {KV_FLAG}", f"flag {KV_FLAG}"
        if metric is UNKNOWN:
            continue
        if metric is None:
            metric, source = default_kv_metric(chart), f"chart {chart.props.get('version')} default"
        if metric is None:
            yield (
                chart.urn,
                (
                    f"endpoint picker {release_name(chart)}: chart version {chart.props.get('version')!r} is "
                    f"unknown, so its KV-cache metric is too: set flag {KV_FLAG} explicitly"
                ),
            )
            continue
        for dep in sorted(served_deployments(chart, resources), key=lambda d: d.k8s_name):
            version = pod_labels(dep).get(VERSION_LABEL)
            if version is UNKNOWN:
                continue
            accepted = accepted_kv_metrics(version)
            if accepted is None:
                yield (
                    chart.urn,
                    (
                        f"Deployment {dep.k8s_name} has no {VERSION_LABEL} label with its vLLM version: the "
                        "endpoint picker's KV-cache metric cannot be checked"
                    ),
                )
            elif metric not in accepted:
                yield (
                    chart.urn,
                    (
                        f"endpoint picker {release_name(chart)} reads KV-cache usage from {metric!r} "
                        f"({source}) but vLLM {version} on {dep.k8s_name} exports {accepted[0]!r}: set "
                        f"{fix} to {accepted[0]!r}"
                    ),
                )


POLICY = StackValidationPolicy(
    name=NAME,
    description="The endpoint picker's KV-cache metric name matches the pool's vLLM version.",
    validate=stack_validator(check, (DEPLOYMENT, HELM_CHART)),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["routing", "observability"],
)
