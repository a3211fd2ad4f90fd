"""The Cloud Run target's facts: each pool's revision resource (its run.v2 ``RevisionTemplate``, run.v2 spellings
``command``, ``env``, ``volumeMounts``; ``components/cloud_run/service.py`` renders it), the service resource's
service-level fields and its IAM resources. Every pool's revision is read, stable's as well as the canary's. Cloud
Run has no reservations and no shared GPUs: those readers stay empty."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .._common import (
    CLOUD_RUN_IAM,
    CLOUD_RUN_PROBE_DEFAULTS,
    CLOUD_RUN_REVISION,
    CLOUD_RUN_SERVICE,
    COLD_LOAD_ANNOTATION,
    UNKNOWN,
    Res,
    cloud_run_argv,
    cloud_run_containers,
    cloud_run_serving_container,
    get,
    iam_grants,
    vllm_serve_args,
)
from .facts import (
    Adapter,
    CallerGrant,
    IamCheckSwitch,
    ImageRef,
    ProbeLimit,
    Reader,
    ServingEndpoint,
    StartupWindow,
    VllmServer,
    WarmFloor,
)

#: The Cloud Run Admin API v1 IAM resources grant on the same services as the run.v2 ones (the provider's usual
#: "public Cloud Run service" example is a v1 IamMember to allUsers), and iam-no-public-members does not cover them.
CLOUD_RUN_V1_IAM = (
    "gcp:cloudrun/iamMember:IamMember",
    "gcp:cloudrun/iamBinding:IamBinding",
    "gcp:cloudrun/iamPolicy:IamPolicy",
)
#: Cloud Run's bound on failureThreshold x periodSeconds of a startup probe of a GPU service (Cloud Run "Configure
#: container health checks": "can't exceed 600 seconds (1800 for GPU)").
MAX_GPU_PROBE_SECONDS = 1800
INVOKER_ROLE = "roles/run.invoker"
#: A Cloud Run startup window covers twice the cold-load estimate (issue 23; infra/targets/cloud_run/config.py,
#: ``startup_margin`` >= 1): the estimate rests on a stated throughput, and a start the probe kills is lost whole.
STARTUP_WINDOW_FACTOR = 2.0


def images(res: Res) -> Iterator[ImageRef]:
    """Every container of the revision, the sidecars too: a tag can move between two instance starts."""
    for c in cloud_run_containers(res):
        image = c.get("image")
        if isinstance(image, str) or image is UNKNOWN:
            yield ImageRef(f"container {c.get('name')!r} image", image, digest_required=True, starts="instance")


def warm_floors(res: Res) -> Iterator[WarmFloor]:
    """``template.scaling.minInstanceCount`` of a GPU serving service (run.v2: unset = 0)."""
    if cloud_run_serving_container(res) is None:
        return  # not a GPU serving service
    yield WarmFloor(
        "template.scaling.minInstanceCount",
        get(res.props, "template", "scaling", "minInstanceCount", default=0),
        "instance",
        "a cold GPU instance loads its weights for minutes before it answers",
    )


def _env(container: dict[str, Any]) -> Any:
    envs = get(container, "env", default=[])
    if envs is UNKNOWN:
        return UNKNOWN
    out: dict[str, Any] = {}
    for e in envs if isinstance(envs, list) else []:
        if isinstance(e, dict) and isinstance(e.get("name"), str):
            source = e.get("valueSource")
            out[e["name"]] = {"valueSource": source} if source is not None else e.get("value")
    return out


def vllm_servers(res: Res) -> Iterator[VllmServer]:
    """The container the GPU is attached to; vLLM's flags are what follows ``vllm serve`` (behind the release
    verifier's ``--exec --``)."""
    c = cloud_run_serving_container(res)
    if c is not None:
        argv = cloud_run_argv(c)
        yield VllmServer(
            container=f"container {c.get('name')!r}",
            args=UNKNOWN if argv is UNKNOWN else vllm_serve_args(argv),
            env=_env(c),
        )


def startup_windows(res: Res) -> Iterator[StartupWindow]:
    """The vLLM container's startup probe (run.v2 defaults); the estimate is the revision template's annotation, the
    fallback key the revision's name; Cloud Run bounds a GPU service's probe."""
    c = cloud_run_serving_container(res)
    if c is None:
        return
    service = res.props.get("revision")
    yield StartupWindow(
        container=f"container {c.get('name')!r}",
        probe=c.get("startupProbe"),
        defaults=CLOUD_RUN_PROBE_DEFAULTS,
        without_probe="Cloud Run's default TCP probe gives up long before a GPU cold load ends",
        cold_load=get(res.props, "template", "annotations", COLD_LOAD_ANNOTATION),
        rendered_on="the revision template",
        key=service if isinstance(service, str) else res.name,
        limit=ProbeLimit(MAX_GPU_PROBE_SECONDS, "Cloud Run accepts for GPU services: the revision would be refused"),
        min_factor=STARTUP_WINDOW_FACTOR,
    )


def caller_grants(res: Res) -> Iterator[CallerGrant]:
    for role, member in iam_grants(res):
        yield CallerGrant(role, member, "service")


def endpoints(res: Res) -> Iterator[ServingEndpoint]:
    """A service admits anyone who reaches its URL when its invoker IAM check is off."""
    switch = IamCheckSwitch("service.invokerIamDisabled", get(res.props, "service", "invokerIamDisabled"), INVOKER_ROLE)
    yield ServingEndpoint("service", iam_check_switch=switch)


ADAPTER = Adapter(
    target="cloud_run",
    images=Reader((CLOUD_RUN_REVISION,), images),
    warm_floors=Reader((CLOUD_RUN_REVISION,), warm_floors),
    vllm_servers=Reader((CLOUD_RUN_REVISION,), vllm_servers),
    startup_windows=Reader((CLOUD_RUN_REVISION,), startup_windows),
    caller_grants=Reader((*CLOUD_RUN_IAM, *CLOUD_RUN_V1_IAM), caller_grants),
    endpoints=Reader((CLOUD_RUN_SERVICE,), endpoints),
)
