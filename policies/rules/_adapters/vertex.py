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

from .._common import UNKNOWN, Res, as_float, flag_value, get, iam_grants, of_type
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
#: A deployment resource pool (model co-hosting): the machines several deployed models share.
RESOURCE_POOL = "pulumi-python:dynamic/vertex:DeploymentResourcePool"
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
    """``dedicatedResources`` of a deployed model or of a resource pool (None for a co-hosted deployed model)."""
    if res.type == RESOURCE_POOL:
        return get(res.props, "resource_pool", "dedicatedResources")
    return get(res.props, "deployed_model", "dedicatedResources")


def serve_args(res: Res) -> Any:
    """``vllm serve`` arguments of a deployed model: everything after ``vllm serve`` in command + args (the release
    verifier's ``--exec -- vllm serve`` included); UNKNOWN at preview, None when it never runs ``vllm serve``."""
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
    argv = command + args
    for i in range(len(argv) - 1):
        if argv[i] == "vllm" and argv[i + 1] == "serve":
            return argv[i + 2 :]
    return None


def images(res: Res) -> Iterator[ImageRef]:
    yield ImageRef(
        "containerSpec.imageUri", get(container_spec(res), "imageUri"), digest_required=True, starts="replica"
    )


def warm_floors(res: Res) -> Iterator[WarmFloor]:
    """``dedicatedResources.minReplicaCount`` of a dedicated deployment or of a resource pool (a co-hosted
    deployment has none: its pool's is read). aiplatform.v1 requires it (>= 1): unset has no default."""
    resources = dedicated_resources(res)
    if res.type == DEPLOYED_MODEL and resources is None:
        return
    yield WarmFloor(
        "dedicatedResources.minReplicaCount",
        get(resources, "minReplicaCount"),
        "replica",
        "a new Vertex AI replica takes minutes to obtain a machine and load weights",
    )


def vllm_servers(res: Res) -> Iterator[VllmServer]:
    spec = container_spec(res)
    envs = get(spec, "env", default=[])
    env: Any = UNKNOWN
    if envs is not UNKNOWN:
        env = {e["name"]: e.get("value") for e in envs or [] if isinstance(e, dict) and isinstance(e.get("name"), str)}
    yield VllmServer(container="containerSpec", args=serve_args(res), env=env)


def reservations(res: Res) -> Iterator[ReservationClaim]:
    """``dedicatedResources.machineSpec.reservationAffinity`` of a dedicated deployment or of a resource pool."""
    resources = dedicated_resources(res)
    if res.type == DEPLOYED_MODEL and resources is None:
        return  # co-hosted: its resource pool's machines are read
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


def utilization(dm: Res) -> float | None:
    args = serve_args(dm)
    if args is UNKNOWN:
        return None
    raw = flag_value(args or [], "--gpu-memory-utilization")
    if raw is UNKNOWN:
        return None
    return VLLM_DEFAULT_UTILIZATION if raw is None else as_float(raw)


def pool_name(pool: Res) -> Any:
    """``projects/<p>/locations/<r>/deploymentResourcePools/<id>``, as deployed models name it."""
    project, region, pool_id = (get(pool.props, k) for k in ("project", "region", "pool_id"))
    if UNKNOWN in (project, region, pool_id) or None in (project, region, pool_id):
        return UNKNOWN
    return f"projects/{project}/locations/{region}/deploymentResourcePools/{pool_id}"


def shared_gpus(resources: list[Res]) -> Iterator[SharedGpu]:
    """Per resource pool: every deployed model that names it in ``sharedResources`` runs on each of its machines,
    so all their partitions meet on each GPU. Nothing when a model's pool is unknown at preview (every pool's sum
    is then unknown); a pool with a model's utilisation unknown is skipped."""
    models = sorted(of_type(resources, DEPLOYED_MODEL), key=lambda r: r.name)
    shared = {dm.name: get(dm.props, "deployed_model", "sharedResources") for dm in models}
    if UNKNOWN in shared.values():
        return
    for pool in of_type(resources, RESOURCE_POOL):
        name = pool_name(pool)
        if name is UNKNOWN:
            continue
        on_it = [dm for dm in models if shared[dm.name] == name]
        shares = [(utilization(dm), dm.name) for dm in on_it]
        if any(u is None for u, _ in shares):
            continue
        yield SharedGpu(
            pool.urn,
            f"{len(shares)} models are co-hosted on this resource pool",
            tuple(sorted(((u, n) for u, n in shares if u is not None), key=lambda s: (-s[0], s[1]))),
        )


ADAPTER = Adapter(
    target="vertex",
    images=Reader((DEPLOYED_MODEL,), images),
    warm_floors=Reader((DEPLOYED_MODEL, RESOURCE_POOL), warm_floors),
    vllm_servers=Reader((DEPLOYED_MODEL,), vllm_servers),
    reservations=Reader((DEPLOYED_MODEL, RESOURCE_POOL), reservations),
    caller_grants=Reader(ENDPOINT_IAM, caller_grants),
    endpoints=Reader((ENDPOINT,), endpoints),
    shared_gpus=StackReader((DEPLOYED_MODEL, RESOURCE_POOL), shared_gpus),
)
