"""Every PromQL expression the program emits passes ``promtool check rules``, and every alert fires on synthetic
series that breach it and stays quiet on series that do not (``promtool test rules``).

Expressions are collected from the rendered inventory (dashboard JSON and alert-policy conditions), not from a
hand-written list. promtool comes from the Debian ``prometheus`` package (``make integration-deps`` /
mk/prometheus.mk); without it these tests skip with that reason.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import naming
from components.monitoring import metrics as m
from components.monitoring.dashboard import dashboard_queries
from components.observability import metrics as gke
from components.observability import tenants as tenant_obs
from infra.planning.plan import StackPlan
from infra.targets.gke.planning import gke_part

from .conftest import GKE_STACKS, STACKS, resources, serving_roles

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not installed: `make integration-deps` installs the Debian prometheus package"
)
#: promtool parses a few hundred expressions in well under a second; 60 s only guards a hung binary.
PROMTOOL_TIMEOUT_S = 60


def emitted_queries(inventory: dict[str, Any]) -> list[str]:
    """Every PromQL string in the rendered inventory: dashboard panels and alert-policy conditions."""
    out: list[str] = []
    for r in resources(inventory, "gcp:monitoring/dashboard:Dashboard"):
        out += dashboard_queries(r["inputs"]["dashboardJson"])
    for r in resources(inventory, "gcp:monitoring/alertPolicy:AlertPolicy"):
        out += [c["conditionPrometheusQueryLanguage"]["query"] for c in r["inputs"]["conditions"]]
    return out


def alert_rules(inventory: dict[str, Any]) -> dict[str, Any]:
    """The rendered alert policies as a Prometheus rules file: same expression, ``for`` and labels."""
    rules = []
    for r in sorted(resources(inventory, "gcp:monitoring/alertPolicy:AlertPolicy"), key=lambda r: r["name"]):
        if r["inputs"].get("enabled") is False:
            continue  # switched off at this rollout stage: Cloud Monitoring does not evaluate it
        c = r["inputs"]["conditions"][0]["conditionPrometheusQueryLanguage"]
        rules.append(
            {
                "alert": c["alertRule"],
                "expr": c["query"],
                "for": c["duration"],
                "labels": {**c["labels"], "pool_role": r["inputs"]["userLabels"]["pool"]},
            }
        )
    return {"groups": [{"name": "llm-serving", "interval": "1m", "rules": rules}]}


def promtool(*args: str) -> subprocess.CompletedProcess:
    assert PROMTOOL is not None  # the tests that get here are marked needs_promtool
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=PROMTOOL_TIMEOUT_S)


def check_expressions(exprs: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    doc = {
        "groups": [{"name": "syntax", "rules": [{"record": f"check:expr_{i}", "expr": e} for i, e in enumerate(exprs)]}]
    }
    path = tmp_path / "exprs.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return promtool("check", "rules", str(path))


@needs_promtool
@pytest.mark.parametrize("stack", STACKS)
def test_every_emitted_expression_parses(plans, stack, tmp_path):
    exprs = emitted_queries(plans[stack][2])
    assert len(exprs) > 40
    res = check_expressions(exprs, tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in res.stdout


@needs_promtool
def test_the_syntax_check_rejects_a_broken_expression(tmp_path):
    res = check_expressions(["sum by (pool (rate(vllm:num_requests_waiting[5m]))"], tmp_path)
    assert res.returncode != 0


@needs_promtool
@pytest.mark.parametrize("stack", STACKS)
def test_alert_rules_file_is_valid(plans, stack, tmp_path):
    path = tmp_path / "alerts.yaml"
    path.write_text(yaml.safe_dump(alert_rules(plans[stack][2]), sort_keys=False))
    res = promtool("check", "rules", str(path))
    assert res.returncode == 0, res.stdout + res.stderr


# ---- promtool test rules: synthetic series that fire and that stay quiet ---------------------------------------


def NS(role: str) -> str:
    """Each pool's series carry its own namespace."""
    return f"llm-serving-{role}"


BUCKETS = ("0.01", "0.5", "2.5", "10", "+Inf")


def _labels(**kv: str) -> str:
    return "{" + ", ".join(f'{k}="{v}"' for k, v in kv.items()) + "}"


def _pod(role: str, i: int = 0) -> str:
    return f"vllm-{role}-5d8f7c6b9-x{i}q2z"


def histogram(metric: str, role: str, release: str, fast: bool, minutes: int = 30) -> list[dict[str, str]]:
    """60 observations per minute, all at most 0.01 s (fast) or all in (2.5, 10] s (slow)."""
    out = []
    for le in BUCKETS:
        counted = fast or le in ("10", "+Inf")
        out.append(
            {
                "series": f"{metric}_bucket"
                + _labels(namespace=NS(role), pool=role, release=release, pod=_pod(role), le=le),
                "values": f"0+{60 if counted else 0}x{minutes}",
            }
        )
    return out


def gauge(metric: str, role: str, release: str, value: float, pod: int = 0, minutes: int = 30) -> dict[str, str]:
    return {
        "series": metric + _labels(namespace=NS(role), pool=role, release=release, pod=_pod(role, pod)),
        "values": f"{value}x{minutes}",
    }


def background(roles: dict[str, str], skip: set[tuple[str, str]]) -> list[dict[str, str]]:
    """Healthy series of every pool (EPP up, requests finishing) unless the case replaces them."""
    out = []
    for role, release in roles.items():
        if ("epp", role) not in skip:
            out.append({"series": "up" + _labels(namespace=NS(role), job=gke.epp_scrape_job(role)), "values": "1x30"})
        if ("traffic", role) not in skip:
            out.append(
                {
                    "series": m.REQUEST_SUCCESS.total
                    + _labels(namespace=NS(role), pool=role, release=release, finished_reason="stop", pod=_pod(role)),
                    "values": "0+30x30",
                }
            )
    return out


def rule_labels(rules: dict[str, Any], alert: str, role: str) -> dict[str, str]:
    rule = next(r for r in rules["groups"][0]["rules"] if r["alert"] == alert and r["labels"]["pool_role"] == role)
    return dict(rule["labels"])


@dataclass(frozen=True)
class Model:
    """A co-hosted model as its alerts see it: its alerts' role, its group, release, public name and instances."""

    role: str
    group: str
    release: str
    name: str
    instances: int


def cohosted_models(plan: StackPlan) -> list[Model]:
    return [
        Model(f"{g.role}-{m.role}", g.role, m.release.release, m.model_name, len(m.instances))
        for g in gke_part(plan).cohosted().values()
        for m in g.models
    ]


def model_series(metric: str, model: Model, values: str, **extra: str) -> dict[str, str]:
    """A co-hosted model's series from its group's pod: the group's namespace and pool, vLLM's model_name."""
    labels = _labels(
        namespace=NS(model.group), pool=model.group, model_name=model.release, pod=_pod(model.group), **extra
    )
    return {"series": metric + labels, "values": values}


def cases(
    rules: dict[str, Any], roles: dict[str, str], max_replicas: dict[str, int], models: Sequence[Model] = ()
) -> list[dict[str, Any]]:
    """One firing and one quiet test per alert rule present in this stack's rendered rules."""
    present = {(r["alert"], r["labels"]["pool_role"]) for r in rules["groups"][0]["rules"]}
    tests: list[dict[str, Any]] = []

    def add(
        alert: str,
        role: str,
        series: list,
        fires: bool,
        extra_labels: dict[str, str],
        at: str = "25m",
        skip: frozenset = frozenset(),
    ) -> None:
        exp = [{"exp_labels": {**rule_labels(rules, alert, role), **extra_labels}}] if fires else []
        tests.append(
            {
                "interval": "1m",
                "input_series": background(roles, set(skip)) + series,
                "alert_rule_test": [{"eval_time": at, "alertname": alert, "exp_alerts": exp}],
                "name": f"{alert}/{role}/{'fires' if fires else 'quiet'}",
            }
        )

    for role, release in roles.items():
        split = {"pool": role, "release": release}
        if ("KvCacheSaturated", role) not in present:  # a co-hosted group: its objectives are its models'
            assert role in {x.group for x in models}, role
        for alert, metric in (("TtftP95OverObjective", m.TTFT.name), ("ItlP95OverObjective", m.ITL.name)):
            if (alert, role) in present:
                add(alert, role, histogram(metric, role, release, fast=False), True, split)
                add(alert, role, histogram(metric, role, release, fast=True), False, split)
        if ("KvCacheSaturated", role) in present:
            add("KvCacheSaturated", role, [gauge(m.KV_CACHE_USAGE.series, role, release, 0.95)], True, split)
            add("KvCacheSaturated", role, [gauge(m.KV_CACHE_USAGE.series, role, release, 0.5)], False, split)
        n = max_replicas[role]

        def pods(count: int, waiting: float, role: str = role, release: str = release) -> list[dict[str, str]]:
            return [gauge(m.NUM_REQUESTS_WAITING.series, role, release, waiting, i) for i in range(count)] + [
                gauge(m.NUM_REQUESTS_RUNNING.series, role, release, 4, i) for i in range(count)
            ]

        add("QueueBuildingAtMaxReplicas", role, pods(n, 10), True, {})
        add("QueueBuildingAtMaxReplicas", role, pods(n, 1), False, {})  # at max, queue under target
        if n > 1:
            add("QueueBuildingAtMaxReplicas", role, pods(n - 1, 10), False, {})  # HPA can still add pods
        epp = {"series": "up" + _labels(namespace=NS(role), job=gke.epp_scrape_job(role)), "values": "0x30"}
        add("EndpointPickerUnavailable", role, [epp], True, {}, skip=frozenset({("epp", role)}))
        add("EndpointPickerUnavailable", role, [], True, {}, skip=frozenset({("epp", role)}))  # no series at all
        add("EndpointPickerUnavailable", role, [], False, {})
        restarts = {
            "series": gke.KSM_RESTARTS.total + _labels(namespace=NS(role), pod=_pod(role), container="vllm"),
            "values": "0x10 1x20",
        }
        add("ServingPodsRestarting", role, [restarts], True, {}, at="15m")
        add("ServingPodsRestarting", role, [{**restarts, "values": "1x30"}], False, {}, at="15m")
        if ("NoTrafficOnServingPool", role) in present:
            stalled = {
                "series": m.REQUEST_SUCCESS.total
                + _labels(namespace=NS(role), pool=role, release=release, finished_reason="stop", pod=_pod(role)),
                "values": "500x30",
            }
            add("NoTrafficOnServingPool", role, [stalled], True, {}, skip=frozenset({("traffic", role)}))
            add("NoTrafficOnServingPool", role, [], False, {})
    for model in models:
        pool = {"pool": model.group}  # the series of a co-host pod carry no release label: vLLM's model_name tells
        for alert, metric in (("TtftP95OverObjective", m.TTFT.name), ("ItlP95OverObjective", m.ITL.name)):
            for fast in (False, True):
                series = [
                    model_series(f"{metric}_bucket", model, f"0+{60 if fast or le in ('10', '+Inf') else 0}x30", le=le)
                    for le in BUCKETS
                ]
                add(alert, model.role, series, not fast, pool)
        for kv, fires in ((0.95, True), (0.5, False)):
            add("KvCacheSaturated", model.role, [model_series(m.KV_CACHE_USAGE.series, model, f"{kv}x30")], fires, pool)
        for up, fires in (("0", True), ("1", False)):
            series = [
                model_series(
                    naming.COHOST_INSTANCE_UP,
                    model,
                    f"{up if i == 0 else '1'}x30",
                    cohost_model=model.name,
                    cohost_instance=f"{model.name}-{i}",
                )
                for i in range(model.instances)
            ]
            add("CoHostedInstancesMissing", model.role, series, fires, {})
    if ("CanaryTtftWorseThanStable", "canary") in present:
        slow = histogram(m.TTFT.name, "canary", roles["canary"], fast=False)
        fast_c = histogram(m.TTFT.name, "canary", roles["canary"], fast=True)
        fast_s = histogram(m.TTFT.name, "stable", roles["stable"], fast=True)
        add("CanaryTtftWorseThanStable", "canary", slow + fast_s, True, {})
        add("CanaryTtftWorseThanStable", "canary", fast_c + fast_s, False, {})
    for rule in rules["groups"][0]["rules"]:
        if rule["alert"] != tenant_obs.TOKEN_BUDGET_ALERT:
            continue
        # A tenant's output tokens through the stable pool's router at twice its budget (fires) or half (quiet);
        # the counter grows by rate x 60 per 1 min sample.
        role, budget = rule["labels"]["pool_role"], float(rule["expr"].rsplit(" > ", 1)[1])
        tenant = role.removeprefix("tenant-")
        sel = _labels(namespace=NS("stable"), job=gke.epp_scrape_job("stable"), fairness_id=tenant, priority="0")
        for factor, fires in ((2.0, True), (0.5, False)):
            tokens = {"series": tenant_obs.EPP_OUTPUT_TOKENS.sum + sel, "values": f"0+{budget * factor * 60:g}x30"}
            add(tenant_obs.TOKEN_BUDGET_ALERT, role, [tokens], fires, {})
    return tests


@needs_promtool
@pytest.mark.parametrize("stack", GKE_STACKS)
def test_alerts_fire_on_breaching_series_and_stay_quiet_otherwise(plans, stack, tmp_path):
    cfg, plan, inv = plans[stack]
    rules = alert_rules(inv)
    roles = serving_roles(cfg, plan)
    max_replicas = {
        r["inputs"]["metadata"]["name"].removeprefix("vllm-"): r["inputs"]["spec"]["maxReplicas"]
        for r in resources(inv, "kubernetes:autoscaling/v2:HorizontalPodAutoscaler")
    }
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules, sort_keys=False))
    tests = cases(rules, roles, max_replicas, cohosted_models(plan))
    covered = {(t["alert_rule_test"][0]["alertname"], t["name"].split("/")[1]) for t in tests}
    assert covered >= {(r["alert"], r["labels"]["pool_role"]) for r in rules["groups"][0]["rules"]}
    for outcome in ("fires", "quiet"):
        assert any(t["name"].endswith(outcome) for t in tests)
    (tmp_path / "tests.yaml").write_text(
        yaml.safe_dump({"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": tests}, sort_keys=False)
    )
    res = promtool("test", "rules", str(tmp_path / "tests.yaml"))
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]


@needs_promtool
def test_promtool_test_catches_a_wrong_expectation(plans, tmp_path):
    """The harness is not vacuous: claiming a quiet pool fires makes promtool fail."""
    cfg, _, inv = plans["prod"]
    rules = alert_rules(inv)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules, sort_keys=False))
    release = cfg.serving.stable.release
    test = {
        "interval": "1m",
        "input_series": [gauge(m.KV_CACHE_USAGE.series, "stable", release, 0.5)],
        "alert_rule_test": [
            {
                "eval_time": "25m",
                "alertname": "KvCacheSaturated",
                "exp_alerts": [
                    {
                        "exp_labels": {
                            **rule_labels(rules, "KvCacheSaturated", "stable"),
                            "pool": "stable",
                            "release": release,
                        }
                    }
                ],
            }
        ],
    }
    (tmp_path / "tests.yaml").write_text(
        yaml.safe_dump({"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": [test]}, sort_keys=False)
    )
    assert promtool("test", "rules", str(tmp_path / "tests.yaml")).returncode != 0
