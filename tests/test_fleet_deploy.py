"""A prod fleet's platform (docs/multiregion.md, components/fleet.py): the other region's cluster in the config
cluster's VPC, its GPU node pool on its own region's reservation, Hub memberships for both clusters and the
multi-cluster Ingress feature naming the config cluster, and the prod policy pack on it. The serving side (model
servers, exports, the multi-cluster Gateway) is checked on the shipped dev fleet, tests/test_fleet_serving.py.

The prod fixture (tests/fixtures/fleet/Pulumi.prod-multiregion.yaml) plans, and the prod pack refuses it for one
reason only, its tenants' request budgets (:data:`BASELINE`); every one-mutation case below adds exactly its own
finding to that baseline. Expected values are the fixture's, written out by hand.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest

from infra.config import ConfigError
from infra.entry import main as program_main
from infra.offline.planrun import PROJECT
from infra.offline.runner import run_offline
from infra.offline.stackfile import ROOT, read_stack_file
from infra.registry import REGISTRY
from infra.resolve import resolve_stack

FIXTURES = Path(__file__).parent / "fixtures" / "fleet"
#: Policies whose one-mutation cases are here (the fleet plan is their compliant baseline): policy -> test.
FLEET_POLICY_CASES = {
    "fleet-cluster-min-version": "test_a_fleet_cluster_below_the_multi_cluster_minimum_is_a_violation",
    "fleet-no-model-armor": "test_a_model_armor_extension_in_a_fleet_is_a_violation",
}
STACK = "prod-multiregion"
#: What the prod pack finds on the prod fleet as it stands: neither imported pool's backend policy names a Cloud
#: Armor budget policy (a fleet has none to attach: rule fleet_tenant_budgets_have_no_enforcement_point).
BASELINE = [
    ("every-tenant-bounded", "vllm-canary-import-backendpolicy"),
    ("every-tenant-bounded", "vllm-stable-import-backendpolicy"),
]
CONFIG_VPC = "<known-after-apply:platform-network-vpc.id>"


def inventory() -> dict[str, Any]:
    """The fixture planned by the real program under the mocks."""
    return _planned()[1]


def of(typ: str, name: str | None = None) -> list[dict[str, Any]]:
    return [r for r in inventory()["resources"] if r["type"] == typ and (name is None or r["name"] == name)]


def one(typ: str, name: str) -> dict[str, Any]:
    (r,) = of(typ, name)
    return r


def test_two_clusters_in_two_regions_one_vpc():
    clusters = {r["inputs"]["name"]: r["inputs"] for r in of("gcp:container/cluster:Cluster")}
    assert {n: c["location"] for n, c in clusters.items()} == {
        "llm-prod-usc1": "us-central1",
        "llm-prod-euw4": "europe-west4",
    }
    assert clusters["llm-prod-euw4"]["network"] == CONFIG_VPC
    assert [r["name"] for r in of("gcp:compute/network:Network")] == ["platform-network-vpc"]
    nodes = one("gcp:compute/subnetwork:Subnetwork", "fleet-europe-west4-network-nodes")["inputs"]
    assert (nodes["network"], nodes["region"], nodes["ipCidrRange"]) == (CONFIG_VPC, "europe-west4", "10.30.0.0/20")
    assert {r["rangeName"]: r["ipCidrRange"] for r in nodes["secondaryIpRanges"]} == {
        "pods": "10.32.0.0/14",
        "services": "10.36.0.0/20",
    }
    proxy = one("gcp:compute/subnetwork:Subnetwork", "fleet-europe-west4-network-proxy-only")["inputs"]
    assert (proxy["ipCidrRange"], proxy["purpose"], proxy["role"]) == (
        "10.30.16.0/23",
        "GLOBAL_MANAGED_PROXY",
        "ACTIVE",
    )
    nat = one("gcp:compute/routerNat:RouterNat", "fleet-europe-west4-network-nat")["inputs"]
    assert nat["region"] == "europe-west4"


def test_each_gpu_pool_consumes_its_own_regions_reservation():
    reservations = {r["inputs"]["name"]: r["inputs"] for r in of("gcp:compute/reservation:Reservation")}
    assert {n: (r["zone"], r["specificReservation"]["count"]) for n, r in reservations.items()} == {
        "llm-prod-usc1-h100-tp2": ("us-central1-a", 8),
        "llm-prod-euw4-h100-tp2": ("europe-west4-b", 8),
    }
    eu = one("gcp:container/nodePool:NodePool", "fleet-europe-west4-gpu-h100-tp2-pool")["inputs"]
    assert eu["nodeLocations"] == ["europe-west4-b"]
    affinity = eu["nodeConfig"]["reservationAffinity"]
    assert affinity["consumeReservationType"] == "SPECIFIC_RESERVATION"
    assert affinity["values"] == ["llm-prod-euw4-h100-tp2"]  # its own region's reservation, not us-central1's
    # Planned for the region's share: stable HPA max 4 + canary max 2, one surge node per pool, one replica per
    # a3-highgpu-2g node (TP 2 on its 2 GPUs): 4 + 2 + 2 = 8 nodes, the reservation's count.
    assert eu["autoscaling"]["totalMaxNodeCount"] == 8


def test_node_accounts_are_per_cluster_and_pull_from_the_one_registry():
    accounts = sorted(r["inputs"]["accountId"] for r in of("gcp:serviceaccount/account:Account"))
    assert accounts == ["gke-gpu-h100-tp2", "llm-prod-euw4-h100-tp2", "llm-prod-euw4-system", "llm-prod-usc1-system"]
    (reader,) = of(
        "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember",
        "fleet-europe-west4-registry-reader-gpu-h100-tp2",
    )
    assert (reader["inputs"]["location"], reader["inputs"]["role"]) == ("us-central1", "roles/artifactregistry.reader")
    assert reader["inputs"]["repository"] == "serving"  # the config platform's repository (gke.registry)
    assert reader["property_dependencies"]["repository"] == [
        "urn:pulumi:prod-multiregion::llm-serving::llm-serving:registry:Registry$gcp:artifactregistry/repository:Repository::platform-registry-repo"
    ]


def test_workload_identity_grants_are_made_once_for_the_fleet():
    """One Workload Identity pool per project: a pool's KSA is one principal in both clusters, so the weights
    bucket is granted once per role (2 roles), not once per cluster."""
    readers = of("gcp:storage/bucketIAMMember:BucketIAMMember")
    assert sorted(r["name"] for r in readers if "weights-reader" in r["name"]) == [
        "platform-identity-weights-reader-canary",
        "platform-identity-weights-reader-stable",
    ]
    ksas = sorted(r["name"] for r in of("kubernetes:core/v1:ServiceAccount") if r["name"].startswith("fleet-"))
    assert ksas == [
        "fleet-europe-west4-identity-ksa-canary-model-server",
        "fleet-europe-west4-identity-ksa-stable-model-server",
    ]


def test_both_clusters_are_fleet_members_and_the_config_cluster_holds_the_gateway_config():
    memberships = {r["inputs"]["membershipId"]: r for r in of("gcp:gkehub/membership:Membership")}
    assert {k: m["inputs"]["endpoint"]["gkeCluster"]["resourceLink"] for k, m in memberships.items()} == {
        "llm-prod-usc1": "//container.googleapis.com/<known-after-apply:platform-cluster-gke.id>",
        "llm-prod-euw4": "//container.googleapis.com/<known-after-apply:fleet-europe-west4-cluster-gke.id>",
    }
    assert {m["inputs"]["location"] for m in memberships.values()} == {"global"}
    assert all(m["options"]["protect"] for m in memberships.values())  # prod
    feature = one("gcp:gkehub/feature:Feature", "fleet-multiclusteringress")
    assert (feature["inputs"]["name"], feature["inputs"]["location"]) == ("multiclusteringress", "global")
    assert feature["inputs"]["spec"] == {
        "multiclusteringress": {"configMembership": "<known-after-apply:fleet-llm-prod-usc1.id>"}
    }


def test_the_fleet_apis_are_enabled():
    names = sorted(r["inputs"]["service"] for r in of("gcp:projects/service:Service") if r["name"].startswith("fleet-"))
    assert names == [
        "autoscaling.googleapis.com",
        "gkehub.googleapis.com",
        "multiclusteringress.googleapis.com",
        "multiclusterservicediscovery.googleapis.com",
        "trafficdirector.googleapis.com",
    ]


def test_a_cluster_name_too_long_for_its_node_account_is_refused():
    import copy

    v = copy.deepcopy(read_stack_file(STACK, FIXTURES).values)
    v["llm-serving:fleet"]["regions"]["europe-west4"]["cluster_name"] = "llm-prod-europe-west4-a"  # 23 characters
    with pytest.raises(ConfigError) as err:
        resolve_stack(v, STACK, ROOT)
    issues = {i.path: i.message for i in err.value.issues}
    # "llm-prod-europe-west4-a" + "-h100-tp2" = 23 + 9 = 32 characters > 30
    assert issues["llm-serving:fleet.regions.europe-west4.cluster_name"] == (
        "the GPU nodes of europe-west4 would run as service account 'llm-prod-europe-west4-a-h100-tp2' (32 characters):"
        " an id must be 6-30 lowercase letters, digits or hyphens; shorten the cluster name"
    )


# ---- the policy pack on the fleet plan (Analyzer gRPC protocol) ------------------------------------------------


@cache
def _planned() -> tuple[Any, dict[str, Any]]:
    """(resolution, inventory) of the fixture run by the real program."""
    from infra.resolve import ResolvedStack

    seen: list[ResolvedStack] = []
    sf = read_stack_file(STACK, FIXTURES)
    run = run_offline(
        lambda: program_main(on_resolved=seen.append, registry=REGISTRY),
        project=PROJECT,
        stack=STACK,
        config=sf.config,
        secret_keys=sf.secret_keys,
    )
    return seen[0], run.inventory().to_dict()


def _violations(inv: dict[str, Any]) -> list[tuple[str, str]]:
    from infra.offline import policy as pack
    from infra.offline.inventory import Inventory

    resolved, _ = _planned()
    report, _path = pack.check_policies(resolved, Inventory.from_dict(inv))
    return sorted((v.policy, v.urn.rsplit("::", 1)[-1]) for v in report.violations)


def test_the_prod_fleet_fails_the_prod_pack_on_its_tenant_budgets_only():
    assert _violations(_planned()[1]) == BASELINE


def test_an_unprotected_fleet_membership_is_a_mandatory_violation():
    import copy

    inv = copy.deepcopy(_planned()[1])
    (membership,) = [r for r in inv["resources"] if r["name"] == "fleet-llm-prod-usc1"]
    membership["options"]["protect"] = False
    assert _violations(inv) == sorted([*BASELINE, ("deletion-protection-stateful", "fleet-llm-prod-usc1")])


def test_every_regions_backends_admit_the_whole_fleets_proxies():
    """A cross-regional internal load balancer's proxies in either region may send to either region's backends:
    each region's vLLM and picker openings admit both proxy-only ranges (10.10.16.0/23 us-central1,
    10.30.16.0/23 europe-west4) plus Google's health-check ranges."""
    expected = ["10.10.16.0/23", "10.30.16.0/23", "130.211.0.0/22", "35.191.0.0/16"]
    rules = {r["inputs"]["name"]: r["inputs"]["sourceRanges"] for r in of("gcp:compute/firewall:Firewall")}
    assert rules == {
        "llm-prod-usc1-allow-lb-model-server": expected,
        "llm-prod-usc1-allow-lb-epp": expected,
        "llm-prod-euw4-allow-lb-model-server": expected,
        "llm-prod-euw4-allow-lb-epp": expected,
    }


@pytest.mark.parametrize(
    "version,message",
    [
        (
            "1.34",
            "Cluster fleet-europe-west4-cluster-gke: minMasterVersion '1.34' is not a full GKE version: the fleet's "
            "clusters must run at least 1.34.1-gke.1127000, which only a full version proves",
        ),
        (
            "1.34.1-gke.1126999",  # one build below the documented minimum
            "Cluster fleet-europe-west4-cluster-gke: minMasterVersion 1.34.1-gke.1126999 is below 1.34.1-gke.1127000, "
            "the multi-cluster Inference Gateway's minimum",
        ),
    ],
)
def test_a_fleet_cluster_below_the_multi_cluster_minimum_is_a_violation(version, message):
    import copy

    from infra.offline import policy as pack
    from infra.offline.inventory import Inventory

    inv = copy.deepcopy(_planned()[1])
    (cluster,) = [r for r in inv["resources"] if r["name"] == "fleet-europe-west4-cluster-gke"]
    cluster["inputs"]["minMasterVersion"] = version
    report, _ = pack.check_policies(_planned()[0], Inventory.from_dict(inv))
    found = [(v.policy, v.message.split("\n", 1)[1]) for v in report.violations]
    assert [f for f in found if f[0] != "every-tenant-bounded"] == [("fleet-cluster-min-version", message)]


def test_every_fleet_policy_case_exists():
    assert all(callable(globals().get(t)) for t in FLEET_POLICY_CASES.values())


def test_a_model_armor_extension_in_a_fleet_is_a_violation():
    import copy

    inv = copy.deepcopy(_planned()[1])
    (route,) = [r for r in inv["resources"] if r["type"] == "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute"][:1]
    ext = copy.deepcopy(route)
    ext["type"] = "kubernetes:networking.gke.io/v1:GCPTrafficExtension"
    ext["name"] = "inference-gateway-model-armor"
    ext["urn"] = (
        route["urn"].rsplit("$", 1)[0]
        + "$kubernetes:networking.gke.io/v1:GCPTrafficExtension::inference-gateway-model-armor"
    )
    ext["inputs"] = {
        "apiVersion": "networking.gke.io/v1",
        "kind": "GCPTrafficExtension",
        "metadata": {"name": "model-armor", "namespace": "llm-serving"},
        "spec": {
            "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "inference-gateway"}]
        },
    }
    inv["resources"].append(ext)
    assert _violations(inv) == sorted([*BASELINE, ("fleet-no-model-armor", "inference-gateway-model-armor")])
