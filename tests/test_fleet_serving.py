"""The shipped fleet stack ``dev-multiregion`` (docs/multiregion.md), planned by the real program under the mocks:
two clusters in two regions, each serving both pools on its own region's reservation, both pools exported, and the
config cluster's multi-cluster Gateway routing to the imports.

Expected values are the stack file's, worked out by hand in each test. Which cluster a Kubernetes object goes to is
its provider: the config cluster's ``platform-k8s``, the europe-west4 member's ``fleet-europe-west4-k8s``.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from infra.offline import policy as pack
from infra.offline.inventory import Inventory
from tests.conftest import plan_run, planned
from tests.crd_schema import schema_known, validate_custom_resource

STACK = "dev-multiregion"
CONFIG, MEMBER = "platform-k8s", "fleet-europe-west4-k8s"
#: The proxy-only ranges of the stack file: us-central1 (config cluster) and europe-west4.
USC1_PROXIES, EUW4_PROXIES = "10.10.16.0/23", "10.30.16.0/23"


def resources() -> list[dict[str, Any]]:
    return planned(STACK)[2]["resources"]


def cluster_of(r: dict[str, Any]) -> str:
    return str(r.get("provider") or "").rsplit("::", 1)[-1]


def k8s(kind: str, cluster: str | None = None) -> list[dict[str, Any]]:
    """Kubernetes objects of one kind (``inputs`` as rendered), in one cluster or in all."""
    return [
        r
        for r in resources()
        if r["type"].startswith("kubernetes:")
        and not r["type"].endswith("Patch")  # a patch of an object is not an object (InferencePoolPatch)
        and r["inputs"].get("kind", r["type"].rsplit(":", 1)[-1]) == kind
        and (cluster is None or cluster_of(r) == cluster)
    ]


def by_name(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["inputs"]["metadata"]["name"]: r["inputs"] for r in objs}


def test_each_cluster_runs_every_pool_on_its_own_regions_reservation():
    """Both clusters run stable and canary. Each region plans for its share (0.5 of 0.5 req/s) within the stack's
    bounds: HPA stable 1..2, canary 1..1; its L4 pool (one replica per g2-standard-12 node) consumes its own region's
    reservation of 2 + 1 + 1 surge + 1 surge = 5 nodes."""
    for cluster in (CONFIG, MEMBER):
        deployments = by_name(k8s("Deployment", cluster))
        assert {"vllm-stable", "vllm-canary"} <= set(deployments)
        hpas = {
            n: (h["spec"]["minReplicas"], h["spec"]["maxReplicas"])
            for n, h in by_name(k8s("HorizontalPodAutoscaler", cluster)).items()
        }
        assert hpas == {"vllm-stable": (1, 2), "vllm-canary": (1, 1)}
    pools = {
        r["inputs"]["location"]: r["inputs"]
        for r in resources()
        if r["type"] == "gcp:container/nodePool:NodePool" and "gpu" in r["name"]
    }
    assert {loc: p["nodeConfig"]["reservationAffinity"]["values"] for loc, p in pools.items()} == {
        "us-central1-a": ["llm-dev-usc1-l4"],
        "europe-west4-a": ["llm-dev-euw4-l4"],
    }
    assert {loc: p["autoscaling"]["totalMaxNodeCount"] for loc, p in pools.items()} == {
        "us-central1-a": 5,
        "europe-west4-a": 5,
    }


def test_every_cluster_exports_its_pools_and_holds_no_load_balancer_policy_of_its_own():
    """The serving side of the setup page: each InferencePool annotated ``networking.gke.io/export: "True"`` and an
    AutoscalingMetric exporting the KV-cache gauge; the health check and backend policy target the imports (config
    cluster only), never a local InferencePool."""
    for cluster in (CONFIG, MEMBER):
        pools = by_name(k8s("InferencePool", cluster))
        assert sorted(pools) == ["vllm-canary", "vllm-stable"]
        assert {n: p["metadata"]["annotations"]["networking.gke.io/export"] for n, p in pools.items()} == {
            "vllm-canary": "True",
            "vllm-stable": "True",
        }
        metrics = by_name(k8s("AutoscalingMetric", cluster))
        assert sorted(metrics) == ["vllm-canary", "vllm-stable"]
        assert metrics["vllm-stable"]["spec"]["endpoints"][0]["metrics"] == [
            {"name": "vllm:kv_cache_usage_perc", "exportName": "kv-cache"}
        ]
    targets = [
        (cluster_of(r), r["inputs"]["spec"]["targetRef"]["kind"])
        for kind in ("HealthCheckPolicy", "GCPBackendPolicy")
        for r in k8s(kind)
    ]
    assert sorted(targets) == [(CONFIG, "GCPInferencePoolImport")] * 4
    assert k8s("Gateway", MEMBER) == [] and k8s("HTTPRoute", MEMBER) == []


def test_the_config_cluster_routes_to_the_imports_over_https_in_both_regions():
    (gw,) = [r["inputs"] for r in k8s("Gateway", CONFIG)]
    spec = gw["spec"]
    assert spec["gatewayClassName"] == "gke-l7-cross-regional-internal-managed-mc"
    # One ephemeral internal address per serving region, the config cluster's first.
    assert spec["addresses"] == [
        {"type": "networking.gke.io/ephemeral-ipv4-address/us-central1", "value": "us-central1"},
        {"type": "networking.gke.io/ephemeral-ipv4-address/europe-west4", "value": "europe-west4"},
    ]
    assert [(ln["protocol"], ln["port"]) for ln in spec["listeners"]] == [("HTTPS", 443), ("HTTP", 80)]
    assert spec["listeners"][0]["tls"]["options"] == {
        "networking.gke.io/cert-manager-certs": "llm-dev-fleet-acme-internal"
    }
    routes = by_name(k8s("HTTPRoute", CONFIG))
    backends = routes["llm-api"]["spec"]["rules"][0]["backendRefs"]
    assert [(b["kind"], b["name"], b["namespace"], b["weight"]) for b in backends] == [
        ("GCPInferencePoolImport", "vllm-stable", "llm-serving-stable", 100),
        ("GCPInferencePoolImport", "vllm-canary", "llm-serving-canary", 0),
    ]
    grants = by_name(k8s("ReferenceGrant", CONFIG))
    assert {n: g["spec"]["to"] for n, g in grants.items()} == {
        "llm-api-to-vllm-stable": [
            {"group": "networking.gke.io", "kind": "GCPInferencePoolImport", "name": "vllm-stable"}
        ],
        "llm-api-to-vllm-canary": [
            {"group": "networking.gke.io", "kind": "GCPInferencePoolImport", "name": "vllm-canary"}
        ],
    }
    # TLS 1.2+ from a global SSL policy (the cross-region proxy is global), named by the GCPGatewayPolicy.
    (ssl,) = [r["inputs"] for r in resources() if r["type"] == "gcp:compute/sSLPolicy:SSLPolicy"]
    assert (ssl["name"], ssl["minTlsVersion"], ssl["profile"]) == ("llm-gateway-dev-tls12", "TLS_1_2", "MODERN")
    (gwp,) = [r["inputs"] for r in k8s("GCPGatewayPolicy", CONFIG)]
    assert gwp["spec"]["default"] == {"sslPolicy": "llm-gateway-dev-tls12"}
    assert [r for r in resources() if r["type"] == "gcp:compute/address:Address"] == []


def test_the_import_backend_policy_balances_on_kv_cache_and_keeps_the_stream_bound():
    """timeoutSec = the planner's stream bound as in one region: ceil(2000 ms TTFT + 1024 tokens x 80 ms ITL)
    = ceil(83.92 s) = 84 s; draining the same; 100 % of requests logged (dev's 1.0, in ppm)."""
    policies = by_name(k8s("GCPBackendPolicy", CONFIG))
    default = policies["vllm-stable"]["spec"]["default"]
    assert default == {
        "timeoutSec": 84,
        "connectionDraining": {"drainingTimeoutSec": 84},
        "logging": {"enabled": True, "sampleRate": 1_000_000},
        "balancingMode": "CUSTOM_METRICS",
        "trafficDuration": "LONG",
        "customMetrics": [{"name": "gke.named_metrics.kv-cache", "dryRun": False, "maxUtilizationPercent": 60}],
    }


def test_every_regions_model_servers_admit_every_regions_proxies():
    """A cross-regional proxy in either region may send to either region's pods: each NetworkPolicy admits its own
    region's proxy-only range first, then the other region's (the firewall openings do the same)."""
    for cluster, own, other in ((CONFIG, USC1_PROXIES, EUW4_PROXIES), (MEMBER, EUW4_PROXIES, USC1_PROXIES)):
        for name, np in by_name(k8s("NetworkPolicy", cluster)).items():
            peers = np["spec"]["ingress"][0]["from"]
            cidrs = [p["ipBlock"]["cidr"] for p in peers if "ipBlock" in p]
            assert cidrs[:2] == [own, other], (cluster, name, cidrs)
    subnets = {
        r["inputs"]["region"]: r["inputs"]["purpose"]
        for r in resources()
        if r["type"] == "gcp:compute/subnetwork:Subnetwork" and r["name"].endswith("proxy-only")
    }
    # One proxy-only subnet per region, the cross-regional kind in the config region too (setup page warning).
    assert subnets == {"us-central1": "GLOBAL_MANAGED_PROXY", "europe-west4": "GLOBAL_MANAGED_PROXY"}


def test_each_cluster_has_its_own_adapter_and_the_fleet_one_project_grant():
    """Every cluster scales on its own metrics adapter; their KSAs are one principal (one Workload Identity pool per
    project), so the monitoring.viewer grant exists once."""
    adapters = [r for r in k8s("Deployment") if r["inputs"]["metadata"]["name"] == "custom-metrics-stackdriver-adapter"]
    assert sorted(cluster_of(r) for r in adapters) == sorted([CONFIG, MEMBER])
    viewers = [
        r
        for r in resources()
        if r["type"] == "gcp:projects/iAMMember:IAMMember" and r["inputs"]["role"] == "roles/monitoring.viewer"
    ]
    assert len(viewers) == 1


def _alerts() -> dict[str, dict[str, Any]]:
    return {
        r["inputs"]["displayName"]: r["inputs"]
        for r in resources()
        if r["type"] == "gcp:monitoring/alertPolicy:AlertPolicy"
    }


def test_region_alerts_exist_per_region_and_pool_alerts_count_the_whole_fleet():
    names = sorted(_alerts())
    region = [n for n in names if "Region" in n]
    assert len([n for n in region if "RegionServingNothing" in n]) == 2  # one per region (shares 0.5 and 0.5)
    assert len([n for n in region if "RegionSaturatedWhileAnotherIdles" in n]) == 4  # 2 regions x 2 pools
    # "at maxReplicas" is the fleet's: stable 2 per region x 2 regions = 4 pods (not the config region's 2).
    (queue,) = [a for n, a in _alerts().items() if "QueueBuildingAtMaxReplicas" in n and "stable" in n]
    query = json.dumps(queue["conditions"])
    assert ">= 4" in query and "maxReplicas 4" in json.dumps(queue)


def test_every_rendered_object_with_a_vendored_schema_validates():
    manifests = Inventory.from_dict(planned(STACK)[2]).manifests()
    checked = 0
    for name, obj in manifests.items():
        if not schema_known(obj):
            continue
        errors = validate_custom_resource(obj)
        if obj["kind"] == "GCPBackendPolicy":
            # The vendored GCPBackendPolicy schema predates trafficDuration (tests/test_multicluster_gateway.py).
            errors = [e for e in errors if "'trafficDuration' was unexpected" not in e]
        assert errors == [], name
        checked += 1
    assert checked >= 20


def test_the_stack_passes_its_policy_pack_and_each_cluster_is_held_to_its_own_reservation():
    """0 violations; then europe-west4's reservation shrunk from 5 to 4 nodes: its own Deployments reach stable
    2 + 1 surge + canary 1 + 1 surge = 5 > 4, while us-central1's are not counted against it (before policies saw
    each object's cluster, both clusters' 10 replicas were)."""
    run = plan_run(STACK)
    inv = planned(STACK)[2]
    report, _ = pack.check_policies(run.resolved, Inventory.from_dict(inv))
    assert report.violations == []
    shrunk = copy.deepcopy(inv)
    (res,) = [r for r in shrunk["resources"] if r["inputs"].get("name") == "llm-dev-euw4-l4"]
    res["inputs"]["specificReservation"]["count"] = 4
    report, _ = pack.check_policies(run.resolved, Inventory.from_dict(shrunk))
    assert [(v.policy, v.message.split("\n", 1)[1]) for v in report.violations] == [
        (
            "hpa-max-within-reservation",
            "reservation llm-dev-euw4-l4 holds 4 node(s) x 1 replica(s)/node = 4 replicas, but its Deployments can "
            "reach 5 (vllm-canary max 1 + surge 1, vllm-stable max 2 + surge 1): lower maxReplicas or reserve at "
            "least 5 node(s)",
        )
    ]


@pytest.mark.parametrize("cluster", [CONFIG, MEMBER])
def test_the_pickers_watch_their_own_clusters_pools(cluster):
    charts = [r for r in resources() if r["type"] == "kubernetes:helm.sh/v4:Chart" and cluster_of(r) == cluster]
    assert sorted(c["inputs"]["name"] for c in charts) == ["vllm-canary-router", "vllm-stable-router"]
