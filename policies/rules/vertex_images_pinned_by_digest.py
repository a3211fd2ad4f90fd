"""vertex-images-pinned-by-digest: every model a Vertex deployment uploads runs a container image pinned by digest."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pulumi_policy import ResourceValidationPolicy, Severity

from ._common import UNKNOWN, Res, get, resource_validator
from ._vertex import DEPLOYED_MODEL, container_spec

NAME = "vertex-images-pinned-by-digest"
SEVERITY = Severity.HIGH
FRAMEWORK = None  # supply-chain control; CIS GCP has no Vertex AI image-pinning section.
DIGEST_RE = re.compile(r"@sha256:[0-9a-f]{64}$")
REMEDIATION = (
    "Upload the model with containerSpec.imageUri = <repository>@sha256:<64 hex>, the release's image "
    "digest: a tag can move to another image between two replica starts."
)


def check(res: Res, _cfg: dict[str, Any]) -> Iterator[str]:
    image = get(container_spec(res), "imageUri")
    if image is UNKNOWN:
        return
    if not isinstance(image, str) or not DIGEST_RE.search(image):
        yield (
            f"containerSpec.imageUri {image!r} is not pinned by digest: a tag can move to another image between "
            "two replica starts; use <repository>@sha256:<64 hex>"
        )


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="Vertex AI models run container images pinned by digest only.",
    validate=resource_validator((DEPLOYED_MODEL,), check),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["supply-chain", "release-identity", "vertex"],
)
