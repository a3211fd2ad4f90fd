"""The review for people (text) and for CI (JSON): every value in full, long strings and JSON as unified diffs,
plain-value lists (``args``) as list diffs, created resources with their inputs."""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from typing import Any, Final

from .engine import ACTIONS, Change, Review
from .paths import ABSENT
from .providers import UNKNOWN, FieldChange, is_unknown

#: Values longer than this (rendered as JSON), or holding a newline, are shown as a block / unified diff.
INLINE_CHARS: Final = 60
SYMBOL: Final = {"create": "+", "update": "~", "replace": "+-", "delete": "-"}
#: Sections in the order a reviewer needs them: what destroys first.
SECTION_ORDER: Final = ("replace", "delete", "update", "create")


def _clean(value: Any) -> Any:
    """Inputs as shown: pickled dynamic providers elided."""
    if isinstance(value, Mapping):
        return {k: ("<pickled provider>" if k == "__provider" else _clean(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _json(value: Any, indent: int | None = None) -> str:
    if value is ABSENT:
        return "(absent)"
    if is_unknown(value):
        return "(unknown until apply)"
    return json.dumps(
        _clean(value), sort_keys=True, ensure_ascii=False, indent=indent, separators=None if indent else (", ", ": ")
    )


def _inline(value: Any) -> bool:
    text = _json(value)
    return len(text) <= INLINE_CHARS and not (isinstance(value, str) and "\n" in value)


def _lines_of(value: Any) -> list[str]:
    """A value as lines to diff: text by its lines, a string holding a JSON document (a dashboard, Model Armor
    settings) pretty-printed so the diff shows the member that changed, anything else as indented JSON."""
    if value is ABSENT:
        return []
    if isinstance(value, str) and not is_unknown(value):
        stripped = value.strip()
        if stripped[:1] in ("{", "[") and "\n" not in stripped:
            try:
                return _json(json.loads(stripped), indent=2).splitlines()
            except ValueError:
                pass
        return value.splitlines()
    return _json(value, indent=2).splitlines()


def _list_diff(old: list[Any], new: list[Any], pad: str) -> list[str]:
    """``args`` and other lists of plain values: each item one line, ``-`` / ``+`` for what left / came."""
    a, b = [_json(x) for x in old], [_json(x) for x in new]
    out: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            keep = a[i1:i2]
            if len(keep) > 4:
                out += [f"{pad}  {x}" for x in keep[:2]] + [f"{pad}  ... ({len(keep) - 4} unchanged)"]
                out += [f"{pad}  {x}" for x in keep[-2:]]
            else:
                out += [f"{pad}  {x}" for x in keep]
            continue
        out += [f"{pad}- {x}" for x in a[i1:i2]]
        out += [f"{pad}+ {x}" for x in b[j1:j2]]
    return out


def field_lines(f: FieldChange, indent: str = "      ") -> list[str]:
    tags: list[str] = []
    if f.forces_replacement:
        tags.append("forces replacement: " + "; ".join(f.reasons))
    if f.ignored:
        tags.append(f"not applied: {f.note}")
    elif f.note:
        tags.append(f.note)
    tag = f"   [{' | '.join(tags)}]" if tags else ""
    old, new = f.old, f.new
    if _inline(old) and _inline(new):
        return [f"{indent}{f.path}: {_json(old)} → {_json(new)}{tag}"]
    head = f"{indent}{f.path}:{tag}"
    pad = indent + "    "
    if isinstance(old, list) and isinstance(new, list) and all(not isinstance(x, (dict, list)) for x in old + new):
        return [head, *_list_diff(old, new, pad)]
    if old is ABSENT or new is ABSENT:
        side, value = ("added", new) if old is ABSENT else ("removed", old)
        return [head, f"{pad}({side})", *[f"{pad}{'+' if side == 'added' else '-'} {x}" for x in _lines_of(value)]]
    diff = difflib.unified_diff(_lines_of(old), _lines_of(new), "old", "new", n=2, lineterm="")
    return [head, *[f"{pad}{line}" for line in diff]]


def _inputs_lines(inputs: Mapping[str, Any], indent: str) -> list[str]:
    return [f"{indent}{line}" for line in _json(dict(inputs), indent=2).splitlines()]


def summary_line(review: Review) -> str:
    n = review.counts()
    dbr = sum(1 for c in review.changes if c.delete_before_replace)
    refused = sum(1 for c in review.changes if c.protected)
    restarts = sum(c.restarts_pods for c in review.changes)
    text = (
        f"Plan diff: {n['create']} to create, {n['update']} to update, {n['replace']} to replace "
        f"({dbr} delete-before-replace), {n['delete']} to delete; {review.unchanged} unchanged"
    )
    if refused:
        text += f"; {refused} refused by `pulumi up` (protected)"
    if restarts:
        text += f"; restarts {restarts} pod{'s' if restarts != 1 else ''}"
    return text


def change_lines(c: Change) -> list[str]:
    flags = []
    if c.delete_before_replace:
        flags.append("delete-before-replace")
    if c.protected:
        flags.append("PROTECTED: `pulumi up` will refuse")
    if c.restarts_pods:
        flags.append(f"restarts {c.restarts_pods} pod{'s' if c.restarts_pods != 1 else ''}")
    head = f"  {SYMBOL[c.action]} {c.action} {c.type}::{c.name}"
    lines = [head + (f"   [{', '.join(flags)}]" if flags else ""), f"      urn: {c.urn}"]
    if c.old_urn:
        lines.append(f"      was: {c.old_urn} (matched by alias)")
    for r in c.reasons:
        if not any(r in f.reasons for f in c.fields):
            lines.append(f"      why: {r}")
    lines += [f"      note: {n}" for n in c.notes if not n.startswith("restarts ")]
    for f in c.fields:
        lines += field_lines(f)
    if c.action == "create" and c.inputs is not None:
        lines.append("      inputs:")
        lines += _inputs_lines(c.inputs, "        ")
    return lines


def render_text(review: Review) -> str:
    lines = [summary_line(review)]
    for e in review.errors:
        lines.append(f"error: {e}")
    for w in review.warnings:
        lines.append(f"warning: {w}")
    by_action: dict[str, list[Change]] = {a: [] for a in ACTIONS}
    for c in review.changes:
        by_action[c.action].append(c)
    for action in SECTION_ORDER:
        items = by_action[action]
        lines += ["", f"{action.capitalize()} ({len(items)})"]
        if not items:
            lines.append("  (none)")
        for c in items:
            lines += change_lines(c)
    if review.outputs:
        lines += ["", f"Stack outputs ({len(review.outputs)})"]
        for f in review.outputs:
            lines += field_lines(f)
    return "\n".join(lines) + "\n"


def _jvalue(v: Any) -> Any:
    if v is ABSENT:
        return None
    if is_unknown(v):
        return UNKNOWN
    return _clean(v)


def _jfield(f: FieldChange) -> dict[str, Any]:
    return {
        "path": f.path,
        "kind": f.kind,
        "old": _jvalue(f.old),
        "new": _jvalue(f.new),
        "forces_replacement": f.forces_replacement,
        "reasons": list(f.reasons),
        "ignored": f.ignored,
        "note": f.note,
    }


def summary(review: Review) -> dict[str, int]:
    n = review.counts()
    return {
        **n,
        "unchanged": review.unchanged,
        "delete_before_replace": sum(1 for c in review.changes if c.delete_before_replace),
        "protected": sum(1 for c in review.changes if c.protected),
        "restarts_pods": sum(c.restarts_pods for c in review.changes),
        "errors": len(review.errors),
        "warnings": len(review.warnings),
    }


def to_json_doc(review: Review) -> dict[str, Any]:
    def one(c: Change) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "urn": c.urn,
            "type": c.type,
            "name": c.name,
            "action": c.action,
            "custom": c.custom,
            "delete_before_replace": c.delete_before_replace,
            "protected": c.protected,
            "restarts_pods": c.restarts_pods,
            "old_urn": c.old_urn,
            "reasons": list(c.reasons),
            "notes": list(c.notes),
            "fields": [_jfield(f) for f in c.fields],
        }
        if c.inputs is not None:
            doc["inputs"] = _clean(dict(c.inputs))
        return doc

    return {
        "summary": summary(review),
        "errors": list(review.errors),
        "warnings": list(review.warnings),
        "changes": [one(c) for c in review.changes],
        "outputs": [_jfield(f) for f in review.outputs],
    }


def render_json(review: Review) -> str:
    return json.dumps(to_json_doc(review), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def exit_code(review: Review) -> int:
    """0 no changes, 1 changes without replacement or deletion, 3 any replacement or deletion."""
    if any(c.custom and c.action in ("replace", "delete") for c in review.changes):
        return 3
    return 1 if review.changes or review.outputs else 0
