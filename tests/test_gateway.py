"""GKE Inference Gateway : upstream-schema validation of every rendered custom resource, the derived
values (pool selectors, weights, backend timeout, picker KV metric, chart pin), and the gateway config rules."""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.gateway import chart_filter
from components.gateway import objects as o
from components.gateway.charts import (
    KV_METRIC_CURRENT,
    KV_METRIC_LEGACY,
    ROUTER,
    ROUTER_CHART,
    vllm_kv_cache_metrics,
)
from components.gateway.component import CHART_DROPPED_KINDS, CHART_FILTER_SCRIPT
from infra.config import ConfigError
from infra.offline import cli
from infra.offline.inventory import Inventory
from infra.offline.planrun import PlanRun, summary
from infra.offline.stackfile import ROOT, read_stack_file
from infra.resolve import ResolvedStack
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


#: The vendored llm-d Router chart (llm-d-router v0.10.0 config/charts).
ROUTER_CHARTS = ("charts", "llm-d-router", "v0.10.0")


def picker_conf(values: dict[str, Any]) -> dict[str, Any]:
    """The EndpointPickerConfig a picker release's values carry (the file its ``pluginsConfigFile`` names)."""
    epp = values["router"]["epp"]
    return json.loads(epp["pluginsCustomConfig"][epp["pluginsConfigFile"]])


def effective_kv_metric(values: dict[str, Any]) -> str:
    """The KV metric a picker rendered from ``values`` scrapes: the extractor's ``vllm`` engine mapping."""
    (extractor,) = [p for p in picker_conf(values)["plugins"] if p["type"] == "core-metrics-extractor"]
    (vllm,) = [e for e in extractor["parameters"]["engineConfigs"] if e["name"] == "vllm"]
    return str(vllm["kvUsageSpec"])


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
                "name": f"vllm-{role}-router-epp",
                "port": {"number": 9002},
                "failureMode": cfg.gateway.epp.failure_mode,
            }
            chart = _chart(inv, role)
            # the chart names its Service <release>-epp; its picker watches the pool named by the pool-name flag,
            # which overrides the chart's own --pool-name <release>
            assert f"{chart['inputs']['name']}-epp" == ref["name"]
            assert chart["inputs"]["name"] == f"vllm-{role}-router"
            assert chart["inputs"]["values"]["router"]["epp"]["flags"]["pool-name"] == f"vllm-{role}"
            # and the patch that moves the pointer once the picker is ready sets exactly this reference
            (patch,) = [
                r
                for r in resources(inv, "kubernetes:inference.networking.k8s.io/v1:InferencePoolPatch")
                if r["inputs"]["metadata"]["name"] == f"vllm-{role}"
            ]
            assert patch["inputs"]["spec"] == {"endpointPickerRef": ref}
            assert patch["inputs"]["metadata"]["annotations"] == {"pulumi.com/patchForce": "true"}
            # a patch owning a required field cannot be deleted (pulumi-kubernetes provider.go Delete): retained
            assert patch["options"]["retain_on_delete"] is True


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
    (chart,) = [r for r in resources(inv, "kubernetes:helm.sh/v4:Chart") if r["name"] == f"vllm-{role}-router-epp"]
    return chart


def test_picker_kv_metric_equals_what_vllm_exports(plans):
    for _stack, (cfg, _, inv) in plans.items():
        for role, pool in cfg.pools():
            values = _chart(inv, role)["inputs"]["values"]
            version = cfg.release(pool.release).vllm_version
            assert effective_kv_metric(values) == vllm_kv_cache_metrics(version)[0] == KV_METRIC_CURRENT


def test_chart_resource_carries_pinned_version_and_values(plans):
    for stack, (cfg, plan, inv) in plans.items():
        charts = resources(inv, "kubernetes:helm.sh/v4:Chart")
        assert len(charts) == len(serving_roles(cfg, plan))
        for role in serving_roles(cfg, plan):
            c = _chart(inv, role)["inputs"]
            assert c["chart"] == ROUTER_CHART == "oci://ghcr.io/llm-d/charts/llm-d-router-gateway"
            assert c["version"] == "v0.10.0"
            assert c["namespace"] == f"llm-serving-{role}" and c["skipCrds"] is True
            v = c["values"]
            assert v["provider"] == {"name": "gke"}
            # The chart fails on the pre-move top-level keys (routerlib _helpers.tpl validations.deprecations).
            assert set(v) == {"provider", "router"}
            epp = v["router"]["epp"]
            # Pinned to the release, never the vendored default ``main``.
            assert epp["image"] == {
                "registry": "ghcr.io/llm-d",
                "repository": "llm-d-router-endpoint-picker",
                "tag": "v0.10.0",
                "pullPolicy": "IfNotPresent",
            }
            assert v["router"]["monitoring"]["prometheus"] == {"enabled": True, "auth": {"enabled": True}}
            assert v["router"]["monitoring"]["provider"] == {"name": "gmp"}
            assert v["router"]["inferencePool"] == {"create": True, "failureMode": cfg.gateway.epp.failure_mode}
            assert v["router"]["modelServers"]["matchLabels"] == {
                "app.kubernetes.io/name": "vllm",
                "app.kubernetes.io/instance": f"vllm-{role}",
            }
            if stack in ("staging", "prod"):
                assert epp["replicas"] >= 2
            drops = c["postRenderer"]["args"]
            assert drops[:2] == ["-c", CHART_FILTER_SCRIPT.read_text()] and c["postRenderer"]["command"] == "python3"
            assert {drops[i + 1] for i, a in enumerate(drops) if a == "--drop-kind"} == set(CHART_DROPPED_KINDS)
    cfg, plan, inv = plans["prod"]
    run = PlanRun(ResolvedStack("prod", cfg, plan), Inventory.from_dict(inv))
    assert "kubernetes:helm.sh/v4:Chart" in summary(run, run.inventory.manifests())


#: Values whose contents the chart passes through whole (``toYaml`` / ``range``): their inner keys are the
#: Kubernetes or EPP schema's, not the chart's.
OPAQUE_VALUES = {
    ("router", "epp", "affinity"),
    ("router", "epp", "resources"),
    ("router", "epp", "flags"),
    ("router", "epp", "pluginsCustomConfig"),
    ("router", "modelServers", "matchLabels"),
    ("router", "modelServers", "targetPorts"),
}


def _value_paths(values: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for k, v in values.items():
        path = (*prefix, k)
        if isinstance(v, dict) and path not in OPAQUE_VALUES:
            out += _value_paths(v, path)
        else:
            out.append(path)
    return out


def test_every_chart_value_the_program_sets_is_read_by_the_vendored_chart(plans):
    """Each key path of the picker values is read by a template as ``.Values.<path>`` (or through a helper that
    indexes it), and is a default of the chart (llm-d-router-gateway values.yaml or routerlib's under ``router``)
    unless the values file only shows it as a comment (``router.epp.flags``)."""
    from tests.scheduling import chart_default_values, value_at

    root = reference(*ROUTER_CHARTS)
    defaults = chart_default_values(root / "llm-d-router-gateway")
    templates = "\n".join(p.read_text() for p in root.rglob("*.yaml") if "templates" in p.parts)
    templates += "\n".join(p.read_text() for p in root.rglob("*.tpl"))
    # Read through helpers rather than as a literal .Values path (routerlib _helpers.tpl).
    helper_reads: dict[tuple[str, ...], str] = {
        ("router", "monitoring", "provider", "name"): 'index $mp "name"',
    }
    for stack, (cfg, plan, inv) in plans.items():
        for role in serving_roles(cfg, plan):
            for path in _value_paths(_chart(inv, role)["inputs"]["values"]):
                dotted = ".".join(path)
                read = f".Values.{dotted}" in templates or helper_reads.get(path, "\0") in templates
                # A default (values.yaml) or a commented-out example (``flags``) with a template reading it.
                assert value_at(defaults, path) is not None or read, f"{stack}: {dotted} not in values"
                assert read, f"{stack}: no template reads .Values.{dotted}"


def test_pickers_spread_over_nodes_without_a_pdb_and_reach_their_model_servers(plans):
    """A leader-elected picker gets no PodDisruptionBudget (only the leader is ready, so none could ever allow
    its eviction); its replicas repel each other per node, and the model servers' NetworkPolicy admits the chart's
    picker pods by the chart's own pod label."""
    template = reference(*ROUTER_CHARTS, "routerlib", "templates", "_deployment.yaml").read_text()
    assert "service: readiness" in template and "--ha-enable-leader-election" in template
    helpers = reference(*ROUTER_CHARTS, "routerlib", "templates", "_helpers.tpl").read_text()
    assert 'llm-d-router-gateway: {{ include "llm-d-router.name" . }}' in helpers
    for stack, (cfg, _, inv) in plans.items():
        for role, _ in cfg.pools():
            assert find(inv, "PodDisruptionBudget", f"vllm-{role}-router-epp") == []
            (chart,) = [
                r for r in resources(inv, "kubernetes:helm.sh/v4:Chart") if r["inputs"]["name"] == f"vllm-{role}-router"
            ]
            anti = chart["inputs"]["values"]["router"]["epp"]["affinity"]["podAntiAffinity"]
            (term,) = anti["preferredDuringSchedulingIgnoredDuringExecution"]
            assert term["podAffinityTerm"] == {
                "topologyKey": "kubernetes.io/hostname",
                "labelSelector": {"matchLabels": {"llm-d-router-gateway": f"vllm-{role}-router-epp"}},
            }
            netpol = only(inv, "NetworkPolicy", f"vllm-{role}")["spec"]["ingress"]
            peers = [p.get("podSelector", {}).get("matchLabels") for rule in netpol for p in rule["from"]]
            assert {"llm-d-router-gateway": f"vllm-{role}-router-epp"} in peers, (
                f"{stack}: picker cannot scrape vllm-{role}"
            )


def test_chart_has_no_pdb_of_its_own():
    texts = [p.read_text() for p in reference(*ROUTER_CHARTS).rglob("*") if p.is_file()]
    assert texts and not any("PodDisruptionBudget" in t for t in texts)


def test_picker_name_is_derived_as_the_chart_derives_it():
    """routerlib _helpers.tpl ``llm-d-router.name``: release name lower-cased, trimmed, cut to 40, then ``-epp``."""
    from components import naming

    helpers = reference(*ROUTER_CHARTS, "routerlib", "templates", "_helpers.tpl").read_text()
    assert '.Release.Name | default "default-pool" | lower | trim | trunc 40 -}}\n{{ $base }}-epp' in helpers
    assert naming.epp_name("stable") == "vllm-stable-router-epp"
    long_role = "a" * 45  # release "vllm-" + 45 characters + "-router" = 57, cut to the first 40, then "-epp"
    assert naming.epp_name(long_role) == "vllm-" + "a" * 35 + "-epp"
    role_30 = "b" * 30  # release 5 + 30 + 7 = 42 characters: the cut falls inside "-router"
    assert naming.epp_name(role_30) == "vllm-" + "b" * 30 + "-rout-epp"


def test_every_pool_owns_every_class_under_its_bare_name(plans):
    """The picker looks a class up by name in its pool's namespace and drops objectives naming another pool: each
    pool's namespace must hold one objective per class, named as the class, pointing at that pool."""
    for stack, (cfg, plan, inv) in plans.items():
        objs = find(inv, "InferenceObjective")
        assert all(x["apiVersion"] == "llm-d.ai/v1alpha2" for x in objs)
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


# ---- post-renderer -------------------------------------------------------------------------------------------------

RENDERED = """---
# Source: llm-d-router-gateway/templates/gke.yaml
kind: HealthCheckPolicy
apiVersion: networking.gke.io/v1
metadata:
  name: vllm-stable
---
# Source: llm-d-router-gateway/templates/epp.yaml
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
    assert "# Source: llm-d-router-gateway/templates/epp.yaml" in out


# The exact post-renderer command each Chart carries runs in tests/test_picker_await.py.


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
            lambda v: _gw(v)["epp"].update(version="v1.5.0"),
            "llm-serving:gateway.epp.version",
            "Input should be 'v0.10.0' (got 'v1.5.0')",
        ),
        (
            "staging",
            lambda v: _gw(v)["epp"].update(flow_control=False),
            "llm-serving:gateway.epp.flow_control",
            "staging runs the picker's flow control (bounded queues while saturated, 429 beyond them)",
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


def test_picker_states_its_saturation_thresholds_and_runs_flow_control(plans):
    for stack, (cfg, plan, inv) in plans.items():
        auto = cfg.observability.autoscaling
        for role in serving_roles(cfg, plan):
            epp = _chart(inv, role)["inputs"]["values"]["router"]["epp"]
            assert epp["pluginsConfigFile"] == "llm-serving-plugins.yaml"
            conf = picker_conf(_chart(inv, role)["inputs"]["values"])
            assert conf["apiVersion"] == "llm-d.ai/v1alpha1"
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
            # Flow control on every GKE stack: the gate, and the detector named where v0.10.0 reads it.
            assert conf["featureGates"] == ["flowControl"]
            assert conf["flowControl"]["saturationDetector"] == {"pluginRef": "utilization-detector"}
            assert "saturationDetector" not in conf
            bands = conf["flowControl"]["priorityBands"]
            assert sorted(b["priority"] for b in bands) == sorted({c.priority for c in cfg.contract.priority_classes})
            assert int(conf["flowControl"]["maxRequests"]) == sum(int(b["maxRequests"]) for b in bands)
            # The chart's default scoring profile, unchanged: queue 2, KV cache 2, prefix cache 3.
            (profile,) = conf["schedulingProfiles"]
            assert [(p["pluginRef"], p["weight"]) for p in profile["plugins"]] == [
                ("queue-scorer", 2),
                ("kv-cache-utilization-scorer", 2),
                ("prefix-cache-scorer", 3),
            ]


def test_each_band_keeps_interactive_queue_wait_under_the_ttft_objective(plans):
    """staging, either pool, by hand. Contract: TTFT 1500 ms, ITL 50 ms, prompt p95 8000 tokens, mean output 350;
    plan: --max-num-batched-tokens 8192, --max-num-seqs 203, warm minimum 1 replica; HPA queue target 3.

    prefill = ceil(8000 / 8192) = 1 step x 50 ms = 50 ms      TTL = 1500 - 50 = 1450 ms
    one request = (1500 + 350 x 50) / 1000 = 19.0 s          drain = 1 x 203 / 19.0 = 10.684 req/s
    interactive band = floor(1.45 x 10.684) = floor(15.49) = 15
    the 15th queued request waits 15 / 10.684 = 1.404 s <= TTL 1.45 s, and 1.404 + 0.050 prefill = 1.454 s < 1.5 s
    batch (sheddable) band = 3 per pod x 1 replica = 3: the 4th queued batch request is answered 429 at once."""
    _, plan, inv = plans["staging"]
    p = gke_part(plan).gke_pools()["stable"]
    assert (p.capacity.max_num_batched_tokens, p.capacity.max_num_seqs, p.min_replicas) == (8192, 203, 1)
    for role in ("stable", "canary"):
        fc = picker_conf(_chart(inv, role)["inputs"]["values"])["flowControl"]
        assert fc["defaultRequestTTL"] == "1450ms"
        bounds = [{k: v for k, v in b.items() if k != "fairnessPolicyRef"} for b in fc["priorityBands"]]
        assert bounds == [{"priority": 100, "maxRequests": "15"}, {"priority": -1, "maxRequests": "3"}]
        # staging names tenants: each band shares its queue between them (tests/test_tenants.py)
        assert {b["fairnessPolicyRef"] for b in fc["priorityBands"]} == {"tenant-fairness"}
        assert fc["maxRequests"] == "18" and fc["maxBytes"] == "512Mi"
    drain = 203 / 19.0
    assert 15 / drain <= 1.450 and 15 / drain + 0.050 < 1.500 < 16 / drain + 0.050


def test_flow_control_needs_a_queue_wait_budget():
    """A p95 prompt whose prefill alone takes the TTFT objective leaves no TTL: the planner refuses it."""
    from infra.targets.gke.planning.flow_control import FlowControlError, request_ttl_ms

    cfg = load_config(_values_with(lambda v: None, "staging"))
    # ceil(8000 / 256) = 32 steps x 50 ms = 1600 ms >= 1500 ms
    with pytest.raises(FlowControlError, match="leaves no queue wait within ttft_p95_ms"):
        request_ttl_ms(cfg.contract, 256)
    assert request_ttl_ms(cfg.contract, 512) == 1500 - 16 * 50


def test_picker_plugins_are_the_charts_defaults_plus_the_detector():
    """Every plugin type this program names is one the vendored chart's own default config names (routerlib
    templates/_config.yaml), or the saturation detector, which that config leaves to the EPP's default
    (``utilization-detector``, registered by pkg/epp/config/loader/defaults.go when none is named)."""
    text = reference(*ROUTER_CHARTS, "routerlib", "templates", "_config.yaml").read_text()
    chart_types = set(re.findall(r"^\s*- type: ([a-z-]+)\s*$", text, flags=re.M))
    assert "apiVersion: llm-d.ai/v1alpha1" in text and o.PICKER_CONFIG_API == "llm-d.ai/v1alpha1"
    pool = o.PoolRoute("stable", "r", 100, {"a": "b"}, "ns")
    ours = {p["type"] for p in o.picker_config(o.SaturationSpec(3, 0.8), pool)["plugins"]}
    assert ours - chart_types == {"utilization-detector"}
    assert {"queue-scorer", "kv-cache-utilization-scorer", "prefix-cache-scorer"} <= chart_types
    assert {"metrics-data-source", "core-metrics-extractor"} <= chart_types
    # The chart's metrics source parameters are the ones this program states.
    for key in ("scheme:", "path:", "insecureSkipVerify:"):
        assert key in text


def test_objectives_state_the_pickers_shedding_semantics(plans):
    for _stack, (cfg, _, inv) in plans.items():
        classes = {c.name: c for c in cfg.contract.priority_classes}
        assert resources(inv, "kubernetes:inference.networking.x-k8s.io/v1alpha2:InferenceObjective") == []
        objectives = resources(inv, "kubernetes:llm-d.ai/v1alpha2:InferenceObjective")
        assert objectives
        for r in objectives:
            spec, meta = r["inputs"]["spec"], r["inputs"]["metadata"]
            cls = classes[meta["name"].removesuffix("-canary")]
            assert spec["priority"] == cls.priority
            assert meta["annotations"]["llm-serving.io/sheddable"] == ("true" if spec["priority"] < 0 else "false")
        # batch is shed (priority -1), interactive never; a request without a class is served at 0, between them.
        assert classes["batch"].priority < 0 < classes["interactive"].priority


def test_objective_crds_come_from_the_release_commit_and_match_the_vendored_crd(plans):
    """The CRDs are installed from the release's commit (not a movable tag) and are the files vendored under
    ../shared/reference/llm-d-router/v0.10.0; the picker's Role grants exactly those kinds."""
    inv = plans["prod"][2]
    (crds,) = resources(inv, "kubernetes:yaml/v2:ConfigGroup")
    assert crds["inputs"]["files"] == [
        f"https://raw.githubusercontent.com/llm-d/llm-d-router/{ROUTER.crd_commit}/config/crd/bases/{f}"
        for f in ("llm-d.ai_inferenceobjectives.yaml", "llm-d.ai_inferencemodelrewrites.yaml")
    ]
    assert re.fullmatch(r"[0-9a-f]{40}", ROUTER.crd_commit)
    for f in ROUTER.crd_files:
        assert reference("llm-d-router", "v0.10.0", f.rsplit("/", 1)[1]).is_file()
    rbac = reference(*ROUTER_CHARTS, "llm-d-router-gateway", "templates", "rbac.yaml").read_text()
    assert '- apiGroups: ["llm-d.ai"]\n  resources: ["inferenceobjectives", "inferencemodelrewrites"]' in rbac


def test_migration_order_crds_then_objectives_then_picker(plans):
    """docs/gke.md "Moving an existing stack to the llm-d Router": the llm-d.ai CRDs exist before any objective,
    the objectives and the pool before the picker that reads them (the v0.10.0 EPP chooses its objective API group
    once at start-up), and the pool keeps pointing at the Service the chart creates under the same name."""
    for stack, (cfg, plan, inv) in plans.items():
        by_name = {r["urn"]: r for r in inv["resources"]}
        (crds,) = [u for u, r in by_name.items() if r["type"] == "kubernetes:yaml/v2:ConfigGroup"]
        for role in serving_roles(cfg, plan):
            chart = _chart(inv, role)
            deps = set(chart["dependencies"])
            pool_urn = next(
                u
                for u, r in by_name.items()
                if r["type"].endswith(":InferencePool") and r["name"] == f"vllm-{role}-pool"
            )
            objectives = [
                u
                for u, r in by_name.items()
                if r["type"] == "kubernetes:llm-d.ai/v1alpha2:InferenceObjective"
                and r["name"].startswith(f"vllm-{role}-objective-")
            ]
            assert objectives and set(objectives) <= deps, stack
            assert {crds, pool_urn} <= deps, stack
            for u in objectives:
                assert crds in by_name[u]["dependencies"], stack
            ref = by_name[pool_urn]["inputs"]["spec"]["endpointPickerRef"]
            assert ref["name"] == f"{chart['inputs']['name']}-epp" and ref["failureMode"] == "FailOpen"


def test_chart_facts_a_zero_window_picker_move_must_respect():
    """docs/gke.md "Moving an existing stack to the llm-d Router": the chart facts the move is built on, read from the
    vendored v0.10.0 chart, so a chart bump re-checks them.

    * the picker watches the pool named after the Helm release (``--pool-name {{ .Release.Name }}``), and the
      ``router.epp.flags`` map is rendered after it: the ``pool-name`` flag the values set wins (the last value of a
      repeated flag), so a release named ``vllm-<role>-router`` still watches ``vllm-<role>``;
    * the Deployment uses ``Recreate``: an in-place rollout of the picker stops the old pod before the new starts;
    * with more than one replica readiness is the gRPC service ``readiness``, which only the leader passes
      (cmd/epp/runner/health.go), hence the custom await (tests/test_picker_await.py)."""
    deployment = reference(*ROUTER_CHARTS, "routerlib", "templates", "_deployment.yaml").read_text()
    pool_arg = deployment.index("- --pool-name\n              - {{ .Release.Name }}")
    flags = deployment.index("{{- range $key, $value := $eppFlags }}")
    assert pool_arg < flags
    assert "    type: Recreate\n" in deployment
    readiness = deployment[deployment.index("readinessProbe:\n          {{- if gt (.Values.router.epp.replicas") :]
    assert readiness.index("service: readiness") < readiness.index("{{- else }}")


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
