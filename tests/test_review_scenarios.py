"""The reviewer scenarios of docs/reviewing-changes.md, on the shipped stacks: a change as a reviewer makes it (a
stack-file edit), planned by the real program, reviewed by ``llm-serving diff OLD NEW --format json --exit-code``.

Each expectation is what the provider or the engine does with that change (the rule is named beside it)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.offline import cli
from infra.offline.planrun import run_plan, write_plan
from infra.offline.stackfile import STACKS_DIR

from .conftest import REPO, plan_run

Edit = Callable[[dict[str, Any]], None]


def planned(stack: str, edit: Edit | None, tmp: Path, name: str) -> Path:
    """The plan directory of ``stack`` with ``edit`` applied to its config (the shipped stack without one)."""
    out = tmp / f"plan-{name}"
    if edit is None:
        write_plan(plan_run(stack), out)
        return out
    doc = yaml.safe_load((STACKS_DIR / f"Pulumi.{stack}.yaml").read_text())
    edit(doc["config"])
    stacks = tmp / f"stacks-{name}"
    stacks.mkdir()
    (stacks / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(doc))
    write_plan(run_plan(stack, stacks), out)
    return out


def diff(capsys: pytest.CaptureFixture[str], old: Path, new: Path) -> tuple[int, dict[str, Any], str]:
    code = cli.main(["diff", str(old), str(new), "--format", "json", "--exit-code"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def by_name(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in doc["changes"]}


def serving(cfg: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = cfg["llm-serving:serving"]
    return result


def test_a_vertex_promote_is_a_replacement(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """DeployedModelProvider.diff() (components/vertex/provider.py) replaces on a new upload_model_request."""

    def promote(cfg: dict[str, Any]) -> None:
        serving(cfg)["stable"]["release"] = serving(cfg)["canary"]["release"]

    code, doc, _ = diff(
        capsys, planned("staging-vertex", None, tmp_path, "a"), planned("staging-vertex", promote, tmp_path, "b")
    )
    stable = by_name(doc)["vertex-stable"]
    assert (code, stable["action"], stable["restarts_pods"]) == (3, "replace", 1)  # min_replicas 1: one new machine
    assert {f["path"].split(".")[0] for f in stable["fields"] if f["forces_replacement"]} == {
        "deployed_model",
        "upload_model_request",
        "model_id",  # caller-chosen ids derive from the release identity (components/vertex/requests.py)
        "deployed_model_id",
    }


def test_a_hyperdisk_resize_cannot_apply_and_names_the_claim(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """staging's StorageClass sets allowVolumeExpansion: false: the disk grows in place, the claim is refused."""

    def grow(cfg: dict[str, Any]) -> None:
        cfg["llm-serving:gke"]["weights"]["hyperdisk_ml"]["size_gib"] = 100

    code, doc, err = diff(capsys, planned("staging", None, tmp_path, "a"), planned("staging", grow, tmp_path, "b"))
    assert code == 2 and "the change cannot apply as planned" in err
    changes = by_name(doc)
    disk = changes["platform-weights-weights-qwen3-32b-fp8-2026-08-23-1"]
    assert disk["action"] == "update"  # IsDiskShrinkage: growth is in place
    claim = changes["platform-weight-volumes-pvc-stable-weights-qwen3-32b-fp8-2026-08-23-1"]
    assert any(
        "cannot apply in place: StorageClass hyperdisk-ml has allowVolumeExpansion: false" in n for n in claim["notes"]
    )
    assert doc["errors"] == [
        "kubernetes:core/v1:PersistentVolumeClaim::platform-weight-volumes-pvc-stable-weights-qwen3-32b-fp8-2026-08-23-1: "
        + next(n for n in claim["notes"] if n.startswith("cannot apply"))
    ]


def test_a_new_snapshot_replaces_the_disk_delete_before_replace_and_its_volume(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """snapshot is ForceNew; the disk is named by the program, so the bridge deletes it first; the PV's spec comes
    from the disk and its csi source is forceNew: the engine deletes it first too (calculateDependentReplacements)."""

    def rehydrate(cfg: dict[str, Any]) -> None:
        cfg["llm-serving:gke"]["weights"]["hyperdisk_ml"]["snapshots"]["qwen3-32b-fp8-2026-08-23.1"] = "rehydrated-1"

    code, doc, _ = diff(capsys, planned("staging", None, tmp_path, "a"), planned("staging", rehydrate, tmp_path, "b"))
    got = {(c["type"].rsplit(":", 1)[-1], c["action"], c["delete_before_replace"]) for c in doc["changes"]}
    assert ("Disk", "replace", True) in got and ("PersistentVolume", "replace", True) in got
    assert code == 3


def test_a_protected_delete_says_pulumi_up_refuses(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A promote on Hyperdisk ML with protection on (as prod requires): the old release's disk is removed, and
    deleting a protected resource fails (pulumi step.go deleteProtectedError)."""

    def protected(cfg: dict[str, Any]) -> None:
        cfg["llm-serving:gke"]["protect"] = True

    def promote(cfg: dict[str, Any]) -> None:
        protected(cfg)
        serving(cfg)["stable"]["release"] = serving(cfg)["canary"]["release"]
        cfg["llm-serving:gke"]["weights"]["hyperdisk_ml"]["snapshots"] = {"qwen3-32b-fp8-2026-11-20.1": "snap-new"}

    code, doc, _ = diff(
        capsys, planned("staging", protected, tmp_path, "a"), planned("staging", promote, tmp_path, "b")
    )
    disk = by_name(doc)["platform-weights-weights-qwen3-32b-fp8-2026-08-23-1"]
    assert (disk["action"], disk["protected"]) == ("delete", True)
    assert "holds data: the hydrated release weights on the disk" in disk["notes"]
    assert code == 3 and doc["summary"]["protected"] == 1


def test_a_template_change_restarts_the_pods_and_a_bound_change_none(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The TTFT objective sets the liveness window (max(60 s, 10 x TTFT)): a pod-template change, so every pod of
    both pools rolls, at their HPA minimum (prod: 2 + 2). A warm-minimum change is the HPA's alone."""

    def ttft(cfg: dict[str, Any]) -> None:
        cfg["llm-serving:contract"]["ttft_p95_ms"] = 1200

    code, doc, _ = diff(capsys, planned("prod", None, tmp_path, "a"), planned("prod", ttft, tmp_path, "b"))
    deployments = {
        c["name"]: c["restarts_pods"] for c in doc["changes"] if c["type"] == "kubernetes:apps/v1:Deployment"
    }
    assert deployments["vllm-stable-deployment"] == 2 and deployments["vllm-canary-deployment"] == 2
    assert code == 1

    def warmer(cfg: dict[str, Any]) -> None:
        serving(cfg)["stable"]["min_replicas"] = 3

    code, doc, _ = diff(capsys, planned("prod", None, tmp_path, "c"), planned("prod", warmer, tmp_path, "d"))
    assert [c["restarts_pods"] for c in doc["changes"] if c["type"] == "kubernetes:apps/v1:Deployment"] in ([], [0])
    assert doc["summary"]["restarts_pods"] == 0


def test_changed_long_values_appear_in_full(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    def ttft(cfg: dict[str, Any]) -> None:
        cfg["llm-serving:contract"]["ttft_p95_ms"] = 1200

    old, new = planned("prod", None, tmp_path, "a"), planned("prod", ttft, tmp_path, "b")
    assert cli.main(["diff", str(old), str(new)]) == 0
    text = capsys.readouterr().out
    inv = json.loads((new / "inventory.json").read_text())
    query = next(
        r["inputs"]["conditions"][0]["conditionPrometheusQueryLanguage"]["query"]
        for r in inv["resources"]
        if r["name"] == "observability-alert-stable-ttft-p95-over-objective"
    )
    assert len(query) > 80 and query in text  # the whole alert query, not a cut


def test_an_edited_release_cannot_apply(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Same id, new digest: pods would change content under the same release id."""
    release = json.loads((REPO / "stacks/releases/prod/qwen3-32b-fp8-2026-08-23.1.json").read_text())
    edited = copy.deepcopy(release)
    digest = "sha256:" + "2" * 64
    edited["image"] = edited["image"].split("@")[0] + "@" + digest
    edited["image_digest"] = digest

    def edit(cfg: dict[str, Any]) -> None:
        cfg["llm-serving:releases"] = [edited, cfg["llm-serving:releases"][1]]

    code, doc, err = diff(capsys, planned("prod", None, tmp_path, "a"), planned("prod", edit, tmp_path, "b"))
    assert code == 2 and "release qwen3-32b-fp8-2026-08-23.1 was edited in place" in err
    assert doc["errors"][0].startswith(
        "release qwen3-32b-fp8-2026-08-23.1 was edited in place (image changed): releases are immutable"
    )


def test_unmeasured_pools_warn_when_traffic_moves(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Peak x 3 changes no resource of an unmeasured stack: the diff is empty but says what it cannot show."""

    def triple(cfg: dict[str, Any]) -> None:
        cfg["llm-serving:contract"]["peak_arrival_rate_rps"] = 24.0

    code, doc, _ = diff(capsys, planned("prod", None, tmp_path, "a"), planned("prod", triple, tmp_path, "b"))
    assert doc["changes"] == [] and code == 1  # the stack output `traffic` changed
    assert [w.split(" (")[0] for w in doc["warnings"]] == [
        "pool canary is sized unmeasured",
        "pool stable is sized unmeasured",
    ]
    assert "contract.peak_arrival_rate_rps" in doc["warnings"][0]


def test_identical_plans_exit_0(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    plan = planned("dev-cloudrun", None, tmp_path, "a")
    code, doc, _ = diff(capsys, plan, plan)
    assert (code, doc["changes"], doc["summary"]["update"]) == (0, [], 0)


def test_a_closed_pipe_is_not_a_traceback(tmp_path: Path) -> None:
    """``| head``: the reader closes the pipe while the diff is still writing (every prod resource created with its
    inputs is far more than a pipe buffer holds)."""
    old, new = planned("dev-cloudrun", None, tmp_path, "a"), planned("prod", None, tmp_path, "b")
    proc = subprocess.run(
        f'{sys.executable} -m infra.offline.cli diff {old} {new} | head -1; echo "status ${{PIPESTATUS[0]}}"',
        shell=True,
        executable="/bin/bash",
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    first, status = proc.stdout.splitlines()
    # prod's 123 custom resources (117 + two Cloud Armor tenant policies + two tenant token-budget alerts + two picker
    # patches) and its 3 remote components (two picker charts, the objective CRDs' ConfigGroup)
    assert first.startswith("Plan diff: 126 to create, 0 to update, 0 to replace")
    assert status == "status 0"
    assert proc.stderr == ""  # no BrokenPipeError traceback, no "Exception ignored" at exit
