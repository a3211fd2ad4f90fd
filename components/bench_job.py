"""The in-cluster benchmark (``gke.bench``): a Kubernetes Job that runs ``llm-serving bench`` against one pool from
inside the cluster, on the real hardware, and writes its measurement record create-only to
``gs://<weights bucket>/measurements/<stack>-<role>-<release>.json`` (``llm-serving bench fetch`` reads it back).

What it creates, all of it only for the stack that enables ``gke.bench``:

* its own namespace (``naming.BENCH_NAMESPACE``) and KSA (``naming.BENCH_KSA``) with a direct Workload Identity
  principal built from the cluster's ``workload_pool`` output (so the grants wait for the cluster), holding
  ``storage.objectViewer`` on the benchmarked release's folder only and ``storage.objectCreator`` on
  ``measurements/`` only — both as IAM conditions on the object name (list requests are matched by the
  ``storage.googleapis.com/objectListPrefix`` attribute, since their resource is the bucket), and reader on the
  stack's image repository for the system nodes' service account, which pulls the bench image;
* a ClusterIP Service in the pool's namespace selecting the pool's Deployment selector on the vLLM port: the
  bench's target. It spreads connections over every Ready pod, and θ is per replica, so **the pool must run one
  replica, with no other traffic, while the Job runs** (docs/capacity.md, "Measured capacity in the cluster");
* a NetworkPolicy for the bench pods: no ingress; egress only to the pool's pods on the vLLM port, DNS, the
  metadata server and the Google API VIPs (the model server's own constants). The pool's NetworkPolicy admits the
  bench pods (``ModelServerArgs.clients``, set by the gke target when the Job is enabled);
* the ``batch/v1`` Job: one attempt, a deadline derived from the sweep (infra/targets/gke/planning/bench.py), non-root,
  read-only root filesystem, no service-account token, the release folder mounted read-only by GCS FUSE at
  ``/tokenizer`` (guidellm sizes prompts with the release's own tokenizer).

Construction is pure functions that the tests call directly; :class:`BenchJob` only registers what they return.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from . import naming
from .base import Component
from .cluster import SYSTEM_POOL_LABEL
from .identity import WEIGHTS_READER_ROLE, namespace_labels, wi_principal
from .registry import READER_ROLE as IMAGE_READER_ROLE
from .serving.model_server import (
    DNS_PODS,
    GCSFUSE_DRIVER,
    GOOGLE_API_RANGES,
    METADATA_ENDPOINTS,
    PodPeer,
    container_security_context,
)
from .serving.spec import ReleaseInfo
from .weights import WRITER_ROLE as RECORD_CREATOR_ROLE

core = k8s.core.v1
meta = k8s.meta.v1
net = k8s.networking.v1

#: The bench image's entry point (``[project.scripts]`` of pyproject.toml, installed by scripts/bench-image).
BENCH_COMMAND = ("llm-serving",)
#: Where the release folder appears in the bench container: ``--tokenizer`` (guidellm loads the tokenizer files
#: from it; weights are never read, GCS FUSE fetches only the files opened).
TOKENIZER_MOUNT = "/tokenizer"
#: ``--out``: the bench's output directory, on the writable /tmp volume.
OUT_DIR = "/tmp/bench"
TMP_MOUNT = "/tmp"
#: Writable scratch of the read-only container (bench output, matplotlib and Hugging Face caches): guidellm's
#: reports are per-run JSON without request texts (``sample_size: 0``), megabytes for a whole sweep; 2 GiB is ample.
TMP_SIZE = "2Gi"
#: Two CPUs: each priority class of the contract is one guidellm process (one asyncio worker drives all its
#: streams, runner.py), and the shipped contracts have two classes.
CPU_REQUEST = "2"
#: Two classes x (guidellm's main + worker process) x ~0.55 GiB of imports (torch, transformers, datasets:
#: 561 MB RSS measured for the import alone) ~= 2.2 GiB, plus the bench process and request buffers: 4 GiB.
MEMORY = "4Gi"
#: /tmp plus the container's logs.
EPHEMERAL_STORAGE = "3Gi"
#: A failed benchmark is not retried: a second attempt would measure again and collide with the create-only record.
BACKOFF_LIMIT = 0
#: A finished Job (and its pod's logs) stays 7 days for ``kubectl logs`` and ``bench fetch``; then Kubernetes
#: deletes it. Turn ``gke.bench`` off once the record is fetched, or a refreshed ``pulumi up`` recreates it.
TTL_SECONDS_AFTER_FINISHED = 7 * 24 * 3600
#: Non-root identity (the bench image creates this user; see scripts/bench-image/Dockerfile).
RUN_AS_UID = 1000
#: The listing attribute Cloud Storage evaluates for ``objects.list`` (whose resource is the bucket, not an object).
LIST_PREFIX_ATTRIBUTE = "storage.googleapis.com/objectListPrefix"
#: ``pulumi up`` does not wait for the benchmark: a sweep runs for up to hours (pulumi-kubernetes would otherwise
#: await the Job's completion, 10 minutes by default). Wait with ``kubectl wait`` instead (docs/capacity.md).
SKIP_AWAIT_ANNOTATION = "pulumi.com/skipAwait"


# ---- arguments ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchJobArgs:
    #: Stack name: ``--stack`` of the bench, and part of the record's object name.
    stack: str
    #: The benchmarked pool and the release it serves (bucket, folder, id).
    role: str
    release: ReleaseInfo
    #: The bench image, ``<repository>@sha256:<64 hex>``.
    image: str
    quick: bool
    #: ``--rates`` as given in config (``auto`` or ``R1,R2,...``); None = the bench's default.
    rates: str | None
    #: ``--duration-seconds``; None = the bench's default.
    duration_seconds: float | None
    #: From the sweep (infra/targets/gke/planning/bench.py).
    active_deadline_seconds: int
    #: The pool's namespace Output (the Service waits for it) and its Deployment's selector.
    pool_namespace: pulumi.Input[str]
    pool_selector: dict[str, str]
    project: str
    region: str
    project_number: pulumi.Input[str]
    #: The cluster's Workload Identity pool output (see components/identity.py ``wi_principal``).
    workload_pool: pulumi.Input[str]
    #: The weights bucket's name Output (the grants wait for the bucket).
    weights_bucket: pulumi.Input[str]
    #: The image repository's id Output and the member of the system nodes' service account.
    image_repository: pulumi.Input[str]
    system_node_member: pulumi.Input[str]

    def __post_init__(self) -> None:
        if "@sha256:" not in self.image:
            raise ValueError(f"BenchJobArgs.image: must be pinned by digest, got {self.image!r}")
        if self.active_deadline_seconds < 1:
            raise ValueError(f"BenchJobArgs.active_deadline_seconds: must be >= 1, got {self.active_deadline_seconds}")
        if not self.pool_selector:
            raise ValueError("BenchJobArgs.pool_selector: the pool's Deployment selector is required")


# ---- names and labels -----------------------------------------------------------------------------------------


def selector_labels(role: str) -> dict[str, str]:
    """What the bench's NetworkPolicy and the pool's NetworkPolicy select the bench pods by."""
    return {naming.COMPONENT_LABEL: naming.BENCH_COMPONENT, naming.INSTANCE_LABEL: naming.bench_job_name(role)}


def labels(role: str) -> dict[str, str]:
    return {**selector_labels(role), naming.PART_OF_LABEL: naming.PART_OF}


def client_peer(role: str) -> PodPeer:
    """The bench pods as the benchmarked pool's NetworkPolicy admits them."""
    return PodPeer(namespace=naming.BENCH_NAMESPACE, labels=selector_labels(role))


def service_url(role: str) -> str:
    """``http://<service>.<pool namespace>.svc:<vLLM port>``: the bench's ``--url``."""
    return f"http://{naming.bench_service_name(role)}.{naming.pool_namespace(role)}.svc:{naming.VLLM_PORT}"


def record_uri(args: BenchJobArgs) -> str:
    return (
        f"gs://{args.release.weights_bucket}/{naming.bench_record_object(args.stack, args.role, args.release.release)}"
    )


def bench_args(args: BenchJobArgs) -> list[str]:
    """``llm-serving bench ...`` as the Job runs it."""
    out = [
        "bench",
        "--stack",
        args.stack,
        "--pool",
        args.role,
        "--url",
        service_url(args.role),
        "--tokenizer",
        TOKENIZER_MOUNT,
    ]
    if args.quick:
        out.append("--quick")
    if args.rates is not None:
        out += ["--rates", args.rates]
    if args.duration_seconds is not None:
        out += ["--duration-seconds", f"{args.duration_seconds:g}"]
    return [*out, "--out", OUT_DIR, "--record-uri", record_uri(args)]


# ---- IAM conditions -------------------------------------------------------------------------------------------


def _objects(bucket: str, prefix: str) -> str:
    return f"projects/_/buckets/{bucket}/objects/{prefix}"


def release_read_condition(args: BenchJobArgs) -> gcp.storage.BucketIAMMemberConditionArgs:
    """Objects of the benchmarked release's folder, and listings under it (GCS FUSE lists directories)."""
    rel = args.release
    folder = f"{rel.weights_prefix.strip('/')}/"
    return gcp.storage.BucketIAMMemberConditionArgs(
        title=f"bench-{args.role}-release-folder",
        description=f"Read gs://{rel.weights_bucket}/{folder} only: the tokenizer of {rel.release}",
        expression=(
            f'resource.name.startsWith("{_objects(rel.weights_bucket, folder)}") || '
            f'api.getAttribute("{LIST_PREFIX_ATTRIBUTE}", "").startsWith("{folder}")'
        ),
    )


def record_create_condition(args: BenchJobArgs) -> gcp.storage.BucketIAMMemberConditionArgs:
    """New objects under ``measurements/`` only (objectCreator cannot replace or delete one)."""
    bucket = args.release.weights_bucket
    return gcp.storage.BucketIAMMemberConditionArgs(
        title=f"bench-{args.role}-measurements",
        description=f"Create measurement records under gs://{bucket}/{naming.BENCH_RECORD_PREFIX} only",
        expression=f'resource.name.startsWith("{_objects(bucket, naming.BENCH_RECORD_PREFIX)}")',
    )


# ---- Kubernetes objects ---------------------------------------------------------------------------------------


def service_spec(args: BenchJobArgs) -> core.ServiceSpecArgs:
    return core.ServiceSpecArgs(
        type="ClusterIP",
        selector=dict(args.pool_selector),
        ports=[core.ServicePortArgs(name="http", port=naming.VLLM_PORT, target_port=naming.VLLM_PORT, protocol="TCP")],
    )


def _tcp(*ports: int) -> list[net.NetworkPolicyPortArgs]:
    return [net.NetworkPolicyPortArgs(protocol="TCP", port=p) for p in ports]


def _namespace_named(*names: str) -> meta.LabelSelectorArgs:
    return meta.LabelSelectorArgs(
        match_expressions=[
            meta.LabelSelectorRequirementArgs(key="kubernetes.io/metadata.name", operator="In", values=list(names))
        ]
    )


def network_policy_spec(args: BenchJobArgs) -> net.NetworkPolicySpecArgs:
    """No ingress; egress to the pool's pods on the vLLM port, DNS, the metadata server and the Google API VIPs."""
    egress = [
        net.NetworkPolicyEgressRuleArgs(
            to=[
                net.NetworkPolicyPeerArgs(
                    namespace_selector=_namespace_named(naming.pool_namespace(args.role)),
                    pod_selector=meta.LabelSelectorArgs(match_labels=dict(args.pool_selector)),
                )
            ],
            ports=_tcp(naming.VLLM_PORT),
        ),
        net.NetworkPolicyEgressRuleArgs(
            to=[
                net.NetworkPolicyPeerArgs(
                    namespace_selector=_namespace_named("kube-system"),
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
        pod_selector=meta.LabelSelectorArgs(match_labels=selector_labels(args.role)),
        policy_types=["Ingress", "Egress"],
        ingress=[],
        egress=egress,
    )


def env() -> list[core.EnvVarArgs]:
    values = {
        # Everything the bench and its libraries write goes to /tmp (the root filesystem is read-only).
        "HOME": f"{TMP_MOUNT}/home",
        "XDG_CACHE_HOME": f"{TMP_MOUNT}/cache",
        "MPLCONFIGDIR": f"{TMP_MOUNT}/matplotlib",
        "HF_HOME": f"{TMP_MOUNT}/huggingface",
        # The tokenizer is the mounted release folder: nothing is fetched from a model hub.
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        # getpass.getuser() (used by torch) needs a name for a UID without a passwd entry.
        "USER": "bench",
    }
    return [core.EnvVarArgs(name=k, value=v) for k, v in sorted(values.items())]


def container(args: BenchJobArgs) -> core.ContainerArgs:
    return core.ContainerArgs(
        name="bench",
        image=args.image,
        image_pull_policy="IfNotPresent",
        command=list(BENCH_COMMAND),
        args=bench_args(args),
        env=env(),
        resources=core.ResourceRequirementsArgs(
            requests={"cpu": CPU_REQUEST, "memory": MEMORY, "ephemeral-storage": EPHEMERAL_STORAGE},
            limits={"memory": MEMORY, "ephemeral-storage": EPHEMERAL_STORAGE},
        ),
        volume_mounts=[
            core.VolumeMountArgs(name="tmp", mount_path=TMP_MOUNT),
            core.VolumeMountArgs(name="tokenizer", mount_path=TOKENIZER_MOUNT, read_only=True),
        ],
        security_context=container_security_context(),
        termination_message_policy="FallbackToLogsOnError",
    )


def volumes(args: BenchJobArgs) -> list[core.VolumeArgs]:
    rel = args.release
    return [
        core.VolumeArgs(name="tmp", empty_dir=core.EmptyDirVolumeSourceArgs(size_limit=TMP_SIZE)),
        core.VolumeArgs(
            name="tokenizer",
            csi=core.CSIVolumeSourceArgs(
                driver=GCSFUSE_DRIVER,
                read_only=True,
                volume_attributes={
                    "bucketName": rel.weights_bucket,
                    # only-dir: the mount root is the release's immutable folder, the only one the KSA may read.
                    "mountOptions": f"implicit-dirs,only-dir={rel.weights_prefix.strip('/')}",
                },
            ),
        ),
    ]


def pod_annotations(args: BenchJobArgs) -> dict[str, str]:
    return {**args.release.annotations(), "gke-gcsfuse/volumes": "true"}  # asks GKE for the GCS FUSE sidecar


def pod_spec(args: BenchJobArgs, service_account: pulumi.Input[str]) -> core.PodSpecArgs:
    return core.PodSpecArgs(
        restart_policy="Never",
        service_account_name=service_account,
        # The bench never calls the Kubernetes API; Workload Identity and the GCS FUSE driver need no token.
        automount_service_account_token=False,
        enable_service_links=False,
        # CPU load generation belongs on the system nodes, never on a reserved GPU node.
        node_selector=dict(SYSTEM_POOL_LABEL),
        security_context=core.PodSecurityContextArgs(
            run_as_non_root=True,
            run_as_user=RUN_AS_UID,
            run_as_group=RUN_AS_UID,
            seccomp_profile=core.SeccompProfileArgs(type="RuntimeDefault"),
        ),
        containers=[container(args)],
        volumes=volumes(args),
    )


def job_spec(args: BenchJobArgs, service_account: pulumi.Input[str]) -> k8s.batch.v1.JobSpecArgs:
    return k8s.batch.v1.JobSpecArgs(
        backoff_limit=BACKOFF_LIMIT,
        completions=1,
        parallelism=1,
        active_deadline_seconds=args.active_deadline_seconds,
        ttl_seconds_after_finished=TTL_SECONDS_AFTER_FINISHED,
        template=core.PodTemplateSpecArgs(
            metadata=meta.ObjectMetaArgs(labels=labels(args.role), annotations=pod_annotations(args)),
            spec=pod_spec(args, service_account),
        ),
    )


# ---- the component --------------------------------------------------------------------------------------------


class BenchJob(Component):
    """The benchmark Job of one pool and everything it needs. Pass the cluster's Kubernetes provider in
    ``opts.providers`` and what the Job must wait for (the benchmarked model server, so its rollout is over before
    load starts; the project services) in ``opts.depends_on``."""

    TYPE = "llm-serving:bench:BenchJob"

    def __init__(self, name: str, args: BenchJobArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, args, opts)
        child = self.child_opts()
        role = args.role
        self.namespace = core.Namespace(
            f"{name}-ns",
            metadata=meta.ObjectMetaArgs(name=naming.BENCH_NAMESPACE, labels=namespace_labels(naming.BENCH_NAMESPACE)),
            opts=child,
        )
        ns = self.namespace.metadata.name
        self.ksa = core.ServiceAccount(
            f"{name}-ksa",
            metadata=meta.ObjectMetaArgs(name=naming.BENCH_KSA, namespace=ns, labels=labels(role)),
            automount_service_account_token=False,
            opts=child,
        )
        self.principal: pulumi.Output[str] = wi_principal(
            args.project_number, args.workload_pool, naming.BENCH_NAMESPACE, naming.BENCH_KSA
        )
        self.release_reader = gcp.storage.BucketIAMMember(
            f"{name}-release-reader",
            bucket=args.weights_bucket,
            role=WEIGHTS_READER_ROLE,
            member=self.principal,
            condition=release_read_condition(args),
            opts=child,
        )
        self.record_creator = gcp.storage.BucketIAMMember(
            f"{name}-record-creator",
            bucket=args.weights_bucket,
            role=RECORD_CREATOR_ROLE,
            member=self.principal,
            condition=record_create_condition(args),
            opts=child,
        )
        self.image_reader = gcp.artifactregistry.RepositoryIamMember(
            f"{name}-image-reader",
            project=args.project,
            location=args.region,
            repository=args.image_repository,
            role=IMAGE_READER_ROLE,
            member=args.system_node_member,
            opts=child,
        )
        self.service = core.Service(
            f"{name}-service",
            metadata=meta.ObjectMetaArgs(
                name=naming.bench_service_name(role), namespace=args.pool_namespace, labels=labels(role)
            ),
            spec=service_spec(args),
            opts=child,
        )
        self.network_policy = net.NetworkPolicy(
            f"{name}-netpol",
            metadata=meta.ObjectMetaArgs(name=naming.bench_job_name(role), namespace=ns, labels=labels(role)),
            spec=network_policy_spec(args),
            opts=child,
        )
        self.job = k8s.batch.v1.Job(
            f"{name}-job",
            metadata=meta.ObjectMetaArgs(
                name=naming.bench_job_name(role),
                namespace=ns,
                labels=labels(role),
                annotations={SKIP_AWAIT_ANNOTATION: "true"},
            ),
            spec=job_spec(args, self.ksa.metadata.name),
            # Load starts only once the pod may reach the pool, read the tokenizer and store its record.
            opts=self.child_opts(
                depends_on=[
                    self.service,
                    self.network_policy,
                    self.release_reader,
                    self.record_creator,
                    self.image_reader,
                ]
            ),
        )
        self.record_uri: str = record_uri(args)
        self.url: str = service_url(role)
        self.register_outputs(
            {
                "job": self.job.metadata.name,
                "namespace": ns,
                "record_uri": self.record_uri,
                "url": self.url,
                "active_deadline_seconds": args.active_deadline_seconds,
            }
        )
