"""Tests for infra.offline.plan_diff on synthetic inventories (no Pulumi run needed)."""

from __future__ import annotations

import copy
import json
import random
import re
import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from infra.offline.plan_diff import (
    ABSENT,
    MAX_VALUE_CHARS,
    FieldChange,
    PlanDiff,
    PlanDiffError,
    diff_plan_dirs,
    diff_plans,
    format_path,
    parse_path,
    plan_dir_at_git_revision,
    render,
    resource_replaced_by_name,
)

from .synthetic import inventory, resource, urn


def res(type_: str, name: str, inputs: dict[str, Any], **options: Any) -> dict[str, Any]:
    """A resource row whose options (protect, ignore_changes, ...) are given as keyword arguments."""
    return resource(type_, name, inputs, options=options)


NODE_POOL = "gcp:container/nodePool:NodePool"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"


def node_pool(machine_type: str = "a3-highgpu-8g", gpus: int = 8) -> dict[str, Any]:
    return res(
        NODE_POOL,
        "gpu-pool",
        {
            "cluster": "serving",
            "location": "us-central1",
            "nodeConfig": {
                "machineType": machine_type,
                "guestAccelerators": [{"count": gpus, "type": "nvidia-h100-80gb"}],
                "taints": [{"effect": "NO_SCHEDULE", "key": "nvidia.com/gpu", "value": "present"}],
            },
        },
    )


def deployment(args: list[str] | None = None, app: str = "vllm", protect: bool = False) -> dict[str, Any]:
    return res(
        DEPLOYMENT,
        "vllm",
        {
            "metadata": {"name": "vllm", "namespace": "serving", "labels": {"app.kubernetes.io/name": app}},
            "spec": {
                "selector": {"matchLabels": {"app": app}},
                "template": {
                    "metadata": {"labels": {"app": app}},
                    "spec": {
                        "containers": [
                            {
                                "name": "vllm",
                                "image": "vllm/vllm-openai:v0.9.0",
                                "args": args or ["--model", "/models/qwen3-8b", "--port", "8000"],
                            }
                        ]
                    },
                },
            },
        },
        protect=protect,
    )


BUCKET = res("gcp:storage/bucket:Bucket", "models", {"location": "US", "name": "models-bkt"})
REPO = res("gcp:artifactregistry/repository:Repository", "images", {"format": "DOCKER", "location": "us"})


def _one_changed(diff: PlanDiff) -> Any:
    assert len(diff.changed) == 1, diff.changed
    return diff.changed[0]


def test_added_and_removed_are_listed_by_urn() -> None:
    old = inventory(node_pool(), BUCKET)
    new = inventory(node_pool(), REPO)
    diff = diff_plans(old, new)
    assert [r.urn for r in diff.added] == [REPO["urn"]]
    assert [r.urn for r in diff.removed] == [BUCKET["urn"]]
    assert diff.changed == ()
    text = render(diff)
    assert "Added (1)\n  + gcp:artifactregistry/repository:Repository::images\n" in text
    assert "Removed (1)\n  - gcp:storage/bucket:Bucket::models\n" in text
    assert "Changed (0)\n  (none)" in text


def test_identical_plans_are_empty() -> None:
    inv = inventory(node_pool(), deployment(), BUCKET)
    diff = diff_plans(inv, copy.deepcopy(inv))
    assert diff.empty
    assert render(diff).startswith("Plan diff: 0 added, 0 removed, 0 changed (0 replacements)\n")


def test_nested_and_list_paths_with_container_args_not_a_replacement() -> None:
    old = inventory(deployment(["--model", "/models/qwen3-8b", "--port", "8000"]))
    new = inventory(deployment(["--model", "/models/qwen3-8b", "--port", "8080", "--enable-prefix-caching"]))
    rc = _one_changed(diff_plans(old, new))
    assert [(c.path, c.old, c.new, c.kind) for c in rc.changes] == [
        ("spec.template.spec.containers[0].args[3]", "8000", "8080", "changed"),
        ("spec.template.spec.containers[0].args[4]", ABSENT, "--enable-prefix-caching", "added"),
    ]
    assert not rc.replacement
    assert not any(c.replaces for c in rc.changes)
    text = render(diff_plans(old, new))
    assert '      spec.template.spec.containers[0].args[3]: "8000" → "8080"\n' in text
    assert '      spec.template.spec.containers[0].args[4]: (absent) → "--enable-prefix-caching"\n' in text
    assert "[REPLACE" not in text


def test_deployment_selector_change_is_a_replacement() -> None:
    rc = _one_changed(diff_plans(inventory(deployment(app="vllm")), inventory(deployment(app="vllm-v2"))))
    by_path = {c.path: c for c in rc.changes}
    assert by_path["spec.selector.matchLabels.app"].replaces
    assert by_path["spec.selector.matchLabels.app"].reasons == ("spec.selector forces replacement",)
    # Labels on the pod template and on the object itself are in place.
    assert not by_path["spec.template.metadata.labels.app"].replaces
    assert not by_path['metadata.labels["app.kubernetes.io/name"]'].replaces
    assert rc.replacement
    assert "  ~ kubernetes:apps/v1:Deployment::vllm  [REPLACE]" in render(
        diff_plans(inventory(deployment(app="vllm")), inventory(deployment(app="vllm-v2")))
    )


def test_node_pool_guest_accelerators_replace_machine_type_recreates_nodes_in_place() -> None:
    diff = diff_plans(inventory(node_pool("a3-highgpu-8g", 8)), inventory(node_pool("a3-highgpu-4g", 4)))
    rc = _one_changed(diff)
    by_path = {c.path: c for c in rc.changes}
    accel = by_path["nodeConfig.guestAccelerators[0].count"]
    assert accel.replaces and accel.reasons == ("nodeConfig.guestAccelerators forces replacement",)
    machine = by_path["nodeConfig.machineType"]
    # Since magic-modules#9575 machineType is an in-place UpdateNodePool that migrates every node.
    assert not machine.replaces and machine.disruptive
    assert rc.replacement and diff.replacements == [rc]


def test_node_pool_machine_type_alone_is_flagged_as_node_recreation_not_replacement() -> None:
    rc = _one_changed(diff_plans(inventory(node_pool("a3-highgpu-8g")), inventory(node_pool("a3-megagpu-8g"))))
    assert not rc.replacement and rc.disruptive
    text = render(diff_plans(inventory(node_pool("a3-highgpu-8g")), inventory(node_pool("a3-megagpu-8g"))))
    assert "  ~ gcp:container/nodePool:NodePool::gpu-pool  [RECREATES NODES]\n" in text
    assert '      nodeConfig.machineType: "a3-highgpu-8g" → "a3-megagpu-8g"   [RECREATES NODES' in text


def test_whole_block_added_reaches_a_forcing_field() -> None:
    old = node_pool()
    new = copy.deepcopy(old)
    new["inputs"]["nodeConfig"]["reservationAffinity"] = {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["h100-res"],
    }
    rc = _one_changed(diff_plans(inventory(old), inventory(new)))
    (change,) = rc.changes
    assert change.path == "nodeConfig.reservationAffinity" and change.kind == "added" and change.replaces


def test_name_changes_replace_every_type() -> None:
    old = res("llm:index:Anything", "x", {"name": "a", "size": 1})
    new = res("llm:index:Anything", "x", {"name": "b", "size": 2})
    rc = _one_changed(diff_plans(inventory(old), inventory(new)))
    assert {c.path: c.replaces for c in rc.changes} == {"name": True, "size": False}
    assert rc.replacement_reasons == ["name changed"]
    assert resource_replaced_by_name("kubernetes:core/v1:Service", "metadata.name")
    assert not resource_replaced_by_name("gcp:compute/disk:Disk", "metadata.name")


def test_conditional_rules_subnet_expansion_and_disk_shrink() -> None:
    sub = "gcp:compute/subnetwork:Subnetwork"
    expand = diff_plans(
        inventory(res(sub, "s", {"ipCidrRange": "10.0.0.0/24"})),
        inventory(res(sub, "s", {"ipCidrRange": "10.0.0.0/20"})),
    )
    move = diff_plans(
        inventory(res(sub, "s", {"ipCidrRange": "10.0.0.0/24"})),
        inventory(res(sub, "s", {"ipCidrRange": "10.1.0.0/24"})),
    )
    assert not _one_changed(expand).replacement
    assert _one_changed(move).replacement
    disk = "gcp:compute/disk:Disk"
    grow = diff_plans(inventory(res(disk, "d", {"size": 100})), inventory(res(disk, "d", {"size": 200})))
    shrink = diff_plans(inventory(res(disk, "d", {"size": 200})), inventory(res(disk, "d", {"size": 100})))
    assert not _one_changed(grow).replacement
    assert _one_changed(shrink).replacement_reasons == ["disk size decreased (only growth is in place)"]


def test_option_changes_are_listed_and_ignore_changes_and_replace_on_changes_apply() -> None:
    old = inventory(deployment(protect=False))
    new = inventory(deployment(protect=True))
    rc = _one_changed(diff_plans(old, new))
    assert [(c.path, c.old, c.new, c.replaces) for c in rc.changes] == [("options.protect", False, True, False)]
    assert "      options.protect: false → true\n" in render(diff_plans(old, new))

    b_old = res("gcp:storage/bucket:Bucket", "models", {"labels": {"team": "a"}, "storageClass": "STANDARD"})
    b_new = copy.deepcopy(b_old)
    b_new["inputs"] = {"labels": {"team": "b"}, "storageClass": "NEARLINE"}
    b_new["options"]["ignore_changes"] = ["labels"]
    b_new["options"]["replace_on_changes"] = ["storageClass"]
    rc = _one_changed(diff_plans(inventory(b_old), inventory(b_new)))
    by_path = {c.path: c for c in rc.changes}
    assert by_path["labels.team"].ignored and not by_path["labels.team"].replaces
    assert by_path["storageClass"].replaces
    assert by_path["storageClass"].reasons == ("replaceOnChanges: storageClass",)


def test_provider_change_is_a_replacement_but_provider_id_churn_is_not() -> None:
    prov_a = urn("pulumi:providers:kubernetes", "gke-a")
    prov_b = urn("pulumi:providers:kubernetes", "gke-b")
    old, same_urn, other = deployment(), deployment(), deployment()
    old["provider"] = f"{prov_a}::04da6b54-80e4-46f7-96ec-b56ff0331ba9"
    same_urn["provider"] = f"{prov_a}::1234"
    other["provider"] = f"{prov_b}::1234"
    assert diff_plans(inventory(old), inventory(same_urn)).empty
    rc = _one_changed(diff_plans(inventory(old), inventory(other)))
    assert rc.replacement_reasons == ["provider reference changed"]


def test_values_are_truncated_deterministically() -> None:
    long_old = "x" * 500
    old = inventory(res("llm:index:Blob", "b", {"text": long_old}))
    new = inventory(res("llm:index:Blob", "b", {"text": long_old + "y"}))
    line = next(x for x in render(diff_plans(old, new)).splitlines() if x.strip().startswith("text:"))
    old_shown, new_shown = line.split(": ", 1)[1].split(" → ")
    assert len(old_shown) == MAX_VALUE_CHARS and old_shown.endswith("...")
    assert old_shown == new_shown.rstrip()


def test_outputs_diff_is_rendered() -> None:
    diff = diff_plans(inventory(BUCKET, outputs={"endpoint": "a"}), inventory(BUCKET, outputs={"endpoint": "b"}))
    assert diff.outputs == (FieldChange("endpoint", "a", "b"),)
    assert 'Outputs (1)\n      endpoint: "a" → "b"\n' in render(diff)


def test_render_is_deterministic_across_runs_and_input_order() -> None:
    old = inventory(node_pool(), deployment(), BUCKET, REPO, outputs={"b": 1, "a": [1, 2]})
    new_resources = [
        node_pool("a3-megagpu-8g", 4),
        deployment(["--x"], app="v2", protect=True),
        REPO,
        res("gcp:compute/disk:Disk", "weights", {"size": 2048, "type": "pd-ssd"}),
    ]
    new = inventory(*new_resources, outputs={"a": [1, 3], "b": 1})
    first = render(diff_plans(old, new))
    assert first == render(diff_plans(old, new))

    rng = random.Random(7)
    for _ in range(5):
        s_old, s_new = copy.deepcopy(old), copy.deepcopy(new)
        rng.shuffle(s_old["resources"])
        rng.shuffle(s_new["resources"])
        # Shuffle mapping key order too (JSON objects are unordered).
        for r in s_old["resources"] + s_new["resources"]:
            items = list(r["inputs"].items())
            rng.shuffle(items)
            r["inputs"] = dict(items)
        assert render(diff_plans(s_old, s_new)).encode() == first.encode()
    assert first.startswith("Plan diff: 1 added, 1 removed, 2 changed (2 replacements)\n")


def test_path_syntax_round_trips() -> None:
    paths: tuple[list[str | int], ...] = (
        ["spec", "template", "spec", "containers", 0, "args", 3],
        ["metadata", "labels", "nvidia.com/gpu"],
    )
    for segs in paths:
        assert parse_path(format_path(segs)) == segs
    assert parse_path('spec.containers[*].env["A.B"]') == ["spec", "containers", "[*]", "env", "A.B"]
    with pytest.raises(PlanDiffError):
        parse_path("spec[abc]")


def test_malformed_inventory_is_a_clear_error() -> None:
    with pytest.raises(PlanDiffError, match="old inventory must be an object with a 'resources' list"):
        diff_plans({"resources": None}, inventory())
    with pytest.raises(PlanDiffError, match="duplicate urn"):
        diff_plans(inventory(), {"resources": [BUCKET, BUCKET]})


def test_diff_plan_dirs(tmp_path: Path) -> None:
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    (tmp_path / "old" / "inventory.json").write_text(json.dumps(inventory(BUCKET)))
    (tmp_path / "new" / "inventory.json").write_text(json.dumps(inventory(BUCKET, REPO)))
    diff = diff_plan_dirs(tmp_path / "old", tmp_path / "new")
    assert [r.urn for r in diff.added] == [REPO["urn"]]
    with pytest.raises(PlanDiffError, match=re.escape("no inventory.json")):
        diff_plan_dirs(tmp_path / "old", tmp_path / "missing")


FAKE_CLI = textwrap.dedent(
    '''
    """Stand-in for the lead's CLI: writes an inventory that records the revision's MARKER file."""
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
    repo = tmp_path / "repo"
    (repo / "infra").mkdir(parents=True)
    (repo / "infra" / "__init__.py").write_text("")
    (repo / "infra" / "cli.py").write_text(FAKE_CLI)

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
        diff = diff_plan_dirs(plan_old, plan_new)
        (rc,) = diff.changed
        assert [(c.path, c.old, c.new, c.replaces) for c in rc.changes] == [("location", "US", "EU", True)]
    finally:
        shutil.rmtree(plan_old.parent, ignore_errors=True)
    # The worktrees are gone and the main checkout is untouched.
    assert git("worktree", "list", "--porcelain").count("worktree ") == 1
    assert (repo / "MARKER").read_text() == "EU\n"
    with pytest.raises(PlanDiffError, match="git worktree add"):
        plan_dir_at_git_revision("no-such-rev", "dev", repo)
