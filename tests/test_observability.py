"""Issue 6 unit tier: HPA / PodMonitoring validate against their schemas, the HPA's numbers are the derived ones
(reservation bound, warm minimum, behaviour windows), the adapter's identity and role, the alert set each stack
gets, the observability config rules, and every ``vllm:`` name anywhere in the rendered output is one vLLM 0.32
exports."""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.monitoring import metrics as m
from components.monitoring.alerts import Thresholds
from components.monitoring.dashboard import dashboard_queries
from components.observability import dashboard as dash
from components.observability import metrics as gke
from components.observability.adapter import IMAGE_REPOSITORY, IMAGE_TAG, KSA
from components.observability.adapter import NAMESPACE as ADAPTER_NS
from components.observability.views import PoolView
from infra.config import ConfigError
from infra.offline import cli
from infra.offline.stackfile import ROOT, read_stack_file
from infra.planning.capacity import ROLLOUT_SURGE_REPLICAS
from infra.targets.gke.planning.autoscaling import reservation_replica_cap

from .conftest import GKE_STACKS, STACKS, load_config, one, reference, resources, serving_roles
from .crd_schema import validate_custom_resource

HPA = "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"
POD_MONITORING = "kubernetes:monitoring.googleapis.com/v1:PodMonitoring"
ALERT = "gcp:monitoring/alertPolicy:AlertPolicy"
DASHBOARD = "gcp:monitoring/dashboard:Dashboard"
CHANNEL = "gcp:monitoring/notificationChannel:NotificationChannel"


def hpas(inventory: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["inputs"]["metadata"]["name"].removeprefix("vllm-"): r["inputs"] for r in resources(inventory, HPA)}


# ---- schemas ----------------------------------------------------------------------------------------------------


def _validate_cr(obj: dict[str, Any], crd_file: str) -> list[str]:
    reference("gmp-prometheus-engine", crd_file)  # skips with a visible reason where the reference is absent
    return validate_custom_resource(obj)


@pytest.mark.parametrize("stack", GKE_STACKS)
def test_hpa_validates_against_kubernetes_schema(plans, stack):
    kv = pytest.importorskip("kubernetes_validate")
    cfg, plan, inv = plans[stack]
    objs = resources(inv, HPA)
    assert len(objs) == len(serving_roles(cfg, plan))
    for r in objs:
        kv.validate(r["inputs"], "1.34", strict=True)


@pytest.mark.parametrize("stack", STACKS)
def test_pod_monitorings_validate_against_gmp_crd(plans, stack):
    _, _, inv = plans[stack]
    objs = [r["inputs"] for r in resources(inv, POD_MONITORING)]
    assert objs, "no PodMonitoring rendered"
    for obj in objs:
        assert _validate_cr(obj, "monitoring.googleapis.com_podmonitorings.yaml") == []
        # GMP CRD v0.17 makes the interval required: it must be explicit on every endpoint.
        assert all("interval" in e for e in obj["spec"]["endpoints"])


def test_crd_check_rejects_an_endpoint_without_interval():
    bad = {
        "apiVersion": "monitoring.googleapis.com/v1",
        "kind": "PodMonitoring",
        "metadata": {"name": "x", "namespace": "llm-serving"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "endpoints": [{"port": 8000}]},
    }
    assert _validate_cr(bad, "monitoring.googleapis.com_podmonitorings.yaml")


def test_vllm_pod_monitoring_scrapes_8000_and_labels_pool_and_release(plans):
    cfg, _, inv = plans["prod"]
    for role, _ in cfg.pools():
        # A PodMonitoring selects pods of its own namespace only: one in each pool namespace.
        pm = one(inv, POD_MONITORING, f"observability-podmonitoring-{role}-vllm-model-servers")["inputs"]
        assert pm["metadata"]["namespace"] == f"llm-serving-{role}"
        spec = pm["spec"]
        assert spec["endpoints"] == [{"port": 8000, "path": "/metrics", "scheme": "http", "interval": "15s"}]
        assert {t["from"]: t["to"] for t in spec["targetLabels"]["fromPod"]} == {
            "llm-serving.io/pool": gke.POOL_LABEL,
            "llm-serving.io/release": gke.RELEASE_LABEL,
        }


def test_endpoint_pickers_are_scraped_by_the_chart_podmonitoring_the_queries_select(plans):
    """The EPP /metrics needs a bearer token: the llm-d-router-gateway chart's own PodMonitoring (named after the
    Helm release) carries it, so the observability component adds none and selects that job instead."""
    cfg, _, inv = plans["staging"]
    template = reference("charts", "llm-d-router", "v0.10.0", "routerlib", "templates", "_gke.yaml").read_text()
    assert "kind: PodMonitoring" in template and "name: {{ .Release.Name }}" in template
    assert "- port: metrics" in template and "type: Bearer" in template
    releases = {c["inputs"]["name"] for c in resources(inv, "kubernetes:helm.sh/v4:Chart")}
    for role, _ in cfg.pools():
        assert gke.epp_scrape_job(role) in releases  # Helm release name = the chart's PodMonitoring name = job
    monitoring = [r for r in resources(inv, POD_MONITORING)]
    assert sorted(
        (r["inputs"]["metadata"]["namespace"], r["inputs"]["metadata"]["name"])
        for r in monitoring
        if r["name"].startswith("observability-")
    ) == [(f"llm-serving-{role}", "vllm-model-servers") for role in sorted(r for r, _ in cfg.pools())]
    queries = dashboard_queries(one(inv, DASHBOARD)["inputs"]["dashboardJson"])
    for role, _ in cfg.pools():
        assert any(
            f'namespace="llm-serving-{role}",job="vllm-{role}-router"' in q and "llm_d_epp_scheduler_e2e_duration" in q
            for q in queries
        )


# ---- derived HPA values -----------------------------------------------------------------------------------------


def test_reservation_cap_arithmetic():
    # prod's topology with a reservation one node short of stable 4 + canary 2 + 2 surge: stable is capped to 3.
    assert (
        reservation_replica_cap(reserved_nodes=7, replicas_per_node=1, other_pools_max=2, pools_on_accelerator=2) == 3
    )
    # Two replicas per node double what the same reservation holds.
    assert (
        reservation_replica_cap(reserved_nodes=4, replicas_per_node=2, other_pools_max=1, pools_on_accelerator=2)
        == 8 - 1 - 2 * ROLLOUT_SURGE_REPLICAS
    )


@pytest.mark.parametrize("stack", STACKS)
def test_hpa_bounds_are_warm_minimum_and_reservation_bound(plans, stack):
    cfg, plan, inv = plans[stack]
    found = hpas(inv)
    for role, pool in cfg.pools():
        spec = found[role]["spec"]
        assert spec["minReplicas"] == pool.min_replicas
        if cfg.environment == "prod":
            assert spec["minReplicas"] >= 2
        acc = cfg.accelerators[pool.accelerator]
        expected = pool.max_replicas
        if acc.reservation is not None:
            sharing = [r for r, p in cfg.pools() if p.accelerator == pool.accelerator]
            held = (
                acc.reservation.count * plan.pools[role].capacity.replicas_per_node
                - sum(dict(cfg.pools())[r].max_replicas for r in sharing if r != role)
                - ROLLOUT_SURGE_REPLICAS * len(sharing)
            )
            expected = min(expected, held)
        assert spec["maxReplicas"] == expected
        assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": f"vllm-{role}"}


@pytest.mark.parametrize("stack", STACKS)
def test_hpa_behaviour_windows(plans, stack):
    cfg, plan, inv = plans[stack]
    for role, _ in cfg.pools():
        b = hpas(inv)[role]["spec"]["behavior"]
        cold = plan.pools[role].capacity.cold_load_seconds
        # Scale-up ignores a queue that lasts less than one cold load (a new replica's time to ready), rounded up
        # to whole minutes: e.g. staging's stable pool, 176 s -> 180 s.
        assert b["scaleUp"]["stabilizationWindowSeconds"] == math.ceil(cold / 60) * 60
        assert b["scaleUp"]["stabilizationWindowSeconds"] >= cold
        down = b["scaleDown"]
        assert down["stabilizationWindowSeconds"] == max(300, math.ceil(2 * cold / 60) * 60)
        assert down["stabilizationWindowSeconds"] >= 300
        assert down["policies"] == [
            {
                "type": "Pods",
                "value": 1,
                "periodSeconds": max(60, math.ceil(cfg.contract.stream_bound_seconds / 60) * 60),
            }
        ]


def test_prod_scale_down_outlasts_two_cold_loads(plans):
    _cfg, _plan, inv = plans["prod"]
    # prod's stable cold load is ~181 s: twice that is above the 300 s floor, so the window is 420 s.
    assert hpas(inv)["stable"]["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 420
    # Longest stream 1.5 s + 4096 x 50 ms = 206 s -> pods leave at most one per 240 s.
    assert hpas(inv)["stable"]["spec"]["behavior"]["scaleDown"]["policies"][0]["periodSeconds"] == 240


@pytest.mark.parametrize("stack", STACKS)
def test_hpa_metrics(plans, stack):
    cfg, _, inv = plans[stack]
    auto = cfg.observability.autoscaling
    for role, _ in cfg.pools():
        specs = hpas(inv)[role]["spec"]["metrics"]
        assert specs[0] == {
            "type": "Pods",
            "pods": {
                "metric": {"name": "prometheus.googleapis.com|vllm:num_requests_waiting|gauge"},
                "target": {"type": "AverageValue", "averageValue": str(auto.queue_target_per_pod)},
            },
        }
        kv = [s for s in specs if "kv_cache_usage_perc" in s["pods"]["metric"]["name"]]
        assert len(kv) == (auto.kv_cache_target is not None)
    if stack == "prod":
        assert hpas(inv)["stable"]["spec"]["metrics"][1]["pods"]["target"]["averageValue"] == "800m"


# ---- adapter ----------------------------------------------------------------------------------------------------


def test_adapter_is_pinned_and_bound_to_monitoring_viewer_through_workload_identity(plans):
    cfg, _, inv = plans["prod"]
    dep = one(inv, "kubernetes:apps/v1:Deployment", "observability-adapter-deployment")["inputs"]
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == f"{IMAGE_REPOSITORY}:{IMAGE_TAG}"
    assert "--use-new-resource-model=true" in container["command"]
    assert dep["metadata"]["namespace"] == ADAPTER_NS == "custom-metrics"
    assert dep["spec"]["template"]["spec"]["serviceAccountName"] == KSA
    binding = one(inv, "gcp:projects/iAMMember:IAMMember", "observability-adapter-monitoring-viewer")["inputs"]
    assert binding["role"] == "roles/monitoring.viewer"
    assert binding["project"] == cfg.project
    assert re.fullmatch(
        rf"principal://iam\.googleapis\.com/projects/[^/]+/locations/global/workloadIdentityPools/"
        rf"{cfg.project}\.svc\.id\.goog/subject/ns/custom-metrics/sa/custom-metrics-stackdriver-adapter",
        binding["member"],
    )
    services = {
        r["inputs"]["metadata"]["name"] for r in resources(inv, "kubernetes:apiregistration.k8s.io/v1:APIService")
    }
    assert services == {
        "v1beta1.custom.metrics.k8s.io",
        "v1beta2.custom.metrics.k8s.io",
        "v1beta1.external.metrics.k8s.io",
    }
    # The adapter's binding is the only project-level role the observability component grants.
    mine = [r for r in resources(inv, "gcp:projects/iAMMember:IAMMember") if r["name"].startswith("observability-")]
    assert len(mine) == 1


def test_adapter_digest_from_config_pins_the_image():
    from components.observability.adapter import image

    digest = "sha256:" + "b" * 64
    assert image(digest) == f"{IMAGE_REPOSITORY}:{IMAGE_TAG}@{digest}"
    assert ":latest" not in image(None)


# ---- alerts and dashboard -------------------------------------------------------------------------------------


def policies(inv: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    out = {}
    for r in resources(inv, ALERT):
        cond = r["inputs"]["conditions"][0]["conditionPrometheusQueryLanguage"]
        out[(cond["alertRule"], r["inputs"]["userLabels"]["pool"])] = r["inputs"]
    return out


@pytest.mark.parametrize("stack", STACKS)
def test_alert_set_follows_traffic_split(plans, stack):
    cfg, _, inv = plans[stack]
    got = policies(inv)
    for role, pool in cfg.pools():
        for name in (
            "TtftP95OverObjective",
            "ItlP95OverObjective",
            "KvCacheSaturated",
            "QueueBuildingAtMaxReplicas",
            "EndpointPickerUnavailable",
            "ServingPodsRestarting",
        ):
            assert (name, role) in got
            assert got[(name, role)]["enabled"] is True
        # "No traffic" exists on every warm pool and is enabled only where traffic is expected: a dark (weight 0)
        # pool has none by design. Existing at every stage, a weight change switches it in place.
        assert got[("NoTrafficOnServingPool", role)]["enabled"] == (pool.weight > 0)
        # Users wait on a pool with traffic; stable is the rollback target even at weight 0.
        critical = pool.weight > 0 or role == "stable"
        assert got[("TtftP95OverObjective", role)]["severity"] == ("CRITICAL" if critical else "WARNING")
    canary = cfg.serving.canary
    if canary is not None:
        assert got[("CanaryTtftWorseThanStable", "canary")]["enabled"] == (canary.weight > 0)
    assert policies(plans["staging"][2])[("CanaryTtftWorseThanStable", "canary")]["enabled"]  # a 10 % canary


@pytest.mark.parametrize("stack", STACKS)
def test_alert_thresholds_come_from_the_contract_and_hpa(plans, stack):
    cfg, _, inv = plans[stack]
    got = policies(inv)
    ttft = got[("TtftP95OverObjective", "stable")]["conditions"][0]["conditionPrometheusQueryLanguage"]["query"]
    assert ttft.endswith(f"> {m._fmt(cfg.contract.ttft_p95_ms / 1000)}")
    itl = got[("ItlP95OverObjective", "stable")]["conditions"][0]["conditionPrometheusQueryLanguage"]["query"]
    assert itl.endswith(f"> {m._fmt(cfg.contract.itl_p95_ms / 1000)}")
    queue = got[("QueueBuildingAtMaxReplicas", "stable")]["conditions"][0]["conditionPrometheusQueryLanguage"]["query"]
    assert queue.endswith(f">= {hpas(inv)['stable']['spec']['maxReplicas']})")
    # Every policy notifies every channel the stack created (their names are known after apply).
    channels = [f"<known-after-apply:{r['name']}.name>" for r in resources(inv, CHANNEL)]
    assert len(channels) == len(cfg.observability.alerts.notification_channels)
    for p in got.values():
        assert sorted(p["notificationChannels"]) == sorted(channels)


@pytest.mark.parametrize("stack", STACKS)
def test_dashboard_covers_the_issue_panels_per_pool(plans, stack):
    cfg, plan, inv = plans[stack]
    doc = json.loads(one(inv, DASHBOARD)["inputs"]["dashboardJson"])
    titles = [t["widget"]["title"] for t in doc["mosaicLayout"]["tiles"]]
    text = json.dumps(doc)
    for needle in (
        "TTFT",
        "Inter-token latency",
        "End-to-end",
        "Queue time",
        "Waiting and running",
        "KV-cache usage",
        "tokens/s",
        "Prefix-cache hit rate",
        "Preemptions",
        "success rate",
    ):
        assert any(needle in t for t in titles), needle
    for role, pool in cfg.pools():
        for needle in (
            "Replicas vs HPA target",
            "GPU duty cycle and memory (DCGM)",
            "Endpoint picker",
            "Cost per 1M output tokens (plan)",
        ):
            assert any(t.startswith(needle) and f"{role} ({pool.release})" in t for t in titles), (needle, role)
        if plan.pools[role].capacity.cost_per_million_output_tokens_usd is None:
            assert f"{role} ({pool.release}): capacity plan cost per 1M output tokens: unmeasured" in text
    for q in ("histogram_quantile(0.5,", "histogram_quantile(0.95,", "histogram_quantile(0.99,"):
        assert q + f" sum by (le, pool, release) (rate({m.TTFT.bucket}" in text


def test_cost_panel_shows_the_plan_value_when_measured():
    from infra.targets.gke.planning.autoscaling import plan_hpa

    hpa = plan_hpa(
        role="stable",
        release="r1",
        min_replicas=2,
        pool_max_replicas=4,
        cold_load_seconds=100,
        stream_bound_seconds=100,
        queue_target_per_pod=3,
        kv_cache_target=None,
        reservation_cap=None,
    )
    pool = PoolView(
        role="stable",
        release="r1",
        weight=100,
        hpa=hpa,
        replica_hourly_usd=22.06,
        planned_cost_per_million_usd=3.06,
        measurement_source="bench-2026-11-02",
    )
    t = Thresholds(1.5, 0.05, 0.9, 10, 1.2, 15)
    ps = dash.panels([pool], t, 3, 15)
    text = next(p.text for p in ps if p.text)
    assert "$3.06" in text and "bench-2026-11-02" in text
    live = next(p for p in ps if p.title.startswith("Cost per 1M output tokens at live throughput"))
    assert live.thresholds == (("plan at measured throughput", 3.06),)


# ---- metric names ----------------------------------------------------------------------------------------------


def exported_vllm_names() -> set[str]:
    path = reference("vllm", "vllm-0.33.0-prometheus-metrics.tsv")
    names: set[str] = set()
    with path.open() as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            kind, name = row["type"], row["metric_name"]
            if kind == "Counter":
                names.add(f"{name}_total")
            elif kind == "Histogram":
                names.update(f"{name}_{s}" for s in ("bucket", "sum", "count"))
            else:
                names.add(name)
    return names


VLLM_NAME = re.compile(r"vllm:[A-Za-z0-9_:]+")


@pytest.mark.parametrize("stack", STACKS)
def test_every_vllm_name_in_the_rendered_output_is_exported_by_vllm(plans, stack):
    _, _, inv = plans[stack]
    exported = exported_vllm_names()
    used = set(VLLM_NAME.findall(json.dumps(inv)))
    assert {
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:inter_token_latency_seconds_bucket",
        "vllm:generation_tokens_total",
    } <= used
    assert used - exported == set()


def test_removed_names_are_not_exported():
    exported = exported_vllm_names()
    for removed in (
        "vllm:gpu_cache_usage_perc",
        "vllm:time_per_output_token_seconds_bucket",
        "vllm:time_to_first_token_seconds",
        "vllm:prompt_tokens",
    ):
        assert removed not in exported


# ---- config rules --------------------------------------------------------------------------------------------


def _values(stack: str) -> dict[str, Any]:
    v = json.loads(json.dumps(read_stack_file(stack).values))
    return v


def _errors(v: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ConfigError) as exc:
        load_config(v)
    return {i.path: i.message for i in exc.value.issues}


def _mut_kv(v):
    v["llm-serving:observability"]["autoscaling"]["kv_cache_target"] = 0.95


def _mut_channel_format(v):
    v["llm-serving:observability"]["alerts"]["notification_channels"] = [{"existing": True, "name": "email:oncall"}]


def _mut_channel_project(v):
    v["llm-serving:observability"]["alerts"]["notification_channels"] = [
        {"existing": True, "name": "projects/acme-llm-staging/notificationChannels/4100000000000000001"}
    ]


def _mut_channel_missing_address(v):
    v["llm-serving:observability"]["alerts"]["notification_channels"] = [{"type": "email", "display_name": "x"}]


def _mut_channel_mixed(v):
    v["llm-serving:observability"]["alerts"]["notification_channels"] = [
        {"existing": True, "name": "projects/acme-llm-prod/notificationChannels/1", "email_address": "a@b.example"}
    ]


def _mut_no_channel(v):
    v["llm-serving:observability"]["alerts"]["notification_channels"] = []


def _mut_digest(v):
    v["llm-serving:observability"]["adapter_image_digest"] = "v0.15.2"


RULES = [
    (
        "prod",
        _mut_kv,
        "llm-serving:observability.autoscaling.kv_cache_target",
        "0.95 must be below alerts.kv_cache_usage (0.9): the HPA has to start scaling out before the KV alert fires",
    ),
    (
        "prod",
        _mut_channel_format,
        "llm-serving:observability.alerts.notification_channels[0].name",
        "must be projects/<project>/notificationChannels/<numeric id>",
    ),
    (
        "prod",
        _mut_channel_project,
        "llm-serving:observability.alerts.notification_channels[0].name",
        "'projects/acme-llm-staging/notificationChannels/4100000000000000001' is in project 'acme-llm-staging'; "
        "alert policies of 'acme-llm-prod' can only notify its own channels",
    ),
    (
        "prod",
        _mut_channel_missing_address,
        "llm-serving:observability.alerts.notification_channels[0].email_address",
        "required for an email channel",
    ),
    (
        "prod",
        _mut_channel_mixed,
        "llm-serving:observability.alerts.notification_channels[0].email_address",
        "only for a channel the stack creates (existing: false)",
    ),
    (
        "prod",
        _mut_no_channel,
        "llm-serving:observability.alerts.notification_channels",
        "prod must name at least one notification channel: an alert nobody receives is not an alert",
    ),
    ("dev", _mut_digest, "llm-serving:observability.adapter_image_digest", "must be sha256:<64 hex>, got 'v0.15.2'"),
]


@pytest.mark.parametrize("stack,mutate,path,message", RULES, ids=[r[1].__name__ for r in RULES])
def test_observability_rule(stack, mutate, path, message):
    v = _values(stack)
    mutate(v)
    assert _errors(v)[path] == message


@pytest.mark.parametrize("stack,mutate,path,message", RULES[:2], ids=["kv", "channel"])
def test_bad_observability_config_registers_nothing(tmp_path: Path, capsys, stack, mutate, path, message):
    doc = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    mutate(doc["config"])
    (tmp_path / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(doc))
    out = tmp_path / "plan"
    code = cli.main(["plan", "--stack", stack, "--stacks-dir", str(tmp_path), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{path}: {message}" in err
    assert "nothing was registered." in err
    assert not out.exists()


# ---- fit with the model servers ------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_scrape_selector_and_hpa_target_fit_the_model_server_deployments(plans, stack):
    cfg, _, inv = plans[stack]
    deployments = {r["inputs"]["metadata"]["name"]: r for r in resources(inv, "kubernetes:apps/v1:Deployment")}
    hpa_by_role = {r["inputs"]["metadata"]["name"]: r for r in resources(inv, HPA)}
    for role, pool in cfg.pools():
        pm = one(inv, POD_MONITORING, f"observability-podmonitoring-{role}-vllm-model-servers")["inputs"]
        selector = pm["spec"]["selector"]
        dep = deployments[f"vllm-{role}"]
        assert pm["metadata"]["namespace"] == dep["inputs"]["metadata"]["namespace"] == f"llm-serving-{role}"
        assert hpa_by_role[f"vllm-{role}"]["inputs"]["metadata"]["namespace"] == f"llm-serving-{role}"
        labels = dep["inputs"]["spec"]["template"]["metadata"]["labels"]
        assert selector["matchLabels"].items() <= labels.items()
        assert labels["llm-serving.io/pool"] == role and labels["llm-serving.io/release"] == pool.release
        ports = [
            p["containerPort"]
            for c in dep["inputs"]["spec"]["template"]["spec"]["containers"]
            for p in c.get("ports", [])
        ]
        assert 8000 in ports
        assert dep["urn"] in hpa_by_role[f"vllm-{role}"]["dependencies"]  # the HPA waits for what it scales
        assert "spec.replicas" in dep["options"]["ignore_changes"]  # ... and owns the replica count
