"""Observability of the Vertex AI target (issue 17, item 2): the shipped ``staging-vertex`` stack planned by the real
program under the mock monitor renders a dashboard of vLLM's AI AutoMetrics series beside the endpoint's own Cloud
Monitoring metrics, and alert policies on the contract's objectives.

The expected numbers are hand-written from ``stacks/Pulumi.staging-vertex.yaml`` (contract ttft_p95_ms 1500,
itl_p95_ms 50; stable 90 % min 1 max 2 on release qwen3-32b-fp8-2026-08-23.1, canary 10 % min 1 max 1 on
qwen3-32b-fp8-2026-11-20.1; endpoint llm-staging; the observability defaults KV 0.9, canary ratio 1.2, no-traffic
window 15 min; one e-mail channel). The metric-name rule is checked against the aiplatform.v1 discovery document.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import naming
from components.monitoring import metrics as m
from components.monitoring.alerts import Thresholds
from components.monitoring.dashboard import dashboard_queries
from components.observability import metrics as gke
from components.vertex import monitoring
from components.vertex import requests as rq
from infra.offline import cli
from tests.discovery import document

from .conftest import plan_run, resources

STACK = "staging-vertex"
DASHBOARD = "gcp:monitoring/dashboard:Dashboard"
ALERT = "gcp:monitoring/alertPolicy:AlertPolicy"
CHANNEL = "gcp:monitoring/notificationChannel:NotificationChannel"
OBSERVABILITY = "llm-serving:vertex:Observability"
ENDPOINT_ID = "llm-staging"
#: DeployedModel.displayName of each pool: <role>-<release id> (the model's display name is the release id).
DISPLAY = {"stable": "stable-qwen3-32b-fp8-2026-08-23.1", "canary": "canary-qwen3-32b-fp8-2026-11-20.1"}
TTFT_P95_S, ITL_P95_S = 1.5, 0.05  # contract ttft_p95_ms 1500, itl_p95_ms 50
KV, CANARY_RATIO = 0.9, 1.2  # observability.alerts defaults (infra/config/observability.py)


# ---- helpers -----------------------------------------------------------------------------------------------------


def inv() -> dict[str, Any]:
    return plan_run(STACK).inventory.to_dict()


def dashboard(inventory: dict[str, Any]) -> dict[str, Any]:
    (d,) = resources(inventory, DASHBOARD)
    return json.loads(d["inputs"]["dashboardJson"])


def tiles(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["widget"]["title"]: t["widget"] for t in doc["mosaicLayout"]["tiles"]}


def condition(policy: dict[str, Any]) -> dict[str, Any]:
    (c,) = policy["inputs"]["conditions"]
    return c["conditionPrometheusQueryLanguage"]


def alerts(inventory: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["inputs"]["userLabels"]["pool"], condition(r)["alertRule"]): r for r in resources(inventory, ALERT)}


def thresholds() -> Thresholds:
    return Thresholds(
        ttft_p95_seconds=TTFT_P95_S,
        itl_p95_seconds=ITL_P95_S,
        kv_cache_usage=KV,
        kv_cache_for_minutes=10,
        canary_ttft_ratio=CANARY_RATIO,
        no_traffic_minutes=15,
    )


def view(role: str, weight: int, min_replicas: int = 1) -> monitoring.DeployedModelView:
    return monitoring.DeployedModelView(
        role=role,
        release=DISPLAY[role].split("-", 1)[1],
        display_name=DISPLAY[role],
        weight=weight,
        min_replicas=min_replicas,
        max_replicas=2,
        autoscaling_signal="vllm_queue",
        autoscaling_target=3,
    )


# ---- the plan renders them --------------------------------------------------------------------------------------------


def test_the_plan_renders_a_dashboard_and_the_alert_policies() -> None:
    i = inv()
    (obs,) = resources(i, OBSERVABILITY)
    children = resources(i, DASHBOARD) + resources(i, ALERT) + resources(i, CHANNEL)
    assert all(r["parent"] == obs["urn"] for r in children)  # parent=self on every child
    doc = dashboard(i)
    assert document("monitoring", "v1").validate("Dashboard", doc) == []
    assert doc["displayName"] == "LLM serving — staging (Vertex AI llm-staging)"
    assert sorted(alerts(i)) == sorted(
        [
            (role, a)
            for role in ("stable", "canary")
            for a in ("TtftP95OverObjective", "ItlP95OverObjective", "KvCacheSaturated", "NoTrafficOnServingPool")
        ]
        + [("canary", "CanaryTtftWorseThanStable")]
    )
    # Both pools carry traffic: their latency alerts page.
    assert {a: r["inputs"]["severity"] for a, r in alerts(i).items() if a[1] == "TtftP95OverObjective"} == {
        ("stable", "TtftP95OverObjective"): "CRITICAL",
        ("canary", "TtftP95OverObjective"): "CRITICAL",
    }
    # The stack's one e-mail channel, notified by every policy.
    (ch,) = resources(i, CHANNEL)
    assert ch["inputs"]["type"] == "email" and ch["inputs"]["labels"] == {"email_address": "llm-serving@acme.example"}
    assert all(
        r["inputs"]["notificationChannels"] == [f"<known-after-apply:{ch['name']}.name>"] for r in resources(i, ALERT)
    )
    # The dashboard is created through the Monitoring API.
    (d,) = resources(i, DASHBOARD)
    assert any(dep.endswith("::platform-services-monitoring") for dep in d["dependencies"])


def test_the_dashboard_has_vllm_and_the_endpoints_own_panels() -> None:
    t = tiles(dashboard(inv()))
    by = "deployed model / release"
    for title in (
        f"TTFT by {by} (s)",
        f"Inter-token latency p95 by {by} (s)",
        f"Waiting and running requests by {by}",
        f"KV-cache usage by {by} (0-1)",
        f"Prompt and generation tokens/s by {by}",
        "Replicas and target replicas by deployed model (Vertex)",
        "Predictions/s by deployed model (Vertex)",
        "Accelerator duty cycle by deployed model (Vertex)",
        f"Replicas and queue — stable (qwen3-32b-fp8-2026-08-23.1, {DISPLAY['stable']})",
        f"Replicas and queue — canary (qwen3-32b-fp8-2026-11-20.1, {DISPLAY['canary']})",
    ):
        assert title in t, title
    queries = [
        ds["timeSeriesQuery"]["prometheusQuery"]
        for ds in t["Replicas and target replicas by deployed model (Vertex)"]["xyChart"]["dataSets"]
    ]
    assert queries == [
        "max by (deployed_model_id, model_display_name) (aiplatform_googleapis_com:prediction_online_replicas"
        '{monitored_resource="aiplatform.googleapis.com/Endpoint",endpoint_id="llm-staging"})',
        "max by (deployed_model_id, model_display_name) (aiplatform_googleapis_com:prediction_online_target_replicas"
        '{monitored_resource="aiplatform.googleapis.com/Endpoint",endpoint_id="llm-staging"})',
    ]
    stable = t[f"Replicas and queue — stable (qwen3-32b-fp8-2026-08-23.1, {DISPLAY['stable']})"]["xyChart"]
    # max_replicas 2, min 1, the queue autoscaling target 3 (observability.autoscaling.queue_target_per_pod).
    assert [(x["label"], x["value"]) for x in stable["thresholds"]] == [
        ("max replicas", 2.0),
        ("min replicas", 1.0),
        ("autoscaling target per replica", 3.0),
    ]


# ---- the queries select the endpoint and split by pool ------------------------------------------------------------------


def test_queries_filter_on_the_endpoint_and_split_per_pool() -> None:
    i = inv()
    doc = dashboard(i)
    queries = dashboard_queries(json.dumps(doc))
    assert queries and all(f'endpoint_id="{ENDPOINT_ID}"' in q for q in queries)
    vllm = [q for q in queries if "vertex_vllm_" in q]
    endpoint = [q for q in queries if "aiplatform_googleapis_com:" in q]
    assert len(vllm) + len(endpoint) == len(queries) and vllm and endpoint
    # No vLLM name reaches a query unmapped (the container's own names are not what AutoMetrics stores).
    assert not any(re.search(r"(?<![_a-z])vllm:", q) for q in queries)
    assert all('monitored_resource="aiplatform.googleapis.com/Endpoint"' in q for q in endpoint)
    # Split panels group by deployed model and release and name their lines by them.
    legends = {
        ds["legendTemplate"]
        for t in doc["mosaicLayout"]["tiles"]
        for ds in t["widget"].get("xyChart", {}).get("dataSets", [])
    }
    assert "p95 ${model_display_name} ${model_name}" in legends
    ttft = tiles(doc)["TTFT by deployed model / release (s)"]["xyChart"]["dataSets"]
    assert all("sum by (le, model_display_name, model_name)" in ds["timeSeriesQuery"]["prometheusQuery"] for ds in ttft)
    # Each pool's alerts select its own deployed model on the endpoint, and no other.
    for (role, name), r in alerts(i).items():
        q = condition(r)["query"]
        assert f'endpoint_id="{ENDPOINT_ID}"' in q, name
        if name == "CanaryTtftWorseThanStable":
            assert f'model_display_name="{DISPLAY["canary"]}"' in q and f'model_display_name="{DISPLAY["stable"]}"' in q
            continue
        other = DISPLAY["canary" if role == "stable" else "stable"]
        assert f'model_display_name="{DISPLAY[role]}"' in q and other not in q, (role, name)
        if name != "NoTrafficOnServingPool":
            assert "by (le, model_display_name, model_name)" in q or "avg by (model_display_name, model_name)" in q


def test_the_pool_label_is_the_display_name_the_program_deploys_with() -> None:
    """The alerts' ``model_display_name`` is the DeployedModel.displayName the provider sends for that pool."""
    i = inv()
    sent = {
        r["name"].removeprefix("vertex-"): r["inputs"]["deployed_model"]["displayName"]
        for r in resources(i, "pulumi-python:dynamic/vertex:DeployedModel")
    }
    assert sent == DISPLAY
    assert rq.deployed_model_display_name("canary", "qwen3-32b-fp8-2026-11-20.1") == DISPLAY["canary"]


# ---- thresholds are the contract's objectives ----------------------------------------------------------------------------


def test_thresholds_equal_the_contracts_objectives() -> None:
    i = inv()
    a = alerts(i)
    for role in ("stable", "canary"):
        assert condition(a[(role, "TtftP95OverObjective")])["query"].endswith(") > 1.5")
        assert condition(a[(role, "ItlP95OverObjective")])["query"].endswith(") > 0.05")
        assert condition(a[(role, "KvCacheSaturated")])["query"].endswith(") > 0.9")
        assert condition(a[(role, "KvCacheSaturated")])["duration"] == "600s"  # kv_cache_for_minutes 10
        nt = condition(a[(role, "NoTrafficOnServingPool")])["query"]
        assert "[15m]" in nt and nt.endswith(" <= 0")
    assert condition(a[("canary", "CanaryTtftWorseThanStable")])["query"].endswith(") > 1.2")
    t = tiles(dashboard(i))
    assert t["TTFT by deployed model / release (s)"]["xyChart"]["thresholds"][0]["value"] == TTFT_P95_S
    assert (
        t["Inter-token latency p95 by deployed model / release (s)"]["xyChart"]["thresholds"][0]["value"] == ITL_P95_S
    )
    assert t["KV-cache usage by deployed model / release (0-1)"]["xyChart"]["thresholds"][0]["value"] == KV


def test_a_dark_canary_warns_and_is_not_compared() -> None:
    """Weight 0: a breach is a rollout warning, no traffic is expected, there is nothing to compare yet: those two
    alerts exist switched off, so the stage that gives the canary traffic enables them in place."""
    specs = monitoring.alert_specs(ENDPOINT_ID, [view("stable", 100), view("canary", 0)], thresholds())
    got = {(s.role, s.name): s for s in specs}
    assert not got[("canary", "NoTrafficOnServingPool")].enabled
    assert not got[("canary", "CanaryTtftWorseThanStable")].enabled
    assert got[("canary", "TtftP95OverObjective")].severity == "WARNING"
    assert got[("stable", "TtftP95OverObjective")].severity == "CRITICAL"
    assert got[("stable", "NoTrafficOnServingPool")].enabled


def test_stable_stays_critical_as_the_rollback_target() -> None:
    """Stage 100: stable carries nothing but is where a rollback lands; its alerts keep paging, its traffic alert is
    off."""
    specs = monitoring.alert_specs(ENDPOINT_ID, [view("stable", 0), view("canary", 100)], thresholds())
    got = {(s.role, s.name): s for s in specs}
    assert got[("stable", "TtftP95OverObjective")].severity == "CRITICAL"
    assert not got[("stable", "NoTrafficOnServingPool")].enabled
    assert got[("canary", "CanaryTtftWorseThanStable")].enabled


# ---- metric names: the rule the discovery document shows -------------------------------------------------------------------


def test_the_vertex_name_rule_reproduces_every_name_the_discovery_document_lists() -> None:
    doc = document("aiplatform", "v1")
    text = doc.schema("GoogleCloudAiplatformV1AutoscalingMetricSpec")["properties"]["metricName"]["description"]
    listed = set(re.findall(r"prometheus\.googleapis\.com/([a-z0-9_]+)", text))
    assert listed == {
        monitoring.vertex_name(naming.VLLM_NUM_REQUESTS_WAITING),
        monitoring.vertex_name(naming.VLLM_KV_CACHE_USAGE_LEGACY),
        monitoring.vertex_name(gke.DCGM_GPU_UTIL.name),
    }
    assert monitoring.vertex_name("vllm:num_requests_waiting") == "vertex_vllm_num_requests_waiting"
    assert monitoring.vertex_name("DCGM_FI_DEV_GPU_UTIL") == "vertex_dcgm_fi_dev_gpu_util"
    # The autoscaling signal and the dashboard read the same series.
    assert (
        rq.AUTOSCALING_METRICS["vllm_queue"]
        == "prometheus.googleapis.com/" + monitoring.on_vertex(m.NUM_REQUESTS_WAITING).series
    )
    # Exported suffixes are kept (assumed: only gauges appear in the document).
    assert monitoring.on_vertex(m.TTFT).bucket == "vertex_vllm_time_to_first_token_seconds_bucket"
    assert monitoring.on_vertex(m.REQUEST_SUCCESS).total == "vertex_vllm_request_success_total"
    assert (
        m.cloud_monitoring_promql_name("aiplatform.googleapis.com/prediction/online/accelerator/duty_cycle")
        == "aiplatform_googleapis_com:prediction_online_accelerator_duty_cycle"
    )


# ---- PromQL: parses, and the alerts fire on a breach of their own pool only ---------------------------------------------------


def test_emitted_promql_parses(tmp_path: Path) -> None:
    from .test_promql import PROMTOOL, check_expressions, emitted_queries

    if PROMTOOL is None:
        pytest.skip("promtool not installed: `make integration-deps` installs the Debian prometheus package")
    exprs = emitted_queries(inv())
    assert len(exprs) > 30
    res = check_expressions(exprs, tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in res.stdout


def _ttft_buckets(role: str, slow: bool) -> list[dict[str, str]]:
    """30 min of TTFT histogram series of one pool: 1 request/s, all under 0.5 s (fast) or all 2.5-5 s (slow)."""
    base = monitoring.on_vertex(m.TTFT).bucket
    labels = {
        "endpoint_id": ENDPOINT_ID,
        "model_display_name": DISPLAY[role],
        "model_name": DISPLAY[role].split("-", 1)[1],
        "replica_id": f"{role}-0",
    }
    out = []
    for le in ("0.5", "2.5", "5", "+Inf"):
        inc = 0 if (slow and le in ("0.5", "2.5")) else 60
        sel = ",".join(f'{k}="{v}"' for k, v in sorted({**labels, "le": le}.items()))
        out.append({"series": f"{base}{{{sel}}}", "values": f"0+{inc}x30"})
    return out


def test_the_ttft_alert_fires_on_its_pools_breach_only(tmp_path: Path) -> None:
    from .test_promql import PROMTOOL, alert_rules, promtool

    if PROMTOOL is None:
        pytest.skip("promtool not installed: `make integration-deps` installs the Debian prometheus package")
    rules = alert_rules(inv())
    (rules_path := tmp_path / "alerts.yaml").write_text(yaml.safe_dump(rules, sort_keys=False))
    ttft = {r["labels"]["pool_role"]: r for r in rules["groups"][0]["rules"] if r["alert"] == "TtftP95OverObjective"}
    test = {
        "rule_files": [str(rules_path)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                # stable breaches (p95 between 2.5 and 5 s > 1.5 s), canary does not.
                "input_series": _ttft_buckets("stable", slow=True) + _ttft_buckets("canary", slow=False),
                "alert_rule_test": [
                    {
                        "eval_time": "20m",
                        "alertname": "TtftP95OverObjective",
                        "exp_alerts": [
                            {
                                "exp_labels": {
                                    "severity": "critical",
                                    "pool_role": "stable",
                                    "model_display_name": DISPLAY["stable"],
                                    "model_name": DISPLAY["stable"].split("-", 1)[1],
                                }
                            }
                        ],
                    },
                ],
            }
        ],
    }
    assert set(ttft) == {"stable", "canary"}
    (test_path := tmp_path / "test.yaml").write_text(yaml.safe_dump(test, sort_keys=False))
    res = promtool("test", "rules", str(test_path))
    assert res.returncode == 0, res.stdout + res.stderr


# ---- determinism --------------------------------------------------------------------------------------------------------


def test_two_plans_are_byte_identical(tmp_path: Path) -> None:
    for out in ("a", "b"):
        assert cli.main(["plan", "--stack", STACK, "--out", str(tmp_path / out)]) == 0
    for name in ("inventory.json", "capacity.json", "policy-report.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
