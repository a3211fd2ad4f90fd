"""`llm-serving diff` on two real plans of the dev stack that differ in one config value."""

from __future__ import annotations

from pathlib import Path

import yaml

from infra.offline import cli
from infra.offline.planrun import write_plan
from infra.offline.stackfile import STACKS_DIR

from .conftest import plan_run


def test_diff_between_two_plans_shows_the_derived_change(plans, tmp_path: Path, capsys):
    a, b, stacks = tmp_path / "a", tmp_path / "b", tmp_path / "stacks"
    stacks.mkdir()
    doc = yaml.safe_load((STACKS_DIR / "Pulumi.dev.yaml").read_text())
    doc["config"]["llm-serving:serving"]["stable"]["max_replicas"] = 3
    (stacks / "Pulumi.dev.yaml").write_text(yaml.safe_dump(doc))
    write_plan(plan_run("dev"), a)
    assert cli.main(["plan", "--stack", "dev", "--out", str(b), "--stacks-dir", str(stacks)]) == 0
    capsys.readouterr()
    assert cli.main(["diff", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    # derived, not echoed: one more replica on a 1-replica-per-node topology needs one more node
    assert "capacity.accelerators.l4.nodes_for_max_plus_surge: 5 → 6" in out
    assert cli.main(["diff", str(a), str(b)]) == 0
    assert capsys.readouterr().out == out  # stable order


def test_diff_needs_two_dirs_or_a_revision(capsys):
    assert cli.main(["diff", "/tmp/only-one"]) == 2
    assert "give <old-plan-dir> <new-plan-dir>" in capsys.readouterr().err
