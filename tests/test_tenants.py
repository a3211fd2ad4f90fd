"""Tenants (#26 part B): the contract's tenants, the rules that keep their identity verified and their budgets
within capacity, the Cloud Armor policy that holds each to its request budget, and the router's fairness config.

Every expected number is worked out by hand from the shipped stacks' own numbers in the comments beside it."""

from __future__ import annotations

import copy
import dataclasses
import json
from types import SimpleNamespace
from typing import Any

import pytest

from components.gateway import tenants as gt
from infra.config import ConfigError
from infra.offline.stackfile import read_stack_file
from infra.planning.tenants import PoolThroughput, TenantBudget, tenant_fit
from infra.rules.tenants import tenant_budgets_fit_capacity

from .conftest import load_config, one, resources
from .discovery import document

SECURITY_POLICY = "gcp:compute/regionSecurityPolicy:RegionSecurityPolicy"
BACKEND_POLICY = "kubernetes:networking.gke.io/v1:GCPBackendPolicy"


def values(stack: str) -> dict[str, Any]:
    return copy.deepcopy(read_stack_file(stack).values)


def errors(v: dict[str, Any], stack: str | None = None) -> dict[str, str]:
    with pytest.raises(ConfigError) as exc:
        load_config(v, stack)
    return {i.path: i.message for i in exc.value.issues}


C = "llm-serving:contract"


# ---- config -----------------------------------------------------------------------------------------------


def test_prod_and_staging_name_two_tenants_and_dev_none() -> None:
    prod = load_config(values("prod")).contract
    assert [(t.id, t.weight, t.requests_per_minute, t.output_tokens_per_minute) for t in prod.tenants] == [
        ("chat-app", 1, 360, 126_000),  # 360 req/min x 350 mean output tokens
        ("summaries", 1, 120, 42_000),  # 120 x 350
    ]
    assert prod.tenant_identity is not None and prod.tenant_identity.source == "api_key_proxy"
    assert [t.id for t in load_config(values("staging")).contract.tenants] == ["chat-app", "load-test"]
    assert load_config(values("dev")).contract.tenants == []


def test_every_tenant_error_is_reported_with_its_key_path() -> None:
    v = values("prod")
    v[C]["tenants"] = [
        {"id": "chat-app", "weight": 1, "requests_per_minute": 60},
        {"id": "ok", "weight": 1, "requests_per_minute": 60, "output_tokens_per_minute": 0},
        {"id": "Bad_Id", "weight": 0, "requests_per_minute": 0, "colour": "blue"},
    ]
    e = errors(v)
    assert e[f"{C}.tenants[1].output_tokens_per_minute"] == "Input should be greater than or equal to 1 (got 0)"
    assert e[f"{C}.tenants[2].id"].startswith("String should match pattern")
    assert e[f"{C}.tenants[2].weight"] == "Input should be greater than 0 (got 0)"
    assert e[f"{C}.tenants[2].requests_per_minute"] == "Input should be greater than or equal to 1 (got 0)"
    assert e[f"{C}.tenants[2].colour"] == "unknown key (not part of the schema)"


def test_duplicate_tenant_ids_are_refused() -> None:
    v = values("prod")
    v[C]["tenants"][1]["id"] = "chat-app"
    assert errors(v)[f"{C}.tenants[1].id"] == "duplicate tenant id 'chat-app' (also tenants[0])"


def test_tenants_need_an_identity_source() -> None:
    v = values("prod")
    del v[C]["tenant_identity"]
    assert errors(v)[f"{C}.tenant_identity"].startswith("tenants need an identity source")


def test_prod_refuses_a_client_chosen_tenant_header() -> None:
    v = values("prod")
    v[C]["tenant_identity"] = {"source": "client_header"}
    assert errors(v)[f"{C}.tenant_identity.source"].startswith(
        "prod sets the tenant header from a verified caller identity"
    )
    # dev may let clients name their tenant.
    d = values("dev")
    d[C]["tenant_identity"] = {"source": "client_header"}
    d[C]["tenants"] = [{"id": "me", "weight": 1}]
    assert load_config(d).contract.tenants[0].id == "me"


def test_prod_iap_admits_only_the_api_front_that_sets_the_tenant_header() -> None:
    """A group IAP admits directly would skip the API front and send any fairness id; staging may admit people."""
    v = values("prod")
    v["llm-serving:gateway"]["iap"]["members"] = [
        "serviceAccount:llm-api-front@acme-llm-prod.iam.gserviceaccount.com",
        "group:llm-api-clients@acme.example",
    ]
    e = errors(v)
    assert "llm-serving:gateway.iap.members[0]" not in e
    assert e["llm-serving:gateway.iap.members[1]"] == (
        "'group:llm-api-clients@acme.example' would reach the tenants' pools without the API front and could send "
        "any x-llm-d-inference-fairness-id: in prod with tenant_identity api_key_proxy, IAP admits only the API "
        "front's service accounts"
    )
    s = values("staging")
    assert any(m.startswith("group:") for m in s["llm-serving:gateway"]["iap"]["members"])
    assert load_config(s).environment == "staging"


def test_prod_without_tenants_is_refused_on_gke() -> None:
    v = values("prod")
    del v[C]["tenants"]
    del v[C]["tenant_identity"]
    assert errors(v)[f"{C}.tenants"].startswith("prod names its tenants")


def test_unequal_weights_are_refused_on_gke() -> None:
    v = values("prod")
    v[C]["tenants"][1]["weight"] = 3
    assert errors(v)[f"{C}.tenants[1].weight"].startswith("3 differs from tenants[0]'s 1")


def test_budgets_above_the_sized_peak_are_refused() -> None:
    # prod's peak is 8.0 req/s = 480 req/min; 360 + 121 = 481 req/min = 8.0167 req/s > 8.0.
    v = values("prod")
    v[C]["tenants"][1]["requests_per_minute"] = 121
    # The message names the largest budget (chat-app, 360): the one whose cut helps most.
    assert errors(v)[f"{C}.tenants[0].requests_per_minute"] == (
        "tenant budgets sum to 8.017 req/s, above peak_arrival_rate_rps 8 the pools are sized for: lower the budgets "
        "or raise the peak (which resizes the pools)"
    )


# ---- budgets against measured capacity --------------------------------------------------------------------------

#: prod's contract: E[I] = 1800, E[O] = 350 tokens, rho = 0.7; stable pool 2..4 replicas at weight 100.
PROD_MEANS = (1800.0, 350.0, 0.7)
PROD_BUDGETS = [TenantBudget("chat-app", 360, 126_000), TenantBudget("summaries", 120, 42_000)]


def test_unmeasured_pools_give_unmeasured_never_a_pass() -> None:
    fit = tenant_fit(PROD_BUDGETS, [PoolThroughput("stable", 100, 4, None, None)], *PROD_MEANS)
    assert (fit.status, fit.requests_fit, fit.output_tokens_fit, fit.unmeasured_pools) == (
        "unmeasured",
        None,
        None,
        ("stable",),
    )
    # The budgets are still summed: (360 + 120) / 60 = 8.0 req/s, (126,000 + 42,000) / 60 = 2,800 tokens/s.
    assert (fit.budget_requests_per_s, fit.budget_output_tokens_per_s) == (8.0, 2800.0)


def test_budgets_fit_the_capacity_at_the_operating_point() -> None:
    # A replica measured at theta_o = 2,000 and theta_i = 12,000 tokens/s:
    #   decode:  2000 x 0.7 / 350  = 4.0 req/s;  prefill: 12000 x 0.7 / 1800 = 4.667 req/s  -> 4.0 req/s per replica
    #   stable:  (4 - 1 failure) x 4.0 = 12.0 req/s;  (4 - 1) x 2000 x 0.7 = 4,200 output tokens/s
    # The dark canary (weight 0) carries no traffic and is not counted.
    pools = [PoolThroughput("stable", 100, 4, 2000.0, 12000.0), PoolThroughput("canary", 0, 2, None, None)]
    fit = tenant_fit(PROD_BUDGETS, pools, *PROD_MEANS)
    assert fit.status == "measured" and fit.limiting_pool == "stable"
    assert fit.capacity_requests_per_s == pytest.approx(12.0)
    assert fit.capacity_output_tokens_per_s == pytest.approx(4200.0)
    assert (fit.requests_fit, fit.output_tokens_fit) == (True, True)  # 8.0 <= 12.0, 2,800 <= 4,200


def test_a_split_saturates_at_its_first_pool() -> None:
    # staging-like split 90 / 10, both measured at theta_o = 2,000, theta_i = 12,000 (4.0 req/s per replica):
    #   stable 2 replicas: (2 - 1) x 4.0 = 4.0 req/s for 90 % -> the stack saturates at 4.0 x 100 / 90 = 4.444 req/s
    #   canary 2 replicas: (2 - 1) x 4.0 = 4.0 req/s for 10 % -> 40.0 req/s
    pools = [PoolThroughput("stable", 90, 2, 2000.0, 12000.0), PoolThroughput("canary", 10, 2, 2000.0, 12000.0)]
    fit = tenant_fit(PROD_BUDGETS, pools, *PROD_MEANS)
    assert fit.limiting_pool == "stable"
    assert fit.capacity_requests_per_s == pytest.approx(4.0 * 100 / 90)
    # Output tokens: (2 - 1) x 2000 x 0.7 = 1,400 tokens/s x 100 / 90 = 1,555.6 < 2,800 budgeted.
    assert fit.capacity_output_tokens_per_s == pytest.approx(1400 * 100 / 90)
    assert (fit.requests_fit, fit.output_tokens_fit) == (False, False)  # 8.0 > 4.444


def _measured(plan: Any, theta_o: float, theta_i: float) -> Any:
    """The plan with the stable pool as if its record measured theta_o / theta_i at the operating point."""
    record = SimpleNamespace(operating_point=SimpleNamespace(output_tokens_per_s=theta_o, input_tokens_per_s=theta_i))
    return dataclasses.replace(plan, measurements={"stable": record})


def test_the_rule_names_the_tenant_key_when_budgets_exceed_measured_capacity(plans: dict[str, Any]) -> None:
    cfg, plan, _ = plans["prod"]
    # theta_o = 2,000, theta_i = 12,000: 12.0 req/s and 4,200 tokens/s (above) hold prod's 8.0 req/s, 2,800 tokens/s.
    assert list(tenant_budgets_fit_capacity(cfg, _measured(plan, 2000.0, 12000.0))) == []
    # theta_o = 1,000: decode 1000 x 0.7 / 350 = 2.0 req/s per replica (prefill 4.667) -> 3 x 2.0 = 6.0 req/s < 8.0;
    # tokens 3 x 1000 x 0.7 = 2,100 < 2,800.
    found = dict(tenant_budgets_fit_capacity(cfg, _measured(plan, 1000.0, 12000.0)))
    assert found == {
        ("contract", "tenants", 0, "requests_per_minute"): (
            "tenant budgets sum to 8 req/s, above the 6 req/s the pools serve at their measured operating points "
            "(first to saturate: stable, at max_replicas less one failure); lower the budgets or raise max_replicas"
        ),
        ("contract", "tenants", 0, "output_tokens_per_minute"): (
            "tenant output-token budgets sum to 2800 tokens/s, above the 2100 tokens/s the pools decode at their "
            "measured operating points (first to saturate: stable); lower the budgets or raise max_replicas"
        ),
    }


# ---- Cloud Armor ------------------------------------------------------------------------------------------------


def _policy(inventory: dict[str, Any], role: str) -> dict[str, Any]:
    inputs: dict[str, Any] = one(inventory, SECURITY_POLICY, f"inference-gateway-{role}-tenants")["inputs"]
    return inputs


def test_prod_throttles_each_tenant_at_its_share_of_the_pool(plans: dict[str, Any]) -> None:
    _, _, inventory = plans["prod"]
    stable, canary = _policy(inventory, "stable"), _policy(inventory, "canary")
    assert (stable["name"], stable["region"], stable["type"]) == (
        "llm-prod-stable-tenants",
        "us-central1",
        "CLOUD_ARMOR",
    )

    def throttles(policy: dict[str, Any]) -> list[tuple[int, str, int, int]]:
        return [
            (
                r["priority"],
                r["match"]["expr"]["expression"],
                r["rateLimitOptions"]["rateLimitThreshold"]["count"],
                r["rateLimitOptions"]["rateLimitThreshold"]["intervalSec"],
            )
            for r in policy["rules"]
            if r["action"] == "throttle"
        ]

    header = "request.headers['x-llm-d-inference-fairness-id']"
    # stable carries 100 %: ceil(360 x 100 / 100) = 360 and ceil(120 x 100 / 100) = 120 per 60 s.
    assert throttles(stable) == [
        (1000, f"{header} == 'chat-app'", 360, 60),
        (1001, f"{header} == 'summaries'", 120, 60),
    ]
    # the dark canary carries 0 %: ceil(0) = 0, raised to Cloud Armor's minimum count of 1.
    assert throttles(canary) == [(1000, f"{header} == 'chat-app'", 1, 60), (1001, f"{header} == 'summaries'", 1, 60)]
    for rule in stable["rules"][:2]:
        assert rule["rateLimitOptions"] | {"rateLimitThreshold": None} == {
            "conformAction": "allow",
            "exceedAction": "deny(429)",
            "enforceOnKey": "HTTP_HEADER",
            "enforceOnKeyName": "x-llm-d-inference-fairness-id",
            "rateLimitThreshold": None,
        }
    # Cloud Armor rule descriptions are at most 64 characters (Cloud Armor docs "Best practices").
    assert [r["description"] for r in stable["rules"]] == [
        "budget 360/min x 100% = 360/60s",
        "budget 120/min x 100% = 120/60s",
        "no known tenant: refused",
    ]
    longest = gt.armor_rules((gt.TenantSpec("a" * 63, 1, 1_000_000, None),), 100)[0].description
    assert longest == "budget 1000000/min x 100% = 1000000/60s" and len(longest) <= 64
    default = stable["rules"][-1]
    assert (default["priority"], default["action"], default["match"]) == (
        2147483647,
        "deny(403)",
        {"versionedExpr": "SRC_IPS_V1", "config": {"srcIpRanges": ["*"]}},
    )


def test_staging_splits_each_budget_by_pool_weight(plans: dict[str, Any]) -> None:
    _, _, inventory = plans["staging"]
    counts = {
        role: [r["rateLimitOptions"]["rateLimitThreshold"]["count"] for r in _policy(inventory, role)["rules"][:2]]
        for role in ("stable", "canary")
    }
    # staging routes 90 / 10: chat-app 45/min -> ceil(40.5) = 41 and ceil(4.5) = 5; load-test 15/min -> ceil(13.5)
    # = 14 and ceil(1.5) = 2. Cloud Armor counts per backend, so the pools together admit 46 and 16 (rounding up).
    assert counts == {"stable": [41, 14], "canary": [5, 2]}


def test_each_pools_backend_policy_names_its_tenant_policy(plans: dict[str, Any]) -> None:
    for stack, env in (("prod", "prod"), ("staging", "staging")):
        _, _, inventory = plans[stack]
        for role in ("stable", "canary"):
            bp = one(inventory, BACKEND_POLICY, f"vllm-{role}-backendpolicy")
            assert bp["inputs"]["spec"]["default"]["securityPolicy"] == f"llm-{env}-{role}-tenants"
            assert any(u.endswith(f"inference-gateway-{role}-tenants") for u in bp["dependencies"])
    _, _, dev = plans["dev"]
    assert resources(dev, SECURITY_POLICY) == []
    assert "securityPolicy" not in one(dev, BACKEND_POLICY, "vllm-stable-backendpolicy")["inputs"]["spec"]["default"]


def test_the_policy_body_validates_against_compute_v1(plans: dict[str, Any]) -> None:
    compute = document("compute", "v1")
    _, _, inventory = plans["prod"]
    for role in ("stable", "canary"):
        body = {k: v for k, v in _policy(inventory, role).items() if k not in ("project", "region")}
        assert compute.validate("SecurityPolicy", body) == [], role
    assert compute.validate("SecurityPolicy", {"rules": [{"rateLimitOptions": {"exceedActon": "deny(429)"}}]}) != []


# ---- router fairness --------------------------------------------------------------------------------------------


def test_the_fairness_builder_gives_the_picker_what_it_needs() -> None:
    specs = (gt.TenantSpec("chat-app", 1, 360, 126_000), gt.TenantSpec("summaries", 1, 120, 42_000))
    f = gt.tenant_fairness(specs)
    assert f is not None
    assert f.header == "x-llm-d-inference-fairness-id"
    assert f.plugin == {
        "type": "program-aware-fairness",
        "name": "tenant-fairness",
        "parameters": {"strategy": "las", "lasHalfLifeSeconds": 60, "evictionTtlSeconds": 3600},
    }
    assert dict(f.weights) == {"chat-app": 1, "summaries": 1}
    flow = {"defaultPriorityBand": {"maxRequests": "100"}, "priorityBands": [{"priority": 100}, {"priority": -1}]}
    assert gt.with_fairness(flow, f) == {
        "defaultPriorityBand": {"maxRequests": "100", "fairnessPolicyRef": "tenant-fairness"},
        "defaultNegativePriorityBand": {"fairnessPolicyRef": "tenant-fairness"},
        "priorityBands": [
            {"priority": 100, "fairnessPolicyRef": "tenant-fairness"},
            {"priority": -1, "fairnessPolicyRef": "tenant-fairness"},
        ],
    }
    assert flow["defaultPriorityBand"] == {"maxRequests": "100"}  # the input is not changed
    assert gt.tenant_fairness(()) is None


# ---- observability ----------------------------------------------------------------------------------------------


def test_prod_alerts_on_each_tenants_output_token_budget(plans: dict[str, Any]) -> None:
    _, _, inventory = plans["prod"]
    rules = {
        c["conditionPrometheusQueryLanguage"]["ruleGroup"]: c["conditionPrometheusQueryLanguage"]
        for r in resources(inventory, "gcp:monitoring/alertPolicy:AlertPolicy")
        for c in r["inputs"]["conditions"]
        if c["conditionPrometheusQueryLanguage"]["alertRule"] == "TenantOverOutputTokenBudget"
    }
    # 126,000 tokens/min / 60 = 2,100 tokens/s; 42,000 / 60 = 700; held for the 10 min window.
    assert {g: (q["query"].rsplit(" > ", 1)[1], q["duration"]) for g, q in rules.items()} == {
        "llm-serving-tenant-chat-app": ("2100", "600s"),
        "llm-serving-tenant-summaries": ("700", "600s"),
    }
    q = rules["llm-serving-tenant-chat-app"]["query"]
    # Summed over both pools' routers, each term 0 while the tenant sends nothing there.
    assert q.count('fairness_id="chat-app"') == 2 and q.count("or on() vector(0)") == 2


def test_dashboards_show_tenants_only_where_there_are_tenants(plans: dict[str, Any]) -> None:
    def titles(stack: str) -> list[str]:
        _, _, inventory = plans[stack]
        (dash,) = resources(inventory, "gcp:monitoring/dashboard:Dashboard")
        body = dash["inputs"]["dashboardJson"]
        return [t["widget"].get("title", "") for t in json.loads(body)["mosaicLayout"]["tiles"]]

    prod = [t for t in titles("prod") if t.startswith("Tenants:")]
    assert prod == [
        "Tenants: admitted / shed / queued — stable (qwen3-32b-fp8-2026-08-23.1)",
        "Tenants: admitted / shed / queued — canary (qwen3-32b-fp8-2026-11-20.1)",
    ]
    assert not [t for t in titles("dev") if t.startswith("Tenants:")]


def test_the_capacity_plan_says_unmeasured_for_prod(plans: dict[str, Any]) -> None:
    from infra.offline.capacity_table import render_table, tenant_line

    _, plan, _ = plans["prod"]
    entry = plan.to_dict()["tenants"]
    assert (entry["status"], entry["requests_fit"], entry["capacity_requests_per_s"]) == ("unmeasured", None, None)
    assert render_table(plan).splitlines()[-1] == (
        "tenant budgets: 8 req/s, 2,800 output tokens/s; capacity unmeasured (stable): not checked"
    )
    # Measured as in test_budgets_fit_the_capacity_at_the_operating_point: 12 req/s, 4,200 tokens/s.
    fit = tenant_fit(PROD_BUDGETS, [PoolThroughput("stable", 100, 4, 2000.0, 12000.0)], *PROD_MEANS)
    assert tenant_line(fit) == (
        "tenant budgets: 8 req/s, 2,800 output tokens/s; capacity 12 req/s, 4,200 output tokens/s (first to "
        "saturate: stable): fit"
    )
    _, dev_plan, _ = plans["dev"]
    assert dev_plan.tenants is None and "tenants" not in dev_plan.to_dict()


def _prod_picker_config(role: str) -> dict[str, Any]:
    import yaml

    from .conftest import plan_run

    (chart,) = [
        r["inputs"]
        for r in plan_run("prod").inventory.to_dict()["resources"]
        if r["type"] == "kubernetes:helm.sh/v4:Chart" and r["inputs"]["name"] == f"vllm-{role}-router"
    ]
    epp = chart["values"]["router"]["epp"]
    doc: dict[str, Any] = yaml.safe_load(epp["pluginsCustomConfig"][epp["pluginsConfigFile"]])
    return doc


def test_every_band_of_the_prod_pickers_shares_its_queue_between_the_tenants() -> None:
    """The fairness policy is declared once and named by every band: a band naming none falls back to
    global-strict-fairness-policy, which ignores flows (llm-d-router v0.10.0 endpointpickerconfig_types.go)."""
    for role in ("stable", "canary"):
        cfg = _prod_picker_config(role)
        (plugin,) = [p for p in cfg["plugins"] if p.get("name") == gt.FAIRNESS_PLUGIN_NAME]
        assert plugin["type"] == "program-aware-fairness"
        fc = cfg["flowControl"]
        bands = [fc["defaultPriorityBand"], fc["defaultNegativePriorityBand"], *fc["priorityBands"]]
        assert len(bands) == 2 + len(values("prod")["llm-serving:contract"]["priority_classes"])
        assert {b["fairnessPolicyRef"] for b in bands} == {gt.FAIRNESS_PLUGIN_NAME}


def test_a_stack_without_tenants_keeps_the_band_default() -> None:
    from .conftest import plan_run

    for r in plan_run("dev").inventory.to_dict()["resources"]:
        if r["type"] == "kubernetes:helm.sh/v4:Chart":
            assert "fairnessPolicyRef" not in json.dumps(r["inputs"]) and "program-aware" not in json.dumps(r["inputs"])
