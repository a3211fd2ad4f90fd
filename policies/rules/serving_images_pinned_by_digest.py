"""serving-images-pinned-by-digest: model-server images by digest; no workload or chart image on ``:latest``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pulumi_policy import ResourceValidationPolicy, Severity

from ._common import DEPLOYMENT, HELM_CHART, UNKNOWN, Res, containers, is_serving_deployment, resource_validator

NAME = "serving-images-pinned-by-digest"
SEVERITY = Severity.HIGH
FRAMEWORK = None  # CIS GKE 5.1.4 ("only trusted images", Binary Authorization) is related but not this control.
REMEDIATION = (
    "Reference serving images as <repository>@sha256:<64 hex> (the release's image_digest); never use "
    "':latest' or an untagged image anywhere."
)
WORKLOADS = (DEPLOYMENT, "kubernetes:apps/v1:StatefulSet", "kubernetes:apps/v1:DaemonSet", "kubernetes:batch/v1:Job")
DIGEST_RE = re.compile(r"@sha256:[0-9a-f]{64}$")


def _tag(image: str) -> str | None:
    """The tag of an image reference without digest, None when untagged (``:`` in a registry port is not a tag)."""
    last = image.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None


def image_problem(image: Any, serving: bool) -> str | None:
    if not isinstance(image, str) or image is UNKNOWN:
        return None
    if DIGEST_RE.search(image):
        return None
    tag = _tag(image)
    if tag == "latest":
        return "uses the mutable :latest tag"
    if tag is None:
        return "has no tag or digest (that means :latest)"
    if serving:
        return "is not pinned by digest"
    return None


def _chart_images(values: Any, path: str = "values") -> Iterator[tuple[str, Any]]:
    """(path, image reference) for every ``image`` in Helm values: strings, or {repository, tag, digest} maps."""
    if isinstance(values, dict):
        for k, v in sorted(values.items()):
            here = f"{path}.{k}"
            if k == "image" and isinstance(v, dict):
                repo = "/".join(str(v[p]) for p in ("registry", "repository") if isinstance(v.get(p), str))
                if isinstance(v.get("digest"), str) and v["digest"]:
                    yield here, f"{repo}@{v['digest']}"
                elif v.get("tag") is not UNKNOWN:
                    tag = v.get("tag")
                    yield here, f"{repo}:{tag}" if isinstance(tag, str) and tag else repo
            elif k == "image" and isinstance(v, str):
                yield here, v
            else:
                yield from _chart_images(v, here)
    elif isinstance(values, list):
        for i, v in enumerate(values):
            yield from _chart_images(v, f"{path}[{i}]")


def check(res: Res, _cfg: dict[str, Any]) -> Iterator[str]:
    if res.type == HELM_CHART:
        for where, image in _chart_images(res.props.get("values")):
            problem = image_problem(image, serving=False)
            if problem:
                yield f"{where} image {image!r} {problem}: pin a released version (ideally <repository>@sha256:<digest>)"
        return
    serving = is_serving_deployment(res)
    for c in containers(res):
        image = c.get("image")
        problem = image_problem(image, serving)
        if problem:
            want = (
                "<repository>@sha256:<64 hex>, the release's image digest"
                if serving
                else "a released version tag or, better, <repository>@sha256:<digest>"
            )
            yield f"container {c.get('name')!r} image {image!r} {problem}: use {want}"


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="Serving images are pinned by digest and no image uses :latest.",
    validate=resource_validator((*WORKLOADS, HELM_CHART), check),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["supply-chain", "release-identity"],
)
