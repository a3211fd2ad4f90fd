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
    cohost_instances,
    entry_list,
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


def _matches_model(cmd: list[Any], model: Any) -> Iterator[str]:
    """The check reads what vLLM loads: the gs:// folder it streams, or the path it reads."""
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


def _cohost(instances: list[dict[str, Any]]) -> Iterator[str]:
    """A co-host server runs each instance's ``verify`` command before it starts that instance's engine (after a
    restart and for an update's new release too): it must run the verifier on what the instance loads, expecting
    the revision its release folder names (``<bucket>/<model>/<revision>/``)."""
    for inst in instances:
        who = f"instance {inst.get('name')!r}: "
        cmd = inst.get("verify")
        if not isinstance(cmd, list) or not any(isinstance(w, str) and w.endswith(SCRIPT) for w in cmd):
            yield who + f"its verify command does not run {SCRIPT}: the server would start weights nobody checked"
            continue
        args = entry_list(inst, "args")
        model = flag_value(args, "--model")
        yield from (who + m for m in _matches_model(cmd, model))
        if isinstance(model, str) and model.startswith("gs://"):
            revision = model.rstrip("/").rsplit("/", 1)[-1]
            expect = flag_value(cmd, "--expect-revision")
            if expect != revision:
                yield who + f"{SCRIPT} expects revision {expect!r} but --model's folder is revision {revision!r}"


def check(res: Res, _cfg: dict[str, Any]) -> Iterator[str]:
    if not is_serving_deployment(res):
        return
    instances = cohost_instances(res)
    if instances is UNKNOWN:
        return
    if instances is not None:
        yield from _cohost(instances)
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
    yield from _matches_model(cmd, flag_value(args, "--model"))


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="Serving pods verify their weights against the release's checksum manifest before vLLM starts.",
    validate=resource_validator((DEPLOYMENT,), check),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["release-identity", "supply-chain"],
)
