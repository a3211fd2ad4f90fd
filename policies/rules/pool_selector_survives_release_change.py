"""pool-selector-survives-release-change: an InferencePool keeps selecting its pods through a release change."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import Severity, StackValidationPolicy

from ._common import (
    DEPLOYMENT,
    INFERENCE_POOL,
    RELEASE_LABEL,
    UNKNOWN,
    VERSION_LABEL,
    Res,
    get,
    is_serving_deployment,
    of_type,
    pod_labels,
    same_namespace,
    selector_matches,
    stack_validator,
)

NAME = "pool-selector-survives-release-change"
SEVERITY = Severity.HIGH
FRAMEWORK = None
#: Pod labels whose value changes with the release a pod serves.
RELEASE_VARYING_LABELS = (RELEASE_LABEL, VERSION_LABEL)
REMEDIATION = (
    "Select an InferencePool's pods with the serving Deployment's own spec.selector labels only (they are "
    "immutable and identical for every release of the pool), never with a release or version label."
)


def check(resources: list[Res], _cfg: dict[str, Any]) -> Iterator[tuple[str, str]]:
    deployments = [d for d in resources if is_serving_deployment(d)]
    for pool in of_type(resources, INFERENCE_POOL):
        sel = get(pool.props, "spec", "selector", "matchLabels")
        if sel is UNKNOWN or not isinstance(sel, dict):
            continue
        varying = sorted(k for k in sel if k in RELEASE_VARYING_LABELS)
        if varying:
            yield (
                pool.urn,
                (
                    f"InferencePool {pool.k8s_name} selects on {', '.join(varying)}, which changes with every "
                    "release: a rolling update to a new release creates pods the pool does not select while "
                    "the old ones drain, down to zero endpoints; select on the Deployment's own selector labels"
                ),
            )
            continue
        matched: list[Res] = []
        undecided = False  # a selector match unknown at preview: no verdict on this pool
        for dep in deployments:
            if not same_namespace(pool, dep):
                continue
            verdict = selector_matches({"matchLabels": sel}, pod_labels(dep))
            if verdict is None:
                undecided = True
                break
            if verdict:
                matched.append(dep)
        if undecided:
            continue
        if not matched:
            yield pool.urn, f"InferencePool {pool.k8s_name} selects the pods of no serving Deployment"
            continue
        for dep in matched:
            dsel = get(dep.props, "spec", "selector", "matchLabels")
            if dsel is UNKNOWN or not isinstance(dsel, dict):
                continue
            extra = sorted(k for k, v in sel.items() if dsel.get(k) != v)
            if extra:
                yield (
                    pool.urn,
                    (
                        f"InferencePool {pool.k8s_name} selects on {', '.join(extra)}, outside Deployment "
                        f"{dep.k8s_name}'s selector: a label outside a Deployment's (immutable) selector can "
                        "change with its pod template, so a rollout can create pods the pool does not select"
                    ),
                )


POLICY = StackValidationPolicy(
    name=NAME,
    description="InferencePools select serving pods by release-independent labels, so a release change never empties them.",
    validate=stack_validator(check, (DEPLOYMENT, INFERENCE_POOL)),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["availability", "rollout"],
)
