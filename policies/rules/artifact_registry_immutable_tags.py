"""artifact-registry-immutable-tags: a tag names one image forever."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import ResourceValidationPolicy, Severity

from ._common import REPOSITORY, UNKNOWN, Res, get, resource_validator

NAME = "artifact-registry-immutable-tags"
SEVERITY = Severity.MEDIUM
FRAMEWORK = None
REMEDIATION = "Set dockerConfig.immutableTags: true on Docker repositories."


def check(res: Res, _cfg: dict[str, Any]) -> Iterator[str]:
    if res.props.get("format") not in ("DOCKER", "docker"):
        return
    value = get(res.props, "dockerConfig", "immutableTags")
    if value is not UNKNOWN and value is not True:
        yield (
            f"dockerConfig.immutableTags is {value!r}: set it to true so a pushed tag can never be moved to "
            "another image"
        )


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="Docker repositories have immutable tags.",
    validate=resource_validator((REPOSITORY,), check),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["supply-chain"],
)
