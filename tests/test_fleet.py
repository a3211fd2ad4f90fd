"""A fleet stack (``fleet``): every region planned for its share of the peak, the region-loss N+1 with hand
arithmetic, the fleet's config rules, and the refusal to deploy what is not built yet (nothing registered).

The stack under test is tests/fixtures/fleet/Pulumi.prod-multiregion.yaml: prod's pools and contract, us-central1
(the config cluster, share 0.5) and europe-west4 (share 0.5), each region with its own 8-node H100 reservation.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from infra.config import ConfigError
from infra.offline import cli
from infra.offline.planrun import run_plan
from infra.offline.stackfile import ROOT, read_stack_file
from infra.resolve import resolve_stack
from infra.targets.gke.config import fleet_section
from infra.targets.gke.planning import gke_part, regional_config
from infra.targets.gke.planning.fleet import region_losses
from infra.targets.gke.report import fleet_lines
from infra.targets.gke.rules.fleet import fleet_holds_peak_with_a_region_lost

FIXTURES = Path(__file__).parent / "fixtures" / "fleet"
STACK = "prod-multiregion"


def values() -> dict[str, Any]:
    return copy.deepcopy(read_stack_file(STACK, FIXTURES).values)


def resolve(v: dict[str, Any]):
    return resolve_stack(v, STACK, ROOT)


def problems(v: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ConfigError) as err:
        resolve(v)
    return {i.path: i.message for i in err.value.issues}


def test_each_region_is_the_stack_in_its_place_with_its_share_of_the_peak():
    r = resolve(values())
    cfg = r.config
    fleet = fleet_section(cfg)
    assert fleet is not None
    eu = regional_config(cfg, fleet, "europe-west4")
    # 8.0 req/s x 0.5 = 4.0 req/s per region; every other contract number is the stack's.
    assert eu.contract.peak_arrival_rate_rps == 4.0
    assert regional_config(cfg, fleet, "us-central1").contract.peak_arrival_rate_rps == 4.0
    assert eu.contract.ttft_p95_ms == cfg.contract.ttft_p95_ms == 1500
    assert (eu.region, eu.zones) == ("europe-west4", ["europe-west4-a", "europe-west4-b", "europe-west4-c"])
    acc = eu.accelerators["h100-tp2"]
    assert acc.zone == "europe-west4-b" and acc.reservation is not None
    assert (acc.reservation.name, acc.reservation.count) == ("llm-prod-euw4-h100-tp2", 8)
    assert acc.machine_type == "a3-highgpu-2g"  # the topology is the stack's; only its place moved
    assert eu.gke.cluster_name == "llm-prod-euw4" and eu.gke.ranges.subnet == "10.30.0.0/20"  # type: ignore[attr-defined]
    # The stack itself is unchanged: its own region is the config cluster's.
    assert cfg.accelerators["h100-tp2"].zone == "us-central1-a" and cfg.contract.peak_arrival_rate_rps == 8.0

    part = gke_part(r.plan)
    assert [s.region for s in part.sites] == ["us-central1", "europe-west4"] and part.sites[0].config_cluster
    assert sorted(part.regions) == ["europe-west4"]
    eu_pools = part.regions["europe-west4"].gke_pools()
    # Each region's HPA ceiling: its pool bound (stable 4, canary 2); 8 reserved nodes hold 4 + 2 + 1 + 1 surge.
    assert (eu_pools["stable"].hpa.max_replicas, eu_pools["canary"].hpa.max_replicas) == (4, 2)
    assert part.regions["europe-west4"].accelerators["h100-tp2"].capacity.reserved_nodes == 8


def _measured(theta_o: float, theta_i: float) -> Any:
    return SimpleNamespace(operating_point=SimpleNamespace(output_tokens_per_s=theta_o, input_tokens_per_s=theta_i))


def test_region_loss_with_hand_arithmetic():
    """λ = 8 req/s (stable weight 100), E[O] = 350, E[I] = 1800, ρ = 0.7.
    θ_o = 1000, θ_i = 20000: decode ceil(8·350 / (1000·0.7)) = ceil(4.0) = 4, prefill ceil(8·1800 / 14000) =
    ceil(1.03) = 2 → 4 replicas; either region alone reaches its stable max 4: holds.
    θ_o = 900: decode ceil(2800 / 630) = ceil(4.44) = 5 > 4: with either region lost the fleet cannot hold the peak."""
    r = resolve(values())
    part = gke_part(r.plan)
    pools = {"us-central1": part.gke_pools(), "europe-west4": part.regions["europe-west4"].gke_pools()}

    ok = region_losses(r.config, pools, {"stable": _measured(1000, 20000)})
    assert [(x.role, x.lost_region, x.needed_replicas, x.surviving_max_replicas, x.holds) for x in ok] == [
        ("stable", "us-central1", 4, 4, True),
        ("stable", "europe-west4", 4, 4, True),
    ]
    short = region_losses(r.config, pools, {"stable": _measured(900, 20000)})
    assert [(x.needed_replicas, x.surviving_max_replicas, x.holds) for x in short] == [(5, 4, False)] * 2

    from dataclasses import replace

    plan = replace(r.plan, parts={**r.plan.parts, "gke": replace(part, region_losses=tuple(short))})
    findings = list(fleet_holds_peak_with_a_region_lost(r.config, plan))
    assert findings[0] == (
        ("serving", "stable", "max_replicas"),
        "with us-central1 lost the other regions reach 4 stable replica(s) at most, but the whole peak needs 5: "
        "raise max_replicas (and the reservations) or add a region",
    )
    assert len(findings) == 2
    lines = fleet_lines(replace(part, region_losses=tuple(short)))
    assert (
        "region loss europe-west4: stable needs 5 replica(s) for the whole peak, the other regions reach 4: "
        "does NOT hold" in lines
    )


def test_unmeasured_pools_are_reported_not_checked():
    r = resolve(values())
    lines = fleet_lines(gke_part(r.plan))
    assert (
        lines[0] == "region us-central1 (config cluster llm-prod-usc1): share 0.5 of the peak; canary 2..2, stable 2..4"
    )
    assert lines[1] == "region europe-west4 (llm-prod-euw4): share 0.5 of the peak; canary 2..2, stable 2..4"
    assert "region loss europe-west4: stable unmeasured: not checked" in lines
    assert gke_part(r.plan).region_losses == ()


def test_shares_must_add_up_to_one():
    v = values()
    v["llm-serving:fleet"]["regions"]["europe-west4"]["share"] = 0.4
    assert problems(v)["llm-serving:fleet.share"] == (
        "0.5 (fleet.share) + 0.4 (europe-west4) = 0.9: the regions' shares of the peak must add up to 1"
    )


def test_each_region_is_a_distinct_place():
    v = values()
    eu = v["llm-serving:fleet"]["regions"]["europe-west4"]
    eu["cluster_name"] = "llm-prod-usc1"
    eu["ranges"]["pods"] = "10.16.0.0/14"  # us-central1's Pod range
    got = problems(v)
    assert "already the cluster of gke.cluster_name" in got["llm-serving:fleet.regions.europe-west4.cluster_name"]
    assert got["llm-serving:fleet.regions.europe-west4.ranges.pods"] == (
        "10.16.0.0/14 overlaps gke.ranges.pods: every region of the fleet needs its own ranges"
    )


def test_zones_belong_to_their_region():
    """Schema errors, each with its key (the section then fails as a whole, so no rule reads it)."""
    v = values()
    eu = v["llm-serving:fleet"]["regions"]["europe-west4"]
    eu["accelerators"]["h100-tp2"]["zone"] = "us-central1-a"
    eu["zones"] = ["europe-west4-a", "europe-west4-a", "europe-west1-b"]
    got = problems(v)
    assert (
        got["llm-serving:fleet.regions.europe-west4.accelerators.h100-tp2.zone"]
        == "'us-central1-a' is not in europe-west4"
    )
    assert got["llm-serving:fleet.regions.europe-west4.zones"] == "listed twice: ['europe-west4-a']"


def test_the_own_region_is_not_listed_again():
    v = values()
    us = copy.deepcopy(v["llm-serving:fleet"]["regions"]["europe-west4"])
    us.update(zones=["us-central1-b"], accelerators={"h100-tp2": {"zone": "us-central1-b"}})
    v["llm-serving:fleet"]["regions"]["us-central1"] = us
    got = problems(v)
    assert got["llm-serving:fleet.regions.us-central1"].startswith("us-central1 is the stack's own region")


def test_every_region_reserves_for_every_accelerator():
    v = values()
    v["llm-serving:fleet"]["regions"]["europe-west4"]["accelerators"]["h100-tp2"].pop("reservation")
    assert problems(v)["llm-serving:fleet.regions.europe-west4.accelerators.h100-tp2.reservation"] == (
        "h100-tp2 consumes a reservation in us-central1; europe-west4 needs its own (a zonal reservation serves one "
        "zone only)"
    )
    v = values()
    v["llm-serving:fleet"]["regions"]["europe-west4"]["accelerators"] = {}
    assert "no entry for accelerator 'h100-tp2'" in problems(v)["llm-serving:fleet.regions.europe-west4.accelerators"]


def test_what_a_fleet_does_not_build_is_refused():
    v = values()
    v["llm-serving:serving"]["canary"]["loading"]["path"] = "hyperdisk_ml"
    got = problems(v)
    assert got["llm-serving:serving.canary.loading.path"].startswith("hyperdisk_ml volumes are zonal (one region)")


def test_a_budgeted_tenant_in_a_fleet_is_refused_before_anything_is_registered(tmp_path):
    """A request budget is a Cloud Armor throttle; a fleet has no load balancer it is known to attach to."""
    v = values()
    v["llm-serving:contract"]["tenants"][0]["requests_per_minute"] = 360
    assert problems(v) == {
        "llm-serving:contract.tenants[0].requests_per_minute": (
            "tenant 'chat-app': a fleet has no load balancer a Cloud Armor budget is known to attach to (the "
            "multi-cluster Gateway's cross-region internal load balancer is not among those Cloud Armor lists): "
            "enforce budgets in the API front and drop requests_per_minute, or serve from one region"
        )
    }
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump({"config": v}))
    with pytest.raises(ConfigError) as err:  # the program stops at its config: nothing is registered
        run_plan(STACK, stacks)
    assert [i.path for i in err.value.issues] == ["llm-serving:contract.tenants[0].requests_per_minute"]


def test_a_fleet_is_served_by_the_multi_cluster_gateway_class_and_only_a_fleet_is():
    v = values()
    v["llm-serving:gateway"]["gateway_class"] = "gke-l7-regional-external-managed"
    assert problems(v)["llm-serving:gateway.gateway_class"] == (
        "a fleet stack is served by the multi-cluster Gateway: set gke-l7-cross-regional-internal-managed-mc "
        "(got gke-l7-regional-external-managed)"
    )
    single = copy.deepcopy(read_stack_file("prod").values)
    single["llm-serving:gateway"]["gateway_class"] = "gke-l7-cross-regional-internal-managed-mc"
    with pytest.raises(ConfigError) as err:
        resolve_stack(single, "prod", ROOT)
    assert {i.path: i.message for i in err.value.issues}["llm-serving:gateway.gateway_class"] == (
        "gke-l7-cross-regional-internal-managed-mc routes to pools imported from a fleet: a stack without `fleet` "
        "uses gke-l7-regional-external-managed or gke-l7-rilb"
    )


def test_capacity_sizes_a_fleet_stack(capsys):
    code = cli.main(["capacity", "--stack", STACK, "--stacks-dir", str(FIXTURES)])
    out = capsys.readouterr().out
    assert code == 0
    assert "region europe-west4 (llm-prod-euw4): share 0.5 of the peak; canary 2..2, stable 2..4" in out


def test_a_single_region_stack_has_no_fleet_part():
    r = resolve(json.loads(json.dumps(read_stack_file("prod").values)))
    part = gke_part(r.plan)
    assert (part.sites, dict(part.regions), part.region_losses) == ((), {}, ())
    assert fleet_lines(part) == []


def test_fleet_clusters_run_the_documented_minimum_version():
    """GKE setup page, Requirements: 1.34.1-gke.1127000 or later; a bare 1.34 may resolve to an older patch."""
    for version, bad in (("1.34", True), ("1.34.1-gke.1126999", True), ("1.34.1-gke.1127000", False), ("1.35", False)):
        v = values()
        v["llm-serving:gke"]["min_version"] = version
        if bad:
            assert problems(v)["llm-serving:gke.min_version"].startswith(
                f"{version} may run below 1.34.1-gke.1127000, the multi-cluster GKE Inference Gateway's minimum"
            )
        else:
            resolve(v)


def test_no_model_armor_on_a_fleet():
    v = values()
    v["llm-serving:gateway"]["model_armor"] = copy.deepcopy(
        read_stack_file("prod").values["llm-serving:gateway"]["model_armor"]
    )
    assert problems(v)["llm-serving:gateway.model_armor"].startswith(
        "the multi-cluster GKE Inference Gateway does not support Model Armor"
    )
