"""Helpers of the Vertex AI policies: the resource types the Vertex serving target registers and where their
request bodies keep the fields the policies read (``components/vertex/endpoint.py`` builds them)."""

from __future__ import annotations

from typing import Any

from ._common import UNKNOWN, Res, get

#: One uploaded model + its deployment (a dynamic resource: the inputs are the aiplatform.v1 request bodies).
DEPLOYED_MODEL = "pulumi-python:dynamic/vertex:DeployedModel"
#: A deployment resource pool (model co-hosting): the machines several deployed models share.
RESOURCE_POOL = "pulumi-python:dynamic/vertex:DeploymentResourcePool"
ENDPOINT = "gcp:vertex/aiEndpoint:AiEndpoint"
ENDPOINT_IAM = (
    "gcp:vertex/aiEndpointIamMember:AiEndpointIamMember",
    "gcp:vertex/aiEndpointIamBinding:AiEndpointIamBinding",
    "gcp:vertex/aiEndpointIamPolicy:AiEndpointIamPolicy",
)


def container_spec(res: Res) -> Any:
    """``UploadModelRequest.model.containerSpec`` of a deployed model (UNKNOWN / None when not known / absent)."""
    return get(res.props, "upload_model_request", "model", "containerSpec")


def dedicated_resources(res: Res) -> Any:
    """``dedicatedResources`` of a deployed model or of a resource pool (None for a co-hosted deployed model)."""
    if res.type == RESOURCE_POOL:
        return get(res.props, "resource_pool", "dedicatedResources")
    return get(res.props, "deployed_model", "dedicatedResources")


def serve_args(res: Res) -> list[Any] | Any:
    """``vllm serve`` arguments of a deployed model: everything after ``vllm serve`` in command + args."""
    spec = container_spec(res)
    if spec is UNKNOWN:
        return UNKNOWN
    if not isinstance(spec, dict):
        return []
    # UNKNOWN is falsy: test it before defaulting an absent list.
    command, args = spec.get("command"), spec.get("args")
    if command is UNKNOWN or args is UNKNOWN:
        return UNKNOWN
    command, args = command or [], args or []
    if not isinstance(command, list) or not isinstance(args, list):
        return []
    argv = command + args
    for i in range(len(argv) - 1):
        if argv[i] == "vllm" and argv[i + 1] == "serve":
            return argv[i + 2 :]
    return []
