"""README stays true: the generated sections match their generators, every config key is documented, the quick
start matches the Makefile, and CI runs the README's test command."""

from __future__ import annotations

import re

from infra.offline import docs, reference
from infra.registry import STACK_CONFIG

from .conftest import REPO


def test_generated_sections_and_the_naming_copy_are_current():
    assert docs.stale() == [], "run `.venv/bin/python -m infra.offline.docs --write`"


def test_policy_table_lists_every_discovered_policy():
    text = (REPO / "README.md").read_text()
    names = sorted(m.NAME for m in docs.policy_modules())
    rows = re.findall(r"^\| `([a-z0-9-]+)` \| (?:resource|stack) \|", text, flags=re.M)
    assert rows == names
    assert f"{len(names)} policies, one module each" in text


def test_every_config_key_is_documented():
    missing = [row[0] for row in reference.rows(STACK_CONFIG, "", root=True) if not row[4]]
    assert not missing, f"config keys without a meaning (give the field a Field(description=...)): {missing}"


def test_quick_start_commands_exist_and_ci_runs_the_test_command():
    text = (REPO / "README.md").read_text()
    block = text.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["make plan STACK=dev", "make test"]
    makefile = (REPO / "Makefile").read_text()
    for target in ("plan", "test"):
        assert re.search(rf"^{target}:", makefile, re.M), target
    assert "make test" in (REPO / ".ci" / "run").read_text()
