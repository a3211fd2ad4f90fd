"""serving-images-pinned-by-digest: every serving image is pinned by digest (a GKE model-server container, every
container of a Cloud Run revision, a Vertex AI model's ``containerSpec.imageUri``); no other image (GKE workloads,
Helm chart values) uses ``:latest`` or no tag at all."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pulumi_policy import ResourceValidationPolicy, Severity

from ._adapters import ADAPTERS, types_of
from ._adapters.facts import FactKind
from ._common import UNKNOWN, Res, resource_validator

NAME = "serving-images-pinned-by-digest"
SEVERITY = Severity.HIGH
FRAMEWORK = None  # CIS GKE 5.1.4 ("only trusted images", Binary Authorization) is related but not this control.
REMEDIATION = (
    "Reference every serving image as <repository>@sha256:<64 hex> (GKE model-server containers, every container "
    "of a Cloud Run revision, a Vertex AI model's containerSpec.imageUri): the release's image_digest for vLLM, "
    "the published digest for a sidecar. Never use ':latest' or an untagged image anywhere."
)
FACTS: tuple[FactKind, ...] = ("images",)
DIGEST_RE = re.compile(r"@sha256:[0-9a-f]{64}$")


def _tag(image: str) -> str | None:
    """The tag of an image reference without digest, None when untagged (``:`` in a registry port is not a tag)."""
    last = image.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None


def image_problem(image: str, digest_required: bool) -> str | None:
    if DIGEST_RE.search(image):
        return None
    if "@" in image:  # a digest, but not a sha256 of 64 hex
        return "is not pinned by digest" if digest_required else None
    tag = _tag(image)
    if tag == "latest":
        return "uses the mutable :latest tag"
    if tag is None:
        return "has no tag or digest (that means :latest)"
    return "is not pinned by digest" if digest_required else None


def check(res: Res, _cfg: dict[str, Any]) -> Iterator[str]:
    for adapter in ADAPTERS:
        for ref in adapter.images(res):
            if ref.image is UNKNOWN:
                continue
            if not isinstance(ref.image, str):
                if ref.digest_required:
                    yield f"{ref.where} is not set: set it to <repository>@sha256:<64 hex>, the release's image digest"
                continue
            problem = image_problem(ref.image, ref.digest_required)
            if problem is None:
                continue
            if ref.digest_required:
                yield (
                    f"{ref.where} {ref.image!r} {problem}: a tag can move to another image between two {ref.starts} "
                    "starts; use <repository>@sha256:<64 hex>"
                )
            else:
                yield (
                    f"{ref.where} {ref.image!r} {problem}: use a released version tag or, better, "
                    "<repository>@sha256:<digest>"
                )


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="Serving images are pinned by digest on every target, and no image uses :latest.",
    validate=resource_validator(types_of(*FACTS), check),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["supply-chain", "release-identity"],
)
