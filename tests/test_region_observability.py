"""Per-region alerts and panels of a fleet (components/observability/regions.py): the PromQL they derive, written
out by hand for a two-region fleet (us-central1 / llm-prod-usc1 and europe-west4 / llm-prod-euw4, half the peak
each); which alerts exist for which fleet; ``promtool check rules`` on the rules they render; and ``promtool test
rules`` on synthetic series that must make each alert fire and that must leave it quiet.

The rules file is rendered from the AlertSpecs the way ``components/monitoring/component.py`` ``alert_policy`` turns
one into a Cloud Monitoring PromQL condition (alert rule = name, query = ``expr``, duration = ``for_seconds``, label
``severity``) plus the policy's ``pool`` user label as ``pool_role``, as tests/test_promql.py reads the rendered
policies back. promtool comes from the Debian ``prometheus`` package (mk/prometheus.mk); without it those tests skip
with that reason.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.monitoring import metrics as m
from components.monitoring.alerts import AlertSpec, Thresholds
from components.monitoring.dashboard import Panel
from components.observability.regions import RegionView, region_alert_specs, region_panels

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not installed: `make prometheus-tools` installs the Debian prometheus package"
)
#: A handful of rules parse and evaluate in well under a second; 60 s only guards a hung binary.
PROMTOOL_TIMEOUT_S = 60

#: The contract's thresholds as tests/test_observability.py writes them: KV-cache alert at 0.9 for 10 min.
T = Thresholds(1.5, 0.05, 0.9, 10, 1.2, 15)
USC1 = RegionView("us-central1", "llm-prod-usc1", 0.5)
EUW4 = RegionView("europe-west4", "llm-prod-euw4", 0.5)
ROLES = ["stable", "canary"]
PROJECT = "llm-prod"


def spec(specs: list[AlertSpec], name: str, role: str) -> AlertSpec:
    (found,) = [s for s in specs if s.name == name and s.role == role]
    return found


# ---- the derived PromQL, by hand --------------------------------------------------------------------------------


def test_serving_nothing_promql_by_hand():
    s = spec(region_alert_specs([USC1, EUW4], ROLES, T), "RegionServingNothing", "europe-west4")
    good = 'finished_reason=~"stop|length"'
    assert s.signal == (
        'sum (rate(vllm:request_success_total{namespace=~"llm-serving-.+",cluster="llm-prod-euw4",'
        + good
        + "}[10m])) or on() vector(0)"
    )
    assert (s.op, s.threshold, s.for_seconds, s.severity) == ("<=", 0, 0, "ERROR")
    assert s.guard_signal == (
        '(sum (rate(vllm:request_success_total{namespace=~"llm-serving-.+",' + good + "}[10m])) > bool 0)"
    )
    assert s.guard_min == 1
    assert s.expr == (
        '(sum (rate(vllm:request_success_total{namespace=~"llm-serving-.+",cluster="llm-prod-euw4",'
        + good
        + "}[10m])) or on() vector(0)) <= 0 and on() ("
        + '(sum (rate(vllm:request_success_total{namespace=~"llm-serving-.+",'
        + good
        + "}[10m])) > bool 0) >= 1)"
    )


def test_saturation_promql_by_hand():
    s = spec(region_alert_specs([USC1, EUW4], ROLES, T), "RegionSaturatedWhileAnotherIdles", "us-central1-stable")
    assert s.expr == (
        "(avg (avg_over_time(vllm:kv_cache_usage_perc"
        '{namespace="llm-serving-stable",pool="stable",cluster="llm-prod-usc1"}[5m]))) > 0.9'
        " and on() (count(avg by (cluster) (avg_over_time(vllm:kv_cache_usage_perc"
        '{namespace="llm-serving-stable",pool="stable",cluster=~"llm-prod-euw4"}[5m])) < 0.3) >= 1)'
    )
    assert (s.for_seconds, s.severity) == (600, "WARNING")  # KvCacheSaturated's 10 min, from the thresholds
    three = region_alert_specs([USC1, EUW4, RegionView("asia-east1", "llm-prod-ase1", 0.2)], ["stable"], T)
    guard = spec(three, "RegionSaturatedWhileAnotherIdles", "europe-west4-stable").guard_signal
    assert guard is not None and 'cluster=~"llm-prod-usc1|llm-prod-ase1"' in guard


def test_region_panels_by_hand():
    panels = region_panels([USC1, EUW4], "1m")
    assert isinstance(panels, list) and all(isinstance(p, Panel) for p in panels)
    assert [p.title for p in panels] == [
        "Completed requests/s — us-central1 (llm-prod-usc1, share 0.5)",
        "KV-cache usage (0-1) — us-central1 (llm-prod-usc1, share 0.5)",
        "Waiting requests — us-central1 (llm-prod-usc1, share 0.5)",
        "Completed requests/s — europe-west4 (llm-prod-euw4, share 0.5)",
        "KV-cache usage (0-1) — europe-west4 (llm-prod-euw4, share 0.5)",
        "Waiting requests — europe-west4 (llm-prod-euw4, share 0.5)",
    ]
    assert {p.split for p in panels} == {("cluster", "pool", "release")}
    euw4 = 'namespace=~"llm-serving-.+",cluster="llm-prod-euw4"'
    assert [q for p in panels[3:] for _, q in p.queries] == [
        "sum by (cluster, pool, release) (rate(vllm:request_success_total{"
        + euw4
        + ',finished_reason=~"stop|length"}[1m]))',
        "avg by (cluster, pool, release) (vllm:kv_cache_usage_perc{" + euw4 + "})",
        "max by (cluster, pool, release) (vllm:kv_cache_usage_perc{" + euw4 + "})",
        "sum by (cluster, pool, release) (vllm:num_requests_waiting{" + euw4 + "})",
    ]


# ---- which alerts exist ---------------------------------------------------------------------------------------


def names(specs: list[AlertSpec]) -> list[tuple[str, str]]:
    return [(s.name, s.role) for s in specs]


def test_which_alerts_exist():
    assert names(region_alert_specs([USC1, EUW4], ROLES, T)) == [
        ("RegionServingNothing", "us-central1"),
        ("RegionSaturatedWhileAnotherIdles", "us-central1-stable"),
        ("RegionSaturatedWhileAnotherIdles", "us-central1-canary"),
        ("RegionServingNothing", "europe-west4"),
        ("RegionSaturatedWhileAnotherIdles", "europe-west4-stable"),
        ("RegionSaturatedWhileAnotherIdles", "europe-west4-canary"),
    ]
    # One region: nobody to spill to, so no saturation alert; its traffic alert stays.
    assert names(region_alert_specs([USC1], ROLES, T)) == [("RegionServingNothing", "us-central1")]
    # A drained region (share 0): no traffic alert, and it is neither compared nor compared against.
    drained = RegionView("europe-west4", "llm-prod-euw4", 0)
    assert names(region_alert_specs([USC1, drained], ROLES, T)) == [("RegionServingNothing", "us-central1")]
    third = RegionView("asia-east1", "llm-prod-ase1", 0.5)
    specs = region_alert_specs([USC1, drained, third], ["stable"], T)
    assert names(specs) == [
        ("RegionServingNothing", "us-central1"),
        ("RegionSaturatedWhileAnotherIdles", "us-central1-stable"),
        ("RegionServingNothing", "asia-east1"),
        ("RegionSaturatedWhileAnotherIdles", "asia-east1-stable"),
    ]
    assert not any("llm-prod-euw4" in s.expr for s in specs)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"region": "", "cluster": "llm-prod-usc1", "share": 0.5}, "region"),
        ({"region": "us-central1\n", "cluster": "llm-prod-usc1", "share": 0.5}, "region"),
        ({"region": "US-Central1", "cluster": "llm-prod-usc1", "share": 0.5}, "region"),
        ({"region": "us-central1", "cluster": 'a"} or vector(1) #', "share": 0.5}, "cluster"),
        ({"region": "us-central1", "cluster": "x" * 41, "share": 0.5}, "cluster"),
        ({"region": "us-central1", "cluster": "llm-prod-usc1", "share": -0.1}, "share"),
        ({"region": "us-central1", "cluster": "llm-prod-usc1", "share": 1.5}, "share"),
        ({"region": "us-central1", "cluster": "llm-prod-usc1", "share": float("nan")}, "share"),
        ({"region": "us-central1", "cluster": "llm-prod-usc1", "share": True}, "share"),
    ],
)
def test_region_view_names_the_bad_field(kwargs, field):
    with pytest.raises(ValueError, match=rf"^RegionView\.{field}: "):
        RegionView(**kwargs)


def test_inconsistent_fleet_inputs_are_refused():
    with pytest.raises(ValueError, match="cluster llm-prod-usc1 appears more than once"):
        region_alert_specs([USC1, RegionView("europe-west4", "llm-prod-usc1", 0.5)], ROLES, T)
    with pytest.raises(ValueError, match="region us-central1 appears more than once"):
        region_alert_specs([USC1, RegionView("us-central1", "llm-prod-usc2", 0.5)], ROLES, T)
    with pytest.raises(ValueError, match=r"^roles: "):
        region_alert_specs([USC1, EUW4], ["stable", "stable"], T)
    with pytest.raises(ValueError, match=r"^roles: "):
        region_alert_specs([USC1, EUW4], [], T)
    with pytest.raises(ValueError, match=r"^t\.kv_cache_usage: "):
        region_alert_specs([USC1, EUW4], ROLES, Thresholds(1.5, 0.05, 0.25, 10, 1.2, 15))


# ---- promtool: the rules parse, fire on breaching series and stay quiet otherwise -------------------------------


def rules_file(specs: list[AlertSpec]) -> dict[str, Any]:
    """The specs as the alert policies deploy them, as one Prometheus rule group."""
    rules = [
        {
            "alert": s.name,
            "expr": s.expr,
            "for": f"{s.for_seconds}s",
            "labels": {"severity": s.severity.lower(), "pool_role": s.role},
        }
        for s in specs
        if s.enabled
    ]
    return {"groups": [{"name": "llm-serving-regions", "interval": "1m", "rules": rules}]}


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None  # the tests that get here are marked needs_promtool
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=PROMTOOL_TIMEOUT_S)


@needs_promtool
def test_rules_pass_promtool_check(tmp_path: Path):
    specs = region_alert_specs([USC1, EUW4, RegionView("asia-east1", "llm-prod-ase1", 0)], ROLES, T)
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rules_file(specs), sort_keys=False))
    res = promtool("check", "rules", str(path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"SUCCESS: {len(specs)} rules found" in res.stdout


def _labels(**kv: str) -> str:
    return "{" + ", ".join(f'{k}="{v}"' for k, v in kv.items()) + "}"


def target(region: RegionView, role: str, pod: int = 0) -> dict[str, str]:
    """The labels Managed Service for Prometheus gives one vLLM pod's series in a region's cluster: the protected
    target labels (a regional cluster's ``location`` is its region) and the pool's namespace and pod labels."""
    return {
        "project_id": PROJECT,
        "location": region.region,
        "cluster": region.cluster,
        "namespace": f"llm-serving-{role}",
        "job": "vllm",
        "instance": f"vllm-{role}-5d8f7c6b9-x{pod}q2z:8000",
        "pod": f"vllm-{role}-5d8f7c6b9-x{pod}q2z",
        "pool": role,
        "release": f"{role}-release",
    }


def finished(region: RegionView, per_minute: int, reason: str = "stop") -> dict[str, str]:
    """The stable pool's finished-request counter in a region, growing ``per_minute`` each 1 min sample."""
    labels = {**target(region, "stable"), "finished_reason": reason}
    return {"series": m.REQUEST_SUCCESS.total + _labels(**labels), "values": f"0+{per_minute}x30"}


def kv(region: RegionView, value: float, role: str = "stable") -> dict[str, str]:
    return {"series": m.KV_CACHE_USAGE.series + _labels(**target(region, role)), "values": f"{value}x30"}


def case(name: str, alert: str, series: list[dict[str, str]], firing_roles: list[str]) -> dict[str, Any]:
    """One promtool test: at 25 min (past every window and ``for``), exactly ``firing_roles`` fire ``alert``."""
    rules = {s.role: s for s in region_alert_specs([USC1, EUW4], ROLES, T)}
    exp = [{"exp_labels": {"severity": rules[r].severity.lower(), "pool_role": r}} for r in firing_roles]
    return {
        "name": name,
        "interval": "1m",
        "input_series": series,
        "alert_rule_test": [{"eval_time": "25m", "alertname": alert, "exp_alerts": exp}],
    }


SERVING = "RegionServingNothing"
SATURATED = "RegionSaturatedWhileAnotherIdles"
CASES = [
    case("euw4 flat while usc1 rises: euw4 only", SERVING, [finished(USC1, 30), finished(EUW4, 0)], ["europe-west4"]),
    case("euw4 has no series while usc1 rises: euw4", SERVING, [finished(USC1, 30)], ["europe-west4"]),
    case(
        "euw4 only aborts while usc1 rises: euw4",
        SERVING,
        [finished(USC1, 30), finished(EUW4, 30, "abort")],
        ["europe-west4"],
    ),
    case("both flat (no traffic anywhere): quiet", SERVING, [finished(USC1, 0), finished(EUW4, 0)], []),
    case("no series anywhere: quiet", SERVING, [], []),
    case("both rise: quiet", SERVING, [finished(USC1, 30), finished(EUW4, 30)], []),
    case("usc1 0.95 while euw4 0.05: usc1 stable", SATURATED, [kv(USC1, 0.95), kv(EUW4, 0.05)], ["us-central1-stable"]),
    case("both 0.95: quiet", SATURATED, [kv(USC1, 0.95), kv(EUW4, 0.95)], []),
    case("usc1 0.95 while euw4 0.5 (not idle): quiet", SATURATED, [kv(USC1, 0.95), kv(EUW4, 0.5)], []),
    case("usc1 0.95 while euw4 has no series (absent, not idle): quiet", SATURATED, [kv(USC1, 0.95)], []),
    case(
        "usc1 stable 0.95 while euw4 canary 0.05 (another pool): quiet",
        SATURATED,
        [kv(USC1, 0.95), kv(EUW4, 0.95), kv(EUW4, 0.05, "canary")],
        [],
    ),
]


def run_cases(tmp_path: Path, specs: list[AlertSpec], tests: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules_file(specs), sort_keys=False))
    (tmp_path / "tests.yaml").write_text(
        yaml.safe_dump({"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": tests}, sort_keys=False)
    )
    return promtool("test", "rules", str(tmp_path / "tests.yaml"))


@needs_promtool
def test_alerts_fire_on_breaching_series_and_stay_quiet_otherwise(tmp_path: Path):
    res = run_cases(tmp_path, region_alert_specs([USC1, EUW4], ROLES, T), CASES)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]


@needs_promtool
def test_promtool_test_catches_a_wrong_expectation(tmp_path: Path):
    """The harness is not vacuous: claiming that a fleet with no traffic anywhere pages for both regions (what the
    alert would do without its guard) makes promtool fail."""
    regions = ["us-central1", "europe-west4"]
    wrong = case("both flat claimed firing", SERVING, [finished(USC1, 0), finished(EUW4, 0)], regions)
    assert run_cases(tmp_path, region_alert_specs([USC1, EUW4], ROLES, T), [wrong]).returncode != 0
