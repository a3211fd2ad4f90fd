"""infra.offline.review on synthetic inventories: each provider's rule, the engine's steps, the effects, the output.

Every expectation is the provider's or the engine's own decision, worked out by hand from the rule it follows (the
rule's source is named in infra/offline/review and in replacement_rules.json), not read back from the code."""

from __future__ import annotations

import copy
import json
import random
import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from infra.offline.review import PlanDiffError, exit_code, plan_dir_at_git_revision, render_json, render_text, review
from infra.offline.review.engine import Review
from infra.offline.review.paths import Keyed, Segment, format_path, parse_path

from .synthetic import inventory, resource, urn

NODE_POOL = "gcp:container/nodePool:NodePool"
DISK = "gcp:compute/disk:Disk"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
HPA = "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
PV = "kubernetes:core/v1:PersistentVolume"
STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
K8S_PROVIDER = "pulumi:providers:kubernetes"
IAP_MEMBER = "gcp:iap/webIamMember:WebIamMember"
PROJECT_MEMBER = "gcp:projects/iAMMember:IAMMember"


def res(type_: str, name: str, inputs: dict[str, Any], **kw: Any) -> dict[str, Any]:
    options = kw.pop("options", {})
    return resource(type_, name, inputs, options=options, **kw)


def node_pool(machine: str = "a3-highgpu-2g", gpus: int = 2, **node_config: Any) -> dict[str, Any]:
    return res(
        NODE_POOL,
        "gpu-pool",
        {
            "name": "gpu-h100",
            "cluster": "llm-prod",
            "location": "us-central1",
            "nodeConfig": {
                "machineType": machine,
                "guestAccelerators": [{"count": gpus, "type": "nvidia-h100-80gb"}],
                **node_config,
            },
        },
    )


def deployment(args: list[str] | None = None, replicas: int | None = None, app: str = "vllm") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selector": {"matchLabels": {"app": app}},
        "template": {
            "metadata": {"labels": {"app": app}},
            "spec": {
                "containers": [
                    {
                        "name": "vllm",
                        "image": "vllm/vllm-openai@sha256:" + "1" * 64,
                        "args": args or ["--model", "/models/q", "--port", "8000"],
                        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                    }
                ]
            },
        },
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return res(
        DEPLOYMENT,
        "vllm",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "vllm", "namespace": "serving"},
            "spec": spec,
        },
    )


def hpa(min_replicas: int = 3) -> dict[str, Any]:
    return res(
        HPA,
        "vllm-hpa",
        {
            "metadata": {"name": "vllm", "namespace": "serving"},
            "spec": {
                "minReplicas": min_replicas,
                "maxReplicas": 6,
                "scaleTargetRef": {"kind": "Deployment", "name": "vllm"},
            },
        },
    )


def only(review_: Review) -> Any:
    assert len(review_.changes) == 1, [(c.name, c.action) for c in review_.changes]
    return review_.changes[0]


def actions(review_: Review) -> list[tuple[str, str, bool, bool, int]]:
    return [(c.name, c.action, c.delete_before_replace, c.protected, c.restarts_pods) for c in review_.changes]


# ---- pulumi-gcp: ForceNew by shape, conditional rules, delete-before-replace ----------------------------------------


def test_node_pool_accelerator_count_replaces_machine_type_recreates_nodes_in_place() -> None:
    """guest_accelerator is a list of blocks: its count field is ForceNew (node_config.go); machine_type is not
    ForceNew (an UpdateNodePool migration), though node_config, the block holding both, is."""
    c = only(review(inventory(node_pool()), inventory(node_pool(gpus=4))))
    assert (c.action, c.delete_before_replace) == ("replace", True)  # the program names it: name is auto-named
    (f,) = c.fields
    assert f.path == "nodeConfig.guestAccelerators[0].count" and f.forces_replacement
    assert "nodeConfig.guestAccelerators[*].count forces replacement" in f.reasons[0]
    assert "node_config.go" in f.reasons[0]
    c = only(review(inventory(node_pool()), inventory(node_pool(machine="a3-highgpu-4g"))))
    assert c.action == "update" and not c.fields[0].forces_replacement
    assert any("recreates every node" in n for n in c.notes)


def test_a_block_added_whole_replaces_when_it_is_forcenew() -> None:
    """reservation_affinity: a ForceNew MaxItems-1 block (an object in Pulumi): adding it replaces."""
    new = node_pool(reservationAffinity={"consumeReservationType": "SPECIFIC_RESERVATION", "values": ["r"]})
    (f,) = only(review(inventory(node_pool()), inventory(new))).fields
    assert (f.path, f.kind, f.forces_replacement) == ("nodeConfig.reservationAffinity", "added", True)


def test_private_nodes_are_updated_in_place_and_datapath_provider_replaces() -> None:
    """terraform-provider-google v7.x: enable_private_nodes lost ForceNew; datapath_provider has it."""
    base: dict[str, Any] = {
        "name": "llm",
        "privateClusterConfig": {"enablePrivateNodes": True},
        "datapathProvider": "ADVANCED_DATAPATH",
    }
    cluster = "gcp:container/cluster:Cluster"
    changed = copy.deepcopy(base)
    changed["privateClusterConfig"]["enablePrivateNodes"] = False
    assert (
        only(review(inventory(res(cluster, "gke", base)), inventory(res(cluster, "gke", changed)))).action == "update"
    )
    changed = {**base, "datapathProvider": "LEGACY_DATAPATH"}
    assert (
        only(review(inventory(res(cluster, "gke", base)), inventory(res(cluster, "gke", changed)))).action == "replace"
    )


def test_optional_computed_forcenew_left_out_keeps_the_provider_value() -> None:
    """project is Optional + Computed + ForceNew: removing it from the inputs is no diff at all."""
    old = res(DISK, "d", {"name": "w", "zone": "us-central1-a", "project": "p", "size": 64})
    new = res(DISK, "d", {"name": "w", "zone": "us-central1-a", "size": 64})
    assert review(inventory(old), inventory(new)).changes == ()


def test_disk_size_grows_in_place_and_shrinking_replaces() -> None:
    """customdiff.ForceNewIfChange("size", IsDiskShrinkage) (resource_compute_disk.go)."""

    def disk(size: int) -> dict[str, Any]:
        return res(DISK, "d", {"name": "w", "zone": "us-central1-a", "type": "hyperdisk-ml", "size": size})

    assert only(review(inventory(disk(64)), inventory(disk(100)))).action == "update"
    c = only(review(inventory(disk(100)), inventory(disk(64))))
    assert c.action == "replace" and "IsDiskShrinkage" in c.fields[0].reasons[0]
    assert c.delete_before_replace  # a named disk: the new one cannot exist beside it
    assert "holds data: the hydrated release weights on the disk" in c.notes


def test_subnet_expansion_in_place_other_ranges_replace() -> None:
    sub = "gcp:compute/subnetwork:Subnetwork"

    def subnet(cidr: str) -> dict[str, Any]:
        return res(sub, "s", {"name": "n", "ipCidrRange": cidr})

    assert only(review(inventory(subnet("10.0.0.0/24")), inventory(subnet("10.0.0.0/20")))).action == "update"
    assert only(review(inventory(subnet("10.0.0.0/24")), inventory(subnet("10.1.0.0/24")))).action == "replace"


def test_iam_member_replacement_and_delete_before_replace_per_resource_info() -> None:
    """member is ForceNew on every IAM member (IamMemberBaseSchema); pulumi-gcp sets DeleteBeforeReplace only for
    the project IAM member; an IAP member has no name field to auto-name, so it is created before the delete."""
    for typ, dbr in ((PROJECT_MEMBER, True), (IAP_MEMBER, False)):
        old = res(typ, "m", {"project": "p", "role": "r", "member": "group:a@x.example"})
        new = res(typ, "m", {"project": "p", "role": "r", "member": "group:b@x.example"})
        c = only(review(inventory(old), inventory(new)))
        assert (c.action, c.delete_before_replace) == ("replace", dbr)


def test_unnamed_resource_is_replaced_create_before_delete() -> None:
    """A disk without an explicit name is auto-named: its replacement gets a new name beside the old one."""
    old = res(DISK, "d", {"zone": "us-central1-a", "type": "pd-ssd"})
    new = res(DISK, "d", {"zone": "us-central1-a", "type": "pd-balanced"})
    c = only(review(inventory(old), inventory(new)))
    assert (c.action, c.delete_before_replace) == ("replace", False)


def test_ignore_and_replace_on_changes_options() -> None:
    old = res("gcp:storage/bucket:Bucket", "b", {"name": "b", "labels": {"t": "a"}, "storageClass": "STANDARD"})
    new = copy.deepcopy(old)
    new["inputs"] = {"name": "b", "labels": {"t": "b"}, "storageClass": "NEARLINE"}
    new["options"]["ignore_changes"] = ["labels"]
    new["options"]["replace_on_changes"] = ["storageClass"]
    c = only(review(inventory(old), inventory(new)))
    by = {f.path: f for f in c.fields}
    assert by["labels.t"].ignored and not by["labels.t"].forces_replacement
    assert by["storageClass"].reasons == ("replaceOnChanges: storageClass",)
    assert c.action == "replace"


# ---- pulumi-kubernetes ------------------------------------------------------------------------------------------


def test_template_change_restarts_the_hpa_minimum_and_replicas_only_restarts_nothing() -> None:
    old = inventory(deployment(), hpa(3))
    new = inventory(deployment(args=["--model", "/models/q", "--port", "8080"]), hpa(3))
    c = only(review(old, new))
    assert (c.action, c.restarts_pods) == ("update", 3)  # the HPA keeps at least 3 running: all roll
    new = inventory(deployment(replicas=5), hpa(3))
    c = only(review(inventory(deployment(replicas=2), hpa(3)), new))
    assert (c.action, c.restarts_pods, c.fields[0].path) == ("update", 0, "spec.replicas")
    # Without an HPA: spec.replicas pods.
    c = only(review(inventory(deployment(replicas=2)), inventory(deployment(replicas=2, args=["--x"]))))
    assert c.restarts_pods == 2


def test_selector_change_replaces_delete_before_replace_and_restarts() -> None:
    c = only(review(inventory(deployment(), hpa(2)), inventory(deployment(app="v2"), hpa(2))))
    assert (c.action, c.delete_before_replace, c.restarts_pods) == ("replace", True, 2)
    by = {f.path: f for f in c.fields}
    assert by["spec.selector.matchLabels.app"].forces_replacement
    assert not by["spec.template.metadata.labels.app"].forces_replacement


def test_list_elements_are_diffed_by_identity_and_args_as_one_list() -> None:
    old = deployment(args=["--model", "/m", "--port", "8000", "--dtype", "bfloat16"])
    new = copy.deepcopy(old)
    c0 = new["inputs"]["spec"]["template"]["spec"]["containers"][0]
    c0["args"] = ["--model", "/m", "--max-num-seqs", "8", "--port", "8000", "--dtype", "bfloat16"]
    c0["env"] = [{"name": "B", "value": "2"}]  # A removed: B keeps its identity, not shifted into A's slot
    c = only(review(inventory(old), inventory(new)))
    paths = [f.path for f in c.fields]
    assert paths == [
        "spec.template.spec.containers[name=vllm].args",
        "spec.template.spec.containers[name=vllm].env[name=A]",
    ]
    text = render_text(review(inventory(old), inventory(new)))
    assert '          + "--max-num-seqs"\n          + "8"\n' in text
    assert '          - "--port"' not in text  # one insertion is one insertion, nothing shifted


def test_configmap_payload_replaces_unless_the_provider_makes_it_mutable() -> None:
    def cm(script: str, provider: str = "") -> dict[str, Any]:
        return res(
            CONFIG_MAP,
            "scripts",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "s", "namespace": "n"},
                "data": {"p.py": script},
            },
            provider=provider,
        )

    c = only(review(inventory(cm("a")), inventory(cm("b"))))
    assert (c.action, c.delete_before_replace) == ("replace", True)
    prov = res(K8S_PROVIDER, "k8s", {"kubeconfig": "x", "enableConfigMapMutable": True})
    ref = urn(K8S_PROVIDER, "k8s")
    c = only(review(inventory(prov, cm("a", ref)), inventory(prov, cm("b", ref))))
    assert c.action == "update"


def test_pvc_resize_without_volume_expansion_cannot_apply() -> None:
    def claim(size: str) -> dict[str, Any]:
        return res(
            PVC,
            "claim",
            {
                "metadata": {"name": "w", "namespace": "n"},
                "spec": {"storageClassName": "hyperdisk-ml", "resources": {"requests": {"storage": size}}},
            },
        )

    sc = res(STORAGE_CLASS, "sc", {"metadata": {"name": "hyperdisk-ml"}, "allowVolumeExpansion": False})
    r = review(inventory(sc, claim("64Gi")), inventory(sc, claim("100Gi")))
    c = only(r)
    assert c.action == "update"  # pulumi-kubernetes would try it in place; the API server refuses
    assert any("cannot apply in place: StorageClass hyperdisk-ml has allowVolumeExpansion: false" in n for n in c.notes)
    assert len(r.errors) == 1
    sc_ok = res(STORAGE_CLASS, "sc", {"metadata": {"name": "hyperdisk-ml"}, "allowVolumeExpansion": True})
    assert review(inventory(sc_ok, claim("64Gi")), inventory(sc_ok, claim("100Gi"))).errors == ()
    assert review(inventory(sc_ok, claim("100Gi")), inventory(sc_ok, claim("64Gi"))).errors != ()  # never shrinks


# ---- the engine: aliases, protect, cascades, unknowns -----------------------------------------------------------


def test_an_alias_keeps_the_resource() -> None:
    old = res(IAP_MEMBER, "iap-accessor-0", {"project": "p", "role": "r", "member": "group:a@x.example"})
    new = res(IAP_MEMBER, "iap-accessor-group-a", {"project": "p", "role": "r", "member": "group:a@x.example"})
    assert actions(review(inventory(old), inventory(new))) == [
        ("iap-accessor-0", "delete", False, False, 0),
        ("iap-accessor-group-a", "create", False, False, 0),
    ]
    new["aliases"] = [old["urn"]]
    assert review(inventory(old), inventory(new)).changes == ()


def test_protect_refuses_replacement_and_deletion() -> None:
    """Replacing needs protect on both sides to refuse (step_generator.go); deleting refuses on the old one."""
    old = node_pool()
    old["options"]["protect"] = True
    new = node_pool(gpus=4)
    new["options"]["protect"] = True
    c = only(review(inventory(old), inventory(new)))
    assert (c.action, c.protected) == ("replace", True)
    new["options"]["protect"] = False  # unprotecting and replacing in one update is allowed
    assert only(review(inventory(old), inventory(new))).protected is False
    r = review(inventory(old), inventory())
    assert actions(r) == [("gpu-pool", "delete", False, True, 0)]
    assert "PROTECTED: `pulumi up` will refuse" in render_text(r)


def test_delete_before_replace_deletes_the_dependents_a_new_copy_would_replace() -> None:
    """The engine's calculateDependentReplacements: the PV's spec comes from the disk, and a PV's csi source is
    forceNew, so replacing the disk delete-before-replace takes the PV down first (and brings it back)."""

    def disk(snapshot: str) -> dict[str, Any]:
        return res(DISK, "d", {"name": "w", "zone": "z", "type": "hyperdisk-ml", "snapshot": snapshot})

    def pv() -> dict[str, Any]:
        return res(
            PV,
            "pv",
            {
                "metadata": {"name": "w"},
                "spec": {"csi": {"driver": "pd.csi.storage.gke.io", "volumeHandle": "disks/w"}},
            },
            property_dependencies={"spec": [urn(DISK, "d")]},
            dependencies=[urn(DISK, "d")],
        )

    r = review(inventory(disk("s1"), pv()), inventory(disk("s2"), pv()))
    assert actions(r) == [("d", "replace", True, False, 0), ("pv", "replace", True, False, 0)]
    assert "replaced with d" in r.changes[1].reasons[0]


def test_a_value_from_a_replaced_resource_is_unknown_until_apply() -> None:
    """A created or replaced resource's outputs are unknown at preview: a ForceNew input built from one replaces."""
    net = "gcp:compute/network:Network"
    sub = "gcp:compute/subnetwork:Subnetwork"

    def network(desc: str) -> dict[str, Any]:
        return res(net, "vpc", {"name": "vpc", "description": desc})

    def subnet() -> dict[str, Any]:
        return res(
            sub,
            "s",
            {"name": "s", "network": "<known-after-apply:vpc.id>"},
            property_dependencies={"network": [urn(net, "vpc")]},
        )

    r = review(inventory(network("a"), subnet()), inventory(network("b"), subnet()))
    assert [(c.name, c.action) for c in r.changes] == [("vpc", "replace"), ("s", "replace")]  # by URN
    r = review(inventory(network("a"), subnet()), inventory(network("a"), subnet()))
    assert r.changes == ()  # the same placeholder on both sides: known from the state


def test_a_replaced_provider_replaces_what_it_manages() -> None:
    def kube(endpoint: str) -> str:
        return json.dumps(
            {
                "current-context": "c",
                "contexts": [{"name": "c", "context": {"cluster": "k"}}],
                "clusters": [{"name": "k", "cluster": {"server": endpoint}}],
            }
        )

    ref = urn(K8S_PROVIDER, "k8s")
    d = deployment()
    d["provider"] = ref
    old = inventory(res(K8S_PROVIDER, "k8s", {"kubeconfig": kube("https://a")}), d)
    new = inventory(res(K8S_PROVIDER, "k8s", {"kubeconfig": kube("https://b")}), d)
    assert [(c.name, c.action) for c in review(old, new).changes] == [("vllm", "replace"), ("k8s", "replace")]


# ---- the program's dynamic providers: their own diff() -----------------------------------------------------------


def _vertex(stack: str = "staging-vertex") -> dict[str, Any]:
    from .conftest import plan_run

    return plan_run(stack).inventory.to_dict()


def test_vertex_deployed_model_upload_change_replaces_and_replica_bounds_update() -> None:
    old = _vertex()
    dm = "pulumi-python:dynamic/vertex:DeployedModel"
    new = copy.deepcopy(old)
    stable = next(r for r in new["resources"] if r["type"] == dm and r["name"] == "vertex-stable")
    stable["inputs"]["upload_model_request"]["model"]["containerSpec"]["args"].append("--seed=1")
    r = review(old, new)
    assert ("vertex-stable", "replace") in [(c.name, c.action) for c in r.changes]
    # The traffic split keys on the caller-chosen deployed model id, an input here (the program derives a new one
    # from a new release identity, this hand edit does not): a replacement keeping its ids leaves the split alone.
    assert "vertex-traffic" not in [c.name for c in r.changes]
    new = copy.deepcopy(old)
    stable = next(r for r in new["resources"] if r["type"] == dm and r["name"] == "vertex-stable")
    stable["inputs"]["deployed_model"]["dedicatedResources"]["maxReplicaCount"] += 1
    assert [(c.name, c.action) for c in review(old, new).changes] == [("vertex-stable", "update")]
    assert review(old, copy.deepcopy(old)).changes == ()


def test_cloud_run_revision_changes_are_judged_by_its_providers_diff() -> None:
    """The Revision provider's diff() replaces on a new revision name or template and updates a timeout in place;
    it reads recorded inputs only, so the review calls it on the old plan's inputs (no stand-in create, no note)."""
    old = _vertex("dev-cloudrun")
    rev = "pulumi-python:dynamic/cloudrun:Revision"

    def stable(inv: dict[str, Any]) -> dict[str, Any]:
        return next(r for r in inv["resources"] if r["type"] == rev and r["name"] == "cloud-run-revision-stable")

    new = copy.deepcopy(old)
    stable(new)["inputs"]["revision"] += "-x"
    (c,) = review(old, new).changes
    assert (c.name, c.action, c.notes) == ("cloud-run-revision-stable", "replace", ())
    assert [f.path for f in c.fields if f.forces_replacement] == ["revision"]
    new = copy.deepcopy(old)
    stable(new)["inputs"]["timeouts"]["create_seconds"] += 60
    (c,) = review(old, new).changes
    assert (c.action, [f.forces_replacement for f in c.fields]) == ("update", [False])


# ---- output ---------------------------------------------------------------------------------------------------


def test_long_values_are_shown_in_full_as_a_unified_diff() -> None:
    alert = "gcp:monitoring/alertPolicy:AlertPolicy"
    q_old = 'sum(rate(vllm:request_success_total{pool="stable"}[15m])) / sum(rate(vllm:x[15m])) > 0.05'
    old = res(alert, "a", {"documentation": {"content": f"line one\n{q_old}\nline three"}})
    new = res(alert, "a", {"documentation": {"content": f"line one\n{q_old.replace('0.05', '0.01')}\nline three"}})
    text = render_text(review(inventory(old), inventory(new)))
    assert f"-{q_old}\n" in text and f"+{q_old.replace('0.05', '0.01')}\n" in text
    assert "..." not in text


def test_created_resources_show_their_inputs_and_json_has_the_schema() -> None:
    r = review(inventory(), inventory(hpa(2)))
    assert '"minReplicas": 2' in render_text(r)
    doc = json.loads(render_json(r))
    assert set(doc) == {"summary", "errors", "warnings", "changes", "outputs"}
    (c,) = doc["changes"]
    assert {"urn", "type", "action", "delete_before_replace", "protected", "restarts_pods", "fields"} <= set(c)
    assert c["action"] == "create" and c["inputs"]["spec"]["minReplicas"] == 2
    assert doc["summary"]["create"] == 1


def test_exit_codes() -> None:
    base = inventory(deployment(), hpa(2))
    assert exit_code(review(base, copy.deepcopy(base))) == 0
    assert exit_code(review(base, inventory(deployment(replicas=3), hpa(2)))) == 1
    assert exit_code(review(base, inventory(deployment(app="v2"), hpa(2)))) == 3
    assert exit_code(review(base, inventory(deployment()))) == 3  # a deletion


def test_render_is_deterministic_across_input_order() -> None:
    old = inventory(node_pool(), deployment(), hpa(2))
    new = inventory(node_pool(gpus=4), deployment(args=["--x"]), hpa(3))
    first = render_text(review(old, new))
    rng = random.Random(7)
    for _ in range(3):
        s_old, s_new = copy.deepcopy(old), copy.deepcopy(new)
        rng.shuffle(s_old["resources"])
        rng.shuffle(s_new["resources"])
        assert render_text(review(s_old, s_new)) == first


def test_path_syntax_round_trips() -> None:
    cases: tuple[list[Segment], ...] = (
        ["spec", "containers", Keyed("name", "vllm"), "args"],
        ["metadata", "labels", "nvidia.com/gpu"],
        ["a", 0],
    )
    for segs in cases:
        assert parse_path(format_path(segs)) == segs


FAKE_CLI = textwrap.dedent(
    '''
    """Stand-in for the CLI: writes an inventory that records the revision's MARKER file."""
    import argparse, json, pathlib
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    plan = sub.add_parser("plan")
    plan.add_argument("--stack", required=True)
    plan.add_argument("--out", required=True)
    a = p.parse_args()
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    marker = pathlib.Path("MARKER").read_text().strip()
    inv = {"project": "llm-serving", "stack": a.stack, "outputs": {}, "resources": [{
        "urn": f"urn:pulumi:{a.stack}::llm-serving::gcp:storage/bucket:Bucket::b", "type": "gcp:storage/bucket:Bucket",
        "name": "b", "custom": True, "parent": None, "provider": "", "inputs": {"location": marker},
        "dependencies": [], "property_dependencies": {}, "options": {}}]}
    (out / "inventory.json").write_text(json.dumps(inv))
    '''
)


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_plan_dir_at_git_revision_uses_a_detached_worktree(tmp_path: Path) -> None:
    from infra.offline.review import review_plan_dirs

    repo = tmp_path / "repo"
    (repo / "infra" / "offline").mkdir(parents=True)
    (repo / "infra" / "__init__.py").write_text("")
    (repo / "infra" / "offline" / "__init__.py").write_text("")
    (repo / "infra" / "offline" / "cli.py").write_text(FAKE_CLI)

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false", *args],
            cwd=repo,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()

    git("init", "-q")
    (repo / "MARKER").write_text("US\n")
    git("add", "-A")
    git("commit", "-q", "-m", "one")
    first = git("rev-parse", "HEAD")
    (repo / "MARKER").write_text("EU\n")
    git("commit", "-q", "-am", "two")
    plan_old = plan_dir_at_git_revision(first, "dev", repo)
    try:
        plan_new = plan_dir_at_git_revision("HEAD", "dev", repo, out_dir=tmp_path / "new-plan")
        c = only(review_plan_dirs(plan_old, plan_new))
        assert (c.action, c.fields[0].path, c.fields[0].old, c.fields[0].new) == ("replace", "location", "US", "EU")
    finally:
        shutil.rmtree(plan_old.parent, ignore_errors=True)
    assert git("worktree", "list", "--porcelain").count("worktree ") == 1
    with pytest.raises(PlanDiffError, match="git worktree add"):
        plan_dir_at_git_revision("no-such-rev", "dev", repo)


def test_an_old_plan_without_traffic_numbers_warns_of_nothing_it_cannot_compare() -> None:
    """A plan made before the stack exported `traffic` (an upgrade of this program): no contract number "changed"."""
    from infra.offline.review.effects import warnings

    contract = {"peak_arrival_rate_rps": 8.0, "prompt_tokens": 2048}
    pools = {"capacity": {"pools": {"stable": {"throughput": "unmeasured", "min_replicas": 2, "max_replicas": 4}}}}
    new = {"outputs": {**pools, "traffic": {"contract": contract, "weights": {"stable": 100}}}}
    assert warnings({"outputs": pools}, new) == []
    moved = {"outputs": {**pools, "traffic": {"contract": {**contract, "peak_arrival_rate_rps": 24.0}}}}
    (w,) = warnings(new, moved)
    assert w.startswith("pool stable is sized unmeasured (contract.peak_arrival_rate_rps changed)")
