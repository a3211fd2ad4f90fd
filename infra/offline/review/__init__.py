"""Reviewing a change: what ``pulumi up`` will really do between two offline plans.

``review(old_inventory, new_inventory)`` steps the two plans the way the Pulumi engine does (:mod:`.engine`), asks
each resource's provider model whether a change replaces it (:mod:`.providers`, with rules derived from the
providers' sources: :mod:`.rules`), and adds what that does to running things (:mod:`.effects`): pods restarted,
data held, changes Kubernetes will not apply, pools whose capacity the plan cannot judge, releases edited in place.
:mod:`.render` prints it for people and as JSON for CI. ``llm-serving diff`` is the command
(docs/reviewing-changes.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..inventory import Inventory, InventoryError
from . import effects
from .engine import Change, Engine, Review, output_changes
from .gitrev import PlanDiffError, plan_dir_at_git_revision
from .paths import ABSENT
from .providers import FieldChange
from .render import exit_code, render_json, render_text, to_json_doc
from .rules import RuleSet, load_rules

__all__ = [
    "ABSENT",
    "Change",
    "FieldChange",
    "PlanDiffError",
    "Review",
    "RuleSet",
    "exit_code",
    "load_inventory",
    "load_rules",
    "plan_dir_at_git_revision",
    "render_json",
    "render_text",
    "review",
    "review_plan_dirs",
    "to_json_doc",
]


def review(old: Mapping[str, Any], new: Mapping[str, Any], rules: RuleSet | None = None) -> Review:
    """The steps ``pulumi up`` takes from ``old`` to ``new`` (inventory documents), annotated."""
    engine = Engine(old, new, rules)
    steps, unchanged = engine.run()
    annotated, errors = effects.annotate(steps, engine.old, engine.new)
    return Review(
        changes=tuple(annotated),
        outputs=output_changes(old, new),
        warnings=tuple(effects.warnings(old, new)),
        errors=tuple(effects.release_errors(old, new) + errors),
        unchanged=unchanged,
    )


def load_inventory(plan_dir: Path) -> dict[str, Any]:
    """A plan directory's inventory, checked by the inventory format's owner."""
    path = Path(plan_dir) / "inventory.json"
    if not path.is_file():
        raise PlanDiffError(f"no inventory.json in {plan_dir} (run `plan --out {plan_dir}` first)")
    try:
        return Inventory.load(path).to_dict()
    except InventoryError as e:
        raise PlanDiffError(str(e)) from None


def review_plan_dirs(old_dir: Path, new_dir: Path, rules: RuleSet | None = None) -> Review:
    return review(load_inventory(Path(old_dir)), load_inventory(Path(new_dir)), rules)
