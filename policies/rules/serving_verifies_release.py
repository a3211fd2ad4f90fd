"""serving-verifies-release: every serving pod checks its weights against the release's manifest before vLLM starts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pulumi_policy import ResourceValidationPolicy, Severity

from . import _naming as naming
from ._common import (
    DEPLOYMENT,
    UNKNOWN,
    Res,
    argv,
    flag_value,
    get,
    is_serving_deployment,
    pod_spec,
    resource_validator,
    serving_container,
)

NAME = "serving-verifies-release"
SEVERITY = Severity.HIGH
FRAMEWORK = None
SCRIPT = "verify_release.py"
REVISION_ANNOTATION = f"{naming.ANNOTATION_PREFIX}model-revision"
REMEDIATION = (
    f"Run {SCRIPT} in an init container before the vLLM container: `gcs --bucket B --prefix <model>/<revision>` "
    "for a gs:// model, `dir --path <the --model path>` for a mounted copy, with --expect-revision set to "
    f"the pod's {REVISION_ANNOTATION}."
)


def _verifier(res: Res) -> tuple[dict[str, Any] | None, Any]:
    inits = get(pod_spec(res), "initContainers", default=[])
    if inits is UNKNOWN:
        return None, UNKNOWN
    for c in inits if isinstance(inits, list) else []:
        cmd = c.get("command") if isinstance(c, dict) else None
        if cmd is UNKNOWN:
            return c, UNKNOWN
        if isinstance(cmd, list) and any(isinstance(w, str) and w.endswith(SCRIPT) for w in cmd):
            return c, cmd
    return None, None


def check(res: Res, _cfg: dict[str, Any]) -> Iterator[str]:
    if not is_serving_deployment(res):
        return
    _container, cmd = _verifier(res)
    if cmd is UNKNOWN:
        return
    if cmd is None:
        yield (
            f"no init container runs {SCRIPT}: vLLM would serve weights nobody checked against the release's "
            f"manifest; add the {naming.VERIFY_CONTAINER} init container"
        )
        return
    args = argv(serving_container(res))
    revision = get(res.props, "spec", "template", "metadata", "annotations", REVISION_ANNOTATION)
    if args is UNKNOWN or revision is UNKNOWN:
        return
    expect = flag_value(cmd, "--expect-revision")
    if expect is UNKNOWN:
        return
    if expect != revision:
        yield (
            f"{SCRIPT} expects revision {expect!r} but the pod serves {REVISION_ANNOTATION} {revision!r}: the "
            "check must be for the release this pod serves"
        )
    model = flag_value(args, "--model")
    if model is UNKNOWN or not isinstance(model, str):
        return
    mode = next((w for w in cmd if w in ("gcs", "dir")), None)
    if model.startswith("gs://"):
        bucket, _, prefix = model[len("gs://") :].partition("/")
        if mode != "gcs" or flag_value(cmd, "--bucket") != bucket or flag_value(cmd, "--prefix") != prefix.rstrip("/"):
            yield (
                f"{SCRIPT} does not check what vLLM streams: --model is {model!r}, so run `gcs --bucket {bucket} "
                f"--prefix {prefix.rstrip('/')}`"
            )
    elif mode != "dir" or flag_value(cmd, "--path") != model:
        yield f"{SCRIPT} does not check what vLLM loads: --model is {model!r}, so run `dir --path {model}`"


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="Serving pods verify their weights against the release's checksum manifest before vLLM starts.",
    validate=resource_validator((DEPLOYMENT,), check),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["release-identity", "supply-chain"],
)
