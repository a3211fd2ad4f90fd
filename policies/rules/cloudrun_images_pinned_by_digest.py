"""cloudrun-images-pinned-by-digest: every container of a Cloud Run revision runs an image pinned by digest."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pulumi_policy import ResourceValidationPolicy, Severity

from ._common import CLOUD_RUN_SERVICE, UNKNOWN, Res, cloud_run_containers, resource_validator

NAME = "cloudrun-images-pinned-by-digest"
SEVERITY = Severity.HIGH
FRAMEWORK = None  # supply-chain control; CIS GCP has no Cloud Run image-pinning section.
DIGEST_RE = re.compile(r"@sha256:[0-9a-f]{64}$")
REMEDIATION = (
    "Reference every container image of the revision as <repository>@sha256:<64 hex>: the release's image "
    "digest for vLLM, the published digest for the metrics collector."
)


def check(res: Res, _cfg: dict[str, Any]) -> Iterator[str]:
    for c in cloud_run_containers(res):
        image = c.get("image")
        if image is UNKNOWN or not isinstance(image, str):
            continue
        if not DIGEST_RE.search(image):
            yield (
                f"container {c.get('name')!r} image {image!r} is not pinned by digest: a tag can move to another "
                "image between two instance starts; use <repository>@sha256:<64 hex>"
            )


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="Cloud Run revisions run images pinned by digest only.",
    validate=resource_validator((CLOUD_RUN_SERVICE,), check),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["supply-chain", "release-identity", "cloud-run"],
)
