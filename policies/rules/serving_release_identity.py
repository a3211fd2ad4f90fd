"""serving-release-identity: the release id labels the pods and is the served model name."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import ResourceValidationPolicy, Severity

from ._common import (
    DEPLOYMENT,
    RELEASE_LABEL,
    RELEASES_ANNOTATION,
    UNKNOWN,
    Res,
    argv,
    cohost_instances,
    entry_list,
    flag_value,
    get,
    is_serving_deployment,
    pod_labels,
    resource_validator,
    serving_container,
)

NAME = "serving-release-identity"
SEVERITY = Severity.MEDIUM
FRAMEWORK = None
REMEDIATION = (
    f"Label the Deployment and its pods with {RELEASE_LABEL}: <release id> and start vLLM with "
    "--served-model-name <release id>."
)


def _cohost(res: Res, instances: list[dict[str, Any]]) -> Iterator[str]:
    """A co-host pod serves several releases: its template lists them (``llm-serving.io/releases``), and each
    instance answers under its release id first."""
    listed = get(res.props, "spec", "template", "metadata", "annotations", RELEASES_ANNOTATION)
    served = sorted({str(i.get("release")) for i in instances})
    if listed is not UNKNOWN and (not isinstance(listed, str) or sorted(listed.split(",")) != served):
        yield f"pod template annotation {RELEASES_ANNOTATION} is {listed!r}: set it to {','.join(served)!r}"
    for inst in instances:
        args = entry_list(inst, "args")
        first = flag_value(args, "--served-model-name")
        if first != inst.get("release"):
            yield (
                f"instance {inst.get('name')!r}: --served-model-name starts with {first!r}, not its release id "
                f"{inst.get('release')!r}"
            )


def check(res: Res, _cfg: dict[str, Any]) -> Iterator[str]:
    if not is_serving_deployment(res):
        return
    instances = cohost_instances(res)
    if instances is UNKNOWN:
        return
    if instances is not None:
        yield from _cohost(res, instances)
        return
    release = pod_labels(res).get(RELEASE_LABEL)
    if release is UNKNOWN:
        return
    if not isinstance(release, str) or not release:
        yield f"pod template has no {RELEASE_LABEL} label: set it to the release id"
        return
    meta = get(res.props, "metadata", "labels", RELEASE_LABEL)
    if meta is not UNKNOWN and meta != release:
        yield (
            f"metadata label {RELEASE_LABEL} is {meta!r} but the pod template says {release!r}: "
            "both must be the release id"
        )
    args = argv(serving_container(res))
    if args is UNKNOWN:
        return
    served = flag_value(args, "--served-model-name")
    if served is None:
        yield f"--served-model-name is not set: set it to the release id {release!r}"
    elif served is not UNKNOWN and served != release:
        yield f"--served-model-name is {served!r}, not the release id {release!r}: set it to {release!r}"


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="Serving pods carry the release id as label and as --served-model-name.",
    validate=resource_validator((DEPLOYMENT,), check),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["release-identity"],
)
