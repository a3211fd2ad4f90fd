"""GKE Inference Gateway : upstream-schema validation of every rendered custom resource, the derived
values (pool selectors, weights, backend timeout, picker KV metric, chart pin), and the gateway config rules."""

from __future__ import annotations

import copy
import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.gateway import chart_filter
from components.gateway import objects as o
from components.gateway.charts import (
    EPP_CHARTS,
    INFERENCEPOOL_CHART,
    KV_METRIC_CURRENT,
    KV_METRIC_LEGACY,
    EppChartProfile,
    vllm_kv_cache_metrics,
)
from components.gateway.component import CHART_DROPPED_KINDS, CHART_FILTER_SCRIPT
from infra.config import ConfigError
from infra.offline import cli
from infra.offline.inventory import Inventory
from infra.offline.planrun import PlanRun, summary
from infra.offline.stackfile import ROOT, read_stack_file
from infra.resolve import ResolvedStack
from infra.targets.gke.compose import gateway_spec
from infra.targets.gke.config import gateway_section
from infra.targets.gke.planning import gke_part
from tests.conftest import REFERENCE, resources, serving_roles
from tests.crd_schema import is_custom_resource, schema_known, unimplemented_rules, validate_custom_resource

from .conftest import load_config, reference

#: Kinds this issue renders: their schemas' CEL rules must all be implemented, so none goes unchecked.
GATEWAY_KINDS = {
    "Gateway",
    "HTTPRoute",
    "InferencePool",
    "InferenceObjective",
    "HealthCheckPolicy",
    "GCPBackendPolicy",
    "GCPGatewayPolicy",
    "GCPTrafficExtension",
}


@pytest.fixture(autouse=True)
def _reference_present():
    reference("gateway-api")


def effective_kv_metric(profile: EppChartProfile, values: dict[str, Any]) -> str:
    """The KV metric a picker rendered from ``values`` scrapes: the flag when set, else the EPP default."""
    flags = values["inferenceExtension"]["flags"]
    items = {f["name"]: f["value"] for f in flags} if isinstance(flags, list) else dict(flags)
    return str(items.get("kv-cache-usage-percentage-metric", profile.default_kv_metric))


def manifests(inventory: dict[str, Any]) -> list[dict[str, Any]]:
    return list(Inventory.from_dict(inventory).manifests().values())


def find(inventory: dict[str, Any], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [m for m in manifests(inventory) if m["kind"] == kind and (name is None or m["metadata"]["name"] == name)]


def only(inventory: dict[str, Any], kind: str, name: str) -> dict[str, Any]:
    found = find(inventory, kind, name)
    assert len(found) == 1, f"{kind} {name}: {len(found)} found"
    return found[0]


# ---- schemas --------------------------------------------------------------------------------------------------


def test_every_custom_resource_of_every_stack_validates(plans):
    checked = 0
    for stack, (_, _, inv) in plans.items():
        for obj in manifests(inv):
            if not is_custom_resource(obj):
                continue
            where = f"{stack}: {obj['kind']} {obj['metadata']['name']}"
            assert schema_known(obj), f"{where}: no upstream schema registered for {obj['apiVersion']}"
            assert validate_custom_resource(obj) == [], where
            if obj["kind"] in GATEWAY_KINDS:
                assert unimplemented_rules(obj) == [], where
            checked += 1
    kinds = {m["kind"] for _, _, inv in plans.values() for m in manifests(inv)}
    assert GATEWAY_KINDS <= kinds, GATEWAY_KINDS - kinds
    assert checked > 0


def _prod_pool(plans) -> dict[str, Any]:
    return copy.deepcopy(only(plans["prod"][2], "InferencePool", "vllm-stable"))


def test_broken_inference_pool_is_rejected(plans):
    nine = _prod_pool(plans)
    nine["spec"]["targetPorts"] = [{"number": 8000 + i} for i in range(9)]
    assert any("targetPorts" in e and "is too long" in e for e in validate_custom_resource(nine))

    no_selector = _prod_pool(plans)
    del no_selector["spec"]["selector"]
    assert any("'selector' is a required property" in e for e in validate_custom_resource(no_selector))

    dup = _prod_pool(plans)
    dup["spec"]["targetPorts"] = [{"number": 8000}, {"number": 8000}]
    assert any("port number must be unique" in e for e in validate_custom_resource(dup))

    no_port = _prod_pool(plans)
    del no_port["spec"]["endpointPickerRef"]["port"]
    assert any("port is required when kind is 'Service'" in e for e in validate_custom_resource(no_port))

    # kind defaults to Service, so the CEL rule applies to a ref that omits it (defaults precede CEL)
    defaulted = _prod_pool(plans)
    del defaulted["spec"]["endpointPickerRef"]["port"], defaulted["spec"]["endpointPickerRef"]["kind"]
    assert any("port is required" in e for e in validate_custom_resource(defaulted))

    typo = _prod_pool(plans)
    typo["spec"]["endpointPickerRef"]["failuremode"] = "FailOpen"
    assert any("Additional properties are not allowed" in e for e in validate_custom_resource(typo))

    bad_mode = _prod_pool(plans)
    bad_mode["spec"]["endpointPickerRef"]["failureMode"] = "FailClosed"  # the llm-d chart's spelling
    assert any("FailClosed" in e for e in validate_custom_resource(bad_mode))


def test_broken_routes_and_policies_are_rejected(plans):
    inv = plans["prod"][2]
    route = copy.deepcopy(only(inv, "HTTPRoute", o.API_ROUTE_NAME))
    ref = route["spec"]["rules"][0]["backendRefs"][0]
    service_ref = {"group": "", "kind": "Service", "name": "vllm-stable"}
    route["spec"]["rules"][0]["backendRefs"] = [service_ref]
    assert any(
        e.endswith("backendRefs[0]: Must have port for Service reference") for e in validate_custom_resource(route)
    )
    route["spec"]["rules"][0]["backendRefs"] = [dict(ref, name=f"pool-{i}") for i in range(17)]
    assert any("is too long" in e for e in validate_custom_resource(route))

    hc = copy.deepcopy(only(inv, "HealthCheckPolicy", "vllm-stable"))
    hc["spec"]["default"]["timeoutSec"] = hc["spec"]["default"]["checkIntervalSec"] + 1
    assert any(
        e.endswith(".spec.default: timeOutSec cannot exceed checkIntervalSec") for e in validate_custom_resource(hc)
    )

    bp = copy.deepcopy(only(inv, "GCPBackendPolicy", "vllm-stable"))
    bp["spec"]["default"]["sessionAffinity"] = {"type": "CLIENT_IP"}
    assert any("sessionAffinity cannot be configured for InferencePool" in e for e in validate_custom_resource(bp))


def test_unknown_custom_resource_is_reported():
    obj = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {}}
    assert validate_custom_resource(obj) == [
        "no known schema for example.com/v1 Widget (register it in tests/crd_schema.py SCHEMA_FILES)"
    ]


def test_inference_pool_is_checked_against_every_ga_bundle():
    from tests.crd_schema import SCHEMA_FILES

    files = SCHEMA_FILES[("inference.networking.k8s.io/v1", "InferencePool")]
    assert {f.split("/")[1] for f in files} == {"v1.1.0", "v1.5.0", "v1.6.0"}
    assert all((REFERENCE / f).is_file() for f in files)


# ---- derived values -----------------------------------------------------------------------------------------


def _pod_labels(inv: dict[str, Any], role: str) -> dict[str, str]:
    dep = only(inv, "Deployment", f"vllm-{role}")
    return dep["spec"]["template"]["metadata"]["labels"]


def test_each_pool_selects_its_deployments_pods_whatever_the_release(plans):
    for stack, (cfg, _, inv) in plans.items():
        roles = [r for r, _ in cfg.pools()]
        for role, _pool in cfg.pools():
            sel = only(inv, "InferencePool", f"vllm-{role}")["spec"]["selector"]["matchLabels"]
            # The Deployment's own immutable selector: no release label, so a release change never empties it.
            assert sel == only(inv, "Deployment", f"vllm-{role}")["spec"]["selector"]["matchLabels"], stack
            assert sel == {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": f"vllm-{role}"}
            for other in roles:
                labels = _pod_labels(inv, other)
                selected = all(labels.get(k) == v for k, v in sel.items())
                assert selected == (other == role), f"{stack}: pool {role} vs pods of {other}"


def test_pool_points_at_its_own_picker_with_explicit_failure_mode(plans):
    for _stack, (cfg, _, inv) in plans.items():
        for role, _ in cfg.pools():
            ref = only(inv, "InferencePool", f"vllm-{role}")["spec"]["endpointPickerRef"]
            assert ref == {
                "group": "",
                "kind": "Service",
                "name": f"vllm-{role}-epp",
                "port": {"number": 9002},
                "failureMode": cfg.gateway.epp.failure_mode,
            }
            chart = _chart(inv, role)
            # the chart names its Service <release>-epp and its picker watches --pool-name <release>
            assert f"{chart['inputs']['name']}-epp" == ref["name"]
            assert chart["inputs"]["name"] == f"vllm-{role}"


def test_route_weights_equal_config_and_dark_canary_stays_attached(plans):
    for stack, (cfg, plan, inv) in plans.items():
        route = only(inv, "HTTPRoute", o.API_ROUTE_NAME)
        # the weighted rule first; one rule per co-hosted model after it (tests/test_cohosting_gke.py)
        models = sum(len(g.models) for g in gke_part(plan).cohosted().values())
        assert len(route["spec"]["rules"]) == 1 + models, stack
        rule = route["spec"]["rules"][0]
        weights = {b["name"]: b["weight"] for b in rule["backendRefs"]}
        assert weights == {f"vllm-{r}": p.weight for r, p in cfg.pools()}, stack
        assert all(
            b["group"] == "inference.networking.k8s.io" and b["kind"] == "InferencePool" and "port" not in b
            for b in rule["backendRefs"]
        )
        assert sum(weights.values()) == 100
        assert {m["path"]["value"] for m in rule["matches"]} == {
            "/v1/chat/completions",
            "/v1/completions",
            "/v1/models",
        }
        assert route["spec"]["parentRefs"][0]["sectionName"] == "https"
    # dev and prod run a dark canary: attached at weight 0
    assert {
        b["name"]: b["weight"]
        for b in only(plans["prod"][2], "HTTPRoute", o.API_ROUTE_NAME)["spec"]["rules"][0]["backendRefs"]
    }["vllm-canary"] == 0


def test_backend_timeout_is_the_stream_bound(plans):
    # ceil((TTFT + max_output x ITL) / 1000)
    expected = {"dev": 84, "staging": 207, "prod": 207, "dev-cohost-gke": 84}
    for stack, (cfg, plan, inv) in plans.items():
        bound = math.ceil((cfg.contract.ttft_p95_ms + cfg.contract.max_output_tokens * cfg.contract.itl_p95_ms) / 1000)
        assert bound == expected[stack]
        for role in serving_roles(cfg, plan):
            d = only(inv, "GCPBackendPolicy", f"vllm-{role}")["spec"]["default"]
            assert d["timeoutSec"] == bound
            assert d["connectionDraining"]["drainingTimeoutSec"] == bound
            assert d["logging"] == {
                "enabled": True,
                "sampleRate": round(cfg.gateway.request_log_sample_rate * 1_000_000),
            }
            assert ("iap" in d) == cfg.gateway.iap.enabled


def test_model_server_grace_covers_the_backend_drain(plans):
    """A pod leaving the pool keeps its streams for drainingTimeoutSec; the kubelet must not kill it sooner."""
    for stack, (cfg, _, inv) in plans.items():
        for role, _ in cfg.pools():
            drain = only(inv, "GCPBackendPolicy", f"vllm-{role}")["spec"]["default"]["connectionDraining"]
            grace = only(inv, "Deployment", f"vllm-{role}")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
            assert grace >= drain["drainingTimeoutSec"], stack


def test_health_check_targets_vllm_health_on_the_serving_port(plans):
    for _stack, (cfg, _, inv) in plans.items():
        for role, _ in cfg.pools():
            hc = only(inv, "HealthCheckPolicy", f"vllm-{role}")["spec"]
            assert hc["targetRef"] == {
                "group": "inference.networking.k8s.io",
                "kind": "InferencePool",
                "name": f"vllm-{role}",
            }
            assert hc["default"]["config"] == {
                "type": "HTTP",
                "httpHealthCheck": {"requestPath": "/health", "port": 8000},
            }
            pool = only(inv, "InferencePool", f"vllm-{role}")
            assert hc["default"]["config"]["httpHealthCheck"]["port"] in [
                p["number"] for p in pool["spec"]["targetPorts"]
            ]


def _chart(inv: dict[str, Any], role: str) -> dict[str, Any]:
    (chart,) = [r for r in resources(inv, "kubernetes:helm.sh/v4:Chart") if r["name"] == f"vllm-{role}-epp"]
    return chart


def test_picker_kv_metric_equals_what_vllm_exports(plans):
    for _stack, (cfg, _, inv) in plans.items():
        profile = EPP_CHARTS[cfg.gateway.epp.version]
        for role, pool in cfg.pools():
            values = _chart(inv, role)["inputs"]["values"]
            version = cfg.release(pool.release).vllm_version
            assert effective_kv_metric(profile, values) == vllm_kv_cache_metrics(version)[0] == KV_METRIC_CURRENT


def test_chart_resource_carries_pinned_version_and_values(plans):
    for stack, (cfg, plan, inv) in plans.items():
        charts = resources(inv, "kubernetes:helm.sh/v4:Chart")
        assert len(charts) == len(serving_roles(cfg, plan))
        for role in serving_roles(cfg, plan):
            c = _chart(inv, role)["inputs"]
            assert c["chart"] == INFERENCEPOOL_CHART and c["version"] == "v1.5.0"
            assert c["namespace"] == f"llm-serving-{role}" and c["skipCrds"] is True
            v = c["values"]
            assert v["provider"] == {"name": "gke"}
            ext = v["inferenceExtension"]
            assert ext["image"] == {"tag": "v1.5.0", "pullPolicy": "IfNotPresent"}
            assert ext["monitoring"]["prometheus"] == {"enabled": True, "auth": {"enabled": True}}
            assert ext["failureMode"] == cfg.gateway.epp.failure_mode
            assert v["inferencePool"]["modelServers"]["matchLabels"] == {
                "app.kubernetes.io/name": "vllm",
                "app.kubernetes.io/instance": f"vllm-{role}",
            }
            if stack in ("staging", "prod"):
                assert ext["replicas"] >= 2
            drops = c["postRenderer"]["args"]
            assert drops[:2] == ["-c", CHART_FILTER_SCRIPT.read_text()] and c["postRenderer"]["command"] == "python3"
            assert {drops[i + 1] for i, a in enumerate(drops) if a == "--drop-kind"} == set(CHART_DROPPED_KINDS)
    cfg, plan, inv = plans["prod"]
    run = PlanRun(ResolvedStack("prod", cfg, plan), Inventory.from_dict(inv))
    assert "kubernetes:helm.sh/v4:Chart" in summary(run, run.inventory.manifests())


def test_pickers_spread_over_nodes_without_a_pdb_and_reach_their_model_servers(plans):
    """A leader-elected picker gets no PodDisruptionBudget (only the leader is ready, so none could ever allow
    its eviction); its replicas repel each other per node, and the model servers' NetworkPolicy admits the chart's
    picker pods by the chart's own pod label."""
    template = reference("charts", "inferencepool", "v1.5.0", "epplib", "templates", "_deployment.yaml").read_text()
    assert "service: readiness" in template and "--ha-enable-leader-election" in template
    for stack, (cfg, _, inv) in plans.items():
        for role, _ in cfg.pools():
            assert find(inv, "PodDisruptionBudget", f"vllm-{role}-epp") == []
            (chart,) = [
                r for r in resources(inv, "kubernetes:helm.sh/v4:Chart") if r["inputs"]["name"] == f"vllm-{role}"
            ]
            anti = chart["inputs"]["values"]["inferenceExtension"]["affinity"]["podAntiAffinity"]
            (term,) = anti["preferredDuringSchedulingIgnoredDuringExecution"]
            assert term["podAffinityTerm"] == {
                "topologyKey": "kubernetes.io/hostname",
                "labelSelector": {"matchLabels": {"inferencepool": f"vllm-{role}-epp"}},
            }
            netpol = only(inv, "NetworkPolicy", f"vllm-{role}")["spec"]["ingress"]
            peers = [p.get("podSelector", {}).get("matchLabels") for rule in netpol for p in rule["from"]]
            assert {"inferencepool": f"vllm-{role}-epp"} in peers, f"{stack}: picker cannot scrape vllm-{role}"


def test_chart_has_no_pdb_of_its_own():
    for version in EPP_CHARTS:
        chart_dir = reference("charts", "inferencepool", version)
        texts = [p.read_text() for p in chart_dir.rglob("*") if p.is_file()]
        assert not any("PodDisruptionBudget" in t for t in texts)


def test_every_pool_owns_every_class_under_its_bare_name(plans):
    """The picker looks a class up by name in its pool's namespace and drops objectives naming another pool: each
    pool's namespace must hold one objective per class, named as the class, pointing at that pool."""
    for stack, (cfg, plan, inv) in plans.items():
        objs = find(inv, "InferenceObjective")
        assert all(x["apiVersion"] == "inference.networking.x-k8s.io/v1alpha2" for x in objs)
        for role in serving_roles(cfg, plan):
            mine = {
                x["metadata"]["name"]: (x["spec"]["priority"], x["spec"]["poolRef"]["name"])
                for x in objs
                if x["metadata"]["namespace"] == f"llm-serving-{role}"
            }
            assert mine == {c.name: (c.priority, f"vllm-{role}") for c in cfg.contract.priority_classes}, stack
        assert len(objs) == len(cfg.contract.priority_classes) * len(serving_roles(cfg, plan))


def test_each_pool_lives_in_its_own_namespace_and_admits_the_api_route(plans):
    for stack, (cfg, _, inv) in plans.items():
        route = only(inv, "HTTPRoute", o.API_ROUTE_NAME)
        assert route["metadata"]["namespace"] == "llm-serving"
        refs = {b["name"]: b["namespace"] for b in route["spec"]["rules"][0]["backendRefs"]}
        assert refs == {f"vllm-{r}": f"llm-serving-{r}" for r, _ in cfg.pools()}
        for role, _ in cfg.pools():
            ns = f"llm-serving-{role}"
            for kind in ("InferencePool", "HealthCheckPolicy", "GCPBackendPolicy", "Deployment"):
                assert only(inv, kind, f"vllm-{role}")["metadata"]["namespace"] == ns, (stack, kind)
            (grant,) = [g for g in find(inv, "ReferenceGrant") if g["metadata"]["namespace"] == ns]
            assert grant["apiVersion"] == "gateway.networking.k8s.io/v1beta1"
            # Only the API route's namespace, only HTTPRoutes, only this pool's InferencePool.
            assert grant["spec"] == {
                "from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "llm-serving"}],
                "to": [{"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": f"vllm-{role}"}],
            }


def test_gateway_front(plans):
    for _stack, (cfg, _, inv) in plans.items():
        gw = only(inv, "Gateway", o.GATEWAY_NAME)["spec"]
        assert gw["gatewayClassName"] == cfg.gateway.gateway_class
        https, http = gw["listeners"]
        assert (https["protocol"], https["port"], http["protocol"], http["port"]) == ("HTTPS", 443, "HTTP", 80)
        assert list(https["tls"]["options"].values()) == [",".join(cfg.gateway.certificate.names)]
        (addr,) = resources(inv, "gcp:compute/address:Address")
        assert gw["addresses"] == [{"type": "NamedAddress", "value": addr["inputs"]["name"]}]
        assert addr["inputs"]["addressType"] == (
            "INTERNAL" if cfg.gateway.gateway_class == "gke-l7-rilb" else "EXTERNAL"
        )
        (ssl,) = resources(inv, "gcp:compute/regionSslPolicy:RegionSslPolicy")
        assert ssl["inputs"]["minTlsVersion"] == "TLS_1_2"
        policy = only(inv, "GCPGatewayPolicy", o.GATEWAY_NAME)["spec"]
        assert policy["default"]["sslPolicy"] == ssl["inputs"]["name"]
        redirect = only(inv, "HTTPRoute", o.REDIRECT_ROUTE_NAME)["spec"]
        assert redirect["parentRefs"][0]["sectionName"] == "http"
        assert redirect["rules"] == [
            {"filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https", "statusCode": 301}}]}
        ]
        assert "backendRefs" not in redirect["rules"][0]


def test_iap_and_model_armor_in_prod(plans):
    cfg, _, inv = plans["prod"]
    members = sorted(r["inputs"]["member"] for r in resources(inv, "gcp:iap/webIamMember:WebIamMember"))
    assert members == sorted(cfg.gateway.iap.members)
    ext = only(inv, "GCPTrafficExtension", o.MODEL_ARMOR_EXTENSION_NAME)["spec"]
    (chain,) = ext["extensionChains"]
    (e,) = chain["extensions"]
    assert e["googleAPIServiceName"] == f"modelarmor.{cfg.region}.rep.googleapis.com"
    settings = json.loads(e["metadata"]["model_armor_settings"])
    # Requests carry the public name, responses the release id: both are screened.
    assert {s["model"] for s in settings} == {p.release for _, p in cfg.pools()} | {cfg.serving.model_name}
    assert e["failOpen"] is False
    assert not find(plans["dev"][2], "GCPTrafficExtension")


# ---- vLLM metric names and the picker flag ---------------------------------------------------------------------


def test_vllm_kv_metric_by_version():
    assert vllm_kv_cache_metrics("0.9.1") == (KV_METRIC_LEGACY,)
    assert set(vllm_kv_cache_metrics("0.10.2")) == {KV_METRIC_CURRENT, KV_METRIC_LEGACY}
    assert vllm_kv_cache_metrics("0.11.0") == (KV_METRIC_CURRENT,)
    assert vllm_kv_cache_metrics("0.32.0")[0] == KV_METRIC_CURRENT


def test_vllm_032_exports_the_current_kv_name():
    """vLLM vllm/v1/metrics/loggers.py: the 0.33 metric table (0.32's set is identical) has kv_cache_usage_perc, not the old name."""
    text = reference("vllm", "vllm-0.33.0-prometheus-metrics.tsv").read_text()
    assert KV_METRIC_CURRENT in text and KV_METRIC_LEGACY not in text


def test_v110_chart_gets_the_flag_its_default_lacks():
    """Chart v1.1.0's EPP defaults to gpu_cache_usage_perc: the values must carry the flag (list layout)."""
    cfg = load_config(_values_with(lambda v: v["llm-serving:gateway"]["epp"].update(version="v1.1.0")))
    pool = o.PoolRoute(
        "stable", cfg.serving.stable.release, 100, {"llm-serving.io/pool": "stable"}, "llm-serving-stable"
    )
    gateway = gateway_section(cfg)
    assert gateway is not None
    values = o.epp_values(pool, gateway_spec(gateway, cfg.observability.autoscaling))
    flags = values["inferenceExtension"]["flags"]
    assert {"name": "kv-cache-usage-percentage-metric", "value": KV_METRIC_CURRENT} in flags
    assert values["inferenceExtension"]["monitoring"]["gke"] == {"enabled": True}
    assert effective_kv_metric(EPP_CHARTS["v1.1.0"], values) == KV_METRIC_CURRENT
    assert values["inferenceExtension"]["image"]["tag"] == "v1.1.0"


# ---- post-renderer -------------------------------------------------------------------------------------------------

RENDERED = """---
# Source: inferencepool/templates/gke.yaml
kind: HealthCheckPolicy
apiVersion: networking.gke.io/v1
metadata:
  name: vllm-stable
---
# Source: inferencepool/templates/epp-deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm-stable-epp
spec:
  template:
    spec:
      containers:
      - name: epp
        env:
        - name: kind
---
apiVersion: "inference.networking.k8s.io/v1"
kind: InferencePool
metadata:
  name: vllm-stable
"""


def test_chart_filter_drops_owned_kinds_only():
    out = chart_filter.filter_manifests(RENDERED, CHART_DROPPED_KINDS)
    docs = [yaml.safe_load(d) for d in out.split("---") if d.strip()]
    assert [d["kind"] for d in docs] == ["Deployment"]
    assert "# Source: inferencepool/templates/epp-deployment.yaml" in out


def test_chart_filter_runs_as_a_helm_post_renderer(plans, tmp_path):
    """Run the exact command the Chart resource carries, from an unrelated working directory."""
    chart = next(r for r in plans["prod"][2]["resources"] if r["type"] == "kubernetes:helm.sh/v4:Chart")
    args = [sys.executable, *chart["inputs"]["postRenderer"]["args"]]
    res = subprocess.run(args, input=RENDERED, capture_output=True, text=True, check=True, timeout=30, cwd=tmp_path)
    assert [yaml.safe_load(d)["kind"] for d in res.stdout.split("---") if d.strip()] == ["Deployment"]


# ---- config rules ---------------------------------------------------------------------------------------------------


def _values_with(mutate, stack: str = "dev") -> dict[str, Any]:
    v = copy.deepcopy(read_stack_file(stack).values)
    v["llm-serving:releases"] = [json.loads((ROOT / p).read_text()) for p in v["llm-serving:releases"]]
    mutate(v)
    return v


def _errors(v: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ConfigError) as exc:
        load_config(v)
    return {i.path: i.message for i in exc.value.issues}


def _gw(v: dict[str, Any]) -> dict[str, Any]:
    return v["llm-serving:gateway"]


@pytest.mark.parametrize(
    "stack,mutate,path,message",
    [
        (
            "dev",
            lambda v: _gw(v)["epp"].update(kv_cache_metric=KV_METRIC_LEGACY),
            "llm-serving:gateway.epp.kv_cache_metric",
            "'vllm:gpu_cache_usage_perc' is not exported by vLLM 0.32.0 (stable pool, release 'qwen3-8b-fp8-2026-11-02.1'), "
            "which exports vllm:kv_cache_usage_perc",
        ),
        (
            "prod",
            lambda v: _gw(v)["iap"].update(enabled=False),
            "llm-serving:gateway.iap.enabled",
            "prod requires identity-aware access (IAP) on the backends",
        ),
        (
            "staging",
            lambda v: _gw(v)["epp"].update(replicas=1),
            "llm-serving:gateway.epp.replicas",
            "staging runs the endpoint picker redundantly (>= 2 replicas), got 1",
        ),
        (
            "dev",
            lambda v: _gw(v)["epp"].update(failure_mode="FailClose"),
            "llm-serving:gateway.epp.failure_mode",
            "FailClose with a single picker replica turns every picker restart into an outage",
        ),
        (
            "prod",
            lambda v: _gw(v).update(allow_global_access=True),
            "llm-serving:gateway.allow_global_access",
            "only applies to the internal class gke-l7-rilb",
        ),
        (
            "prod",
            lambda v: _gw(v)["iap"].update(members=[]),
            "llm-serving:gateway.iap.members",
            "IAP without any httpsResourceAccessor member admits nobody",
        ),
        (
            "prod",
            lambda v: _gw(v)["iap"].update(oauth_client_id="123-abc.apps.googleusercontent.com"),
            "llm-serving:gateway.iap.oauth_client_secret_name",
            "a custom OAuth client needs both oauth_client_id and oauth_client_secret_name "
            "(omit both for the Google-managed client)",
        ),
        (
            "prod",
            lambda v: _gw(v)["model_armor"].update(
                template="projects/acme-llm-prod/locations/europe-west4/templates/t"
            ),
            "llm-serving:gateway.model_armor.template",
            "template is in 'europe-west4'; the regional gateway calls modelarmor.us-central1.rep.googleapis.com, "
            "so it must be in 'us-central1'",
        ),
        (
            "prod",
            lambda v: _gw(v)["model_armor"].update(timeout_ms=2000),
            "llm-serving:gateway.model_armor.timeout_ms",
            "2000 ms screening timeout leaves no TTFT budget (contract.ttft_p95_ms = 1500)",
        ),
        (
            "prod",
            lambda v: _gw(v)["model_armor"].update(template="modelarmor/t"),
            "llm-serving:gateway.model_armor.template",
            "must be projects/<project>/locations/<region>/templates/<name>, got 'modelarmor/t'",
        ),
        (
            "dev",
            lambda v: _gw(v)["epp"].update(version="v0.10.0"),
            "llm-serving:gateway.epp.version",
            "Input should be 'v1.1.0' or 'v1.5.0' (got 'v0.10.0')",
        ),
        (
            "dev",
            lambda v: _gw(v)["epp"].update(failure_mode_reason="because"),
            "llm-serving:gateway.epp.failure_mode_reason",
            "String should have at least 20 characters",
        ),
        (
            "dev",
            lambda v: _gw(v).update(hostnames=["LLM.example"]),
            "llm-serving:gateway.hostnames[0]",
            "String should match pattern",
        ),
        ("dev", lambda v: v.pop("llm-serving:gateway"), "llm-serving:gateway", "required when a pool targets gke"),
    ],
)
def test_gateway_rules(stack, mutate, path, message):
    e = _errors(_values_with(mutate, stack))
    assert path in e, e
    assert e[path].startswith(message), e[path]


def _bad_gateway_stack_dir(tmp_path: Path) -> Path:
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.prod.yaml").read_text())
    doc["config"]["llm-serving:gateway"]["epp"]["kv_cache_metric"] = KV_METRIC_LEGACY
    doc["config"]["llm-serving:gateway"]["iap"]["enabled"] = False
    (tmp_path / "Pulumi.prod.yaml").write_text(yaml.safe_dump(doc))
    return tmp_path


def test_bad_gateway_config_fails_plan_and_registers_nothing(tmp_path: Path, capsys):
    import pulumi

    from infra.entry import main as program_main
    from infra.offline.runner import OfflineRun, run_offline

    out = tmp_path / "plan"
    stacks = _bad_gateway_stack_dir(tmp_path)
    assert cli.main(["plan", "--stack", "prod", "--stacks-dir", str(stacks), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "llm-serving:gateway.epp.kv_cache_metric" in err and "llm-serving:gateway.iap.enabled" in err
    assert not out.exists()
    sf = read_stack_file("prod", stacks)
    sink = OfflineRun(project="llm-serving", stack="prod")
    with pytest.raises(pulumi.RunError, match=re.escape("llm-serving:gateway.epp.kv_cache_metric")):
        run_offline(
            program_main, project="llm-serving", stack="prod", config=sf.config, secret_keys=sf.secret_keys, sink=sink
        )
    assert sink.resources == []


# ---- overload: shedding and saturation -------------------------------------------------------------------------


def test_picker_states_its_saturation_thresholds_and_keeps_flow_control_off(plans):
    for stack, (cfg, plan, inv) in plans.items():
        auto = cfg.observability.autoscaling
        for role in serving_roles(cfg, plan):
            ext = _chart(inv, role)["inputs"]["values"]["inferenceExtension"]
            assert ext["pluginsConfigFile"] == "llm-serving-plugins.yaml"
            conf = json.loads(ext["pluginsCustomConfig"]["llm-serving-plugins.yaml"])
            assert conf["apiVersion"] == "inference.networking.x-k8s.io/v1alpha1"
            assert conf["kind"] == "EndpointPickerConfig"
            (det,) = [p for p in conf["plugins"] if p["type"] == "utilization-detector"]
            # Saturated where the HPA starts adding replicas: its per-pod queue target (dev 5, staging and prod 3),
            # and its KV-cache target where one is set (prod 0.8), else the picker's own 0.8.
            assert (
                det["parameters"]["queueDepthThreshold"]
                == auto.queue_target_per_pod
                == {"dev": 5, "staging": 3, "prod": 3, "dev-cohost-gke": 5}[stack]
            )
            assert auto.kv_cache_target == {"dev": None, "staging": None, "prod": 0.8, "dev-cohost-gke": None}[stack]
            assert det["parameters"]["kvCacheUtilThreshold"] == 0.8
            assert conf["saturationDetector"] == {"pluginRef": "utilization-detector"}
            # Flow control (a feature gate) would queue sheddable requests instead of answering 429.
            assert "featureGates" not in conf and "flowControl" not in conf
            # The chart's default scoring profile, unchanged: queue 2, KV cache 2, prefix cache 3.
            (profile,) = conf["schedulingProfiles"]
            assert [(p["pluginRef"], p["weight"]) for p in profile["plugins"]] == [
                ("queue-scorer", 2),
                ("kv-cache-utilization-scorer", 2),
                ("prefix-cache-scorer", 3),
            ]


def test_picker_plugins_are_the_charts_defaults_plus_the_detector():
    """Every plugin this program names is one chart v1.5.0's own default config names, or the detector."""
    text = reference("charts", "inferencepool", "v1.5.0", "epplib", "templates", "_config.yaml").read_text()
    chart_types = set(re.findall(r"^\s*- type: ([a-z-]+)\s*$", text, flags=re.M))
    ours = {p["type"] for p in o.picker_config(o.SaturationSpec(3, 0.8))["plugins"]}
    assert ours - chart_types == {"utilization-detector"}
    assert {"queue-scorer", "kv-cache-utilization-scorer", "prefix-cache-scorer"} <= chart_types


def test_objectives_state_the_pickers_shedding_semantics(plans):
    for _stack, (cfg, _, inv) in plans.items():
        classes = {c.name: c for c in cfg.contract.priority_classes}
        objectives = resources(inv, "kubernetes:inference.networking.x-k8s.io/v1alpha2:InferenceObjective")
        assert objectives
        for r in objectives:
            spec, meta = r["inputs"]["spec"], r["inputs"]["metadata"]
            cls = classes[meta["name"].removesuffix("-canary")]
            assert spec["priority"] == cls.priority
            assert meta["annotations"]["llm-serving.io/sheddable"] == ("true" if spec["priority"] < 0 else "false")
        # batch is shed (priority -1), interactive never; a request without a class is served at 0, between them.
        assert classes["batch"].priority < 0 < classes["interactive"].priority


def test_priority_class_spec_refuses_a_sheddable_class_the_picker_cannot_shed():
    with pytest.raises(
        ValueError, match=r"PriorityClassSpec.priority: class 'batch' has sheddable=True but priority 0"
    ):
        o.PriorityClassSpec("batch", 0, True, "offline")


def test_saturation_follows_the_hpa_targets():
    from infra.config.observability import Autoscaling
    from infra.targets.gke.compose import saturation_spec

    assert saturation_spec(Autoscaling(queue_target_per_pod=4, kv_cache_target=0.7)) == o.SaturationSpec(4, 0.7)
    assert saturation_spec(Autoscaling(queue_target_per_pod=2)) == o.SaturationSpec(2, 0.8)
