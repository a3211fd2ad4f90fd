"""Property paths: Pulumi's syntax (``a.b[0]["k.with.dots"]``, ``[*]`` any index, ``*`` any key), a keyed list
element for display (``containers[name=vllm]``), and the values at a path of an input tree."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "ABSENT",
    "ANY_INDEX",
    "Keyed",
    "PathError",
    "Segment",
    "format_path",
    "instances",
    "matches_prefix",
    "parse_path",
    "resolve",
]


class PathError(ValueError):
    """A property path that cannot be parsed."""


@dataclass(frozen=True)
class Keyed:
    """A list element identified by one of its fields (``env[name=HF_HOME]``), not by its position."""

    field: str
    value: str

    def __str__(self) -> str:
        return f"[{self.field}={self.value}]"


Segment = str | int | Keyed
#: ``[*]``: any index of a list.
ANY_INDEX: Final = "[*]"


class _Absent:
    """No value at this path on this side (distinct from JSON ``null``)."""

    _instance: _Absent | None = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"

    def __reduce__(self) -> str:
        return "ABSENT"


ABSENT: Final = _Absent()


def parse_path(path: str) -> list[Segment]:
    """``a.b[0]["k.with.dots"].*`` -> ``["a", "b", 0, "k.with.dots", "*"]``; ``[*]`` is :data:`ANY_INDEX`,
    ``[name=x]`` a :class:`Keyed`."""
    segs: list[Segment] = []
    i, n = 0, len(path)
    while i < n:
        c = path[i]
        if c == ".":
            i += 1
            continue
        if c == "[":
            if path.startswith('["', i):
                j = i + 2
                while j < n and not (path[j] == '"' and path[j - 1] != "\\" and j + 1 < n and path[j + 1] == "]"):
                    j += 1
                if j >= n:
                    raise PathError(f"unterminated quoted key in property path {path!r}")
                segs.append(json.loads(path[i + 1 : j + 1]))
                i = j + 2
                continue
            end = path.find("]", i)
            if end < 0:
                raise PathError(f"unterminated '[' in property path {path!r}")
            inner = path[i + 1 : end]
            if inner == "*":
                segs.append(ANY_INDEX)
            elif inner.isdigit():
                segs.append(int(inner))
            elif "=" in inner:
                f, _, v = inner.partition("=")
                segs.append(Keyed(f, v))
            else:
                raise PathError(f"bad index [{inner}] in property path {path!r}")
            i = end + 1
            continue
        j = i
        while j < n and path[j] not in ".[":
            j += 1
        segs.append(path[i:j])
        i = j
    return segs


def _plain_key(key: str) -> bool:
    return bool(key) and all(ch.isalnum() or ch in "_-$" for ch in key)


def format_path(segs: Iterable[Segment]) -> str:
    """Inverse of :func:`parse_path`: ``spec.template.spec.containers[name=vllm].args``."""
    out = ""
    for s in segs:
        if isinstance(s, int):
            out += f"[{s}]"
        elif isinstance(s, Keyed):
            out += str(s)
        elif s == ANY_INDEX:
            out += ANY_INDEX
        elif _plain_key(s):
            out += f".{s}" if out else s
        else:
            out += f"[{json.dumps(s, ensure_ascii=False)}]"
    return out


def _seg_matches(pattern: Segment, actual: Segment) -> bool:
    if pattern == "*":
        return True
    if pattern == ANY_INDEX:
        return isinstance(actual, (int, Keyed)) or actual == ANY_INDEX
    return pattern == actual


def matches_prefix(pattern: Sequence[Segment], path: Sequence[Segment]) -> bool:
    """Do the first ``min(len)`` segments agree (wildcards in ``pattern``)?"""
    return all(_seg_matches(p, a) for p, a in zip(pattern, path, strict=False))


def _step(value: Any, seg: Segment) -> Any:
    if value is ABSENT or value is None:
        return ABSENT
    if isinstance(seg, Keyed):
        if isinstance(value, list):
            for v in value:
                if isinstance(v, Mapping) and str(v.get(seg.field)) == seg.value:
                    return v
        return ABSENT
    if isinstance(seg, int):
        return value[seg] if isinstance(value, list) and 0 <= seg < len(value) else ABSENT
    if isinstance(value, Mapping):
        return value.get(seg, ABSENT)
    return ABSENT


def resolve(tree: Any, path: Sequence[Segment]) -> Any:
    """The value at a concrete path (keys, indices, keyed elements), or :data:`ABSENT`."""
    value = tree
    for seg in path:
        value = _step(value, seg)
        if value is ABSENT:
            return ABSENT
    return value


def instances(tree: Any, pattern: Sequence[Segment], prefix: tuple[Segment, ...] = ()) -> Iterator[tuple[Segment, ...]]:
    """Every concrete path under ``tree`` that matches ``pattern`` (``[*]`` / ``*`` expanded over what exists)."""
    if not pattern:
        yield prefix
        return
    head, rest = pattern[0], pattern[1:]
    if head == ANY_INDEX:
        if isinstance(tree, list):
            for i, v in enumerate(tree):
                yield from instances(v, rest, (*prefix, i))
    elif head == "*":
        if isinstance(tree, Mapping):
            for k in sorted(tree, key=str):
                yield from instances(tree[k], rest, (*prefix, k))
        elif isinstance(tree, list):
            for i, v in enumerate(tree):
                yield from instances(v, rest, (*prefix, i))
    else:
        nxt = _step(tree, head)
        if nxt is not ABSENT:
            yield from instances(nxt, rest, (*prefix, head))
