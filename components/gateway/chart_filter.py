"""Helm post-renderer for the endpoint-picker chart: drop the objects this program owns itself and annotate the
picker's Deployment and Service with the readiness Pulumi must wait for.

Dropping. The upstream ``llm-d-router-gateway`` chart (v0.10.0) always renders an InferencePool named after the
release and, with ``provider.name: gke``, a HealthCheckPolicy and a GCPBackendPolicy (fixed ``timeoutSec: 300``,
every request logged; templates/gke.yaml). The program manages those per pool with derived values (timeout = stream
bound, sampled logs, IAP, explicit failure mode), so the chart keeps only the picker itself: ConfigMap, Deployment,
Service, RBAC, metrics reader and PodMonitoring. Without this filter Helm and Pulumi would both own the same objects.

Annotating. ``--annotate KIND NAME KEY VALUE`` adds ``KEY: VALUE`` to ``metadata.annotations`` of the one object of
that kind and name (the component passes Pulumi's ``pulumi.com/waitFor`` / ``pulumi.com/skipAwait``; why is in
``components/gateway/component.py``). An object asked for but not rendered, or rendered twice, is an error: Helm
then fails the install with the message instead of Pulumi waiting on an await it cannot finish.

Helm runs the post-renderer with the rendered manifests on stdin and installs what it prints. Standard library
only: the Chart resource passes this file's text inline (``python3 -c <source> --drop-kind ...``), so it runs under
whatever ``python3`` is on the deploying machine's PATH, from any working directory.

    python3 components/gateway/chart_filter.py --drop-kind InferencePool \\
        --annotate Service vllm-stable-epp pulumi.com/skipAwait true < in > out
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Iterable, Sequence

_DOC_SPLIT = re.compile(r"^---[ \t]*(?:#.*)?$", re.MULTILINE)
_KIND = re.compile(r"^kind:[ \t]*[\"']?([A-Za-z0-9]+)[\"']?[ \t]*$", re.MULTILINE)
_METADATA = re.compile(r"^metadata:[ \t]*$", re.MULTILINE)
#: One ``key: rest`` line of a block mapping: indent, key (plain or quoted), the rest after ``:``.
_CHILD = re.compile(r"^([ ]+)(\"[^\"]*\"|'[^']*'|[^\s:#\"'][^:]*?):(?:[ \t]+|$)(.*)$")


class PostRenderError(ValueError):
    """The rendered manifests do not have the shape the requested edit needs."""


def document_kind(doc: str) -> str | None:
    """Top-level ``kind`` of one YAML document (indented ``kind:`` keys of nested objects do not count)."""
    m = _KIND.search(doc)
    return m.group(1) if m else None


def _metadata_block(doc: str) -> tuple[int, int, str] | None:
    """(first line index, end line index, child indent) of the top-level ``metadata:`` mapping, block style."""
    lines = doc.split("\n")
    start = next((i for i, line in enumerate(lines) if _METADATA.fullmatch(line)), None)
    if start is None:
        return None
    end, indent = start + 1, ""
    while end < len(lines) and (not lines[end].strip() or lines[end].startswith(" ") or lines[end].startswith("#")):
        if not indent and (m := _CHILD.match(lines[end])):
            indent = m.group(1)
        end += 1
    return (start, end, indent) if indent else None


def document_name(doc: str) -> str | None:
    """``metadata.name`` of one document, or None."""
    block = _metadata_block(doc)
    if block is None:
        return None
    start, end, indent = block
    for line in doc.split("\n")[start + 1 : end]:
        m = _CHILD.match(line)
        if m and m.group(1) == indent and m.group(2) == "name":
            return m.group(3).strip().strip("\"'") or None
    return None


def annotate(doc: str, key: str, value: str) -> str:
    """``doc`` with ``metadata.annotations[key] = value`` (a JSON-quoted scalar, valid YAML). Refuses a document
    that already sets the key (the chart's value would be silently overridden) or uses flow-style metadata."""
    block = _metadata_block(doc)
    if block is None:
        raise PostRenderError(f"{document_kind(doc)}: no block-style top-level metadata to annotate")
    start, end, indent = block
    lines = doc.split("\n")
    entry = f"{json.dumps(key)}: {json.dumps(value)}"
    for i in range(start + 1, end):
        m = _CHILD.match(lines[i])
        if not (m and m.group(1) == indent and m.group(2) == "annotations"):
            continue
        if m.group(3).strip():
            raise PostRenderError(f"{document_kind(doc)}: metadata.annotations is not a block mapping")
        body = []
        for x in lines[i + 1 : end]:
            c = _CHILD.match(x)
            if c and len(c.group(1)) <= len(indent):
                break
            if c:
                body.append(c)
        child = body[0].group(1) if body else indent * 2
        if any(c.group(2).strip("\"'") == key for c in body if c.group(1) == child):
            raise PostRenderError(f"{document_kind(doc)}: the chart already sets annotation {key}")
        return "\n".join([*lines[: i + 1], f"{child}{entry}", *lines[i + 1 :]])
    return "\n".join([*lines[: start + 1], f"{indent}annotations:", f"{indent * 2}{entry}", *lines[start + 1 :]])


def filter_manifests(
    text: str, drop_kinds: Iterable[str], annotations: Sequence[tuple[str, str, str, str]] = ()
) -> str:
    """Remove every document whose top-level kind is in ``drop_kinds`` and apply each ``(kind, name, key, value)``
    annotation to exactly one kept document; keep everything else byte for byte."""
    drop = set(drop_kinds)
    kept = [d for d in _DOC_SPLIT.split(text) if d.strip() and document_kind(d) not in drop]
    for kind, name, key, value in annotations:
        hits = [i for i, d in enumerate(kept) if document_kind(d) == kind and document_name(d) == name]
        if len(hits) != 1:
            raise PostRenderError(f"expected one {kind} named {name!r} to annotate with {key}, found {len(hits)}")
        kept[hits[0]] = annotate(kept[hits[0]], key, value)
    return "".join(f"---{d if d.startswith(chr(10)) else chr(10) + d}" for d in kept)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--drop-kind", action="append", default=[], help="kind to remove (repeatable)")
    p.add_argument(
        "--annotate",
        action="append",
        nargs=4,
        default=[],
        metavar=("KIND", "NAME", "KEY", "VALUE"),
        help="add one annotation to the object of that kind and name (repeatable)",
    )
    args = p.parse_args(argv)
    try:
        out = filter_manifests(sys.stdin.read(), args.drop_kind, [tuple(a) for a in args.annotate])
    except PostRenderError as e:
        sys.stderr.write(f"llm-serving chart post-renderer: {e}\n")
        return 1
    sys.stdout.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
