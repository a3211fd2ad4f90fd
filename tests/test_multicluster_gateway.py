"""The multi-cluster Inference Gateway builders (components/gateway/multicluster.py, issue #29).

Every object whose kind has a vendored schema is validated against it (tests/crd_schema.py). Where the vendored
schema is older than the GKE pages the objects follow, the test states the mismatch instead of bending the object.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components import naming
from components.gateway import multicluster as mc
from components.gateway import objects as o
from tests.conftest import reference
from tests.crd_schema import schema_known, unimplemented_rules, validate_custom_resource

#: Two regions as the setup page's example uses them.
REGIONS = ("europe-west3", "us-east4")
GW = mc.MultiClusterGatewaySpec(regions=REGIONS, hostnames=("llm.internal.example",))
#: Stable 90 / canary 10: the GAIE rollout guide's split, as the single-region route carries it.
STABLE = mc.ImportedPool(role="stable", weight=90, namespace="llm-pool-stable")
CANARY = mc.ImportedPool(role="canary", weight=10, namespace="llm-pool-canary")
POOLS = (STABLE, CANARY)
#: A single-region backend timeout (the planner's value is a stack input; any >= 1 will do here).
TIMEOUT = 300
#: The stack's gateway settings as a fleet has them: the multi-cluster class, Certificate Manager certificates,
#: IAP on with one member, 10 % request logs.
SPEC = o.GatewaySpec(
    gateway_class=mc.MC_GATEWAY_CLASS,
    hostnames=("llm.internal.example",),
    certificate=o.CertificateSpec("certificate-manager", ("llm-internal-example",)),
    epp=None,  # type: ignore[arg-type]  # no builder here reads it
    iap=o.IapSpec(enabled=True, members=("serviceAccount:front@p.iam.gserviceaccount.com",)),
    model_armor=None,
    request_log_sample_rate=0.1,
    allow_global_access=False,
)


def _serving_pool() -> dict[str, Any]:
    route = o.PoolRoute("stable", "r1", 90, {"app": "vllm-stable"}, "llm-pool-stable")
    return o.inference_pool_object(route, "FailOpen")


def _valid(obj: dict[str, Any]) -> None:
    assert schema_known(obj), f"no schema registered for {obj['apiVersion']} {obj['kind']}"
    assert validate_custom_resource(obj) == []
    assert unimplemented_rules(obj) == []


# ---- serving cluster ------------------------------------------------------------------------------------------


def test_exported_pool_has_export_annotation_and_input_is_unchanged() -> None:
    pool = _serving_pool()
    before = copy.deepcopy(pool)
    out = mc.exported_pool_object(pool)
    assert out["metadata"]["annotations"] == {"networking.gke.io/export": "True"}
    assert pool == before  # not mutated
    assert "annotations" not in pool["metadata"]
    # Everything else is the pool as built for one cluster.
    rest = copy.deepcopy(out)
    del rest["metadata"]["annotations"]
    assert rest == before
    _valid(out)


def test_exported_pool_keeps_existing_annotations_without_sharing_them() -> None:
    pool = _serving_pool()
    pool["metadata"]["annotations"] = {"keep": "me"}
    out = mc.exported_pool_object(pool)
    assert out["metadata"]["annotations"] == {"keep": "me", "networking.gke.io/export": "True"}
    assert pool["metadata"]["annotations"] == {"keep": "me"}
    out["spec"]["selector"]["matchLabels"]["x"] = "y"  # a deep copy: the input's nested dicts are not shared
    assert "x" not in pool["spec"]["selector"]["matchLabels"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda p: p.update(kind="Service"), "pool_object.kind"),
        (lambda p: p["metadata"].pop("name"), "pool_object.metadata.name"),
    ],
)
def test_exported_pool_rejects_non_pools(change: Any, field: str) -> None:
    pool = _serving_pool()
    change(pool)
    with pytest.raises(ValueError, match=field):
        mc.exported_pool_object(pool)


def test_autoscaling_metric_exports_kv_cache_gauge_under_the_policy_name() -> None:
    """No CRD schema for autoscaling.gke.io is vendored: the fields are asserted as derived from the setup page
    ("Enable custom metrics reporting": spec.selector.matchLabels, spec.endpoints[].{port, path, metrics[].{name,
    exportName}})."""
    obj = mc.autoscaling_metric_object("stable", "llm-pool-stable", {"app": "vllm-stable"})
    assert not schema_known(obj)  # if a schema gets vendored, register it and validate here
    assert (obj["apiVersion"], obj["kind"]) == ("autoscaling.gke.io/v1beta1", "AutoscalingMetric")
    assert obj["metadata"]["name"] == naming.pool_name("stable")
    assert obj["metadata"]["namespace"] == "llm-pool-stable"
    assert obj["spec"] == {
        "selector": {"matchLabels": {"app": "vllm-stable"}},
        "endpoints": [
            {
                "port": naming.VLLM_PORT,
                "path": naming.METRICS_PATH,
                "metrics": [{"name": "vllm:kv_cache_usage_perc", "exportName": "kv-cache"}],
            }
        ],
    }
    # The backend policy names exactly this export.
    exported = obj["spec"]["endpoints"][0]["metrics"][0]["exportName"]
    assert mc.kv_cache_metric_name() == f"gke.named_metrics.{exported}"


def test_autoscaling_metric_gauge_is_one_vllm_exports() -> None:
    names = reference("vllm", "vllm-0.33.0-prometheus-metrics.tsv").read_text()
    obj = mc.autoscaling_metric_object("stable", "ns", {"app": "x"})
    gauge = obj["spec"]["endpoints"][0]["metrics"][0]["name"]
    assert gauge in names


def test_autoscaling_metric_rejects_empty_selector() -> None:
    with pytest.raises(ValueError, match="selector"):
        mc.autoscaling_metric_object("stable", "ns", {})


# ---- config cluster -------------------------------------------------------------------------------------------


def test_gateway_is_cross_regional_internal_with_one_address_per_region() -> None:
    gw = mc.multicluster_gateway_object(GW, "llm-gateway", o.tls_options(SPEC))
    _valid(gw)
    spec = gw["spec"]
    assert spec["gatewayClassName"] == "gke-l7-cross-regional-internal-managed-mc"
    assert spec["addresses"] == [
        {"type": "networking.gke.io/ephemeral-ipv4-address/europe-west3", "value": "europe-west3"},
        {"type": "networking.gke.io/ephemeral-ipv4-address/us-east4", "value": "us-east4"},
    ]
    # HTTPS with the stack's certificates, and the HTTP listener the single-region redirect route attaches to.
    assert [(ln["name"], ln["protocol"], ln["port"]) for ln in spec["listeners"]] == [
        (o.HTTPS_LISTENER, "HTTPS", 443),
        (o.HTTP_LISTENER, "HTTP", 80),
    ]
    assert spec["listeners"][0]["tls"] == {"mode": "Terminate", "options": o.tls_options(SPEC)}
    assert gw["metadata"]["name"] == o.GATEWAY_NAME


@pytest.mark.parametrize(
    ("regions", "message"),
    [((), "at least one"), (("Europe West3",), "not region names"), (("us-east4", "us-east4"), "duplicates")],
)
def test_gateway_spec_rejects_bad_regions(regions: tuple[str, ...], message: str) -> None:
    with pytest.raises(ValueError, match=f"MultiClusterGatewaySpec.regions: {message}"):
        mc.MultiClusterGatewaySpec(regions=regions)


def test_route_names_the_imports_with_their_weights() -> None:
    route = mc.import_route_object(GW, "llm-gateway", POOLS)
    _valid(route)
    (rule,) = route["spec"]["rules"]
    assert rule["backendRefs"] == [
        {
            "group": "networking.gke.io",
            "kind": "GCPInferencePoolImport",
            "name": naming.pool_name("stable"),
            "namespace": "llm-pool-stable",
            "weight": 90,
        },
        {
            "group": "networking.gke.io",
            "kind": "GCPInferencePoolImport",
            "name": naming.pool_name("canary"),
            "namespace": "llm-pool-canary",
            "weight": 10,
        },
    ]
    assert [m["path"]["value"] for m in rule["matches"]] == list(o.OPENAI_PATH_PREFIXES)
    assert route["spec"]["parentRefs"] == [
        {"group": o.GATEWAY_GROUP, "kind": "Gateway", "name": o.GATEWAY_NAME, "sectionName": o.HTTPS_LISTENER}
    ]
    assert route["spec"]["hostnames"] == ["llm.internal.example"]


def test_route_matches_the_single_region_routes_paths() -> None:
    """Same OpenAI paths and weights as the single-region route for the same pools, only the backend kind differs."""
    single_gw = o.GatewaySpec(
        gateway_class="gke-l7-rilb",
        hostnames=GW.hostnames,
        certificate=o.CertificateSpec("certificate-manager", ("c",)),
        epp=None,  # type: ignore[arg-type]  # api_route_object does not read it
        iap=o.IapSpec(enabled=False),
        model_armor=None,
        request_log_sample_rate=0.0,
        allow_global_access=False,
    )
    single_pools = tuple(o.PoolRoute(p.role, "r", p.weight, {"a": "b"}, p.namespace) for p in POOLS)
    single = o.api_route_object(single_gw, "llm-gateway", single_pools)["spec"]["rules"][0]
    multi = mc.import_route_object(GW, "llm-gateway", POOLS)["spec"]["rules"][0]
    assert multi["matches"] == single["matches"]
    assert [(b["name"], b["namespace"], b["weight"]) for b in multi["backendRefs"]] == [
        (b["name"], b["namespace"], b["weight"]) for b in single["backendRefs"]
    ]


def test_route_keeps_a_dark_canary_attached() -> None:
    dark = (STABLE, mc.ImportedPool(role="canary", weight=0, namespace="llm-pool-canary"))
    route = mc.import_route_object(GW, "llm-gateway", dark)
    assert [b["weight"] for b in route["spec"]["rules"][0]["backendRefs"]] == [90, 0]
    _valid(route)


@pytest.mark.parametrize(
    ("pools", "field"),
    [
        ((), "pools: at least one"),
        ((STABLE, STABLE), "pools: duplicate"),
        ((mc.ImportedPool("stable", 0, "a"), mc.ImportedPool("canary", 0, "b")), "pools.weight"),
    ],
)
def test_route_rejects_bad_pool_sets(pools: tuple[mc.ImportedPool, ...], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        mc.import_route_object(GW, "llm-gateway", pools)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"role": "", "weight": 1, "namespace": "n"}, "ImportedPool.role"),
        ({"role": "r", "weight": -1, "namespace": "n"}, "ImportedPool.weight"),
        ({"role": "r", "weight": 1_000_001, "namespace": "n"}, "ImportedPool.weight"),
        ({"role": "r", "weight": 1, "namespace": ""}, "ImportedPool.namespace"),
    ],
)
def test_imported_pool_rejects_bad_fields(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        mc.ImportedPool(**kwargs)


def test_health_check_policy_targets_the_import() -> None:
    hc = mc.import_health_check_policy_object(STABLE)
    _valid(hc)
    assert hc["spec"]["targetRef"] == {
        "group": "networking.gke.io",
        "kind": "GCPInferencePoolImport",
        "name": naming.pool_name("stable"),
    }
    assert hc["metadata"]["name"] == naming.pool_name("stable")
    assert hc["metadata"]["namespace"] == "llm-pool-stable"
    assert hc["spec"]["default"]["config"] == {
        "type": "HTTP",
        "httpHealthCheck": {"requestPath": "/health", "port": naming.VLLM_PORT},
    }
    # The probe timing is the single-region policy's.
    single = o.health_check_policy_object(o.PoolRoute("stable", "r", 90, {"a": "b"}, "llm-pool-stable"))
    assert hc["spec"]["default"] == single["spec"]["default"]


def _backend_policy() -> dict[str, Any]:
    return mc.import_backend_policy_object(STABLE, SPEC, TIMEOUT)


def test_backend_policy_balances_on_the_exported_kv_cache_metric() -> None:
    bp = _backend_policy()
    assert bp["spec"]["targetRef"] == {
        "group": "networking.gke.io",
        "kind": "GCPInferencePoolImport",
        "name": naming.pool_name("stable"),
    }
    default = bp["spec"]["default"]
    assert default["timeoutSec"] == TIMEOUT
    assert default["balancingMode"] == "CUSTOM_METRICS"
    assert default["trafficDuration"] == "LONG"
    assert default["customMetrics"] == [
        {"name": "gke.named_metrics.kv-cache", "dryRun": False, "maxUtilizationPercent": 60}
    ]
    assert "scopes" not in default and "sessionAffinity" not in default
    # The single-region pool's defaults carry over: draining = timeout, 10 % of requests logged (in ppm), IAP.
    assert default["connectionDraining"] == {"drainingTimeoutSec": TIMEOUT}
    assert default["logging"] == {"enabled": True, "sampleRate": 100_000}
    assert default["iap"] == {"enabled": True}


def test_backend_policy_schema_is_older_than_the_setup_page() -> None:
    """The vendored GCPBackendPolicy schema (datree catalogue) has no ``trafficDuration``, which every inference
    example of the setup page sets: that field is its only error. Without it the object validates, so the import
    targetRef, CUSTOM_METRICS and the named metric are all accepted. If this starts failing because the schema
    gained the field, replace this test by a plain _valid(bp)."""
    bp = _backend_policy()
    errors = validate_custom_resource(bp)
    assert len(errors) == 1, errors
    assert "spec.default" in errors[0] and "'trafficDuration' was unexpected" in errors[0]
    without = copy.deepcopy(bp)
    del without["spec"]["default"]["trafficDuration"]
    _valid(without)


def test_backend_policy_scope_rule_names_the_upstream_kind() -> None:
    """The vendored schema allows ``default.scopes`` only for targetRef kinds ``InferencePoolImport`` and
    ``ServiceImport``, while the scopes page targets ``GCPInferencePoolImport``: per-cluster scopes on the import
    would be rejected by this schema. The builder sets no scopes; this pins the mismatch for whoever adds them."""
    bp = _backend_policy()
    del bp["spec"]["default"]["trafficDuration"]
    del bp["spec"]["default"]["balancingMode"]
    del bp["spec"]["default"]["customMetrics"]
    bp["spec"]["default"]["scopes"] = [
        {"selector": {"gke.io/region": "europe-west3"}, "balancingMode": "CUSTOM_METRICS"}
    ]
    errors = validate_custom_resource(bp)
    assert any("Scopes can only be configured for ServiceImport and InferencePoolImport" in e for e in errors), errors


def test_backend_policy_rejects_bad_timeout() -> None:
    with pytest.raises(ValueError, match="timeout"):
        mc.import_backend_policy_object(STABLE, SPEC, 0)


def test_policies_and_metric_use_the_pool_name_from_naming() -> None:
    role = "canary"
    expected = naming.pool_name(role)
    pool = mc.ImportedPool(role=role, weight=10, namespace="ns")
    objs = [
        mc.import_health_check_policy_object(pool),
        mc.import_backend_policy_object(pool, SPEC, TIMEOUT),
        mc.autoscaling_metric_object(role, "ns", {"a": "b"}),
    ]
    for obj in objs:
        assert obj["metadata"]["name"] == expected
        assert obj["metadata"]["labels"][naming.POOL_LABEL] == role
    assert [b["name"] for b in mc.import_route_object(GW, "gw", (pool,))["spec"]["rules"][0]["backendRefs"]] == [
        expected
    ]
