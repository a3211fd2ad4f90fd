"""cloudrun-no-hub-download: a Cloud Run vLLM never downloads weights from a model hub at start: HF_HUB_OFFLINE=1 and
``--model`` is a folder of a volume the container mounts (the issue: hub downloads at boot meet HTTP 429 on shared
egress and take minutes)."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from typing import Any

from pulumi_policy import ResourceValidationPolicy, Severity

from ._common import (
    CLOUD_RUN_REVISION,
    UNKNOWN,
    Res,
    cloud_run_argv,
    cloud_run_env,
    cloud_run_serving_container,
    flag_value,
    get,
    resource_validator,
    vllm_serve_args,
)

NAME = "cloudrun-no-hub-download"
SEVERITY = Severity.HIGH
FRAMEWORK = None
REMEDIATION = (
    "Set HF_HUB_OFFLINE=1 on the vLLM container and pass --model as the mounted release folder (the Cloud "
    "Storage volume of gs://<bucket>/<model>/<revision>/, or its in-memory copy)."
)


def _mounted(path: str, mounts: list[Any]) -> bool | None:
    """Whether ``path`` is inside one of the mounts; None when it may be (a mount path unknown at preview)."""
    norm = posixpath.normpath(path)
    unknown = False
    for m in mounts:
        root = m.get("mountPath") if isinstance(m, dict) else m
        if root is UNKNOWN:
            unknown = True
        elif isinstance(root, str):
            top = posixpath.normpath(root)
            if norm == top or norm.startswith(top + "/"):
                return True
    return None if unknown else False


def check(res: Res, _cfg: dict[str, Any]) -> Iterator[str]:
    c = cloud_run_serving_container(res)
    if c is None:
        return
    offline = cloud_run_env(c, "HF_HUB_OFFLINE")
    if offline is not UNKNOWN and offline != "1":
        yield (f"HF_HUB_OFFLINE is {offline!r}: set it to '1' so no library behind vLLM reaches a model hub at start")
    argv = cloud_run_argv(c)
    if argv is UNKNOWN:
        return
    serve = vllm_serve_args(argv)
    if serve is None:
        yield "the vLLM container runs no `vllm serve`: its model source cannot be checked"
        return
    # `vllm serve <model_tag>`: a positional model tag overrides --model (vLLM's serve command sets args.model to it).
    positional = bool(serve) and not (isinstance(serve[0], str) and serve[0].startswith("-"))
    model = serve[0] if positional else flag_value(serve, "--model")
    mounts = get(c, "volumeMounts", default=[])
    if model is UNKNOWN or mounts is UNKNOWN:
        return
    mounted = (
        _mounted(model, mounts if isinstance(mounts, list) else [])
        if isinstance(model, str) and model.startswith("/")
        else False
    )
    if mounted is None:
        return
    if not mounted:
        what = (
            f"the model vllm serve loads is {model!r} (the positional model tag, which overrides --model)"
            if positional
            else f"--model is {model!r}"
        )
        yield (
            f"{what}, not a folder of a volume this container mounts: vLLM would fetch it from a model hub (or a "
            "bucket) at every start; mount the release folder and serve from it"
        )


POLICY = ResourceValidationPolicy(
    name=NAME,
    description="Cloud Run vLLM loads the model from a mounted volume with HF_HUB_OFFLINE=1, never from a hub.",
    validate=resource_validator((CLOUD_RUN_REVISION,), check),
    severity=SEVERITY,
    framework=FRAMEWORK,
    remediation_steps=REMEDIATION,
    tags=["reliability", "supply-chain", "cloud-run"],
)
