"""Pure builders of the Cloud Run service: the typed ``gcp.cloudrunv2`` arguments of a pool's revision, its
deterministic name, the traffic split and the IAM members. :class:`~components.cloud_run.component.CloudRunServing`
only registers what these return; the tests call them directly.

Decisions stated here once:

* **Revisions.** Each pool is one revision; the service's ``template`` is the newest pool's (the canary when there
  is one, else stable), and traffic names revisions explicitly: ``TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION`` with the
  pool's weight and the pool's role as tag (``https://<role>---<service>-...run.app`` reaches a 0 % canary). A
  revision's name is ``<service>-<release>-<8 hex>``, the hex being the SHA-256 of everything its template renders
  (the revision field itself excluded): the same config always names the same revision, a changed one a new
  revision, and the plan shows both. Cloud Run creates a revision only from a template, so the stable revision a
  canary's traffic entry names must already exist: it is the revision stable's template created when it was the
  template (docs/cloud-run.md, "Rollout on Cloud Run"). The role is not in the template, so a canary promoted to stable keeps
  its revision.
* **Verification before start.** Cloud Run has no init containers: the container's command is the release verifier
  itself (``components/serving/verify_release.py``, its source passed inline with ``python3 -c``), which hashes the
  mounted release against its manifest and then ``exec``\\ s ``vllm serve`` with the planner's arguments, so vLLM is
  the process Cloud Run signals. With in-memory staging the stager (``stage_weights.py``) runs first, copies the
  mount and execs the verifier on the copy.
* **Probes.** HTTP only on Cloud Run: startup ``/health`` every 5 s after 10 s, for as many failures as the cold-load
  estimate needs; liveness ``/health``.
* **Identity.** The revision runs as a dedicated service account; the weights bucket, the hub-token secret and the
  project's metric writes (the collector) are its only grants.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_gcp as gcp
from pulumi import _types  # the SDK's input-type helpers (pinned pulumi==3.272.0)

from .. import naming
from ..serving.spec import VLLM_COMMAND
from .spec import (
    COLLECTOR_CPU,
    COLLECTOR_HEALTH_PATH,
    COLLECTOR_HEALTH_PORT,
    COLLECTOR_MEMORY_MIB,
    COLLECTOR_PROBE_SECONDS,
    HubToken,
    RevisionSpec,
)

run = gcp.cloudrunv2

VERIFY_SCRIPT = Path(__file__).resolve().parents[1] / "serving" / "verify_release.py"
STAGE_SCRIPT = Path(__file__).resolve().parent / "stage_weights.py"
#: Linux's limit for one argument (MAX_ARG_STRLEN = 32 pages, execve(2)): each inline script must stay below it.
MAX_ARG_BYTES = 128 * 1024
#: Roles of the serving identity, each on one resource.
WEIGHTS_READER_ROLE = "roles/storage.objectViewer"
SECRET_ACCESSOR_ROLE = "roles/secretmanager.secretAccessor"
#: The collector writes the scraped series to Managed Service for Prometheus (Cloud Monitoring) as the revision's
#: service account; metric writes have no narrower scope than the project (run-gmp-sidecar README: the service
#: account needs roles/monitoring.metricWriter). Container logs reach Cloud Logging through Cloud Run itself.
METRIC_WRITER_ROLE = "roles/monitoring.metricWriter"
INVOKER_ROLE = "roles/run.invoker"
PUBLIC_MEMBERS = ("allUsers", "allAuthenticatedUsers")
_MEMBER_RE = re.compile(r"^(user|group|serviceAccount|domain|principal|principalSet):[!-~]+\Z")
#: Revision names are DNS labels (at most 63 characters).
MAX_REVISION_NAME = 63
#: Hex digits of the content hash in a revision name: 8 (32 bits) make an accidental clash between two configs of
#: one service and release vanishingly unlikely while leaving room for the release id.
REVISION_HASH_CHARS = 8
#: Cloud Storage volume mounts and GPUs run on the second-generation execution environment.
EXECUTION_ENVIRONMENT = "EXECUTION_ENVIRONMENT_GEN2"
TRAFFIC_BY_REVISION = "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION"


def inline_source(path: Path) -> str:
    """A script's text for ``python3 -c``; refused when it would not fit one argument."""
    text = path.read_text(encoding="utf-8")
    if len(text.encode("utf-8")) >= MAX_ARG_BYTES:
        raise ValueError(
            f"{path.name} is {len(text.encode('utf-8'))} bytes: it cannot be passed as one argument "
            f"(MAX_ARG_STRLEN {MAX_ARG_BYTES})"
        )
    return text


def server_command(spec: RevisionSpec) -> list[str]:
    """The vLLM container's full command line: [stager ->] verifier -> ``vllm serve <planner args>``.

    The verifier checks the folder vLLM loads (the staged copy when staging, else the mount), requiring the
    manifest's revision to be the release's, on one hashing thread per vCPU."""
    serve = [*VLLM_COMMAND, *spec.vllm_args]
    checked = spec.staged_path or spec.mount_path
    verify = [
        "python3",
        "-c",
        inline_source(VERIFY_SCRIPT),
        "dir",
        "--path",
        checked,
        "--workers",
        str(spec.verify_workers),
        "--expect-revision",
        spec.release.model_revision,
        "--exec",
        "--",
        *serve,
    ]
    if spec.staged_path is None:
        return verify
    return ["python3", "-c", inline_source(STAGE_SCRIPT), spec.mount_path, spec.staged_path, *verify]


def server_env(hub_token: HubToken | None) -> list[run.ServiceTemplateContainerEnvArgs]:
    values = {
        # The weights come from the mounted release, never from a model hub (the issue: hub downloads at boot
        # hit HTTP 429 on shared egress and take minutes).
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
    }
    env = [run.ServiceTemplateContainerEnvArgs(name=k, value=v) for k, v in sorted(values.items())]
    if hub_token is not None:
        env.append(
            run.ServiceTemplateContainerEnvArgs(
                name="HF_TOKEN",
                value_source=run.ServiceTemplateContainerEnvValueSourceArgs(
                    secret_key_ref=run.ServiceTemplateContainerEnvValueSourceSecretKeyRefArgs(
                        secret=hub_token.secret_id, version=hub_token.version
                    )
                ),
            )
        )
    return env


def server_container(spec: RevisionSpec, hub_token: HubToken | None) -> run.ServiceTemplateContainerArgs:
    p = spec.probes
    command = server_command(spec)
    mounts = [
        run.ServiceTemplateContainerVolumeMountArgs(name=naming.CLOUD_RUN_WEIGHTS_VOLUME, mount_path=spec.mount_path)
    ]
    if spec.staged_path is not None:
        mounts.append(
            run.ServiceTemplateContainerVolumeMountArgs(
                name=naming.CLOUD_RUN_STAGED_VOLUME, mount_path=naming.STAGED_WEIGHTS_ROOT
            )
        )
    return run.ServiceTemplateContainerArgs(
        name=naming.CLOUD_RUN_SERVING_CONTAINER,
        image=spec.release.image,  # by digest only (validated in infra/config/release.py)
        commands=command[:1],
        args=command[1:],
        ports=run.ServiceTemplateContainerPortsArgs(name="http1", container_port=naming.CLOUD_RUN_VLLM_PORT),
        envs=server_env(hub_token),
        resources=run.ServiceTemplateContainerResourcesArgs(
            limits={
                "cpu": str(spec.shape.cpu),
                "memory": f"{spec.shape.memory_gib}Gi",
                naming.GPU_RESOURCE: str(spec.shape.gpu_count),
            },
            # GPU services need instance-based billing: CPU stays allocated outside requests (Cloud Run GPU page).
            cpu_idle=False,
            startup_cpu_boost=False,
        ),
        volume_mounts=mounts,
        startup_probe=run.ServiceTemplateContainerStartupProbeArgs(
            http_get=run.ServiceTemplateContainerStartupProbeHttpGetArgs(
                path=naming.HEALTH_PATH, port=naming.CLOUD_RUN_VLLM_PORT
            ),
            initial_delay_seconds=p.startup_initial_delay_seconds,
            period_seconds=p.startup_period_seconds,
            timeout_seconds=p.startup_timeout_seconds,
            failure_threshold=p.startup_failure_threshold,
        ),
        liveness_probe=run.ServiceTemplateContainerLivenessProbeArgs(
            http_get=run.ServiceTemplateContainerLivenessProbeHttpGetArgs(
                path=naming.HEALTH_PATH, port=naming.CLOUD_RUN_VLLM_PORT
            ),
            period_seconds=p.liveness_period_seconds,
            timeout_seconds=p.liveness_timeout_seconds,
            failure_threshold=p.liveness_failure_threshold,
        ),
    )


def collector_container(image: str) -> run.ServiceTemplateContainerArgs:
    """The Managed Prometheus sidecar with its default config (vLLM on 8080 ``/metrics`` every 30 s); it starts
    once vLLM passed its startup probe."""
    return run.ServiceTemplateContainerArgs(
        name=naming.CLOUD_RUN_COLLECTOR_CONTAINER,
        image=image,
        depends_ons=[naming.CLOUD_RUN_SERVING_CONTAINER],
        resources=run.ServiceTemplateContainerResourcesArgs(
            limits={"cpu": str(COLLECTOR_CPU), "memory": f"{COLLECTOR_MEMORY_MIB}Mi"}, cpu_idle=False
        ),
        liveness_probe=run.ServiceTemplateContainerLivenessProbeArgs(
            http_get=run.ServiceTemplateContainerLivenessProbeHttpGetArgs(
                path=COLLECTOR_HEALTH_PATH, port=COLLECTOR_HEALTH_PORT
            ),
            period_seconds=COLLECTOR_PROBE_SECONDS,
            timeout_seconds=COLLECTOR_PROBE_SECONDS,
        ),
    )


def volumes(spec: RevisionSpec) -> list[run.ServiceTemplateVolumeArgs]:
    vols = [
        run.ServiceTemplateVolumeArgs(
            name=naming.CLOUD_RUN_WEIGHTS_VOLUME,
            gcs=run.ServiceTemplateVolumeGcsArgs(
                bucket=spec.release.weights_bucket, read_only=True, mount_options=list(spec.mount_options)
            ),
        )
    ]
    if spec.staging_size_gib is not None:
        vols.append(
            run.ServiceTemplateVolumeArgs(
                name=naming.CLOUD_RUN_STAGED_VOLUME,
                empty_dir=run.ServiceTemplateVolumeEmptyDirArgs(
                    medium="MEMORY", size_limit=f"{spec.staging_size_gib}Gi"
                ),
            )
        )
    return vols


def template_annotations(spec: RevisionSpec) -> dict[str, str]:
    """The release identity and the planner facts policies check the revision against (no role: a promoted
    canary's revision must not change)."""
    return {
        **spec.release.annotations(),
        naming.COLD_LOAD_ANNOTATION: f"{round(spec.probes.cold_load_seconds, 3):g}",
        naming.STREAM_BOUND_ANNOTATION: f"{round(spec.stream_bound_seconds, 3):g}",
        naming.CONTRACT_MAX_MODEL_LEN_ANNOTATION: str(spec.contract_max_model_len),
        naming.CONTRACT_MAX_INPUT_TOKENS_ANNOTATION: str(spec.contract_max_input_tokens),
        naming.CONTRACT_MAX_OUTPUT_TOKENS_ANNOTATION: str(spec.contract_max_output_tokens),
    }


def resource_labels(environment: str) -> dict[str, str]:
    return {
        naming.gcp_label_key(naming.PART_OF_LABEL): naming.PART_OF,
        naming.gcp_label_key(naming.COMPONENT_LABEL): naming.MODEL_SERVER_COMPONENT,
        "environment": environment,
    }


@dataclass(frozen=True)
class TemplateContext:
    """What every revision of the service shares."""

    service_account_email: str
    collector_image: str
    hub_token: HubToken | None
    environment: str


def revision_template(spec: RevisionSpec, ctx: TemplateContext, revision: str | None) -> run.ServiceTemplateArgs:
    vpc = spec.vpc_egress
    return run.ServiceTemplateArgs(
        revision=revision,
        labels=resource_labels(ctx.environment),
        annotations=template_annotations(spec),
        service_account=ctx.service_account_email,
        execution_environment=EXECUTION_ENVIRONMENT,
        containers=[server_container(spec, ctx.hub_token), collector_container(ctx.collector_image)],
        volumes=volumes(spec),
        node_selector=run.ServiceTemplateNodeSelectorArgs(accelerator=spec.shape.gpu),
        gpu_zonal_redundancy_disabled=spec.shape.zonal_redundancy_disabled,
        scaling=run.ServiceTemplateScalingArgs(
            min_instance_count=spec.min_instances, max_instance_count=spec.max_instances
        ),
        max_instance_request_concurrency=spec.concurrency,
        timeout=f"{spec.timeout_seconds}s",
        vpc_access=None
        if vpc is None
        else run.ServiceTemplateVpcAccessArgs(
            egress=vpc.egress,
            network_interfaces=[
                run.ServiceTemplateVpcAccessNetworkInterfaceArgs(
                    network=vpc.network, subnetwork=vpc.subnetwork, tags=list(vpc.tags) or None
                )
            ],
        ),
    )


def canonical(value: Any) -> Any:
    """Typed Pulumi input objects as plain, sorted JSON values (what the revision hash is taken over). Every value
    of a template is a plain value here; an Output would make the name unknowable at plan time and is refused."""
    if isinstance(value, pulumi.Output):
        raise TypeError("a revision template may hold no Output: its name is derived from its content")
    if _types.is_input_type(type(value)):
        # The SDK's own mapping of an ``@input_type`` object to its property names (not recursive: nested objects
        # are converted here).
        return canonical(_types.input_type_to_dict(value))
    if isinstance(value, Mapping):
        return {str(k): canonical(v) for k, v in sorted(value.items()) if v is not None}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    return value


def revision_slug(release_id: str, room: int) -> str:
    """The release id as a DNS-label fragment (``.`` becomes ``-``), cut to ``room`` characters."""
    slug = release_id.replace(".", "-")[: max(0, room)]
    return slug.strip("-")


def revision_name(service: str, spec: RevisionSpec, ctx: TemplateContext) -> str:
    """``<service>-<release>-<hash>``: the hash covers the whole rendered template but the revision field."""
    body = json.dumps(canonical(revision_template(spec, ctx, None)), sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(body.encode("utf-8")).hexdigest()[:REVISION_HASH_CHARS]
    slug = revision_slug(spec.release.release, MAX_REVISION_NAME - len(service) - REVISION_HASH_CHARS - 2)
    return f"{service}-{slug}-{digest}" if slug else f"{service}-{digest}"


def traffic(names: Mapping[str, str], weights: Mapping[str, int]) -> list[run.ServiceTrafficArgs]:
    """One entry per pool, stable first: its revision by name, its weight, its role as tag. A weight of 0 is sent
    explicitly so the tagged revision stays addressable."""
    order = sorted(names, key=lambda r: (r != "stable", r))
    return [
        run.ServiceTrafficArgs(
            type=TRAFFIC_BY_REVISION, revision=names[r], percent=weights[r], tag=naming.cloud_run_revision_tag(r)
        )
        for r in order
    ]


def checked_member(member: str) -> str:
    """An invoker member, refused when public or not an IAM member (config validated it; a component user may not
    have)."""
    if member in PUBLIC_MEMBERS or not _MEMBER_RE.match(member):
        raise ValueError(f"invoker member {member!r} is public or not an IAM member")
    return member
