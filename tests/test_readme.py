"""README stays true: the config reference matches the models, the quick start matches the Makefile, and
CI runs the README's test command."""

from __future__ import annotations

import re

from infra.offline import reference

from .conftest import REPO


def test_config_reference_matches_models():
    text = (REPO / "README.md").read_text()
    assert reference.current_readme_section(text) == reference.render(), (
        "README config reference is stale: run `.venv/bin/python -m infra.offline.reference --write`")


def test_every_config_key_is_documented():
    missing = [row[0] for row in reference.rows(reference.StackConfig, "", root=True) if not row[4]]
    assert not missing, f"config keys without a meaning (add a `#:` comment above the field): {missing}"


def test_quick_start_commands_exist_and_ci_runs_the_test_command():
    text = (REPO / "README.md").read_text()
    block = text.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["make plan STACK=dev", "make test"]
    makefile = (REPO / "Makefile").read_text()
    for target in ("plan", "test"):
        assert re.search(rf"^{target}:", makefile, re.M), target
    assert "make test" in (REPO / ".ci" / "run").read_text()
