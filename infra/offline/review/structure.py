"""What changed between two input trees, as a reviewer reads it: nested keys one by one, list elements that carry an
identity (a container or an env var by ``name``, a volume mount by ``mountPath``, ...) matched by that identity, and a
list of plain values (``args``) as one change shown as a list diff, so one inserted flag is one line, not every
shifted position."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from .paths import ABSENT, Keyed, Segment

#: Fields that identify a list element, in the order tried: Kubernetes merge keys (``name`` for containers, env,
#: volumes and ports; ``mountPath`` for volume mounts; ``containerPort``), and Cloud Run's / IAM's own.
IDENTITY_FIELDS: Final = ("name", "mountPath", "devicePath", "containerPort", "member", "key")

Change = tuple[tuple[Segment, ...], Any, Any]


def same(a: Any, b: Any) -> bool:
    """JSON equality with one number type (protobuf Struct carries every number as a double)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def identity_field(old: Sequence[Any], new: Sequence[Any]) -> str | None:
    """The field that identifies every element of both lists (unique on each side), if there is one."""
    items = [*old, *new]
    if not items or not all(isinstance(i, Mapping) for i in items):
        return None
    for f in IDENTITY_FIELDS:
        if all(isinstance(i.get(f), (str, int)) and not isinstance(i.get(f), bool) for i in items):
            if len({str(i[f]) for i in old}) == len(old) and len({str(i[f]) for i in new}) == len(new):
                return f
    return None


def changes(old: Any, new: Any, path: tuple[Segment, ...] = ()) -> list[Change]:
    """Every changed part of ``old`` -> ``new`` (``ABSENT`` on the side that lacks it)."""
    out: list[Change] = []
    _walk(old, new, path, out)
    return out


def _walk(old: Any, new: Any, path: tuple[Segment, ...], out: list[Change]) -> None:
    if old is ABSENT or new is ABSENT:
        out.append((path, old, new))
    elif isinstance(old, Mapping) and isinstance(new, Mapping):
        for k in sorted(set(old) | set(new), key=str):
            _walk(old.get(k, ABSENT), new.get(k, ABSENT), (*path, k), out)
    elif isinstance(old, list) and isinstance(new, list):
        if same(old, new):
            return
        key = identity_field(old, new)
        if key is not None:
            olds = {str(i[key]): i for i in old}
            news = {str(i[key]): i for i in new}
            order = [str(i[key]) for i in old] + [str(i[key]) for i in new if str(i[key]) not in olds]
            for ident in order:
                _walk(olds.get(ident, ABSENT), news.get(ident, ABSENT), (*path, Keyed(key, ident)), out)
            if [str(i[key]) for i in old if str(i[key]) in news] != [str(i[key]) for i in new if str(i[key]) in olds]:
                out.append(((*path, "(order)"), [str(i[key]) for i in old], [str(i[key]) for i in new]))
        elif all(not isinstance(i, (Mapping, list)) for i in [*old, *new]):
            out.append((path, old, new))  # a list of plain values: one change, shown as a list diff
        else:
            for i in range(max(len(old), len(new))):
                _walk(old[i] if i < len(old) else ABSENT, new[i] if i < len(new) else ABSENT, (*path, i), out)
    elif not same(old, new):
        out.append((path, old, new))
