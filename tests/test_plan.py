"""The offline plan: every stack plans, output is byte-identical across runs, and the summary is derived."""

from __future__ import annotations

import filecmp
import json
import subprocess
import sys
from pathlib import Path

import pytest

from infra.offline import cli
from infra.offline.planrun import OWNED_FILES, write_plan
from infra.offline.runner import PLACEHOLDER

from .conftest import GKE_STACKS, REPO, plan_run


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("stack", GKE_STACKS)
def test_plan_exits_zero_and_is_byte_identical(plans, stack, tmp_path, capsys):
    """A fresh run of the CLI writes exactly the bytes of the session's earlier run of the same stack."""
    a, b = tmp_path / "a", tmp_path / "b"
    write_plan(plan_run(stack), a)
    assert cli.main(["plan", "--stack", stack, "--out", str(b)]) == 0
    out = capsys.readouterr().out
    assert f"stack {stack} ({plans[stack][0].environment})" in out
    ta, tb = _tree(a), _tree(b)
    # the CLI also writes the policy report (tests/test_policies.py covers it); the plan files match exactly
    assert tb.pop("policy-report.json")
    assert json.loads(tb.pop(OWNED_FILES))["files"] == sorted(
        [*json.loads(ta.pop(OWNED_FILES))["files"], "policy-report.json"]
    )
    assert ta.keys() == tb.keys()
    assert ta == tb
    assert {"inventory.json", "capacity.json"} <= set(ta)
    assert any(k.startswith("manifests/") for k in ta)


@pytest.mark.integration
def test_plan_in_a_fresh_process_matches(plans, tmp_path):
    """A separate interpreter (other hash seed, cold imports) produces the same bytes. Integration tier:
    a cold interpreter spends ~15 s importing the provider SDKs."""
    a, b = tmp_path / "a", tmp_path / "b"
    write_plan(plan_run("prod"), a)
    env = {"PYTHONHASHSEED": "12345", "PATH": "/usr/bin:/bin"}
    subprocess.run(
        [sys.executable, "-m", "infra.offline.cli", "plan", "--stack", "prod", "--out", str(b)],
        cwd=REPO,
        env=env,
        check=True,
        capture_output=True,
    )
    (b / "policy-report.json").unlink()  # written by the CLI only; tests/test_policies.py covers it
    for d in (a, b):
        (d / OWNED_FILES).unlink()  # the CLI's list also names the policy report
    cmp = filecmp.dircmp(a, b)
    assert not cmp.diff_files and not cmp.left_only and not cmp.right_only
    assert _tree(a) == _tree(b)


def test_rerun_removes_what_an_earlier_plan_wrote_and_nothing_else(tmp_path):
    run = plan_run("dev")
    out = tmp_path / "p"
    write_plan(run, out)
    # An object an earlier plan wrote that the current plan no longer has ...
    (out / "manifests" / "gone.yaml").write_text("x")
    owned = json.loads((out / OWNED_FILES).read_text())["files"]
    (out / OWNED_FILES).write_text(json.dumps({"files": [*owned, "manifests/gone.yaml"]}))
    # ... and a file the user put there.
    (out / "notes.txt").write_text("mine")
    write_plan(run, out)
    assert not (out / "manifests" / "gone.yaml").exists()
    assert (out / "notes.txt").read_text() == "mine"


def test_inventory_shape_and_capacity_outputs(plans):
    _cfg, plan, inv = plans["prod"]
    urns = [r["urn"] for r in inv["resources"]]
    assert urns == sorted(urns)
    for r in inv["resources"]:
        assert set(r) == {
            "urn",
            "aliases",
            "type",
            "name",
            "custom",
            "parent",
            "provider",
            "inputs",
            "dependencies",
            "property_dependencies",
            "options",
        }
    # the capacity the program exports is the planner's, not the config's
    exported = inv["outputs"]["capacity"]["pools"]["stable"]
    # (79.6 GiB x 0.9 - (32.8e9 + 2 x 151,936 x 5,120 bf16 embedding/lm_head bytes) / TP 2 - 2 GiB) / (131,072 B x
    # 2,160 tokens) = 203 sequences at the mean context
    assert exported["max_num_seqs"] == plan.pools["stable"].capacity.max_num_seqs == 203
    assert exported["throughput"] == "unmeasured"
    assert exported["cost_per_million_output_tokens_usd"] is None


def test_every_child_resource_has_a_parent(plans):
    for stack, (_, _, inv) in plans.items():
        for r in inv["resources"]:
            if r["type"].startswith("pulumi:providers:"):
                continue
            assert r["parent"], f"{stack}: {r['urn']} is registered without a parent"


def test_component_type_tokens(plans):
    _, _, inv = plans["dev"]
    tokens = {r["type"] for r in inv["resources"] if not r["custom"]}
    assert tokens, "no components registered"
    for t in tokens:
        if t.startswith(("kubernetes:helm.sh/", "kubernetes:yaml/v2:")):
            continue  # pulumi-kubernetes' own provider-side components (Helm chart, CRD ConfigGroup)
        assert t.startswith("llm-serving:") and t.count(":") == 2, t


def test_placeholders_are_marked_and_deterministic(plans):
    _, _, inv = plans["prod"]
    text = json.dumps(inv)
    marker = PLACEHOLDER.split("{")[0]
    assert "known-after-apply" in marker
    # no raw engine sentinels leak into the plan
    assert "04da6b54-80e4-46f7-96ec-b56ff0331ba9" not in text
    assert "4dabf18193072939515e22adb298388d" not in text


def test_capacity_command(capsys):
    assert cli.main(["capacity", "--stack", "prod"]) == 0
    out = capsys.readouterr().out
    assert "--max-num-seqs / batched tokens   203 / 8192" in out
    assert "nodes on h100-tp2: 6 at max replicas (6), 8 with rollout surge; 8 reserved" in out


def test_unknown_stack_is_a_clear_error(capsys):
    assert cli.main(["plan", "--stack", "qa"]) == 2
    assert "no stack file" in capsys.readouterr().err
