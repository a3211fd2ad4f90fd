"""README and docs/ stay true: the generated sections match their generators (resource counts, planned capacity,
policy table, input limits, config reference), every config key is documented, the quick start matches the
Makefile, CI runs the README's test command, README stays short and maps every page of docs/, and every link and
repository path the pages quote names something that exists."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from infra.offline import docs, reference
from infra.registry import STACK_CONFIG

from .conftest import REPO

README = REPO / "README.md"
DOCS = REPO / "docs"
#: README is the entry point; depth lives in docs/ (one page per topic).
MAX_README_LINES = 400


def pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def test_generated_sections_and_the_naming_copy_are_current():
    assert docs.stale() == [], "run `.venv/bin/python -m infra.offline.docs --write`"


def test_every_generated_section_lives_in_an_existing_page():
    for section in docs.SECTIONS:
        assert section.page.exists(), section
        assert docs.begin(section.name) in section.page.read_text(), section


def test_readme_is_short():
    lines = README.read_text().count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; move depth into docs/"


def test_policy_table_lists_every_discovered_policy():
    text = (DOCS / "policy-pack.md").read_text()
    names = sorted(m.NAME for m in docs.policy_modules())
    rows = re.findall(r"^\| `([a-z0-9-]+)` \| (?:resource|stack) \|", text, flags=re.M)
    assert rows == names
    assert f"{len(names)} policies, one module each" in text


def test_every_config_key_is_documented():
    missing = [row[0] for row in reference.rows(STACK_CONFIG, "", root=True) if not row[4]]
    assert not missing, f"config keys without a meaning (give the field a Field(description=...)): {missing}"


def test_quick_start_commands_exist_and_ci_runs_the_test_command():
    text = README.read_text()
    block = text.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["make plan STACK=dev", "make test"]
    makefile = (REPO / "Makefile").read_text()
    for target in ("plan", "test"):
        assert re.search(rf"^{target}:", makefile, re.M), target
    assert "make test" in (REPO / ".ci" / "run").read_text()


def test_readme_maps_every_docs_page():
    linked = set(re.findall(r"\]\(docs/([a-z0-9-]+\.md)\)", README.read_text()))
    assert linked == {p.name for p in DOCS.glob("*.md")}


# ---- cross-references ----------------------------------------------------------------------------------------------


def _prose(text: str) -> str:
    """The page without its fenced blocks (code, the layout tree, generated reports)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = "".join(c for c in heading.strip().lower() if c in " -_" or unicodedata.category(c)[0] in "LN")
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    return {_anchor(h) for h in re.findall(r"^#{1,6} (.+)$", _prose(page.read_text()), flags=re.M)}


def test_links_between_pages_resolve():
    broken = []
    for page in pages():
        for target in re.findall(r"\]\(([^)\s]+)\)", re.sub(r"`[^`\n]*`", "", _prose(page.read_text()))):
            if re.match(r"^[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert not broken, broken


#: Quoted paths are checked when they start with one of these (``build/`` is written by the tools, never committed).
REPO_DIRS = ("infra/", "components/", "policies/", "stacks/", "tests/", "scripts/", "mk/", "docs/", ".ci/")


def test_quoted_repository_paths_exist():
    """Every path under the repository's own folders quoted in `code` names a file or folder that exists (paths with
    placeholders, globs or ``…`` are patterns, not paths)."""
    missing = []
    for page in pages():
        for span in re.findall(r"`([^`\n]+)`", _prose(page.read_text())):
            for word in span.split():
                word = word.strip(",;:()'\"")
                if not word.startswith(REPO_DIRS) or re.search(r"[<>*{}…]", word):
                    continue
                if not (REPO / word).exists():
                    missing.append(f"{page.relative_to(REPO)}: {word}")
    assert not missing, missing


def test_the_architecture_page_lists_every_target_and_every_import_contract():
    """docs/architecture.md describes the current structure: a target package per registered target, and one item
    per import-linter contract of pyproject.toml."""
    from infra.registry import REGISTRY

    text = (DOCS / "architecture.md").read_text()
    tree = text.split("```", 2)[1]
    for target in REGISTRY.targets:
        assert re.search(rf"^    {target.name}/ ", tree, flags=re.M), target.name
        assert (REPO / "infra" / "targets" / target.name / "target.py").exists(), target.name
    contracts = (REPO / "pyproject.toml").read_text().count("[[tool.importlinter.contracts]]")
    section = text.split("## Dependencies run one way", 1)[1].split("\n## ", 1)[0]
    assert len(re.findall(r"^\d+\. \*\*", section, flags=re.M)) == contracts
