"""The CrossGuard policy pack .

Per-policy tests call each policy's own ``validate`` in-process, with properties marshalled exactly as the engine
does (``to_analyzer_value`` -> pulumi_policy's deserializer and unknown-checking proxy), starting from the shipped
prod plan (the compliant baseline) and changing ONE property per case. The acceptance tests then go through the
real Analyzer gRPC path: the shipped stacks with their enforcement files, the bad-stack fixture and a mutated
inventory via ``infra.offline.cli.main(["policy", ...])``. Each gRPC run starts one pack process (~1-2 s).
"""

from __future__ import annotations

import copy
import json
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pulumi_policy import (
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.proxy import unknown_checking_proxy

from infra.offline import cli
from infra.offline import policy as pack
from infra.offline.analyzer import COMPUTED_MARKER, to_analyzer_value
from infra.offline.inventory import Inventory
from infra.resolve import ResolvedStack

from .conftest import REPO, STACKS

sys.path.insert(0, str(REPO / "policies"))  # the pack imports its rules as the top-level package ``rules``
from rules import MODULES
from rules._common import CIS_GCP, CIS_GKE

BY_NAME = {m.NAME: m for m in MODULES}
CONFIG_DIR = REPO / "policies" / "config"

# ---- in-process evaluation, marshalled like the engine -------------------------------------------------------


def _engine_props(inputs: dict[str, Any]) -> Any:
    return unknown_checking_proxy(deserialize_properties(to_analyzer_value(inputs)))


def _opts(r: dict[str, Any]) -> PolicyResourceOptions:
    from pulumi_policy import PolicyCustomTimeouts

    return PolicyResourceOptions(
        bool(r["options"].get("protect")), [], None, [], PolicyCustomTimeouts(0, 0, 0), [], None
    )


def policy_config(name: str, resolved: ResolvedStack, env: str = "prod") -> dict[str, Any]:
    """Schema defaults, then the environment file's properties plus the stack facts (as the policy command sends)."""
    policy = BY_NAME[name].POLICY
    props = {
        k: v["default"]
        for k, v in (policy.config_schema.properties if policy.config_schema else {}).items()
        if "default" in v
    }
    entry = pack.merged_policy_config(resolved, CONFIG_DIR / f"{env}.json").get(name) or {}
    props.update({k: v for k, v in entry.items() if k != "enforcementLevel"} if isinstance(entry, dict) else {})
    return props


def evaluate(name: str, resources: list[dict[str, Any]], config: dict[str, Any]) -> list[str]:
    """Messages a policy reports for these inventory resources (sorted; stack policies prefix the resource name)."""
    policy = BY_NAME[name].POLICY
    out: list[str] = []
    if isinstance(policy, ResourceValidationPolicy):
        for r in resources:
            args = ResourceValidationArgs(
                r["type"], _engine_props(r["inputs"]), r["urn"], r["name"], _opts(r), None, config
            )

            def report(msg: str, urn: str | None = None, name: str = r["name"]) -> None:
                out.append(f"{name}: {msg}")

            policy.validate(args, report)
    else:
        assert isinstance(policy, StackValidationPolicy)
        prs = [
            PolicyResource(r["type"], _engine_props(r["inputs"]), r["urn"], r["name"], _opts(r), None, None, [], {})
            for r in resources
        ]
        # Link parents and dependencies by URN, as pulumi-policy's Analyzer server does for AnalyzeStack.
        by_urn = {pr.urn: pr for pr in prs}
        for pr, r in zip(prs, resources, strict=True):
            pr.parent = by_urn.get(r.get("parent") or "")
            pr.dependencies = [by_urn[u] for u in r.get("dependencies", []) if u in by_urn]
        names = {r["urn"]: r["name"] for r in resources}

        def report_stack(msg: str, urn: str | None = None) -> None:
            out.append(f"{names.get(urn, '(stack)') if urn is not None else '(stack)'}: {msg}")

        policy.validate(StackValidationArgs(prs, config), report_stack)
    return sorted(out)


def find(resources: list[dict[str, Any]], typ: str, name: str) -> dict[str, Any]:
    found = [r for r in resources if r["type"].endswith(typ) and r["name"] == name]
    assert len(found) == 1, f"{typ} {name}: {[r['name'] for r in resources if r['type'].endswith(typ)]}"
    return found[0]


def _picker_conf(resources: list[dict[str, Any]], chart: str, change: Callable[[dict[str, Any]], Any]) -> None:
    """Change one picker's EndpointPickerConfig (the JSON file its values carry) in place."""
    epp = find(resources, ":Chart", chart)["inputs"]["values"]["router"]["epp"]
    files = epp["pluginsCustomConfig"]
    conf = json.loads(files[epp["pluginsConfigFile"]])
    change(conf)
    files[epp["pluginsConfigFile"]] = json.dumps(conf)


def _engine(conf: dict[str, Any], name: str) -> dict[str, Any]:
    (extractor,) = [p for p in conf["plugins"] if p["type"] == "core-metrics-extractor"]
    (engine,) = [e for e in extractor["parameters"]["engineConfigs"] if e["name"] == name]
    return engine


def container(resources: list[dict[str, Any]], dep: str = "vllm-stable-deployment") -> dict[str, Any]:
    return find(resources, ":Deployment", dep)["inputs"]["spec"]["template"]["spec"]["containers"][0]


def set_flag(
    resources: list[dict[str, Any]], flag: str, value: str | None, dep: str = "vllm-stable-deployment"
) -> None:
    args = container(resources, dep)["args"]
    i = args.index(flag)
    if value is None:
        del args[i : i + 2]
    else:
        args[i + 1] = value


@pytest.fixture(scope="module")
def prod(plans: dict[str, Any]) -> tuple[Any, list[dict[str, Any]]]:
    cfg, plan, inventory = plans["prod"]
    cfg = ResolvedStack("prod", cfg, plan)
    return cfg, inventory["resources"]


# ---- metadata ---------------------------------------------------------------------------------------------


def test_pack_metadata() -> None:
    assert len(MODULES) >= 20
    assert len(BY_NAME) == len(MODULES)
    for m in MODULES:
        p = m.POLICY
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", p.name) and p.name == m.NAME
        assert p.description and p.remediation_steps == m.REMEDIATION and p.severity is m.SEVERITY
        assert Path(m.__file__).stem == p.name.replace("-", "_")  # one module per policy, named after it
        if p.framework is not None:
            assert (
                p.framework.name in (CIS_GKE, CIS_GCP)
                and p.framework.version
                and re.fullmatch(r"\d+(\.\d+)+", p.framework.reference)
            )


def test_config_files_name_real_policies_and_environment_levels(plans: dict[str, Any]) -> None:
    for env in STACKS:
        data = json.loads((CONFIG_DIR / f"{env}.json").read_text())
        assert set(data) - {"all"} <= set(BY_NAME), env
    assert json.loads((CONFIG_DIR / "dev.json").read_text())["all"] == "advisory"
    assert json.loads((CONFIG_DIR / "prod.json").read_text())["all"] == "mandatory"
    # staging consumes a reservation owned by another project: the policy file must state the same node count.
    staging_cfg = plans["staging"][0]
    reserved = json.loads((CONFIG_DIR / "staging.json").read_text())["hpa-max-within-reservation"]["reservedNodes"]
    expected = {
        a.reservation.name: a.reservation.count
        for a in staging_cfg.accelerators.values()
        if a.reservation is not None and a.reservation.mode == "existing"
    }
    assert reserved == expected


def test_policy_facts_come_from_planner_and_contract(plans: dict[str, Any]) -> None:
    cfg, plan, _ = plans["prod"]
    facts = pack.policy_facts(ResolvedStack("prod", cfg, plan))
    assert facts["startup-window-covers-cold-load"]["coldLoadSeconds"] == {
        f"vllm-{role}": round(p.capacity.cold_load_seconds, 3) for role, p in plan.pools.items()
    }
    assert facts["grace-period-covers-stream-bound"]["streamBoundSeconds"] == pytest.approx((1500 + 4096 * 50) / 1000)


# ---- per-policy cases: baseline passes, one change -> the exact message ------------------------------------

Mutation = Callable[[list[dict[str, Any]]], None]


def _dep_spec(rs: list[dict[str, Any]], dep: str = "vllm-stable-deployment") -> dict[str, Any]:
    return find(rs, ":Deployment", dep)["inputs"]["spec"]["template"]["spec"]


def _set_init_flag(rs: list[dict[str, Any]], flag: str, value: str) -> None:
    cmd = _dep_spec(rs)["initContainers"][0]["command"]
    cmd[cmd.index(flag) + 1] = value


def _pool(rs: list[dict[str, Any]]) -> dict[str, Any]:
    return find(rs, ":NodePool", "platform-gpu-h100-tp2-pool")["inputs"]


def _bucket(rs: list[dict[str, Any]]) -> dict[str, Any]:
    return find(rs, ":Bucket", "platform-weights-bucket")


def _add(rs: list[dict[str, Any]], typ: str, name: str, inputs: dict[str, Any], protect: bool = False) -> None:
    rs.append(
        {
            "type": typ,
            "name": name,
            "urn": f"urn:pulumi:prod::llm-serving::{typ}::{name}",
            "inputs": inputs,
            "options": {"protect": protect},
            "custom": True,
        }
    )


def _drop(rs: list[dict[str, Any]], typ: str, name: str) -> None:
    rs.remove(find(rs, typ, name))


WIF = (
    "principal://iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/acme-llm-prod.svc.id.goog/"
    "subject/ns/llm-serving/sa/model-server"
)
RELEASE = "qwen3-32b-fp8-2026-08-23.1"
STABLE_REVISION = json.loads((REPO / "stacks" / "releases" / "prod" / f"{RELEASE}.json").read_text())["model_revision"]
STABLE_IMAGE = "us-central1-docker.pkg.dev/acme-llm-prod/serving/vllm-openai"

# (policy, case id, mutation, expected messages)
CASES: list[tuple[str, str, Mutation, list[str]]] = [
    (
        "serving-images-pinned-by-digest",
        "tag-not-digest",
        lambda rs: container(rs).update(image=f"{STABLE_IMAGE}:v0.32.0"),
        [
            f"vllm-stable-deployment: container 'vllm' image '{STABLE_IMAGE}:v0.32.0' is not pinned by digest: a tag "
            "can move to another image between two pod starts; use <repository>@sha256:<64 hex>"
        ],
    ),
    (
        "serving-images-pinned-by-digest",
        "adapter-latest",
        lambda rs: find(rs, ":Deployment", "observability-adapter-deployment")["inputs"]["spec"]["template"]["spec"][
            "containers"
        ][0].update(image="gcr.io/gke-release/custom-metrics-stackdriver-adapter:latest"),
        [
            "observability-adapter-deployment: container 'pod-custom-metrics-stackdriver-adapter' image "
            "'gcr.io/gke-release/custom-metrics-stackdriver-adapter:latest' uses the mutable :latest tag: use a released "
            "version tag or, better, <repository>@sha256:<digest>"
        ],
    ),
    (
        "serving-images-pinned-by-digest",
        "chart-latest",
        lambda rs: find(rs, ":Chart", "vllm-stable-router-epp")["inputs"]["values"]["router"]["epp"]["image"].update(
            tag="latest"
        ),
        [
            "vllm-stable-router-epp: values.router.epp.image 'ghcr.io/llm-d/llm-d-router-endpoint-picker:latest' uses the "
            "mutable :latest tag: use a released "
            "version tag or, better, <repository>@sha256:<digest>"
        ],
    ),
    (
        "serving-release-identity",
        "served-model-name",
        lambda rs: set_flag(rs, "--served-model-name", "qwen3-32b"),
        [
            f"vllm-stable-deployment: --served-model-name is 'qwen3-32b', not the release id '{RELEASE}': set it to '{RELEASE}'"
        ],
    ),
    (
        "serving-release-identity",
        "no-served-model-name",
        lambda rs: set_flag(rs, "--served-model-name", None),
        [f"vllm-stable-deployment: --served-model-name is not set: set it to the release id '{RELEASE}'"],
    ),
    (
        "serving-release-identity",
        "metadata-label",
        lambda rs: find(rs, ":Deployment", "vllm-stable-deployment")["inputs"]["metadata"]["labels"].update(
            {"llm-serving.io/release": "other"}
        ),
        [
            f"vllm-stable-deployment: metadata label llm-serving.io/release is 'other' but the pod template says '{RELEASE}': "
            "both must be the release id"
        ],
    ),
    (
        "startup-window-covers-cold-load",
        "window-too-short",
        lambda rs: container(rs)["startupProbe"].update(failureThreshold=10),
        [
            "vllm-stable-deployment: startupProbe window is 100 s (initialDelaySeconds 0 + periodSeconds 10 x "
            "failureThreshold 10), below the cold-load estimate of {cold} s: set failureThreshold to at least 20"
        ],
    ),
    (
        "startup-window-covers-cold-load",
        "startup-equals-readiness",
        lambda rs: container(rs).update(startupProbe=copy.deepcopy(container(rs)["readinessProbe"])),
        [
            "vllm-stable-deployment: startupProbe is identical to readinessProbe: the startup probe must tolerate a cold "
            "load while readiness fails fast; give them different thresholds",
            "vllm-stable-deployment: startupProbe window is 30 s (initialDelaySeconds 0 + periodSeconds 10 x "
            "failureThreshold 3), below the cold-load estimate of {cold} s: set failureThreshold to at least 20",
        ],
    ),
    (
        "startup-window-covers-cold-load",
        "no-startup-probe",
        lambda rs: container(rs).pop("startupProbe"),
        [
            "vllm-stable-deployment: container 'vllm' has no startupProbe: the liveness and readiness probes would judge "
            "a pod that is still loading weights; add one whose window covers the cold load"
        ],
    ),
    (
        "grace-period-covers-stream-bound",
        "grace-short",
        lambda rs: _dep_spec(rs).update(terminationGracePeriodSeconds=200),
        [
            "vllm-stable-deployment: terminationGracePeriodSeconds is 200 s, below preStop drain 30 s + stream bound "
            "206.3 s = 237 s: set it to at least 237"
        ],
    ),
    (
        "grace-period-covers-stream-bound",
        "default-grace",
        lambda rs: _dep_spec(rs).pop("terminationGracePeriodSeconds"),
        [
            "vllm-stable-deployment: terminationGracePeriodSeconds is 30 s, below preStop drain 30 s + stream bound "
            "206.3 s = 237 s: set it to at least 237"
        ],
    ),
    (
        "pdb-for-serving-workloads",
        "no-model-server-pdb",
        lambda rs: _drop(rs, ":PodDisruptionBudget", "vllm-stable-pdb"),
        [
            "vllm-stable-deployment: Deployment vllm-stable has no PodDisruptionBudget selecting its pods: add one with "
            "maxUnavailable: 1"
        ],
    ),
    (
        "pdb-for-serving-workloads",
        "epp-pdb-stalls-drains",
        lambda rs: rs.append(
            {
                **find(rs, ":PodDisruptionBudget", "vllm-stable-pdb"),
                "name": "vllm-canary-router-epp-pdb",
                "urn": "urn:pulumi:prod::llm-serving::kubernetes:policy/v1:PodDisruptionBudget::vllm-canary-router-epp-pdb",
                "inputs": {
                    "metadata": {"name": "vllm-canary-router-epp", "namespace": "llm-serving-canary"},
                    "spec": {
                        "maxUnavailable": 1,
                        "selector": {"matchLabels": {"llm-d-router-gateway": "vllm-canary-router-epp"}},
                    },
                },
            }
        ),
        [
            "vllm-canary-router-epp: endpoint picker vllm-canary-router runs 2 leader-elected replicas, of which only the leader is "
            "ready: PodDisruptionBudget vllm-canary-router-epp can never allow evicting it and would stall every drain of its "
            "node; remove the PodDisruptionBudget"
        ],
    ),
    (
        "pdb-for-serving-workloads",
        "epp-not-spread",
        lambda rs: find(rs, ":Chart", "vllm-canary-router-epp")["inputs"]["values"]["router"]["epp"].pop("affinity"),
        [
            "vllm-canary-router-epp: endpoint picker vllm-canary-router runs 2 replicas without pod anti-affinity on "
            "kubernetes.io/hostname: one node drain could take every replica; set router.epp.affinity.podAntiAffinity"
        ],
    ),
    (
        "create-after-dependencies",
        "address-before-compute-api",
        lambda rs: find(rs, ":Address", "inference-gateway-address").update(dependencies=[]),
        [
            "inference-gateway-address: gcp:compute/address:Address inference-gateway-address is created through "
            "compute.googleapis.com, which this stack enables, but does not depend on its enablement "
            "(platform-services-compute): on a fresh project it can be created before the API is on"
        ],
    ),
    (
        "create-after-dependencies",
        "wif-grant-before-cluster",
        lambda rs: find(rs, ":BucketIAMMember", "platform-identity-weights-reader-stable").update(
            dependencies=[
                d
                for d in find(rs, ":BucketIAMMember", "platform-identity-weights-reader-stable")["dependencies"]
                if "Cluster" not in d and "identity:WorkloadIdentity" not in d
            ]
        ),
        [
            "platform-identity-weights-reader-stable: gcp:storage/bucketIAMMember:BucketIAMMember "
            "platform-identity-weights-reader-stable grants to the Workload Identity principal of pool acme-llm-prod.svc.id.goog, but does not depend on the GKE "
            "cluster that creates that pool: on a fresh project the grant is rejected"
        ],
    ),
    (
        "epp-min-replicas",
        "one-replica",
        lambda rs: find(rs, ":Chart", "vllm-stable-router-epp")["inputs"]["values"]["router"]["epp"].update(replicas=1),
        [
            "vllm-stable-router-epp: endpoint picker replicas is 1: run at least 2, a picker that is down stops all routing to "
            "its pool"
        ],
    ),
    (
        "serving-keeps-warm-minimum",
        "min-one",
        lambda rs: find(rs, ":HorizontalPodAutoscaler", "observability-hpa-stable")["inputs"]["spec"].update(
            minReplicas=1
        ),
        [
            "observability-hpa-stable: minReplicas is 1: keep at least 2 warm replicas; a new GPU replica takes minutes to "
            "obtain a node and load weights"
        ],
    ),
    (
        "serving-keeps-warm-minimum",
        "unset-is-one",  # autoscaling/v2 default
        lambda rs: find(rs, ":HorizontalPodAutoscaler", "observability-hpa-canary")["inputs"]["spec"].pop(
            "minReplicas"
        ),
        [
            "observability-hpa-canary: minReplicas is 1: keep at least 2 warm replicas; a new GPU replica takes minutes "
            "to obtain a node and load weights"
        ],
    ),
    (
        "hpa-max-within-reservation",
        "max-too-high",
        lambda rs: find(rs, ":HorizontalPodAutoscaler", "observability-hpa-stable")["inputs"]["spec"].update(
            maxReplicas=6
        ),
        [
            "platform-gpu-h100-tp2-pool: reservation llm-prod-h100-tp2 holds 8 node(s) x 1 replica(s)/node = 8 replicas, "
            "but its Deployments can reach 10 (vllm-canary max 2 + surge 1, vllm-stable max 6 + surge 1): lower maxReplicas "
            "or reserve at least 10 node(s)"
        ],
    ),
    (
        "hpa-max-within-reservation",
        "reservation-smaller",
        lambda rs: find(rs, ":Reservation", "platform-gpu-h100-tp2-reservation")["inputs"][
            "specificReservation"
        ].update(count=6),
        [
            "platform-gpu-h100-tp2-pool: reservation llm-prod-h100-tp2 holds 6 node(s) x 1 replica(s)/node = 6 replicas, "
            "but its Deployments can reach 8 (vllm-canary max 2 + surge 1, vllm-stable max 4 + surge 1): lower maxReplicas "
            "or reserve at least 8 node(s)"
        ],
    ),
    (
        "gpu-consumes-specific-reservation",
        "any-reservation",
        lambda rs: _pool(rs)["nodeConfig"]["reservationAffinity"].update(consumeReservationType="ANY_RESERVATION"),
        [
            "platform-gpu-h100-tp2-pool: GPU node pool consumes reservation type 'ANY_RESERVATION': set "
            "SPECIFIC_RESERVATION with key compute.googleapis.com/reservation-name and the reservation's name"
        ],
    ),
    (
        "gpu-consumes-specific-reservation",
        "no-affinity",
        lambda rs: _pool(rs)["nodeConfig"].pop("reservationAffinity"),
        [
            "platform-gpu-h100-tp2-pool: GPU node pool has no reservationAffinity: set consumeReservationType "
            "SPECIFIC_RESERVATION with key compute.googleapis.com/reservation-name and the reservation's name"
        ],
    ),
    (
        "gke-no-spot-nodes",
        "spot",
        lambda rs: _pool(rs)["nodeConfig"].update(spot=True),
        [
            "platform-gpu-h100-tp2-pool: nodeConfig.spot is true: set it to false, spot VMs are reclaimed without notice "
            "and cannot consume a reservation"
        ],
    ),
    (
        "storage-bucket-uniform-access",
        "acl",
        lambda rs: _bucket(rs)["inputs"].update(uniformBucketLevelAccess=False),
        [
            "platform-weights-bucket: uniformBucketLevelAccess is False: set it to true so only bucket-level IAM grants access"
        ],
    ),
    (
        "storage-bucket-public-access-prevention",
        "inherited",
        lambda rs: _bucket(rs)["inputs"].update(publicAccessPrevention="inherited"),
        [
            "platform-weights-bucket: publicAccessPrevention is 'inherited': set it to 'enforced' so no IAM grant can make "
            "the bucket public"
        ],
    ),
    (
        "storage-bucket-versioning",
        "off",
        lambda rs: _bucket(rs)["inputs"].pop("versioning"),
        [
            "platform-weights-bucket: versioning.enabled is None: set it to true so an overwritten or deleted weight file or "
            "manifest can be restored"
        ],
    ),
    (
        "iam-no-project-roles-for-serving-identities",
        "project-role",
        lambda rs: _add(
            rs,
            "gcp:projects/iAMMember:IAMMember",
            "bad-grant",
            {"project": "acme-llm-prod", "role": "roles/storage.objectViewer", "member": WIF},
        ),
        [
            "bad-grant: project-level role roles/storage.objectViewer is granted to Kubernetes identity "
            "subject/ns/llm-serving/sa/model-server: grant it on the specific resource instead (only the metrics adapter's "
            "roles/monitoring.viewer may be project-level)"
        ],
    ),
    (
        "iam-no-project-roles-for-serving-identities",
        "adapter-other-role",
        lambda rs: next(
            r for r in rs if r["inputs"].get("member", "").endswith("sa/custom-metrics-stackdriver-adapter")
        )["inputs"].update(role="roles/monitoring.editor"),
        [
            "observability-adapter-monitoring-viewer: project-level role roles/monitoring.editor is granted to Kubernetes "
            "identity subject/ns/custom-metrics/sa/custom-metrics-stackdriver-adapter: grant it on the specific resource "
            "instead (only the metrics adapter's roles/monitoring.viewer may be project-level)"
        ],
    ),
    (
        "iam-no-service-account-keys",
        "key",
        lambda rs: _add(rs, "gcp:serviceaccount/key:Key", "model-server-key", {"serviceAccountId": "x"}),
        [
            "model-server-key: service account keys must not be created: authenticate the workload with Workload Identity "
            "Federation (its Kubernetes service account's principal) instead"
        ],
    ),
    (
        "iam-no-public-members",
        "all-users",
        lambda rs: find(rs, ":BucketIAMMember", "platform-identity-weights-reader-stable")["inputs"].update(
            member="allUsers"
        ),
        [
            "platform-identity-weights-reader-stable: role roles/storage.objectViewer is granted to allUsers: grant it to named "
            "principals only, nothing in this stack may be reachable without authentication"
        ],
    ),
    (
        "gke-cluster-workload-identity",
        "no-pool",
        lambda rs: find(rs, "gcp:container/cluster:Cluster", "platform-cluster-gke")["inputs"].pop(
            "workloadIdentityConfig"
        ),
        ["platform-cluster-gke: workloadIdentityConfig.workloadPool is not set: set it to 'acme-llm-prod.svc.id.goog'"],
    ),
    (
        "gke-nodepool-gke-metadata",
        "gce-metadata",
        lambda rs: _pool(rs)["nodeConfig"]["workloadMetadataConfig"].update(mode="GCE_METADATA"),
        [
            "platform-gpu-h100-tp2-pool: nodeConfig.workloadMetadataConfig.mode is 'GCE_METADATA': set it to "
            "'GKE_METADATA' so pods cannot read the node's credentials and get Workload Identity tokens"
        ],
    ),
    (
        "networkpolicy-selects-serving-pods",
        "no-netpol",
        lambda rs: _drop(rs, ":NetworkPolicy", "vllm-canary-netpol"),
        [
            "vllm-canary-deployment: pods of Deployment vllm-canary are selected by no NetworkPolicy with policyTypes "
            "Ingress: add one selecting them that admits only the gateway, the endpoint picker and the metrics collector"
        ],
    ),
    (
        "networkpolicy-selects-serving-pods",
        "egress-only",
        lambda rs: find(rs, ":NetworkPolicy", "vllm-canary-netpol")["inputs"]["spec"].update(policyTypes=["Egress"]),
        [
            "vllm-canary-deployment: pods of Deployment vllm-canary are selected by no NetworkPolicy with policyTypes "
            "Ingress: add one selecting them that admits only the gateway, the endpoint picker and the metrics collector"
        ],
    ),
    (
        "gateway-https-only",
        "http-backend",
        lambda rs: find(rs, ":HTTPRoute", "inference-gateway-api-route")["inputs"]["spec"]["parentRefs"][0].pop(
            "sectionName"
        ),
        [
            "inference-gateway-gateway: Gateway llm-gateway listener 'http' serves plain HTTP on port 80: remove it, or "
            "attach only HTTPRoutes that redirect to https"
        ],
    ),
    (
        "gateway-https-only",
        "no-certificate",
        lambda rs: find(rs, ":Gateway", "inference-gateway-gateway")["inputs"]["spec"]["listeners"][0]["tls"].pop(
            "options"
        ),
        [
            "inference-gateway-gateway: Gateway llm-gateway listener 'https' has no TLS certificate: set "
            "tls.certificateRefs, a networking.gke.io/cert-manager-certs option or the networking.gke.io/certmap annotation"
        ],
    ),
    (
        "gateway-tls-min-1-2",
        "tls-1-0",
        lambda rs: find(rs, ":RegionSslPolicy", "inference-gateway-ssl-policy")["inputs"].update(
            minTlsVersion="TLS_1_0"
        ),
        [
            "inference-gateway-ssl-policy: SSL policy llm-gateway-prod-tls12 has minTlsVersion TLS_1_0 (used by Gateway "
            "llm-gateway): set it to TLS_1_2"
        ],
    ),
    (
        "gateway-tls-min-1-2",
        "no-gateway-policy",
        lambda rs: _drop(rs, ":GCPGatewayPolicy", "inference-gateway-gateway-policy"),
        [
            "inference-gateway-gateway: Gateway llm-gateway has no GCPGatewayPolicy with default.sslPolicy, so the load "
            "balancer accepts TLS 1.0: attach an SSL policy with minTlsVersion TLS_1_2"
        ],
    ),
    (
        "serving-requires-authentication",
        "no-iap",
        lambda rs: find(rs, ":GCPBackendPolicy", "vllm-canary-backendpolicy")["inputs"]["spec"]["default"][
            "iap"
        ].update(enabled=False),
        [
            "vllm-canary-deployment: external Gateway llm-gateway (class gke-l7-regional-external-managed) reaches "
            "Deployment vllm-canary (pool canary) without authentication: enable IAP on its InferencePool's GCPBackendPolicy "
            "or require an API key (VLLM_API_KEY from a Secret)"
        ],
    ),
    (
        "vllm-no-request-logging",
        "log-requests",
        lambda rs: container(rs)["args"].__setitem__(
            container(rs)["args"].index("--no-enable-log-requests"), "--enable-log-requests"
        ),
        [
            "vllm-stable-deployment: container 'vllm' sets --enable-log-requests: prompts and completions would reach "
            "Cloud Logging with the container's output; remove it (log request ids, token counts and timings instead)"
        ],
    ),
    (
        "vllm-no-request-logging",
        "debug-response-env",
        lambda rs: container(rs)["env"].append({"name": "VLLM_DEBUG_LOG_API_SERVER_RESPONSE", "value": "true"}),
        [
            "vllm-stable-deployment: container 'vllm' sets VLLM_DEBUG_LOG_API_SERVER_RESPONSE=true: response bodies would "
            "reach Cloud Logging; remove it"
        ],
    ),
    (
        "artifact-registry-immutable-tags",
        "mutable",
        lambda rs: find(rs, ":Repository", "platform-registry-repo")["inputs"]["dockerConfig"].update(
            immutableTags=False
        ),
        [
            "platform-registry-repo: dockerConfig.immutableTags is False: set it to true so a pushed tag can never be moved "
            "to another image"
        ],
    ),
    (
        "epp-kv-metric-matches-vllm",
        "old-metric-extractor",
        lambda rs: _picker_conf(
            rs, "vllm-stable-router-epp", lambda c: _engine(c, "vllm").update(kvUsageSpec="vllm:gpu_cache_usage_perc")
        ),
        [
            "vllm-stable-router-epp: endpoint picker vllm-stable-router reads KV-cache usage from 'vllm:gpu_cache_usage_perc' "
            "(core-metrics-extractor vllm kvUsageSpec) but vLLM 0.32.0 on vllm-stable exports "
            "'vllm:kv_cache_usage_perc': set kvUsageSpec to 'vllm:kv_cache_usage_perc'"
        ],
    ),
    (
        "epp-kv-metric-matches-vllm",
        "old-gaie-chart-default",
        lambda rs: find(rs, ":Chart", "vllm-canary-router-epp")["inputs"].update(
            # the GAIE chart's picker watches the pool named after its release
            name="vllm-canary",
            chart="oci://registry.k8s.io/gateway-api-inference-extension/charts/inferencepool",
            version="v1.1.0",
            values={"inferenceExtension": {"flags": []}},
        ),
        [
            "vllm-canary-router-epp: endpoint picker vllm-canary reads KV-cache usage from 'vllm:gpu_cache_usage_perc' (chart "
            "v1.1.0 default) but vLLM 0.32.0 on vllm-canary exports 'vllm:kv_cache_usage_perc': set flag "
            "kv-cache-usage-percentage-metric to 'vllm:kv_cache_usage_perc'"
        ],
    ),
    (
        "epp-image-pinned-to-release",
        "main-tag",
        lambda rs: find(rs, ":Chart", "vllm-stable-router-epp")["inputs"]["values"]["router"]["epp"]["image"].update(
            tag="main"
        ),
        [
            "vllm-stable-router-epp: router.epp.image.tag is 'main', not a release tag: pin the chart release's tag (vX.Y.Z) or a digest"
        ],
    ),
    (
        "epp-image-pinned-to-release",
        "chart-default-tag",
        lambda rs: find(rs, ":Chart", "vllm-canary-router-epp")["inputs"]["values"]["router"]["epp"].pop("image"),
        [
            "vllm-canary-router-epp: router.epp.image is not set: the chart's default tag applies (main for the llm-d "
            "Router): pin a release tag"
        ],
    ),
    (
        "epp-flow-control-bounded",
        "gate-off",
        lambda rs: _picker_conf(rs, "vllm-stable-router-epp", lambda c: c.pop("featureGates")),
        [
            "vllm-stable-router-epp: feature gate flowControl is off: queued requests have no wait bound and no 429 beyond it"
        ],
    ),
    (
        "epp-flow-control-bounded",
        "band-default-capacity",
        lambda rs: _picker_conf(
            rs, "vllm-canary-router-epp", lambda c: c["flowControl"]["priorityBands"][1].update(maxRequests="0")
        ),
        [
            "vllm-canary-router-epp: flowControl band -1: maxRequests '0' means the default 5000: state the bound",
        ],
    ),
    (
        "epp-flow-control-bounded",
        "ttl-disabled",
        lambda rs: _picker_conf(
            rs, "vllm-stable-router-epp", lambda c: c["flowControl"].update(defaultRequestTTL="0s")
        ),
        ["vllm-stable-router-epp: flowControl.defaultRequestTTL is '0s': state a positive queue-wait bound"],
    ),
    (
        "gpu-memory-shares-below-one",
        "mps-two-clients",
        lambda rs: _pool(rs)["nodeConfig"]["guestAccelerators"][0].update(
            gpuSharingConfig={"gpuSharingStrategy": "MPS", "maxSharedClientsPerGpu": 2}
        ),
        [
            "platform-gpu-h100-tp2-pool: up to 2 servers share one GPU of this pool (maxSharedClientsPerGpu 2) and their "
            "--gpu-memory-utilization partitions sum to 1.8 = 0.9 (vllm-canary) + 0.9 (vllm-canary): keep the sum at "
            "most 0.9 (1 - transient reserve 0.1)"
        ],
    ),
    (
        "max-model-len-within-contract",
        "too-long",
        lambda rs: set_flag(rs, "--max-model-len", "32768"),
        [
            "vllm-stable-deployment: --max-model-len is 32768, above the contract's max_model_len 16384: set it to at most "
            "16384, context beyond the workload only costs concurrency"
        ],
    ),
    (
        "max-model-len-within-contract",
        "unset",
        lambda rs: set_flag(rs, "--max-model-len", None),
        [
            "vllm-stable-deployment: --max-model-len is not set (vLLM would serve the model's full context): set it to at "
            "most 16384"
        ],
    ),
    (
        "max-model-len-within-contract",
        "context-above-input-plus-output",
        lambda rs: find(rs, ":Deployment", "vllm-stable-deployment")["inputs"]["metadata"]["annotations"].update(
            {"llm-serving.io/contract-max-input-tokens": "12000"}
        ),
        [
            "vllm-stable-deployment: --max-model-len is 16384, above max_input_tokens + max_output_tokens = 16096: vLLM's "
            "only prompt limit is the context, so prompts of up to 16383 tokens are admitted against the contract's 12000; "
            "set it to 16096"
        ],
    ),
    (
        "pool-selector-survives-release-change",
        "release-label",
        lambda rs: find(rs, ":InferencePool", "vllm-stable-pool")["inputs"]["spec"]["selector"]["matchLabels"].update(
            {"llm-serving.io/release": RELEASE}
        ),
        [
            "vllm-stable-pool: InferencePool vllm-stable selects on llm-serving.io/release, which changes with every "
            "release: a rolling update to a new release creates pods the pool does not select while the old ones drain, "
            "down to zero endpoints; select on the Deployment's own selector labels"
        ],
    ),
    (
        "pool-selector-survives-release-change",
        "label-outside-deployment-selector",
        lambda rs: find(rs, ":InferencePool", "vllm-stable-pool")["inputs"]["spec"]["selector"]["matchLabels"].update(
            {"llm-serving.io/pool": "stable"}
        ),
        [
            "vllm-stable-pool: InferencePool vllm-stable selects on llm-serving.io/pool, outside Deployment vllm-stable's "
            "selector: a label outside a Deployment's (immutable) selector can change with its pod template, so a rollout "
            "can create pods the pool does not select"
        ],
    ),
    (
        "pool-selector-survives-release-change",
        "selects-nothing",
        lambda rs: find(rs, ":InferencePool", "vllm-stable-pool")["inputs"]["spec"]["selector"]["matchLabels"].update(
            {"app.kubernetes.io/instance": "vllm-old"}
        ),
        ["vllm-stable-pool: InferencePool vllm-stable selects the pods of no serving Deployment"],
    ),
    (
        "sheddable-classes-have-negative-priority",
        "sheddable-at-priority-0",
        lambda rs: find(rs, ":InferenceObjective", "vllm-stable-objective-batch")["inputs"]["spec"].update(priority=0),
        [
            "vllm-stable-objective-batch: InferenceObjective batch is marked sheddable but has priority 0: the endpoint picker sheds "
            "only priority < 0, so under saturation this class queues with everyone else; give it a negative priority"
        ],
    ),
    (
        "sheddable-classes-have-negative-priority",
        "negative-but-not-marked",
        lambda rs: find(rs, ":InferenceObjective", "vllm-stable-objective-interactive")["inputs"]["spec"].update(
            priority=-5
        ),
        [
            "vllm-stable-objective-interactive: InferenceObjective interactive has priority -5, which the endpoint picker sheds under "
            'saturation, but is not marked sheddable: set llm-serving.io/sheddable: "true" or a priority >= 0'
        ],
    ),
    (
        "sheddable-classes-have-negative-priority",
        "unstated",
        lambda rs: find(rs, ":InferenceObjective", "vllm-stable-objective-batch")["inputs"]["metadata"][
            "annotations"
        ].pop("llm-serving.io/sheddable"),
        [
            "vllm-stable-objective-batch: InferenceObjective batch has no llm-serving.io/sheddable annotation: state whether its class "
            "may be shed under saturation (priority < 0) or not"
        ],
    ),
    (
        "vllm-output-capped",
        "no-cap",
        lambda rs: set_flag(rs, "--override-generation-config", None),
        [
            "vllm-stable-deployment: no server-side output cap: vLLM generates as many tokens as a request asks for (up to "
            "the context), past the stream bound the load balancer timeout and the drain are sized for; add "
            "--override-generation-config '{\"max_new_tokens\": 4096}'"
        ],
    ),
    (
        "vllm-output-capped",
        "cap-above-contract",
        lambda rs: set_flag(rs, "--override-generation-config", '{"max_new_tokens":8192}'),
        [
            "vllm-stable-deployment: output is capped at 8192 tokens, above the contract's max_output_tokens 4096: a longer "
            "stream outlives the timeouts sized for the contract; use --override-generation-config "
            "'{\"max_new_tokens\": 4096}'"
        ],
    ),
    (
        "vllm-output-capped",
        "no-max-new-tokens",
        lambda rs: set_flag(rs, "--override-generation-config", '{"temperature":0.7}'),
        [
            "vllm-stable-deployment: --override-generation-config sets no max_new_tokens, so output is not capped: use "
            "--override-generation-config '{\"max_new_tokens\": 4096}'"
        ],
    ),
    (
        "hpa-scale-up-damped",
        "window-zero",
        lambda rs: find(rs, ":HorizontalPodAutoscaler", "observability-hpa-stable")["inputs"]["spec"]["behavior"][
            "scaleUp"
        ].update(stabilizationWindowSeconds=0),
        [
            "observability-hpa-stable: HPA vllm-stable scale-up stabilizationWindowSeconds is 0 s, below the {cold} s a new "
            "replica of Deployment vllm-stable takes to become ready: a burst shorter than that is over before the replica "
            "can help, so it only creates a late pod; set it to at least {cold_up}"
        ],
    ),
    (
        "hpa-scale-up-damped",
        "no-behavior",
        lambda rs: find(rs, ":HorizontalPodAutoscaler", "observability-hpa-stable")["inputs"]["spec"].pop("behavior"),
        [
            "observability-hpa-stable: HPA vllm-stable scale-up stabilizationWindowSeconds is 0 s, below the {cold} s a new "
            "replica of Deployment vllm-stable takes to become ready: a burst shorter than that is over before the replica "
            "can help, so it only creates a late pod; set it to at least {cold_up}"
        ],
    ),
    (
        "serving-verifies-release",
        "no-init-container",
        lambda rs: _dep_spec(rs).pop("initContainers"),
        [
            "vllm-stable-deployment: no init container runs verify_release.py: vLLM would serve weights nobody checked "
            "against the release's manifest; add the verify-release init container"
        ],
    ),
    (
        "serving-verifies-release",
        "other-revision",
        lambda rs: _set_init_flag(rs, "--expect-revision", "0" * 40),
        [
            f"vllm-stable-deployment: verify_release.py expects revision '{'0' * 40}' but the pod serves "
            f"llm-serving.io/model-revision '{STABLE_REVISION}': the check must be for the release this pod serves"
        ],
    ),
    (
        "serving-verifies-release",
        "other-prefix",
        lambda rs: _set_init_flag(rs, "--prefix", "qwen3-32b-fp8/" + "1" * 40),
        [
            f"vllm-stable-deployment: verify_release.py does not check what vLLM streams: --model is "
            f"'gs://acme-llm-prod-weights/qwen3-32b-fp8/{STABLE_REVISION}/', so run `gcs --bucket acme-llm-prod-weights "
            f"--prefix qwen3-32b-fp8/{STABLE_REVISION}`"
        ],
    ),
    (
        "deletion-protection-stateful",
        "bucket-unprotected",
        lambda rs: _bucket(rs)["options"].update(protect=False),
        ["platform-weights-bucket: Bucket is not protected: set the Pulumi protect option so no update can delete it"],
    ),
    (
        "deletion-protection-stateful",
        "cluster-deletion-protection",
        lambda rs: find(rs, "gcp:container/cluster:Cluster", "platform-cluster-gke")["inputs"].update(
            deletionProtection=False
        ),
        ["platform-cluster-gke: deletionProtection is false: set it to true"],
    ),
    (
        "every-tenant-bounded",
        "tenant-allowed-unbounded",
        lambda rs: _armor_rule(rs, "stable", 1000).update(action="allow"),
        [
            "inference-gateway-stable-tenants: RegionSecurityPolicy inference-gateway-stable-tenants: tenant 'chat-app' "
            "is matched by a 'allow' rule with no enforced request budget",
            "inference-gateway-stable-tenants: RegionSecurityPolicy inference-gateway-stable-tenants: tenant 'chat-app' "
            "of the contract has no rate-based rule",
        ],
    ),
    (
        "every-tenant-bounded",
        "default-allows",
        lambda rs: _armor_rule(rs, "canary", 2147483647).update(action="allow"),
        [
            "inference-gateway-canary-tenants: RegionSecurityPolicy inference-gateway-canary-tenants: the default "
            "rule's action is 'allow': requests naming no tenant pass without any budget; deny them"
        ],
    ),
    (
        "every-tenant-bounded",
        "backend-without-policy",
        lambda rs: find(rs, ":GCPBackendPolicy", "vllm-stable-backendpolicy")["inputs"]["spec"]["default"].pop(
            "securityPolicy"
        ),
        [
            "vllm-stable-backendpolicy: GCPBackendPolicy vllm-stable names no Cloud Armor policy: its pool serves "
            "every tenant without a budget"
        ],
    ),
]


def _armor_rule(rs: list[dict[str, Any]], role: str, priority: int) -> dict[str, Any]:
    """The rule of a pool's Cloud Armor tenant policy at ``priority``."""
    policy = find(rs, "RegionSecurityPolicy", f"inference-gateway-{role}-tenants")["inputs"]
    (rule,) = [r for r in policy["rules"] if r["priority"] == priority]
    return rule


def test_every_policy_has_cases() -> None:
    # The Cloud Run, Vertex and fleet policies' cases mutate their own baselines, so they live beside them.
    from .test_cloud_run_policies import CLOUD_RUN_CASES
    from .test_fleet_deploy import FLEET_POLICY_CASES
    from .test_vertex_policies import CASES as VERTEX_CASES

    cases = {c[0] for c in CASES} | {c[0] for c in CLOUD_RUN_CASES} | {c[0] for c in VERTEX_CASES}
    assert cases | set(FLEET_POLICY_CASES) == set(BY_NAME)


#: The policies written once over the per-target adapters (each module names the facts it judges in ``FACTS``).
CROSS_TARGET = {
    "gpu-consumes-specific-reservation": {"gke", "vertex"},
    "gpu-memory-shares-below-one": {"gke", "vertex"},
    "serving-images-pinned-by-digest": {"gke", "cloud_run", "vertex"},
    "serving-keeps-warm-minimum": {"gke", "cloud_run", "vertex"},
    "serving-no-public-access": {"cloud_run", "vertex"},
    "startup-window-covers-cold-load": {"gke", "cloud_run"},
    "vllm-no-request-logging": {"gke", "cloud_run", "vertex"},
}


def test_every_target_of_a_cross_target_policy_has_cases() -> None:
    """A policy written once over the adapters still detects its violation on every target whose adapter has its
    facts: each such target's baseline has a failing case for it."""
    from rules._adapters import targets_with

    from .test_cloud_run_policies import CLOUD_RUN_CASES
    from .test_vertex_policies import CASES as VERTEX_CASES

    covered = {
        m.NAME: {t for kind in m.FACTS for t in targets_with(kind)} for m in MODULES if getattr(m, "FACTS", None)
    }
    assert covered == CROSS_TARGET
    cases = {"gke": CASES, "cloud_run": CLOUD_RUN_CASES, "vertex": VERTEX_CASES}
    missing = [(n, t) for n, targets in covered.items() for t in sorted(targets) if n not in {c[0] for c in cases[t]}]
    assert missing == []


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_shipped_prod_baseline_passes(name: str, prod: tuple[Any, list[dict[str, Any]]]) -> None:
    cfg, resources = prod
    assert evaluate(name, copy.deepcopy(resources), policy_config(name, cfg)) == []


@pytest.mark.parametrize(("name", "case", "mutate", "expected"), CASES, ids=[f"{c[0]}:{c[1]}" for c in CASES])
def test_one_change_one_violation(
    name: str, case: str, mutate: Mutation, expected: list[str], prod: tuple[Any, list[dict[str, Any]]]
) -> None:
    cfg, resources = prod
    rs = copy.deepcopy(resources)
    mutate(rs)
    # The stable pool's cold-load estimate is the planner's (the policy command passes it as a fact).
    cold = pack.policy_facts(cfg)["startup-window-covers-cold-load"]["coldLoadSeconds"]["vllm-stable"]
    assert evaluate(name, rs, policy_config(name, cfg)) == sorted(
        m.replace("{cold}", f"{cold:g}").replace("{cold_up}", str(math.ceil(cold))) for m in expected
    )


# ---- unknown values at preview -------------------------------------------------------------------------------


def _unknown_everywhere(resources: list[dict[str, Any]], keys: set[str]) -> list[dict[str, Any]]:
    """Replace every property named in ``keys`` (at any depth) by the preview marker."""

    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: (COMPUTED_MARKER if k in keys else walk(x)) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return [{**r, "inputs": walk(r["inputs"])} for r in resources]


UNKNOWN_KEYS = [
    {
        "image",
        "args",
        "env",
        "startupProbe",
        "readinessProbe",
        "terminationGracePeriodSeconds",
        "labels",
        "annotations",
        "matchLabels",
        "podSelector",
        "policyTypes",
    },
    {
        "values",
        "replicas",
        "minReplicas",
        "maxReplicas",
        "count",
        "specificReservation",
        "nodeConfig",
        "reservationAffinity",
        "workloadIdentityConfig",
        "member",
        "role",
        "members",
    },
    {
        "listeners",
        "protocol",
        "tls",
        "sslPolicy",
        "minTlsVersion",
        "iap",
        "uniformBucketLevelAccess",
        "publicAccessPrevention",
        "versioning",
        "dockerConfig",
        "deletionProtection",
    },
    {"spec"},
]


@pytest.mark.parametrize("keys", UNKNOWN_KEYS, ids=lambda k: ",".join(sorted(k))[:40])
def test_unknown_values_never_crash_or_invent_violations(
    keys: set[str], prod: tuple[Any, list[dict[str, Any]]]
) -> None:
    cfg, resources = prod
    rs = _unknown_everywhere(resources, keys)
    for name in sorted(BY_NAME):
        found = evaluate(name, rs, policy_config(name, cfg))
        # Only facts that are known may produce findings: a few policies report the *absence* of a fact.
        assert all("is unknown" in m or "not set" in m or "has no" in m for m in found), (name, found)


def test_unknown_value_is_skipped_but_the_rest_still_checked(prod: tuple[Any, list[dict[str, Any]]]) -> None:
    cfg, resources = prod
    rs = copy.deepcopy(resources)
    container(rs, "vllm-canary-deployment")["args"] = COMPUTED_MARKER  # canary args unknown at preview
    set_flag(rs, "--max-model-len", "32768")  # stable is still checked
    assert evaluate("max-model-len-within-contract", rs, policy_config("max-model-len-within-contract", cfg)) == [
        "vllm-stable-deployment: --max-model-len is 32768, above the contract's max_model_len 16384: set it to at most "
        "16384, context beyond the workload only costs concurrency"
    ]


# ---- through the Analyzer gRPC protocol ------------------------------------------------------------------------

EXPECTED_LEVEL = {"dev": "advisory", "staging": "mandatory", "prod": "mandatory"}


@pytest.mark.parametrize("stack", STACKS)
def test_shipped_stack_passes_with_its_enforcement(stack: str, plans: dict[str, Any]) -> None:
    cfg, plan, inventory = plans[stack]
    report, path = pack.check_policies(ResolvedStack(stack, cfg, plan), Inventory.from_dict(inventory))
    assert path == CONFIG_DIR / f"{stack}.json"
    assert set(report.policies) == set(BY_NAME)
    assert set(report.policies.values()) == {EXPECTED_LEVEL[stack]}
    assert report.violations == [] and report.mandatory_count == 0
    assert report.resources_analyzed == len(inventory["resources"])


def _findings(out: Path) -> list[tuple[str, str, str, str]]:
    data = json.loads((out / "policy-report.json").read_text())
    rows = []
    for v in data["violations"]:
        detail = v["message"].split("\n", 1)[1]
        rows.append((v["policy"], v["enforcement"], v["urn"].rsplit("::", 1)[-1], detail))
    return sorted(rows)


def test_bad_stack_fails_policy_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stacks = REPO / "tests" / "fixtures" / "bad-stack"
    out = tmp_path / "report"
    # The fixture is valid configuration (loading raises ConfigError otherwise) ...
    cli.resolve("prod", stacks)
    # ... which the policy pack, run as the engine runs it, rejects.
    assert cli.main(["policy", "--stack", "prod", "--stacks-dir", str(stacks), "--out", str(out)]) == cli.EXIT_POLICY
    assert _findings(out) == [
        (
            "hpa-max-within-reservation",
            "mandatory",
            "platform-gpu-h100-tp2-pool",
            "capacity of reservation shared-h100-prod is unknown: it is not in this stack, so add its node count to this "
            "policy's reservedNodes",
        ),
    ]
    printed = capsys.readouterr().out
    assert "1 violation(s), 1 mandatory, 0 advisory" in printed
    assert re.search(r"hpa-max-within-reservation\s+high\s+mandatory\s+gcp:container/nodePool:NodePool::", printed)


def test_mutated_inventory_fails_through_grpc_with_unknowns(tmp_path: Path, plans: dict[str, Any]) -> None:
    _, _, inventory = plans["prod"]
    inv = copy.deepcopy(inventory)
    rs = inv["resources"]
    container(rs)["image"] = f"{STABLE_IMAGE}:latest"
    find(rs, ":Bucket", "platform-weights-bucket")["inputs"]["versioning"] = {"enabled": False}
    _pool(rs)["nodeConfig"]["spot"] = True
    _drop(rs, ":NetworkPolicy", "vllm-stable-netpol")
    # Preview unknowns travel as the engine's sentinel and must neither crash nor hide the findings above.
    container(rs, "vllm-canary-deployment")["args"] = COMPUTED_MARKER
    find(rs, "gcp:container/cluster:Cluster", "platform-cluster-gke")["inputs"]["workloadIdentityConfig"] = (
        COMPUTED_MARKER
    )
    # A dashboard that no longer waits for the Monitoring API: AnalyzeStack carries each resource's dependencies.
    find(rs, ":Dashboard", "observability-dashboard")["dependencies"] = []
    path = tmp_path / "inventory.json"
    path.write_text(json.dumps(inv))
    out = tmp_path / "report"
    assert cli.main(["policy", "--stack", "prod", "--inventory", str(path), "--out", str(out)]) == cli.EXIT_POLICY
    assert _findings(out) == [
        (
            "create-after-dependencies",
            "mandatory",
            "observability-dashboard",
            "gcp:monitoring/dashboard:Dashboard observability-dashboard is created through monitoring.googleapis.com, "
            "which this stack enables, but does not depend on its enablement (platform-services-monitoring): on a fresh "
            "project it can be created before the API is on",
        ),
        (
            "gke-no-spot-nodes",
            "mandatory",
            "platform-gpu-h100-tp2-pool",
            "nodeConfig.spot is true: set it to false, spot VMs are reclaimed without notice and cannot consume a "
            "reservation",
        ),
        (
            "networkpolicy-selects-serving-pods",
            "mandatory",
            "vllm-stable-deployment",
            "pods of Deployment vllm-stable are selected by no NetworkPolicy with policyTypes Ingress: add one selecting "
            "them that admits only the gateway, the endpoint picker and the metrics collector",
        ),
        (
            "serving-images-pinned-by-digest",
            "mandatory",
            "vllm-stable-deployment",
            f"container 'vllm' image '{STABLE_IMAGE}:latest' uses the mutable :latest tag: a tag can move to another "
            "image between two pod starts; use <repository>@sha256:<64 hex>",
        ),
        (
            "storage-bucket-versioning",
            "mandatory",
            "platform-weights-bucket",
            "versioning.enabled is False: set it to true so an overwritten or deleted weight file or manifest can be "
            "restored",
        ),
    ]


def test_traffic_regressions_fail_through_grpc(tmp_path: Path, plans: dict[str, Any]) -> None:
    """What this program used to render, one regression each, caught by the pack run as the engine runs it: a pool
    selector a release change empties, a sheddable class the picker cannot shed, no output cap, undamped scale-up."""
    _, plan, inventory = plans["prod"]
    inv = copy.deepcopy(inventory)
    rs = inv["resources"]
    find(rs, ":InferencePool", "vllm-stable-pool")["inputs"]["spec"]["selector"]["matchLabels"] = {
        "llm-serving.io/pool": "stable",
        "llm-serving.io/release": RELEASE,
    }
    find(rs, ":InferenceObjective", "vllm-stable-objective-batch")["inputs"]["spec"]["priority"] = 0
    set_flag(rs, "--override-generation-config", None)
    find(rs, ":HorizontalPodAutoscaler", "observability-hpa-stable")["inputs"]["spec"]["behavior"]["scaleUp"][
        "stabilizationWindowSeconds"
    ] = 0
    path = tmp_path / "inventory.json"
    path.write_text(json.dumps(inv))
    out = tmp_path / "report"
    assert cli.main(["policy", "--stack", "prod", "--inventory", str(path), "--out", str(out)]) == cli.EXIT_POLICY
    cold = round(plan.pools["stable"].capacity.cold_load_seconds, 3)
    assert _findings(out) == [
        (
            "hpa-scale-up-damped",
            "mandatory",
            "observability-hpa-stable",
            f"HPA vllm-stable scale-up stabilizationWindowSeconds is 0 s, below the {cold:g} s a new replica of "
            "Deployment vllm-stable takes to become ready: a burst shorter than that is over before the replica can help, "
            f"so it only creates a late pod; set it to at least {math.ceil(cold)}",
        ),
        (
            "pool-selector-survives-release-change",
            "mandatory",
            "vllm-stable-pool",
            "InferencePool vllm-stable selects on llm-serving.io/release, which changes with every release: a rolling "
            "update to a new release creates pods the pool does not select while the old ones drain, down to zero "
            "endpoints; select on the Deployment's own selector labels",
        ),
        (
            "sheddable-classes-have-negative-priority",
            "mandatory",
            "vllm-stable-objective-batch",
            "InferenceObjective batch is marked sheddable but has priority 0: the endpoint picker sheds only priority < "
            "0, so under saturation this class queues with everyone else; give it a negative priority",
        ),
        (
            "vllm-output-capped",
            "mandatory",
            "vllm-stable-deployment",
            "no server-side output cap: vLLM generates as many tokens as a request asks for (up to the context), past "
            "the stream bound the load balancer timeout and the drain are sized for; add --override-generation-config "
            "'{\"max_new_tokens\": 4096}'",
        ),
    ]


def test_plan_prints_policy_summary_and_exits_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "plan"
    assert cli.main(["plan", "--stack", "dev", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "policy: 0 violation(s): 0 mandatory, 0 advisory, " in printed and "(policies/config/dev.json)" in printed
    assert json.loads((out / "policy-report.json").read_text())["mandatory_count"] == 0


def test_bad_policy_config_is_a_config_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "policy.json"
    bad.write_text(json.dumps({"serving-keeps-warm-minimum": {"minReplicas": "two"}}))
    inv = tmp_path / "inventory.json"
    inv.write_text(json.dumps({"project": "llm-serving", "stack": "prod", "resources": []}))
    code = cli.main(
        [
            "policy",
            "--stack",
            "prod",
            "--inventory",
            str(inv),
            "--policy-config",
            str(bad),
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert code == cli.EXIT_CONFIG
    assert (
        "policy config is invalid: serving-keeps-warm-minimum.minReplicas: 'two' is not valid (type 'integer')"
        in capsys.readouterr().err
    )
