"""Pure builders of the Cloud Run service's run.v2 REST bodies: a pool's revision template, its deterministic name,
the service-level fields, the traffic split and the IAM members. The dynamic providers (:mod:`.provider`) send
exactly these bodies; ``tests/test_cloud_run_provider.py`` validates each against the run.v2 discovery document
the providers' client is built from (``googleapiclient/discovery_cache/documents/run.v2.json``).

Decisions stated here once:

* **Revisions are named by their content.** A revision's name is ``<service>-<release>-<8 hex>``, the hex being
  the SHA-256 of everything its template renders but the name itself (``RevisionTemplate.revision``: "The unique
  name for the revision"; the full digest rides along as :data:`~components.naming.TEMPLATE_SHA_ANNOTATION`). The
  same config always names the same revision, any rendered change a new one, and the role is not in the template,
  so a promoted canary keeps its revision. Cloud Run requires a caller-chosen revision name to start with the
  service's name and a dash (the ``--revision-suffix`` convention), which this one does.
* **Traffic names revisions explicitly** (``TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION``, the pool's weight, the pool's
  role as tag: ``https://<role>---<service>-...run.app`` reaches a 0 % canary). A service whose traffic names
  revisions keeps that split for every later deployment: a revision created from a new template gets no traffic
  until the split names it (Cloud Run "Rollbacks, gradual rollouts, and traffic migration", lifecycle of traffic
  splits). The providers rely on exactly that to create a revision without moving traffic.
* **Verification before start, no program text inside the revision.** Cloud Run has no init containers: the
  container's command is the release verifier, run from the read-only programs volume (:mod:`.programs`) in
  ``gcs`` mode: it compares name, size and CRC32C of every object of ``gs://<bucket>/<model>/<revision>/`` with the
  manifest from the objects' metadata (Cloud Storage checked each object's CRC32C when it was written), as the
  Vertex AI target does, so the weights are read once (by vLLM or the stager), never hashed again. It then
  ``exec``\\ s the next step, so vLLM becomes the process Cloud Run signals. With in-memory staging that step is
  the stager (its copy threads in parallel), which then ``exec``\\ s vLLM on the copy.
* **Probes.** HTTP only on Cloud Run: startup ``/health`` every 5 s after 10 s, for as many failures as twice the
  cold-load estimate needs; liveness ``/health``.
* **Identity.** The revision runs as a dedicated service account; the weights bucket, the programs bucket, the
  hub-token secret and the project's metric writes (the collector) are its only grants.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import naming
from ..serving.spec import VLLM_COMMAND, verify_gcs_command
from . import programs
from .spec import (
    COLLECTOR_CPU,
    COLLECTOR_HEALTH_PATH,
    COLLECTOR_HEALTH_PORT,
    COLLECTOR_MEMORY_MIB,
    COLLECTOR_PROBE_SECONDS,
    HubToken,
    ProgramsVolume,
    RevisionSpec,
)

Body = dict[str, Any]

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
#: one service and release vanishingly unlikely while leaving room for the release id; the full digest is the
#: template's TEMPLATE_SHA_ANNOTATION, checked before a revision found by name is adopted.
REVISION_HASH_CHARS = 8
#: Cloud Storage volume mounts and GPUs run on the second-generation execution environment.
EXECUTION_ENVIRONMENT = "EXECUTION_ENVIRONMENT_GEN2"
TRAFFIC_BY_REVISION = "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION"
TRAFFIC_TO_LATEST = "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST"
#: Arguments longer than this are program text, not arguments: no revision may carry one (issue 23: the verifier
#: used to ride inline, 42,660 characters). 4 KiB is ~30x the longest real argument (a JSON generation config).
MAX_ARGUMENT_CHARS = 4096


def server_command(spec: RevisionSpec, volume: ProgramsVolume) -> list[str]:
    """The vLLM container's full command line: verifier -> [stager ->] ``vllm serve <planner args>``.

    The verifier checks the release's objects by metadata (``gcs`` mode, no second read of the weights), requiring
    the manifest's revision to be the release's; the stager (staged pools) then copies the mount into memory on
    ``stage_workers`` threads and execs vLLM on the copy."""
    rel = spec.release
    serve = [*VLLM_COMMAND, *spec.vllm_args]
    then = serve
    if spec.staged_path is not None:
        then = [
            "python3",
            programs.program_path("stage_weights.py"),
            "--workers",
            str(spec.stage_workers),
            spec.mount_path,
            spec.staged_path,
            *serve,
        ]
    return list(
        verify_gcs_command(
            ("python3", programs.program_path("verify_release.py")),
            rel.weights_bucket,
            rel.weights_prefix,
            rel.model_revision,
            tuple(then),
        )
    )


def server_env(hub_token: HubToken | None) -> list[Body]:
    values = {
        # The weights come from the mounted release, never from a model hub (the issue: hub downloads at boot
        # hit HTTP 429 on shared egress and take minutes).
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
    }
    env: list[Body] = [{"name": k, "value": v} for k, v in sorted(values.items())]
    if hub_token is not None:
        env.append(
            {
                "name": "HF_TOKEN",
                "valueSource": {"secretKeyRef": {"secret": hub_token.secret_id, "version": hub_token.version}},
            }
        )
    return env


def memory_quantity(gib: float) -> str:
    """A memory limit as Cloud Run takes it: whole GiB as ``<n>Gi``, half GiB steps in MiB (``81408Mi``)."""
    return f"{int(gib)}Gi" if float(gib).is_integer() else f"{round(gib * 1024)}Mi"


def server_container(spec: RevisionSpec, volume: ProgramsVolume, hub_token: HubToken | None) -> Body:
    p = spec.probes
    command = server_command(spec, volume)
    mounts = [
        {"name": naming.CLOUD_RUN_WEIGHTS_VOLUME, "mountPath": spec.mount_path},
        {"name": naming.CLOUD_RUN_PROGRAMS_VOLUME, "mountPath": naming.CLOUD_RUN_PROGRAMS_ROOT},
    ]
    if spec.staged_path is not None:
        mounts.append({"name": naming.CLOUD_RUN_STAGED_VOLUME, "mountPath": naming.STAGED_WEIGHTS_ROOT})
    health = {"path": naming.HEALTH_PATH, "port": naming.CLOUD_RUN_VLLM_PORT}
    return {
        "name": naming.CLOUD_RUN_SERVING_CONTAINER,
        "image": spec.release.image,  # by digest only (validated in infra/config/release.py)
        "command": command[:1],
        "args": command[1:],
        "ports": [{"name": "http1", "containerPort": naming.CLOUD_RUN_VLLM_PORT}],
        "env": server_env(hub_token),
        "resources": {
            "limits": {
                "cpu": str(spec.shape.cpu),
                "memory": memory_quantity(spec.shape.memory_gib),
                naming.GPU_RESOURCE: str(spec.shape.gpu_count),
            },
            # GPU services need instance-based billing: CPU stays allocated outside requests (Cloud Run GPU page).
            "cpuIdle": False,
            "startupCpuBoost": False,
        },
        "volumeMounts": mounts,
        "startupProbe": {
            "httpGet": health,
            "initialDelaySeconds": p.startup_initial_delay_seconds,
            "periodSeconds": p.startup_period_seconds,
            "timeoutSeconds": p.startup_timeout_seconds,
            "failureThreshold": p.startup_failure_threshold,
        },
        "livenessProbe": {
            "httpGet": dict(health),
            "periodSeconds": p.liveness_period_seconds,
            "timeoutSeconds": p.liveness_timeout_seconds,
            "failureThreshold": p.liveness_failure_threshold,
        },
    }


def collector_container(image: str) -> Body:
    """The Managed Prometheus sidecar with its default config (vLLM on 8080 ``/metrics`` every 30 s); it starts
    once vLLM passed its startup probe."""
    return {
        "name": naming.CLOUD_RUN_COLLECTOR_CONTAINER,
        "image": image,
        "dependsOn": [naming.CLOUD_RUN_SERVING_CONTAINER],
        "resources": {"limits": {"cpu": str(COLLECTOR_CPU), "memory": f"{COLLECTOR_MEMORY_MIB}Mi"}, "cpuIdle": False},
        "livenessProbe": {
            "httpGet": {"path": COLLECTOR_HEALTH_PATH, "port": COLLECTOR_HEALTH_PORT},
            "periodSeconds": COLLECTOR_PROBE_SECONDS,
            "timeoutSeconds": COLLECTOR_PROBE_SECONDS,
        },
    }


def volumes(spec: RevisionSpec, volume: ProgramsVolume) -> list[Body]:
    vols: list[Body] = [
        {
            "name": naming.CLOUD_RUN_WEIGHTS_VOLUME,
            "gcs": {"bucket": spec.release.weights_bucket, "readOnly": True, "mountOptions": list(spec.mount_options)},
        },
        {
            "name": naming.CLOUD_RUN_PROGRAMS_VOLUME,
            "gcs": {"bucket": volume.bucket, "readOnly": True, "mountOptions": [f"only-dir={volume.folder}"]},
        },
    ]
    if spec.staging_size_gib is not None:
        vols.append(
            {
                "name": naming.CLOUD_RUN_STAGED_VOLUME,
                "emptyDir": {"medium": "MEMORY", "sizeLimit": f"{spec.staging_size_gib}Gi"},
            }
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
    programs: ProgramsVolume


def template_body(spec: RevisionSpec, ctx: TemplateContext) -> Body:
    """The RevisionTemplate without its name and digest (what both are derived from)."""
    vpc = spec.vpc_egress
    body: Body = {
        "labels": resource_labels(ctx.environment),
        "annotations": template_annotations(spec),
        "serviceAccount": ctx.service_account_email,
        "executionEnvironment": EXECUTION_ENVIRONMENT,
        "containers": [
            server_container(spec, ctx.programs, ctx.hub_token),
            collector_container(ctx.collector_image),
        ],
        "volumes": volumes(spec, ctx.programs),
        "nodeSelector": {"accelerator": spec.shape.gpu},
        "gpuZonalRedundancyDisabled": spec.shape.zonal_redundancy_disabled,
        "scaling": {"minInstanceCount": spec.min_instances, "maxInstanceCount": spec.max_instances},
        "maxInstanceRequestConcurrency": spec.concurrency,
        "timeout": f"{spec.timeout_seconds}s",
    }
    if vpc is not None:
        interface: Body = {"network": vpc.network, "subnetwork": vpc.subnetwork}
        if vpc.tags:
            interface["tags"] = list(vpc.tags)
        body["vpcAccess"] = {"egress": vpc.egress, "networkInterfaces": [interface]}
    return body


def digest(body: Mapping[str, Any]) -> str:
    """SHA-256 of a body as sorted, compact JSON."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


def revision_slug(release_id: str, room: int) -> str:
    """The release id as a DNS-label fragment (``.`` becomes ``-``), cut to ``room`` characters."""
    slug = release_id.replace(".", "-")[: max(0, room)]
    return slug.strip("-")


def revision_name(service: str, spec: RevisionSpec, ctx: TemplateContext) -> str:
    """``<service>-<release>-<hash>``: the hash covers the whole rendered template but its name and digest."""
    hexdigest = digest(template_body(spec, ctx))[:REVISION_HASH_CHARS]
    slug = revision_slug(spec.release.release, MAX_REVISION_NAME - len(service) - REVISION_HASH_CHARS - 2)
    return f"{service}-{slug}-{hexdigest}" if slug else f"{service}-{hexdigest}"


def revision_template(spec: RevisionSpec, ctx: TemplateContext, service: str) -> Body:
    """The run.v2 ``RevisionTemplate`` a pool's revision is created from: the body, its caller-chosen name and the
    full digest of the body as an annotation."""
    body = template_body(spec, ctx)
    full = digest(body)
    named: Body = {"revision": revision_name(service, spec, ctx), **body}
    named["annotations"] = {**body["annotations"], naming.TEMPLATE_SHA_ANNOTATION: full}
    return named


def template_digest(template: Mapping[str, Any]) -> str:
    """The digest a named template carries, recomputed from its content (the check the providers and policies
    share): the body without ``revision`` and without the digest annotation."""
    body = {k: v for k, v in template.items() if k != "revision"}
    annotations = {k: v for k, v in dict(body.get("annotations") or {}).items() if k != naming.TEMPLATE_SHA_ANNOTATION}
    return digest({**body, "annotations": annotations})


def service_fields(*, environment: str, ingress: str, launch_stage: str, description: str) -> Body:
    """The service-level fields this program owns (everything of a run.v2 Service but ``template`` and
    ``traffic``, which the revision and traffic resources own)."""
    return {
        "labels": resource_labels(environment),
        "description": description,
        "ingress": ingress,
        "launchStage": launch_stage,
        # The invoker IAM check stays on: only the configured members may call the service.
        "invokerIamDisabled": False,
    }


def traffic(names: Mapping[str, str], weights: Mapping[str, int]) -> list[Body]:
    """One entry per pool, stable first: its revision by name, its weight, its role as tag. A weight of 0 is sent
    explicitly so the tagged revision stays addressable."""
    order = sorted(names, key=lambda r: (r != "stable", r))
    return [
        {
            "type": TRAFFIC_BY_REVISION,
            "revision": names[r],
            "percent": weights[r],
            "tag": naming.cloud_run_revision_tag(r),
        }
        for r in order
    ]


def checked_member(member: str) -> str:
    """An invoker member, refused when public or not an IAM member (config validated it; a component user may not
    have)."""
    if member in PUBLIC_MEMBERS or not _MEMBER_RE.match(member):
        raise ValueError(f"invoker member {member!r} is public or not an IAM member")
    return member
