"""epp-image-pinned-to-release: the endpoint picker runs a released image, never the chart's moving default.

The vendored llm-d Router chart defaults the picker image tag to ``main`` (llm-d-router v0.10.0
config/charts/routerlib/values.yaml ``router.epp.image.tag``); a release tag is only written into the chart when it
is published (hack/push-chart.sh). A picker on ``main`` or ``latest`` changes its scheduling, flow control and metric
names under a running pool whenever it restarts. A release tag (``vX.Y.Z``) or a digest is required.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pulumi_policy import ResourceValidationPolicy, Severity

from ._common import HELM_CHART, UNKNOWN, Res, resource_validator
from ._epp import epp_values, epp_values_key, is_epp_chart

NAME = "epp-image-pinned-to-release"
SEVERITY = Severity.HIGH
FRAMEWORK = None
REMEDIATION = (
    "State the picker image in the chart values (router.epp.image.tag, or inferenceExtension.image.tag) as the "
    "release tag of the pinned chart, e.g. v0.10.0, or pin a digest."
)
#: A release tag (``v0.10.0``, ``v1.5.0``, optionally with a pre-release suffix such as ``-rc.1``).
RELEASE_TAG = re.compile(r"^v\d+\.\d+\.\d+(-[0-9A-Za-z.]+)?$")
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def check(res: Res, _cfg: dict[str, Any]) -> Iterator[str]:
    if not is_epp_chart(res):
        return
    image = epp_values(res).get("image") if isinstance(epp_values(res), dict) else None
    if image is UNKNOWN:
        return
    key = f"{epp_values_key(res)}.image"
    if not isinstance(image, dict):
        yield f"{key} is not set: the chart's default tag applies (main for the llm-d Router): pin a release tag"
        return
    tag, digest = image.get("tag"), image.get("digest")
    if tag is UNKNOWN or digest is UNKNOWN:
        return
    if isinstance(digest, str) and DIGEST.match(digest):
        return
    if not isinstance(tag, str) or not tag:
        yield f"{key}.tag is not set: the chart's default tag applies (main for the llm-d Router): pin a release tag"
    elif not RELEASE_TAG.match(tag):
        yield f"{key}.tag is {tag!r}, not a release tag: pin the chart release's tag (vX.Y.Z) or a digest"


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="The endpoint picker's image is pinned to a release tag (never main or latest).",
    validate=resource_validator((HELM_CHART,), check),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["supply-chain", "routing"],
)
