"""A co-hosted group on GKE: one Deployment whose pods run the co-host server (``server.py``) on a node each, owning
the node's GPUs, with its scripts ConfigMap, PodDisruptionBudget and NetworkPolicy (the model server's, the same
selector model: one InferencePool selects the group's pods).

The pod is a model server like a pool's (same labels, identity, security context, volumes, network policy), with
these differences, each because several vLLM instances share the container:

* the container runs the server (``python3 cohost_server.py --config-json <the planner's document>``), which runs
  every instance as a child process; the release checks run in the server before each instance starts (so after a
  restart and for a release an update brings in, too), not in an init container;
* probes are HTTP: startup and readiness ``GET /health`` (200 only while every instance is healthy), liveness
  ``GET /live`` (the server is up: a dead child is the server's to restart, and a restart of the whole pod would cost
  every model's cold load);
* the pod requests every GPU of its node and carries no release label (it serves several): the releases are in its
  annotations and in the server's configuration; its engine-type label selects the picker's co-host metric mapping.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from .. import naming
from ..base import Component
from ..serving import model_server as ms
from ..serving.spec import ProbeTimings, ReleaseInfo

core = k8s.core.v1
meta = k8s.meta.v1

SERVER_SCRIPT = Path(__file__).resolve().parent / "server.py"


@dataclass(frozen=True)
class CoHostServerArgs:
    role: str
    releases: tuple[ReleaseInfo, ...]
    #: The one image every instance runs (by digest) and its vLLM version.
    image: str
    vllm_version: str
    #: The server's configuration document (canonical JSON, ``server.render_config``).
    config_json: str
    #: ``gs://<bucket>/<object>`` the server follows (update_models) and its poll period; None: the plan's set only.
    watch: str | None
    poll_seconds: int | None
    probes: ProbeTimings
    resources: ms.PodResources
    accelerator: str
    min_replicas: int
    max_surge: int
    rollout_replicas: int
    max_unavailable_disruptions: int
    namespace: pulumi.Input[str]
    service_account: pulumi.Input[str]
    proxy_only_cidr: str
    stream_bound_seconds: float
    contract_max_model_len: int
    contract_max_input_tokens: int
    contract_max_output_tokens: int

    def __post_init__(self) -> None:
        if not self.releases:
            raise ValueError("CoHostServerArgs.releases: a group serves at least one release")
        if (self.watch is None) != (self.poll_seconds is None):
            raise ValueError("CoHostServerArgs.poll_seconds: given exactly when watch is")


def scripts() -> dict[str, str]:
    """The ConfigMap's data: the server and the release verifier it runs before each instance."""
    return {
        naming.COHOST_SERVER_FILE: SERVER_SCRIPT.read_text(encoding="utf-8"),
        ms.VERIFY_SCRIPT_NAME: ms.VERIFY_SCRIPT.read_text(encoding="utf-8"),
    }


def pod_labels(args: CoHostServerArgs) -> dict[str, str]:
    return {
        **ms.selector_labels(args.role),
        naming.COMPONENT_LABEL: naming.MODEL_SERVER_COMPONENT,
        naming.PART_OF_LABEL: naming.PART_OF,
        naming.VERSION_LABEL: args.vllm_version,
        naming.POOL_LABEL: args.role,
        naming.ENGINE_TYPE_LABEL: naming.COHOST_ENGINE_TYPE,
    }


def release_annotations(args: CoHostServerArgs) -> dict[str, str]:
    """The releases the pod serves, and the image digest they share (each release's full identity is its file)."""
    p = naming.ANNOTATION_PREFIX
    return {
        naming.RELEASES_ANNOTATION: ",".join(r.release for r in args.releases),
        f"{p}image-digest": args.releases[0].digest,
        f"{p}vllm-version": args.vllm_version,
    }


def plan_annotations(args: CoHostServerArgs) -> dict[str, str]:
    """What policies check the rendered spec against (as a pool's Deployment carries)."""
    return {
        naming.COLD_LOAD_ANNOTATION: f"{round(args.probes.cold_load_seconds, 3):g}",
        naming.STREAM_BOUND_ANNOTATION: f"{round(args.stream_bound_seconds, 3):g}",
        naming.CONTRACT_MAX_MODEL_LEN_ANNOTATION: str(args.contract_max_model_len),
        naming.CONTRACT_MAX_INPUT_TOKENS_ANNOTATION: str(args.contract_max_input_tokens),
        naming.CONTRACT_MAX_OUTPUT_TOKENS_ANNOTATION: str(args.contract_max_output_tokens),
    }


def server_command(args: CoHostServerArgs) -> tuple[list[str], list[str]]:
    command = ["python3", f"{naming.SCRIPTS_MOUNT_PATH}/{naming.COHOST_SERVER_FILE}"]
    argv = ["--config-json", args.config_json]
    if args.watch is not None:
        argv += ["--watch", args.watch, "--poll-seconds", str(args.poll_seconds)]
    return command, argv


def volumes(role: str, shm_gib: int) -> list[core.VolumeArgs]:
    return [
        core.VolumeArgs(
            name="dshm", empty_dir=core.EmptyDirVolumeSourceArgs(medium="Memory", size_limit=f"{shm_gib}Gi")
        ),
        core.VolumeArgs(name="tmp", empty_dir=core.EmptyDirVolumeSourceArgs(size_limit=f"{ms.TMP_SIZE_GIB}Gi")),
        core.VolumeArgs(name="home", empty_dir=core.EmptyDirVolumeSourceArgs(size_limit=f"{ms.CACHE_SIZE_GIB}Gi")),
        core.VolumeArgs(
            name="scripts",
            config_map=core.ConfigMapVolumeSourceArgs(name=naming.scripts_config_map_name(role), default_mode=0o444),
        ),
    ]


def _http(path: str) -> core.HTTPGetActionArgs:
    return core.HTTPGetActionArgs(path=path, port=naming.VLLM_PORT)


def container(args: CoHostServerArgs) -> core.ContainerArgs:
    p = args.probes
    command, argv = server_command(args)
    r = args.resources
    gpus, memory = str(r.gpus), f"{r.memory_gib}Gi"
    ephemeral = f"{ms.TMP_SIZE_GIB + ms.CACHE_SIZE_GIB}Gi"
    return core.ContainerArgs(
        name=naming.COHOST_CONTAINER,
        image=args.image,
        image_pull_policy="IfNotPresent",
        command=command,
        args=argv,
        ports=[core.ContainerPortArgs(name="http", container_port=naming.VLLM_PORT, protocol="TCP")],
        # The server's own log lines and each child's, as they come.
        env=ms.serving_env({"PYTHONUNBUFFERED": "1"}),
        resources=core.ResourceRequirementsArgs(
            requests={"cpu": f"{r.cpu:g}", "memory": memory, naming.GPU_RESOURCE: gpus, "ephemeral-storage": ephemeral},
            limits={"memory": memory, naming.GPU_RESOURCE: gpus, "ephemeral-storage": ephemeral},
        ),
        volume_mounts=[
            core.VolumeMountArgs(name="dshm", mount_path="/dev/shm"),
            core.VolumeMountArgs(name="tmp", mount_path="/tmp"),
            core.VolumeMountArgs(name="home", mount_path=ms.HOME),
            core.VolumeMountArgs(name="scripts", mount_path=naming.SCRIPTS_MOUNT_PATH, read_only=True),
        ],
        security_context=ms.container_security_context(),
        # The startup window covers every instance's cold load in turn (the server starts them one at a time).
        startup_probe=core.ProbeArgs(
            http_get=_http(naming.HEALTH_PATH),
            period_seconds=p.startup_period_seconds,
            failure_threshold=p.startup_failure_threshold,
            timeout_seconds=p.startup_timeout_seconds,
        ),
        readiness_probe=core.ProbeArgs(
            http_get=_http(naming.HEALTH_PATH),
            period_seconds=p.readiness_period_seconds,
            timeout_seconds=p.readiness_timeout_seconds,
            failure_threshold=p.readiness_failure_threshold,
            success_threshold=1,
        ),
        liveness_probe=core.ProbeArgs(
            http_get=_http(naming.LIVE_PATH),
            period_seconds=p.liveness_period_seconds,
            timeout_seconds=p.liveness_timeout_seconds,
            failure_threshold=p.liveness_failure_threshold,
        ),
        lifecycle=core.LifecycleArgs(
            pre_stop=core.LifecycleHandlerArgs(sleep=core.SleepActionArgs(seconds=p.pre_stop_seconds))
        ),
        termination_message_policy="FallbackToLogsOnError",
    )


def pod_spec(args: CoHostServerArgs) -> core.PodSpecArgs:
    return core.PodSpecArgs(
        service_account_name=args.service_account,
        # Neither the server nor vLLM calls the Kubernetes API; Workload Identity does not need the token.
        automount_service_account_token=False,
        # A Service named "vllm" would inject VLLM_PORT=tcp://..., which vLLM reads as its own port setting.
        enable_service_links=False,
        termination_grace_period_seconds=args.probes.termination_grace_seconds,
        node_selector={naming.ACCELERATOR_LABEL: args.accelerator},
        tolerations=[
            core.TolerationArgs(
                key=naming.GPU_TAINT_KEY, operator="Equal", value=naming.GPU_TAINT_VALUE, effect=naming.GPU_TAINT_EFFECT
            )
        ],
        security_context=core.PodSecurityContextArgs(
            run_as_non_root=True,
            run_as_user=ms.RUN_AS_UID,
            run_as_group=ms.RUN_AS_UID,
            seccomp_profile=core.SeccompProfileArgs(type="RuntimeDefault"),
        ),
        containers=[container(args)],
        volumes=volumes(args.role, args.resources.shm_gib),
    )


def deployment_spec(args: CoHostServerArgs, script_sha: str) -> k8s.apps.v1.DeploymentSpecArgs:
    return k8s.apps.v1.DeploymentSpecArgs(
        replicas=args.min_replicas,
        selector=meta.LabelSelectorArgs(match_labels=ms.selector_labels(args.role)),
        strategy=k8s.apps.v1.DeploymentStrategyArgs(
            type="RollingUpdate",
            rolling_update=k8s.apps.v1.RollingUpdateDeploymentArgs(max_surge=args.max_surge, max_unavailable=0),
        ),
        progress_deadline_seconds=ms.progress_deadline_seconds(args.probes),
        revision_history_limit=ms.REVISION_HISTORY_LIMIT,
        template=core.PodTemplateSpecArgs(
            metadata=meta.ObjectMetaArgs(
                labels=pod_labels(args),
                annotations={**release_annotations(args), naming.SCRIPTS_SHA_ANNOTATION: script_sha},
            ),
            spec=pod_spec(args),
        ),
    )


class CoHostServer(Component):
    """A co-hosted group's Deployment and its companions. Pass the Kubernetes provider and what the objects must wait
    for (namespace, GPU node pool) in ``opts``."""

    TYPE = "llm-serving:cohost:CoHostServer"

    def __init__(self, name: str, args: CoHostServerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, args, opts)
        files = scripts()
        child = self.child_opts()
        labels = pod_labels(args)

        def meta_of(n: str, ann: dict[str, str] | None = None) -> meta.ObjectMetaArgs:
            return meta.ObjectMetaArgs(name=n, namespace=args.namespace, labels=labels, annotations=ann)

        deployment = naming.deployment_name(args.role)
        self.config_map = core.ConfigMap(
            f"{name}-scripts", metadata=meta_of(naming.scripts_config_map_name(args.role)), data=files, opts=child
        )
        steps = -(-args.rollout_replicas // max(1, args.max_surge))
        seconds = ms.progress_deadline_seconds(args.probes) * steps
        self.deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata=meta_of(deployment, {**release_annotations(args), **plan_annotations(args)}),
            spec=deployment_spec(args, ms.scripts_digest(files)),
            opts=self.child_opts(
                depends_on=[self.config_map],
                ignore_changes=["spec.replicas"],
                custom_timeouts=pulumi.CustomTimeouts(create=f"{seconds}s", update=f"{seconds}s"),
            ),
        )
        self.pdb = k8s.policy.v1.PodDisruptionBudget(
            f"{name}-pdb",
            metadata=meta_of(deployment),
            spec=ms.pdb_spec(args.role, args.max_unavailable_disruptions),
            opts=child,
        )
        self.network_policy = k8s.networking.v1.NetworkPolicy(
            f"{name}-netpol",
            metadata=meta_of(deployment),
            spec=ms.network_policy_spec(args.role, args.proxy_only_cidr),
            opts=child,
        )
        self.role = args.role
        #: The Deployment's name as an Output: the HPA scales exactly this object.
        self.deployment_name: pulumi.Output[str] = self.deployment.metadata.name
        #: What the group's InferencePool and picker select (a plain value: see ModelServer.pool_selector).
        self.pool_selector: dict[str, str] = ms.selector_labels(args.role)
        self.probes = args.probes
        self.register_outputs(
            {
                "deployment_name": self.deployment_name,
                "releases": [r.release for r in args.releases],
                "selector": self.pool_selector,
                "probes": args.probes.to_dict(),
            }
        )
