"""The Vertex AI target's facts: the dynamic-provider resources the Vertex target registers, whose inputs are the
aiplatform.v1 request bodies (``components/vertex/endpoint.py`` and ``components/vertex/requests.py`` build them),
and the endpoint with its IAM resources.

Not read here: the startup window. A Vertex deployed model carries no cold-load estimate a policy could read (an
upload request has no annotations, and its labels cannot hold a number of seconds); the program sizes the startup
probe and ``deploymentTimeout`` from the planner's estimate itself (``infra/targets/vertex/planning/pools.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .._common import (
    UNKNOWN,
    Res,
    cohost_document_instances,
    entry_dict,
    entry_list,
    get,
    iam_grants,
    instance_gpu_shares,
    of_type,
)
from .facts import (
    Adapter,
    CallerGrant,
    ImageRef,
    Reader,
    ReservationClaim,
    ServingEndpoint,
    SharedGpu,
    StackReader,
    VllmServer,
    WarmFloor,
)

#: One uploaded model + its deployment (a dynamic resource: the inputs are the aiplatform.v1 request bodies).
DEPLOYED_MODEL = "pulumi-python:dynamic/vertex:DeployedModel"
ENDPOINT = "gcp:vertex/aiEndpoint:AiEndpoint"
ENDPOINT_IAM = (
    "gcp:vertex/aiEndpointIamMember:AiEndpointIamMember",
    "gcp:vertex/aiEndpointIamBinding:AiEndpointIamBinding",
    "gcp:vertex/aiEndpointIamPolicy:AiEndpointIamPolicy",
)
#: vLLM 0.32's default --gpu-memory-utilization.
VLLM_DEFAULT_UTILIZATION = 0.9
RESERVATION_FORM = "projects/<p>/zones/<z>/reservations/<name>"


def container_spec(res: Res) -> Any:
    """``UploadModelRequest.model.containerSpec`` of a deployed model (UNKNOWN / None when not known / absent)."""
    return get(res.props, "upload_model_request", "model", "containerSpec")


def dedicated_resources(res: Res) -> Any:
    """``dedicatedResources`` of a deployed model (the program deploys on no resource pool: a pool takes no custom
    container)."""
    return get(res.props, "deployed_model", "dedicatedResources")


def command_line(res: Res) -> Any:
    """``containerSpec`` command + args (UNKNOWN at preview, None when absent or malformed)."""
    spec = container_spec(res)
    if spec is UNKNOWN:
        return UNKNOWN
    if not isinstance(spec, dict):
        return None
    # UNKNOWN is falsy: test it before defaulting an absent list.
    command, args = spec.get("command"), spec.get("args")
    if command is UNKNOWN or args is UNKNOWN:
        return UNKNOWN
    command, args = command or [], args or []
    if not isinstance(command, list) or not isinstance(args, list):
        return None
    return command + args


def serve_args(res: Res) -> Any:
    """``vllm serve`` arguments of a deployed model: everything after ``vllm serve`` in command + args (the release
    verifier's ``--exec -- vllm serve`` included); UNKNOWN at preview, None when it never runs ``vllm serve``."""
    argv = command_line(res)
    if argv is UNKNOWN or argv is None:
        return argv
    for i in range(len(argv) - 1):
        if argv[i] == "vllm" and argv[i + 1] == "serve":
            return argv[i + 2 :]
    return None


def images(res: Res) -> Iterator[ImageRef]:
    yield ImageRef(
        "containerSpec.imageUri", get(container_spec(res), "imageUri"), digest_required=True, starts="replica"
    )


def warm_floors(res: Res) -> Iterator[WarmFloor]:
    """``dedicatedResources.minReplicaCount`` of a deployment. aiplatform.v1 requires it (>= 1): unset has no
    default."""
    resources = dedicated_resources(res)
    yield WarmFloor(
        "dedicatedResources.minReplicaCount",
        get(resources, "minReplicaCount"),
        "replica",
        "a new Vertex AI replica takes minutes to obtain a machine and load weights",
    )


def vllm_servers(res: Res) -> Iterator[VllmServer]:
    """The container's ``vllm serve``; for a co-host server's container, each instance of its configuration (with the
    container's environment plus its own)."""
    spec = container_spec(res)
    envs = get(spec, "env", default=[])
    env: Any = UNKNOWN
    if envs is not UNKNOWN:
        env = {e["name"]: e.get("value") for e in envs or [] if isinstance(e, dict) and isinstance(e.get("name"), str)}
    instances = cohost_document_instances(command_line(res))
    if instances is None or instances is UNKNOWN:
        yield VllmServer(container="containerSpec", args=serve_args(res), env=env)
        return
    for inst in instances:
        own = entry_dict(inst, "env")
        yield VllmServer(
            container=f"containerSpec instance {inst.get('name')!r}",
            args=entry_list(inst, "args"),
            env=env if env is UNKNOWN else {**env, **own},
        )


def reservations(res: Res) -> Iterator[ReservationClaim]:
    """``dedicatedResources.machineSpec.reservationAffinity`` of a deployment."""
    resources = dedicated_resources(res)
    yield ReservationClaim(
        "machineSpec",
        get(resources, "machineSpec", "reservationAffinity"),
        type_field="reservationAffinityType",
        by="resource name",
        resource_form=RESERVATION_FORM,
    )


def caller_grants(res: Res) -> Iterator[CallerGrant]:
    for role, member in iam_grants(res):
        yield CallerGrant(role, member, "endpoint")


def endpoints(res: Res) -> Iterator[ServingEndpoint]:
    """An endpoint on the shared public endpoint domain (neither dedicated nor Private Service Connect)."""
    dedicated = get(res.props, "dedicatedEndpointEnabled")
    psc = get(res.props, "privateServiceConnectConfig", "enablePrivateServiceConnect")
    private = UNKNOWN if UNKNOWN in (dedicated, psc) else (dedicated is True or psc is True)
    yield ServingEndpoint("endpoint", private=private)


# ---- co-hosting ------------------------------------------------------------------------------------------------


def shared_gpus(resources: list[Res]) -> Iterator[SharedGpu]:
    """Per GPU of a co-host server's machine, the instances its configuration places on it (each instance's
    ``gpus``, its partition its ``--gpu-memory-utilization``): they meet on that GPU on every replica. Nothing for
    a deployed model whose command line is unknown at preview."""
    for dm in sorted(of_type(resources, DEPLOYED_MODEL), key=lambda r: r.name):
        instances = cohost_document_instances(command_line(dm))
        if instances is None or instances is UNKNOWN:
            continue
        for g, shares in instance_gpu_shares(instances, VLLM_DEFAULT_UTILIZATION).items():
            yield SharedGpu(
                dm.urn,
                f"{len(shares)} vLLM instance(s) of the co-host server of deployed model {dm.name} share GPU {g} of "
                "each replica",
                tuple(sorted(shares, key=lambda s: (-s[0], s[1]))),
            )


ADAPTER = Adapter(
    target="vertex",
    images=Reader((DEPLOYED_MODEL,), images),
    warm_floors=Reader((DEPLOYED_MODEL,), warm_floors),
    vllm_servers=Reader((DEPLOYED_MODEL,), vllm_servers),
    reservations=Reader((DEPLOYED_MODEL,), reservations),
    caller_grants=Reader(ENDPOINT_IAM, caller_grants),
    endpoints=Reader((ENDPOINT,), endpoints),
    shared_gpus=StackReader((DEPLOYED_MODEL,), shared_gpus),
)
