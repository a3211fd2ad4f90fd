"""The vLLM model server of one pool (stable | canary): Deployment, probe-script ConfigMap,
PodDisruptionBudget and NetworkPolicy (the design's "Weight Loading", "Scale-down is a protocol too" and
"Security Without Giving the Model a Cloud Account").

Construction is split into pure functions (labels, annotations, volumes, container, pod, each spec) that the
tests call directly; :class:`ModelServer` only registers what they return.

Decisions stated here once:

* **Non-root.** The vLLM image runs as root by default; nothing in serving needs it. The pod runs as UID/GID
  1000 with a read-only root filesystem. Every path vLLM and its libraries write to is an emptyDir: ``/tmp``
  (torch.compile / inductor cache, streamed config files, the liveness state file), ``HOME`` (HF, vLLM,
  Triton, FlashInfer caches under ``/home/vllm``) and ``/dev/shm`` (memory). ``USER`` is set because
  ``getpass.getuser()`` (used by torch's inductor) fails for a UID without a passwd entry.
* **Replicas.** ``spec.replicas`` starts at the pool's ``min_replicas`` and is then ignored by Pulumi
  (``ignore_changes``): the HPA owns the live count, and a later ``pulumi up`` must never reset a scaled-out
  pool to its minimum in the middle of a load peak. The HPA's ``minReplicas`` carries later changes of
  ``min_replicas``.
* **Rollout.** RollingUpdate with maxSurge = the planner's surge replicas and maxUnavailable 0: capacity never
  drops during a rollout, and the reservation check (``accelerators.<k>.reservation.count``) already proved
  the surge replica has a node ("maxSurge: 1 cannot manufacture a GPU").
* **Network.** Ingress to the vLLM port only from the gateway's proxy-only subnet, this pool's endpoint picker, the
  Managed Prometheus collectors and Google's load-balancer health checkers; egress only DNS, the metadata
  server and the Google API VIPs (see :func:`network_policy_spec`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pulumi
import pulumi_kubernetes as k8s

from .. import naming
from ..base import Component
from ..network import PRIVATE_GOOGLE_APIS_CIDR
from .spec import VLLM_COMMAND, ProbeTimings, ReleaseInfo, verify_gcs_command
from .verify_release import MANIFEST_NAME

core = k8s.core.v1
meta = k8s.meta.v1

#: The scripts shipped in the ConfigMap, read at plan time (standard library only, run by the image's python3):
#: the probes, and the release verifier the init container runs — the same file the tests run.
PROBE_SCRIPT = Path(__file__).resolve().parent / "probe.py"
PROBE_SCRIPT_NAME = PROBE_SCRIPT.name
VERIFY_SCRIPT = Path(__file__).resolve().parent / naming.VERIFY_SCRIPT_FILE
VERIFY_SCRIPT_NAME = naming.VERIFY_SCRIPT_FILE
SCRIPTS_MOUNT_PATH = naming.SCRIPTS_MOUNT_PATH
#: The verifier holds one 4 MiB read buffer per hashing thread and the parsed manifest: 1 GiB is ample and keeps
#: the init container from raising the pod's memory request (the server's request is far larger).
VERIFY_MEMORY = "1Gi"
#: The liveness probe's progress clock; /tmp is an emptyDir, so it survives a container restart (the script
#: recognises a stale file by its counter value).
LIVENESS_STATE_FILE = "/tmp/liveness-state.json"
HOME = "/home/vllm"
#: Unprivileged identity of the server process (no passwd entry needed; see USER in the env).
RUN_AS_UID = 1000
#: /tmp holds the torch.compile / inductor cache and the streamer's copies of config and tokenizer files.
TMP_SIZE_GIB = 10
#: HOME holds the HF, vLLM, Triton and FlashInfer caches (compiled kernels and CUDA-graph artifacts).
CACHE_SIZE_GIB = 20
#: Deployment progress deadline beyond the startup window: GPU node provisioning (the first clock of
#: "Autoscaling Has Two Clocks") plus pulling a multi-GB image. A rollout that has not progressed within
#: startup window + this is reported failed instead of hanging.
PROGRESS_SLACK_SECONDS = 900
#: Old ReplicaSets kept for ``kubectl rollout undo`` to a previous release.
REVISION_HISTORY_LIMIT = 5

GCSFUSE_DRIVER = "gcsfuse.csi.storage.gke.io"

#: Google's load-balancer health-check source ranges: the gateway's HealthCheckPolicy probes /health on
#: the vLLM port from here, and a pod unreachable from them is marked unhealthy by the load balancer.
GOOGLE_HEALTH_CHECK_RANGES = ("35.191.0.0/16", "130.211.0.0/22")
#: Managed Prometheus collectors: ``gke-gmp-system`` on GKE managed collection, ``gmp-system`` for the
#: self-deployed operator; both label the collector DaemonSet pods ``app.kubernetes.io/name: collector``.
GMP_NAMESPACES = ("gke-gmp-system", "gmp-system")
GMP_COLLECTOR_LABELS = {"app.kubernetes.io/name": "collector"}
#: The GKE metadata server (Workload Identity tokens): 169.254.169.254:80 on Dataplane V2, and the
#: gke-metadata-server's 169.254.169.252:988 on legacy dataplane clusters; 988 also on .254 for both.
METADATA_ENDPOINTS = (("169.254.169.254/32", (80, 988)), ("169.254.169.252/32", (988,)))
#: Google API VIPs: private.googleapis.com, which the platform's private googleapis.com DNS zone resolves
#: every *.googleapis.com name to (components/network.py). NetworkPolicy cannot name hosts, so the VIP range
#: is what storage.googleapis.com (gs:// streaming) and the metadata-issued tokens are used against.
GOOGLE_API_RANGES = (PRIVATE_GOOGLE_APIS_CIDR,)
DNS_PODS = ("kube-dns", "node-local-dns")


# ---- identity ------------------------------------------------------------------------------------------


def selector_labels(role: str) -> dict[str, str]:
    """The Deployment's selector, and also what the pool's InferencePool, picker, PDB and NetworkPolicy select.

    Immutable on a Deployment and identical for every release of the pool, so a release change is a rolling
    update whose new pods the pool selects from their first Ready moment while the old ones drain: the pool's
    Ready endpoints never drop below the warm minimum (tests/test_rollout.py steps through it). A release
    label in this selector would empty the pool during every release change: the new pods would not match
    it, and the old ones leave one by one (policy ``pool-selector-survives-release-change``)."""
    return {naming.NAME_LABEL: naming.VLLM_APP, naming.INSTANCE_LABEL: naming.deployment_name(role)}


def pod_labels(role: str, release: ReleaseInfo) -> dict[str, str]:
    """Naming-contract labels. Release and version label the pods for dashboards and queries only; nothing
    selects on them."""
    return {
        **selector_labels(role),
        naming.COMPONENT_LABEL: naming.MODEL_SERVER_COMPONENT,
        naming.PART_OF_LABEL: naming.PART_OF,
        naming.VERSION_LABEL: release.vllm_version,
        naming.POOL_LABEL: role,
        naming.RELEASE_LABEL: release.release,
        naming.ENGINE_TYPE_LABEL: "vllm",
    }


def scripts() -> dict[str, str]:
    """The ConfigMap's data: file name -> text."""
    return {
        PROBE_SCRIPT_NAME: PROBE_SCRIPT.read_text(encoding="utf-8"),
        VERIFY_SCRIPT_NAME: VERIFY_SCRIPT.read_text(encoding="utf-8"),
    }


def scripts_digest(files: dict[str, str]) -> str:
    """One SHA-256 over the scripts (name and text, in name order): a changed script rolls the pods."""
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode("utf-8") + b"\0" + files[name].encode("utf-8") + b"\0")
    return h.hexdigest()


# ---- arguments -----------------------------------------------------------------------------------------

LoadingPath = Literal["gcs_streaming", "hyperdisk_ml", "gcs_fuse"]


@dataclass(frozen=True)
class PodResources:
    """Per-replica requests: CPU (no limit), memory (request = limit), /dev/shm inside it, GPUs."""

    cpu: float
    memory_gib: int
    shm_gib: int
    gpus: int

    def __post_init__(self) -> None:
        if self.shm_gib * 2 > self.memory_gib:
            raise ValueError(
                f"PodResources.shm_gib: {self.shm_gib} GiB may use at most half of memory_gib ({self.memory_gib} GiB)"
            )


@dataclass(frozen=True)
class PodPeer:
    """Pods of another namespace admitted to the vLLM port (the in-cluster benchmark Job, components/bench_job.py)."""

    namespace: str
    labels: dict[str, str]


@dataclass(frozen=True)
class ModelServerArgs:
    role: str
    release: ReleaseInfo
    #: The planner's ``vllm serve`` arguments (``infra/planning/vllm_args.py``).
    vllm_args: tuple[str, ...]
    #: What clients send as ``model``; vLLM serves it beside the release id.
    public_model_name: str
    #: The ``--model`` the server loads: ``/v1/models`` must report it as every served name's root.
    model_root: str
    #: Hashing threads of the release verification of a mounted copy (the planner counts their time).
    verify_workers: int
    probes: ProbeTimings
    resources: PodResources
    #: Accelerator topology key: the pods select that GPU node pool by its node label.
    accelerator: str
    loading_path: LoadingPath
    #: Starting replica count (the HPA owns it afterwards) and the rollout surge the reservation holds.
    min_replicas: int
    max_surge: int
    #: The most replicas one rollout may have to replace: the HPA's maxReplicas.
    rollout_replicas: int
    #: Voluntary disruptions allowed at once: the replica failures the N+1 headroom absorbs.
    max_unavailable_disruptions: int
    namespace: pulumi.Input[str]
    service_account: pulumi.Input[str]
    #: The gateway's proxy-only subnet (REGIONAL_MANAGED_PROXY): where load-balanced requests come from.
    proxy_only_cidr: str
    #: Planner facts policies check the rendered spec against.
    stream_bound_seconds: float
    contract_max_model_len: int
    contract_max_input_tokens: int
    contract_max_output_tokens: int
    #: PVC of the release's Hyperdisk ML volume; required when the pool loads via ``hyperdisk_ml``.
    hyperdisk_claim: str | None = None
    #: Pods outside the gateway path admitted to the vLLM port (none by default).
    clients: tuple[PodPeer, ...] = ()
    #: A fleet's other regions' proxy-only ranges (``network_policy_spec``); none in a single-region stack.
    fleet_proxy_cidrs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.loading_path == "hyperdisk_ml" and not self.hyperdisk_claim:
            raise ValueError(
                f"ModelServerArgs.hyperdisk_claim: pool {self.role!r} loads via hyperdisk_ml but no "
                "Hyperdisk ML claim was given"
            )
        if self.resources.gpus != self.release.tensor_parallel_size:
            raise ValueError(
                f"ModelServerArgs.resources.gpus: {self.resources.gpus} GPU(s) for tensor_parallel_size "
                f"{self.release.tensor_parallel_size} (one GPU per rank)"
            )


def plan_annotations(args: ModelServerArgs) -> dict[str, str]:
    """Facts the program derived that policies check the rendered spec against (startup window vs cold load,
    grace period vs stream bound, --max-model-len and the output cap vs contract). On the Deployment's own metadata, not the pod
    template: a re-estimate must not roll the pods."""
    return {
        naming.COLD_LOAD_ANNOTATION: f"{round(args.probes.cold_load_seconds, 3):g}",
        naming.STREAM_BOUND_ANNOTATION: f"{round(args.stream_bound_seconds, 3):g}",
        naming.CONTRACT_MAX_MODEL_LEN_ANNOTATION: str(args.contract_max_model_len),
        naming.CONTRACT_MAX_INPUT_TOKENS_ANNOTATION: str(args.contract_max_input_tokens),
        naming.CONTRACT_MAX_OUTPUT_TOKENS_ANNOTATION: str(args.contract_max_output_tokens),
    }


# ---- pod -----------------------------------------------------------------------------------------------


def verify_command(args: ModelServerArgs) -> list[str]:
    """The release check the init container runs before vLLM may start: object metadata against the manifest for a
    gs:// stream (no second download), every mounted byte hashed against it otherwise; both require the manifest's
    revision to be the release's."""
    rel = args.release
    script = ["python3", f"{SCRIPTS_MOUNT_PATH}/{VERIFY_SCRIPT_NAME}"]
    if args.loading_path == "gcs_streaming":
        return list(verify_gcs_command(tuple(script), rel.weights_bucket, rel.weights_prefix, rel.model_revision))
    return [
        *script,
        "dir",
        "--path",
        args.model_root,
        "--workers",
        str(args.verify_workers),
        "--expect-revision",
        rel.model_revision,
    ]


def verify_container(args: ModelServerArgs) -> core.ContainerArgs:
    """Same image (pinned by digest) and identity as the server: its ``python3`` runs the stdlib verifier, and its
    Workload Identity token reads the object metadata. Fails the pod, with one log line per mismatch, on a missing,
    extra or different file or another release's manifest; the server container never starts until it passes."""
    mounts = [core.VolumeMountArgs(name="scripts", mount_path=SCRIPTS_MOUNT_PATH, read_only=True)]
    if args.loading_path in ("hyperdisk_ml", "gcs_fuse"):
        mounts.append(core.VolumeMountArgs(name="weights", mount_path=args.model_root, read_only=True))
    cpu = f"{args.resources.cpu:g}"
    return core.ContainerArgs(
        name=naming.VERIFY_CONTAINER,
        image=args.release.image,
        image_pull_policy="IfNotPresent",
        command=verify_command(args),
        # Requests no more than the server does, so the pod's effective request is unchanged (init containers run
        # one at a time, before the server).
        resources=core.ResourceRequirementsArgs(
            requests={"cpu": cpu, "memory": VERIFY_MEMORY}, limits={"memory": VERIFY_MEMORY}
        ),
        volume_mounts=mounts,
        security_context=container_security_context(),
        termination_message_policy="FallbackToLogsOnError",
    )


def _probe(mode: str, deadline: int) -> list[str]:
    return [
        "python3",
        f"{SCRIPTS_MOUNT_PATH}/{PROBE_SCRIPT_NAME}",
        mode,
        "--port",
        str(naming.VLLM_PORT),
        "--deadline-seconds",
        str(deadline),
    ]


def _identity(args: ModelServerArgs) -> list[str]:
    return [
        "--release-id",
        args.release.release,
        "--public-name",
        args.public_model_name,
        "--model-root",
        args.model_root,
        "--max-model-len",
        str(args.release.max_model_len),
    ]


def startup_command(args: ModelServerArgs) -> list[str]:
    """Health, identity (release id + public name, model root, context), the manifest on mounted weights, /load,
    one generated token under the public name."""
    cmd = _probe("startup", args.probes.startup_deadline_seconds) + _identity(args)
    if args.loading_path in ("hyperdisk_ml", "gcs_fuse"):
        cmd += ["--manifest", f"{args.model_root}/{MANIFEST_NAME}", "--expect-revision", args.release.model_revision]
    return cmd


def readiness_command(args: ModelServerArgs) -> list[str]:
    """Health and identity only: nothing that queues behind the engine's traffic."""
    return _probe("readiness", args.probes.readiness_deadline_seconds) + _identity(args)


def liveness_command(args: ModelServerArgs) -> list[str]:
    """A dead engine, or requests in flight without token progress for the stall window."""
    return [
        *_probe("liveness", args.probes.liveness_deadline_seconds),
        "--stall-seconds",
        str(args.probes.liveness_stall_seconds),
        "--state-file",
        LIVENESS_STATE_FILE,
    ]


def env(args: ModelServerArgs) -> list[core.EnvVarArgs]:
    return serving_env()


def serving_env(extra: dict[str, str] | None = None) -> list[core.EnvVarArgs]:
    """The environment of every vLLM container (a pool's, a co-host server's), plus ``extra``."""
    values = {
        # Weights are staged (GCS, Hyperdisk ML, GCS FUSE) on every loading path: never reach a model hub.
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "HOME": HOME,
        "USER": "vllm",
        "XDG_CACHE_HOME": f"{HOME}/.cache",
        "HF_HOME": f"{HOME}/.cache/huggingface",
        "VLLM_CACHE_ROOT": f"{HOME}/.cache/vllm",
        "TRITON_CACHE_DIR": f"{HOME}/.cache/triton",
        **(extra or {}),
    }
    return [core.EnvVarArgs(name=k, value=v) for k, v in sorted(values.items())]


def volumes(args: ModelServerArgs) -> list[core.VolumeArgs]:
    vols = [
        core.VolumeArgs(
            name="dshm",
            empty_dir=core.EmptyDirVolumeSourceArgs(medium="Memory", size_limit=f"{args.resources.shm_gib}Gi"),
        ),
        core.VolumeArgs(name="tmp", empty_dir=core.EmptyDirVolumeSourceArgs(size_limit=f"{TMP_SIZE_GIB}Gi")),
        core.VolumeArgs(name="home", empty_dir=core.EmptyDirVolumeSourceArgs(size_limit=f"{CACHE_SIZE_GIB}Gi")),
        core.VolumeArgs(
            name="scripts",
            config_map=core.ConfigMapVolumeSourceArgs(
                name=naming.scripts_config_map_name(args.role), default_mode=0o444
            ),
        ),
    ]
    path = args.loading_path
    if path == "hyperdisk_ml":
        assert args.hyperdisk_claim is not None  # ModelServerArgs refuses hyperdisk_ml without a claim
        vols.append(
            core.VolumeArgs(
                name="weights",
                persistent_volume_claim=core.PersistentVolumeClaimVolumeSourceArgs(
                    claim_name=args.hyperdisk_claim, read_only=True
                ),
            )
        )
    elif path == "gcs_fuse":
        vols.append(
            core.VolumeArgs(
                name="weights",
                csi=core.CSIVolumeSourceArgs(
                    driver=GCSFUSE_DRIVER,
                    read_only=True,
                    volume_attributes={
                        "bucketName": args.release.weights_bucket,
                        # only-dir: the mount root is the release's immutable folder, nothing else of the bucket.
                        "mountOptions": f"implicit-dirs,only-dir={args.release.weights_prefix}",
                    },
                ),
            )
        )
    return vols


def volume_mounts(args: ModelServerArgs) -> list[core.VolumeMountArgs]:
    mounts = [
        core.VolumeMountArgs(name="dshm", mount_path="/dev/shm"),
        core.VolumeMountArgs(name="tmp", mount_path="/tmp"),
        core.VolumeMountArgs(name="home", mount_path=HOME),
        core.VolumeMountArgs(name="scripts", mount_path=SCRIPTS_MOUNT_PATH, read_only=True),
    ]
    if args.loading_path in ("hyperdisk_ml", "gcs_fuse"):
        mounts.append(
            core.VolumeMountArgs(
                name="weights", mount_path=naming.weights_mount_path(args.release.weights_prefix), read_only=True
            )
        )
    return mounts


def resources(args: ModelServerArgs) -> core.ResourceRequirementsArgs:
    r = args.resources
    gpus = str(r.gpus)  # one GPU per tensor-parallel rank
    ephemeral = f"{TMP_SIZE_GIB + CACHE_SIZE_GIB}Gi"
    memory = f"{r.memory_gib}Gi"
    return core.ResourceRequirementsArgs(
        requests={"cpu": f"{r.cpu:g}", "memory": memory, naming.GPU_RESOURCE: gpus, "ephemeral-storage": ephemeral},
        limits={"memory": memory, naming.GPU_RESOURCE: gpus, "ephemeral-storage": ephemeral},
    )


def container_security_context() -> core.SecurityContextArgs:
    return core.SecurityContextArgs(
        run_as_non_root=True,
        run_as_user=RUN_AS_UID,
        run_as_group=RUN_AS_UID,
        privileged=False,
        allow_privilege_escalation=False,
        read_only_root_filesystem=True,
        capabilities=core.CapabilitiesArgs(drop=["ALL"]),
        seccomp_profile=core.SeccompProfileArgs(type="RuntimeDefault"),
    )


def container(args: ModelServerArgs) -> core.ContainerArgs:
    probes = args.probes
    return core.ContainerArgs(
        name="vllm",
        image=args.release.image,  # by digest only (validated in infra/config/release.py)
        image_pull_policy="IfNotPresent",
        command=list(VLLM_COMMAND),
        args=list(args.vllm_args),
        ports=[core.ContainerPortArgs(name="http", container_port=naming.VLLM_PORT, protocol="TCP")],
        env=env(args),
        resources=resources(args),
        volume_mounts=volume_mounts(args),
        security_context=container_security_context(),
        startup_probe=core.ProbeArgs(
            exec_=core.ExecActionArgs(command=startup_command(args)),
            period_seconds=probes.startup_period_seconds,
            failure_threshold=probes.startup_failure_threshold,
            timeout_seconds=probes.startup_timeout_seconds,
        ),
        readiness_probe=core.ProbeArgs(
            exec_=core.ExecActionArgs(command=readiness_command(args)),
            period_seconds=probes.readiness_period_seconds,
            timeout_seconds=probes.readiness_timeout_seconds,
            failure_threshold=probes.readiness_failure_threshold,
            success_threshold=1,
        ),
        liveness_probe=core.ProbeArgs(
            exec_=core.ExecActionArgs(command=liveness_command(args)),
            period_seconds=probes.liveness_period_seconds,
            timeout_seconds=probes.liveness_timeout_seconds,
            failure_threshold=probes.liveness_failure_threshold,
        ),
        lifecycle=core.LifecycleArgs(
            pre_stop=core.LifecycleHandlerArgs(sleep=core.SleepActionArgs(seconds=probes.pre_stop_seconds))
        ),
        termination_message_policy="FallbackToLogsOnError",
    )


def pod_annotations(args: ModelServerArgs, script_sha: str) -> dict[str, str]:
    ann = {**args.release.annotations(), naming.SCRIPTS_SHA_ANNOTATION: script_sha}
    if args.loading_path == "gcs_fuse":
        ann["gke-gcsfuse/volumes"] = "true"  # asks GKE to inject the GCS FUSE sidecar
    return ann


def pod_spec(args: ModelServerArgs) -> core.PodSpecArgs:
    probes = args.probes
    return core.PodSpecArgs(
        service_account_name=args.service_account,
        # vLLM never calls the Kubernetes API; Workload Identity and the GCS FUSE driver do not need the token.
        automount_service_account_token=False,
        # A Service named "vllm" would inject VLLM_PORT=tcp://..., which vLLM reads as its own port setting.
        enable_service_links=False,
        termination_grace_period_seconds=probes.termination_grace_seconds,
        node_selector={naming.ACCELERATOR_LABEL: args.accelerator},
        tolerations=[
            core.TolerationArgs(
                key=naming.GPU_TAINT_KEY, operator="Equal", value=naming.GPU_TAINT_VALUE, effect=naming.GPU_TAINT_EFFECT
            )
        ],
        topology_spread_constraints=[
            core.TopologySpreadConstraintArgs(
                # One replica per node where possible: a node loss then costs one replica, which the N+1
                # headroom absorbs. Tainted / non-matching nodes are not counted as empty domains.
                max_skew=1,
                topology_key="kubernetes.io/hostname",
                when_unsatisfiable="DoNotSchedule",
                label_selector=meta.LabelSelectorArgs(match_labels=selector_labels(args.role)),
                node_affinity_policy="Honor",
                node_taints_policy="Honor",
            )
        ],
        security_context=core.PodSecurityContextArgs(
            run_as_non_root=True,
            run_as_user=RUN_AS_UID,
            run_as_group=RUN_AS_UID,
            seccomp_profile=core.SeccompProfileArgs(type="RuntimeDefault"),
        ),
        init_containers=[verify_container(args)],
        containers=[container(args)],
        volumes=volumes(args),
    )


def progress_deadline_seconds(probes: ProbeTimings) -> int:
    """How long one replica may take to progress: its startup window plus node provisioning and image pull."""
    return probes.startup_window_seconds + PROGRESS_SLACK_SECONDS


def rollout_timeout(args: ModelServerArgs) -> pulumi.CustomTimeouts:
    """pulumi-kubernetes waits for a Deployment to become ready, 10 minutes by default. A rollout replaces at
    most ``rollout_replicas`` pods ``max_surge`` at a time, each allowed the progress deadline, so the wait must
    cover deadline x ceil(replicas / surge); a shorter timeout fails ``pulumi up`` and skips every resource that
    depends on the Deployment while the rollout is still healthy."""
    steps = -(-args.rollout_replicas // max(1, args.max_surge))
    seconds = progress_deadline_seconds(args.probes) * steps
    return pulumi.CustomTimeouts(create=f"{seconds}s", update=f"{seconds}s")


def deployment_spec(args: ModelServerArgs, script_sha: str) -> k8s.apps.v1.DeploymentSpecArgs:
    probes = args.probes
    return k8s.apps.v1.DeploymentSpecArgs(
        replicas=args.min_replicas,
        selector=meta.LabelSelectorArgs(match_labels=selector_labels(args.role)),
        strategy=k8s.apps.v1.DeploymentStrategyArgs(
            type="RollingUpdate",
            rolling_update=k8s.apps.v1.RollingUpdateDeploymentArgs(max_surge=args.max_surge, max_unavailable=0),
        ),
        progress_deadline_seconds=progress_deadline_seconds(probes),
        revision_history_limit=REVISION_HISTORY_LIMIT,
        template=core.PodTemplateSpecArgs(
            metadata=meta.ObjectMetaArgs(
                labels=pod_labels(args.role, args.release), annotations=pod_annotations(args, script_sha)
            ),
            spec=pod_spec(args),
        ),
    )


# ---- disruption budget and network policy --------------------------------------------------------------


def pdb_spec(role: str, max_unavailable: int) -> k8s.policy.v1.PodDisruptionBudgetSpecArgs:
    """A voluntary disruption (node upgrade, drain) may take down as many replicas as the N+1 headroom
    absorbs; pods that are not ready may always be evicted, so a crash-looping pod never blocks a drain."""
    return k8s.policy.v1.PodDisruptionBudgetSpecArgs(
        max_unavailable=max_unavailable,
        selector=meta.LabelSelectorArgs(match_labels=selector_labels(role)),
        unhealthy_pod_eviction_policy="AlwaysAllow",
    )


def _tcp(*ports: int) -> list[k8s.networking.v1.NetworkPolicyPortArgs]:
    return [k8s.networking.v1.NetworkPolicyPortArgs(protocol="TCP", port=p) for p in ports]


def network_policy_spec(
    role: str, proxy_only_cidr: str, clients: tuple[PodPeer, ...] = (), fleet_proxy_cidrs: tuple[str, ...] = ()
) -> k8s.networking.v1.NetworkPolicySpecArgs:
    """``fleet_proxy_cidrs``: the other fleet regions' proxy-only ranges. A cross-regional internal load balancer's
    proxies in any region send to backends in every region (the multi-cluster Gateway's class), so a fleet pool
    admits them all; a single-region pool has none."""
    net = k8s.networking.v1

    def ns_in(names: Sequence[str]) -> meta.LabelSelectorArgs:
        return meta.LabelSelectorArgs(
            match_expressions=[
                meta.LabelSelectorRequirementArgs(key="kubernetes.io/metadata.name", operator="In", values=list(names))
            ]
        )

    ingress = [
        net.NetworkPolicyIngressRuleArgs(
            ports=_tcp(naming.VLLM_PORT),
            from_=[
                # Requests: the regional gateway's Envoy proxies live in the proxy-only subnet.
                net.NetworkPolicyPeerArgs(ip_block=net.IPBlockArgs(cidr=proxy_only_cidr)),
                *[net.NetworkPolicyPeerArgs(ip_block=net.IPBlockArgs(cidr=c)) for c in fleet_proxy_cidrs],
                # Load-balancer health checks of the InferencePool backends.
                *[net.NetworkPolicyPeerArgs(ip_block=net.IPBlockArgs(cidr=c)) for c in GOOGLE_HEALTH_CHECK_RANGES],
                # This pool's endpoint picker scrapes /metrics to score endpoints (the chart's selector label), and
                # so does the picker an earlier version ran, until the move deletes it (naming.previous_epp_pod_selectors).
                *[
                    net.NetworkPolicyPeerArgs(pod_selector=meta.LabelSelectorArgs(match_labels=selector))
                    for selector in (
                        {naming.EPP_POD_LABEL: naming.epp_name(role)},
                        *naming.previous_epp_pod_selectors(role),
                    )
                ],
                # Managed Prometheus collectors scrape /metrics.
                net.NetworkPolicyPeerArgs(
                    namespace_selector=ns_in(GMP_NAMESPACES),
                    pod_selector=meta.LabelSelectorArgs(match_labels=GMP_COLLECTOR_LABELS),
                ),
                # Named clients in their own namespace (the benchmark Job while it measures this pool).
                *[
                    net.NetworkPolicyPeerArgs(
                        namespace_selector=ns_in([c.namespace]),
                        pod_selector=meta.LabelSelectorArgs(match_labels=dict(c.labels)),
                    )
                    for c in clients
                ],
            ],
        ),
    ]
    egress = [
        net.NetworkPolicyEgressRuleArgs(
            to=[
                net.NetworkPolicyPeerArgs(
                    namespace_selector=ns_in(["kube-system"]),
                    pod_selector=meta.LabelSelectorArgs(
                        match_expressions=[
                            meta.LabelSelectorRequirementArgs(key="k8s-app", operator="In", values=list(DNS_PODS))
                        ]
                    ),
                )
            ],
            ports=[
                net.NetworkPolicyPortArgs(protocol="UDP", port=53),
                net.NetworkPolicyPortArgs(protocol="TCP", port=53),
            ],
        ),
        *[
            net.NetworkPolicyEgressRuleArgs(
                to=[net.NetworkPolicyPeerArgs(ip_block=net.IPBlockArgs(cidr=cidr))], ports=_tcp(*ports)
            )
            for cidr, ports in METADATA_ENDPOINTS
        ],
        net.NetworkPolicyEgressRuleArgs(
            to=[net.NetworkPolicyPeerArgs(ip_block=net.IPBlockArgs(cidr=c)) for c in GOOGLE_API_RANGES], ports=_tcp(443)
        ),
    ]
    return net.NetworkPolicySpecArgs(
        pod_selector=meta.LabelSelectorArgs(match_labels=selector_labels(role)),
        policy_types=["Ingress", "Egress"],
        ingress=ingress,
        egress=egress,
    )


# ---- the component ------------------------------------------------------------------------------------


class ModelServer(Component):
    """One pool's vLLM Deployment and its companions. Pass the Kubernetes provider and what the objects must
    wait for (namespace, GPU node pool, weight volume) in ``opts``."""

    TYPE = "llm-serving:serving:ModelServer"

    def __init__(self, name: str, args: ModelServerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, args, opts)
        files = scripts()
        sha = scripts_digest(files)
        child = self.child_opts()
        common_labels = pod_labels(args.role, args.release)

        def meta_of(n: str, ann: dict[str, str] | None = None) -> meta.ObjectMetaArgs:
            return meta.ObjectMetaArgs(name=n, namespace=args.namespace, labels=common_labels, annotations=ann)

        deployment = naming.deployment_name(args.role)

        self.config_map = core.ConfigMap(
            f"{name}-scripts", metadata=meta_of(naming.scripts_config_map_name(args.role)), data=files, opts=child
        )
        self.deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata=meta_of(deployment, {**args.release.annotations(), **plan_annotations(args)}),
            spec=deployment_spec(args, sha),
            opts=self.child_opts(
                depends_on=[self.config_map], ignore_changes=["spec.replicas"], custom_timeouts=rollout_timeout(args)
            ),
        )
        self.pdb = k8s.policy.v1.PodDisruptionBudget(
            f"{name}-pdb",
            metadata=meta_of(deployment),
            spec=pdb_spec(args.role, args.max_unavailable_disruptions),
            opts=child,
        )
        self.network_policy = k8s.networking.v1.NetworkPolicy(
            f"{name}-netpol",
            metadata=meta_of(deployment),
            spec=network_policy_spec(args.role, args.proxy_only_cidr, args.clients, args.fleet_proxy_cidrs),
            opts=child,
        )

        self.role = args.role
        self.release_id = args.release.release
        #: The Deployment's name as an Output: the HPA scales exactly this object.
        self.deployment_name: pulumi.Output[str] = self.deployment.metadata.name
        #: What the pool's InferencePool and picker select: the Deployment's own (release-independent) selector.
        #: A plain value on purpose: taking it from the Deployment's outputs would make the gateway objects wait
        #: for the Deployment's rollout.
        self.pool_selector: dict[str, str] = selector_labels(args.role)
        self.port = naming.VLLM_PORT
        self.probes = args.probes
        self.vllm_args = list(args.vllm_args)
        self.termination_grace_seconds = args.probes.termination_grace_seconds
        self.register_outputs(
            {
                "deployment_name": self.deployment_name,
                "release_id": self.release_id,
                "selector": self.pool_selector,
                "port": self.port,
                "vllm_args": self.vllm_args,
                "probes": args.probes.to_dict(),
                "termination_grace_seconds": self.termination_grace_seconds,
            }
        )
