"""Helm post-renderer for the endpoint-picker chart: drop the objects this program owns itself.

The upstream ``llm-d-router-gateway`` chart (v0.10.0) always renders an InferencePool named after the release
and, with ``provider.name: gke``, a HealthCheckPolicy and a GCPBackendPolicy (fixed ``timeoutSec: 300``, every
request logged; templates/gke.yaml). The program manages those per pool with derived values (timeout = stream bound, sampled logs, IAP,
explicit failure mode), so the chart keeps only the picker itself: ConfigMap, Deployment, Service, RBAC,
metrics reader and PodMonitoring. Without this filter Helm and Pulumi would both own the same three objects.

Helm runs the post-renderer with the rendered manifests on stdin and installs what it prints. Standard
library only: the Chart resource passes this file's text inline (``python3 -c <source> --drop-kind ...``),
so it runs under whatever ``python3`` is on the deploying machine's PATH, from any working directory.

    python3 components/gateway/chart_filter.py --drop-kind InferencePool --drop-kind GCPBackendPolicy < in > out
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Iterable

_DOC_SPLIT = re.compile(r"^---[ \t]*(?:#.*)?$", re.MULTILINE)
_KIND = re.compile(r"^kind:[ \t]*[\"']?([A-Za-z0-9]+)[\"']?[ \t]*$", re.MULTILINE)


def document_kind(doc: str) -> str | None:
    """Top-level ``kind`` of one YAML document (indented ``kind:`` keys of nested objects do not count)."""
    m = _KIND.search(doc)
    return m.group(1) if m else None


def filter_manifests(text: str, drop_kinds: Iterable[str]) -> str:
    """Remove every document whose top-level kind is in ``drop_kinds``; keep the rest byte for byte."""
    drop = set(drop_kinds)
    kept = [d for d in _DOC_SPLIT.split(text) if d.strip() and document_kind(d) not in drop]
    return "".join(f"---{d if d.startswith(chr(10)) else chr(10) + d}" for d in kept)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--drop-kind", action="append", default=[], help="kind to remove (repeatable)")
    args = p.parse_args(argv)
    sys.stdout.write(filter_manifests(sys.stdin.read(), args.drop_kind))
    return 0


if __name__ == "__main__":
    sys.exit(main())
