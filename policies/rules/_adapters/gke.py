"""The GKE target's facts: model-server Deployments (and every other workload's images), their HPAs, GPU node
pools and their GPU sharing (``components/serving``, ``components/platform`` render them)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .._common import (
    COLD_LOAD_ANNOTATION,
    DEPLOYMENT,
    HELM_CHART,
    HPA,
    NODE_POOL,
    UNKNOWN,
    Res,
    annotation,
    argv,
    as_float,
    as_int,
    cohost_instances,
    containers,
    deployment_max_replicas,
    entry_dict,
    entry_list,
    flag_value,
    fleet_regions,
    get,
    instance_gpu_shares,
    is_gpu_node_pool,
    is_serving_deployment,
    node_pool_accelerators,
    of_type,
    pod_labels,
    pod_spec,
    pool_for_deployment,
    serving_container,
)
from .facts import (
    Adapter,
    ImageRef,
    Reader,
    ReservationClaim,
    SharedGpu,
    StackReader,
    StartupWindow,
    VllmServer,
    WarmFloor,
)

#: Every Kubernetes workload kind whose pods run images.
WORKLOADS = (DEPLOYMENT, "kubernetes:apps/v1:StatefulSet", "kubernetes:apps/v1:DaemonSet", "kubernetes:batch/v1:Job")
#: Kubernetes probe defaults (core/v1 Probe): initialDelaySeconds 0, periodSeconds 10, failureThreshold 3.
PROBE_DEFAULTS = {"initialDelaySeconds": 0, "periodSeconds": 10, "failureThreshold": 3}
#: vLLM 0.32's default --gpu-memory-utilization.
VLLM_DEFAULT_UTILIZATION = 0.9
HOSTNAME = "kubernetes.io/hostname"


# ---- images ------------------------------------------------------------------------------------------------------


def _chart_images(values: Any, path: str = "values") -> Iterator[tuple[str, Any]]:
    """(path, image reference) for every ``image`` in Helm values: strings, or {repository, tag, digest} maps."""
    if isinstance(values, dict):
        for k, v in sorted(values.items()):
            here = f"{path}.{k}"
            if k == "image" and isinstance(v, dict):
                repo = "/".join(str(v[p]) for p in ("registry", "repository") if isinstance(v.get(p), str))
                if isinstance(v.get("digest"), str) and v["digest"]:
                    yield here, f"{repo}@{v['digest']}"
                elif v.get("tag") is not UNKNOWN:
                    tag = v.get("tag")
                    yield here, f"{repo}:{tag}" if isinstance(tag, str) and tag else repo
            elif k == "image" and isinstance(v, str):
                yield here, v
            else:
                yield from _chart_images(v, here)
    elif isinstance(values, list):
        for i, v in enumerate(values):
            yield from _chart_images(v, f"{path}[{i}]")


def images(res: Res) -> Iterator[ImageRef]:
    """Every container (init containers too) of a workload; every image of a Helm chart's values. Only a
    model-server Deployment's images must be digests (the release's image); the others must not float."""
    if res.type == HELM_CHART:
        for where, image in _chart_images(res.props.get("values")):
            yield ImageRef(where, image, digest_required=False, starts="pod")
        return
    serving = is_serving_deployment(res)
    for c in containers(res):
        image = c.get("image")
        if isinstance(image, str) or image is UNKNOWN:
            yield ImageRef(f"container {c.get('name')!r} image", image, digest_required=serving, starts="pod")


# ---- warm floor ----------------------------------------------------------------------------------------------------


def warm_floors(res: Res) -> Iterator[WarmFloor]:
    """An HPA's ``minReplicas`` (autoscaling/v2 default: 1)."""
    yield WarmFloor(
        "minReplicas",
        get(res.props, "spec", "minReplicas", default=1),
        "replica",
        "a new GPU replica takes minutes to obtain a node and load weights",
    )


# ---- the vLLM server -----------------------------------------------------------------------------------------------


def _env(container: dict[str, Any]) -> Any:
    envs = get(container, "env", default=[])
    if envs is UNKNOWN:
        return UNKNOWN
    out: dict[str, Any] = {}
    for e in envs if isinstance(envs, list) else []:
        if isinstance(e, dict) and isinstance(e.get("name"), str):
            out[e["name"]] = {"valueFrom": e["valueFrom"]} if "valueFrom" in e else e.get("value")
    return out


def vllm_servers(res: Res) -> Iterator[VllmServer]:
    """The model server's container of a model-server Deployment. Its command line is the image's ``vllm serve``
    entrypoint plus args (or a shell / verifier wrapper around it): vLLM's flags are read from all of it. A co-host
    server's container runs one vLLM per instance of its configuration, each with the container's environment plus
    its own."""
    c = serving_container(res) if is_serving_deployment(res) else None
    if c is None:
        return
    instances = cohost_instances(res)
    if instances is None or instances is UNKNOWN:
        yield VllmServer(container=f"container {c.get('name')!r}", args=argv(c), env=_env(c))
        return
    env = _env(c)
    for inst in instances:
        own = entry_dict(inst, "env")
        yield VllmServer(
            container=f"container {c.get('name')!r} instance {inst.get('name')!r}",
            args=entry_list(inst, "args"),
            env=env if env is UNKNOWN else {**env, **own},
        )


def startup_windows(res: Res) -> Iterator[StartupWindow]:
    """The model server's startup and readiness probes; the estimate is the Deployment's annotation (or its pod
    template's), the fallback key the Deployment's name."""
    c = serving_container(res) if is_serving_deployment(res) else None
    if c is None:
        return
    yield StartupWindow(
        container=f"container {c.get('name')!r}",
        probe=c.get("startupProbe"),
        defaults=PROBE_DEFAULTS,
        without_probe="the liveness and readiness probes would judge a pod that is still loading weights",
        cold_load=annotation(res, COLD_LOAD_ANNOTATION),
        rendered_on="the Deployment",
        key=res.k8s_name,
        readiness_required=True,
        readiness=c.get("readinessProbe"),
    )


# ---- reservations --------------------------------------------------------------------------------------------------


def reservations(res: Res) -> Iterator[ReservationClaim]:
    """A GPU node pool's ``nodeConfig.reservationAffinity`` (values: the reservation's name)."""
    if is_gpu_node_pool(res):
        yield ReservationClaim(
            "GPU node pool",
            get(res.props, "nodeConfig", "reservationAffinity"),
            type_field="consumeReservationType",
            by="name",
        )


# ---- GPU sharing ---------------------------------------------------------------------------------------------------


def utilization(dep: Res) -> float | None:
    """A serving Deployment's --gpu-memory-utilization (vLLM's default when unset); None when unknown."""
    args = argv(serving_container(dep))
    if args is UNKNOWN:
        return None
    raw = flag_value(args, "--gpu-memory-utilization")
    if raw is UNKNOWN:
        return None
    return VLLM_DEFAULT_UTILIZATION if raw is None else as_float(raw)


def one_per_node(dep: Res) -> bool:
    """Required anti-affinity on the node over the Deployment's own pod labels: at most one of its pods per node."""
    terms = get(pod_spec(dep), "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
    labels = pod_labels(dep)
    if not isinstance(terms, list) or not isinstance(labels, dict):
        return False
    for t in terms:
        match = get(t, "labelSelector", "matchLabels")
        if (
            get(t, "topologyKey") == HOSTNAME
            and isinstance(match, dict)
            and match
            and all(labels.get(k) == v for k, v in match.items())
        ):
            return True
    return False


def shared_gpus(resources: list[Res]) -> Iterator[SharedGpu]:
    """Per GPU-sharing node pool (MPS / time-sharing, ``maxSharedClientsPerGpu`` >= 2): the largest utilisations
    that can land on one GPU, over every replica the pool may run (the scheduler does not look at memory). A
    Deployment whose pods repel each other per node puts at most one replica on a GPU, so it counts once. A pool
    where one of them is unknown at preview is skipped."""
    pools = [p for p in of_type(resources, NODE_POOL) if is_gpu_node_pool(p)]
    hpas = of_type(resources, HPA)
    deps = sorted((d for d in resources if is_serving_deployment(d)), key=lambda d: d.k8s_name)
    yield from cohost_gpus(deps)
    members = fleet_regions(deps)
    for pool in pools:
        clients = max(
            (as_int(get(a, "gpuSharingConfig", "maxSharedClientsPerGpu")) or 1 for a in node_pool_accelerators(pool)),
            default=1,
        )
        if clients < 2:
            continue
        slots: list[tuple[float, str]] = []
        judgeable = True
        for d in deps:
            if pool_for_deployment(d, pools, members) is not pool:
                continue
            u, n = utilization(d), deployment_max_replicas(d, hpas)
            if u is None or n is None:
                judgeable = False
                break
            slots += [(u, d.k8s_name)] * (min(n, 1) if one_per_node(d) else n)
        if not judgeable:
            continue
        worst = tuple(sorted(slots, key=lambda s: (-s[0], s[1]))[:clients])
        yield SharedGpu(
            pool.urn,
            f"up to {len(worst)} servers share one GPU of this pool (maxSharedClientsPerGpu {clients})",
            worst,
        )


def cohost_gpus(deps: list[Res]) -> Iterator[SharedGpu]:
    """Per GPU of a co-host pod, the instances its server places on it (each instance's ``gpus`` in the
    configuration, its partition its ``--gpu-memory-utilization``): they meet on that GPU on every replica."""
    for d in deps:
        instances = cohost_instances(d)
        if instances is None or instances is UNKNOWN:
            continue
        for g, shares in instance_gpu_shares(instances, VLLM_DEFAULT_UTILIZATION).items():
            yield SharedGpu(
                d.urn,
                f"{len(shares)} vLLM instance(s) of co-host Deployment {d.k8s_name} share GPU {g} of each pod",
                tuple(sorted(shares, key=lambda s: (-s[0], s[1]))),
            )


ADAPTER = Adapter(
    target="gke",
    images=Reader((*WORKLOADS, HELM_CHART), images),
    warm_floors=Reader((HPA,), warm_floors),
    vllm_servers=Reader((DEPLOYMENT,), vllm_servers),
    startup_windows=Reader((DEPLOYMENT,), startup_windows),
    reservations=Reader((NODE_POOL,), reservations),
    shared_gpus=StackReader((DEPLOYMENT, HPA, NODE_POOL), shared_gpus),
)
