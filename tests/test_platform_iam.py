"""Least privilege across every IAM binding of every stack : no serving identity holds a
project-level role. The one documented exception is the Custom Metrics Stackdriver Adapter, which reads
Cloud Monitoring for the HPA (GKE inference autoscaling guide and samples): only that principal, only ``roles/monitoring.viewer``.

Serving identities are Workload Identity principals (``principal://``, ``principalSet://``) and any
user-managed service account. Node service accounts are user-managed and may hold exactly GKE's documented
node role. Google-managed service agents (``service-<number>@gcp-sa-<api>.iam.gserviceaccount.com``, or the
member of a ``ServiceIdentity`` the stack creates) are not identities of this stack's workloads; any other
member kind at project level is a violation."""

from __future__ import annotations

import re

import pytest

from components.identity import NODE_PROJECT_ROLES, principal_text
from infra.offline.runner import placeholder

from .conftest import STACKS, resources

#: pulumi-gcp IAM resource types end in IAMMember / IAMBinding / IAMPolicy (any capitalisation of "Iam").
IAM_TYPE = re.compile(r":(?P<kind>\w*?)I[Aa][Mm](?P<flavour>Member|Binding|Policy)$")
#: Modules whose IAM resources grant on the whole project (or wider).
PROJECT_LEVEL_MODULES = ("gcp:projects/", "gcp:organizations/", "gcp:folder/")
WIF_PREFIXES = ("principal://", "principalSet://")
GOOGLE_SERVICE_AGENT = re.compile(r"^serviceAccount:service-[^@]+@gcp-sa-[a-z0-9-]+\.iam\.gserviceaccount\.com$")


def project_level_exceptions(project: str) -> set[tuple[str, str]]:
    """(member, role) pairs allowed at project level besides the node service accounts' role."""
    adapter = principal_text(
        placeholder("project-number"), f"{project}.svc.id.goog", "custom-metrics", "custom-metrics-stackdriver-adapter"
    )
    return {(adapter, "roles/monitoring.viewer")}


def iam_bindings(inv: dict) -> list[dict]:
    return [r for r in inv["resources"] if r["custom"] and IAM_TYPE.search(r["type"])]


def node_service_account_members(inv: dict) -> set[str]:
    """Members of the accounts the platform's NodeServiceAccount components create."""
    parents = {r["urn"] for r in resources(inv, "llm-serving:identity:NodeServiceAccount")}
    return {
        f"serviceAccount:{r['inputs']['accountId']}@{r['inputs']['project']}.iam.gserviceaccount.com"
        for r in resources(inv, "gcp:serviceaccount/account:Account")
        if r["parent"] in parents
    }


def project_level_violations(inv: dict, project: str) -> list[str]:
    bindings = iam_bindings(inv)
    assert bindings, "no IAM binding found: the enumeration is broken"
    nodes = node_service_account_members(inv)
    assert nodes, "no node service account found"
    allowed = project_level_exceptions(project)
    agents = {
        f"serviceAccount:{placeholder(r['name'] + '.email')}"
        for r in resources(inv, "gcp:projects/serviceIdentity:ServiceIdentity")
    }
    violations = []
    for b in bindings:
        if not b["type"].startswith(PROJECT_LEVEL_MODULES):
            continue
        found = IAM_TYPE.search(b["type"])
        assert found, b["type"]  # every PROJECT_LEVEL_MODULES type is an IAM type
        flavour = found.group("flavour")
        member, role = b["inputs"].get("member"), b["inputs"].get("role")
        if flavour != "Member":
            violations.append(f"{b['name']}: authoritative project-level {b['type']} (would strip other grants)")
        elif member in nodes and role in NODE_PROJECT_ROLES:
            continue
        elif (member, role) in allowed:
            continue
        elif GOOGLE_SERVICE_AGENT.match(str(member)) or member in agents:
            continue
        else:
            violations.append(f"{b['name']}: {member} holds {role} on the project")
    return violations


@pytest.mark.parametrize("stack", STACKS)
def test_no_serving_identity_holds_a_project_level_role(plans, stack):
    cfg, _, inv = plans[stack]
    assert project_level_violations(inv, cfg.project) == []


@pytest.mark.parametrize("stack", STACKS)
def test_serving_principals_are_granted_on_single_resources(plans, stack):
    """Every Workload Identity principal binding outside the exception targets one resource (bucket,
    secret, repository), and the model server's principal reads the weights bucket."""
    cfg, _, inv = plans[stack]
    for role, _ in cfg.pools():
        model_server = principal_text(
            placeholder("project-number"), f"{cfg.project}.svc.id.goog", f"llm-serving-{role}", "model-server"
        )
        grants = [
            (b["type"], b["inputs"]["role"]) for b in iam_bindings(inv) if b["inputs"].get("member") == model_server
        ]
        assert ("gcp:storage/bucketIAMMember:BucketIAMMember", "roles/storage.objectViewer") in grants
        assert not [g for g in grants if g[0].startswith(PROJECT_LEVEL_MODULES)]
    for b in iam_bindings(inv):
        if str(b["inputs"].get("member", "")).startswith(WIF_PREFIXES) and b["type"].startswith(PROJECT_LEVEL_MODULES):
            assert (b["inputs"]["member"], b["inputs"]["role"]) in project_level_exceptions(cfg.project), b["name"]


def test_exception_list_is_narrow():
    ((member, role),) = project_level_exceptions("acme-llm-prod")
    assert role == "roles/monitoring.viewer"
    assert member.endswith("/subject/ns/custom-metrics/sa/custom-metrics-stackdriver-adapter")


def _with(inv: dict, *extra: dict) -> dict:
    return {**inv, "resources": [*inv["resources"], *extra]}


def _grant(typ: str, member: str, role: str) -> dict:
    return {"type": typ, "custom": True, "name": f"fake-{role}", "inputs": {"member": member, "role": role}}


def test_violations_are_caught(plans):
    """The check is not vacuous: each of these extra bindings is reported."""
    cfg, _, inv = plans["prod"]
    model_server = principal_text(
        placeholder("project-number"), f"{cfg.project}.svc.id.goog", "llm-serving-stable", "model-server"
    )
    adapter = principal_text(
        placeholder("project-number"),
        f"{cfg.project}.svc.id.goog",
        "custom-metrics",
        "custom-metrics-stackdriver-adapter",
    )
    member = "gcp:projects/iAMMember:IAMMember"
    bad = [
        _grant(member, model_server, "roles/storage.objectViewer"),  # serving principal, project-wide
        _grant(member, adapter, "roles/monitoring.editor"),  # the exception, but another role
        _grant(member, f"serviceAccount:gke-gpu-h100-tp2@{cfg.project}.iam.gserviceaccount.com", "roles/storage.admin"),
        _grant(member, "serviceAccount:123-compute@developer.gserviceaccount.com", "roles/editor"),
        _grant("gcp:projects/iAMBinding:IAMBinding", "", "roles/viewer"),  # authoritative
    ]
    for b in bad:
        assert len(project_level_violations(_with(inv, b), cfg.project)) == 1, b
