"""The ``vertex`` target: vLLM custom containers as deployed models of one Vertex AI endpoint, stable and canary
with the endpoint's traffic split from the pools' weights.

Maps the validated config and the resolved plan to :class:`~components.vertex.endpoint.VertexServingArgs`: per
pool one model (the release's image by digest, its ``gs://`` folder as artifact, the verifier-then-vLLM command
with the planner's arguments, probes, shared memory, deployment timeout) and its dedicated resources (machine spec
of the accelerator topology, the stack's reservation by resource name, replica bounds, the autoscaling signal).
"""

from __future__ import annotations

from typing import TypedDict

import pulumi

from components.monitoring.cohosted import CoHostedModel
from components.project import ProjectServices
from components.vertex import requests as rq
from components.vertex.container import SERVER_ENV, cohost_server_command, verified_server_command
from components.vertex.endpoint import (
    ImageRepository,
    PrivateServiceConnect,
    VertexDeployment,
    VertexServing,
    VertexServingArgs,
)
from components.vertex.monitoring import CoHostedOnVertex
from components.vertex.observability import VertexObservability, VertexObservabilityArgs, deployed_model_views
from infra.config.stack import StackConfig
from infra.planning.plan import StackPlan
from infra.targets.base import ResolvedStack
from infra.targets.common import channel_spec, platform_labels, thresholds

from .config import VertexConfig, vertex_section
from .planning import CoHostedGroupPlan, VertexPlan, VertexPoolPlan, vertex_part, vertex_pools

#: APIs a Vertex stack uses: Vertex AI (endpoint, models, deployments), IAM (the serving account), Cloud Storage
#: (the weights), Artifact Registry (image pulls), Monitoring and Logging (Vertex's metrics and container logs).
SERVICES: tuple[str, ...] = (
    "aiplatform.googleapis.com",
    "artifactregistry.googleapis.com",
    "iam.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",
    "storage.googleapis.com",
)
#: Label (Vertex label keys allow no '.' or '/') carrying the release id on every uploaded model.
RELEASE_LABEL = "llm-serving-io-release"


def service_account_id(endpoint_id: str) -> str:
    """``<endpoint>-vtx``: the endpoint id is at most 26 characters (infra/targets/vertex/config/endpoint.py), so
    this fits IAM's 30."""
    return f"{endpoint_id}-vtx"


def model_spec(p: VertexPoolPlan) -> rq.ModelSpec:
    """The uploaded model of a pool: the release's image, the verifier then ``vllm serve`` with the planner's
    arguments, probes and deployment timeout from its machine plan."""
    rel, v = p.release, p.vertex
    return _model(
        v,
        image=rel.image,
        command=verified_server_command(rel.weights_bucket, rel.weights_prefix, rel.model_revision),
        args=p.vllm_args,
        display_name=rel.release,
        artifact_uri=rel.weights_uri,
        labels={RELEASE_LABEL: rq.label_value(rel.release)},
        description=f"vLLM {rel.vllm_version} serving release {rel.release}",
    )


def cohosted_model_spec(g: CoHostedGroupPlan) -> rq.ModelSpec:
    """The uploaded model of a co-hosted group: the group's image running the co-host server with the planner's
    configuration document; its artifact the first release's folder (the server streams every release itself);
    probes on the server's ``/health`` (200 only while every instance is), the startup window and deployment timeout
    the group's (every instance's cold load in turn)."""
    command, args = cohost_server_command(g.server_json, g.watch, g.poll_seconds)
    first = g.models[0].release
    return _model(
        g.machine,
        image=g.image,
        command=command,
        args=args,
        display_name=g.key,
        artifact_uri=first.weights_uri,
        labels={RELEASE_LABEL: rq.label_value(first.release)},
        description=(
            f"vLLM {g.vllm_version} co-hosting " + ", ".join(f"{m.model_name} ({m.release.release})" for m in g.models)
        )[:COHOST_DESCRIPTION_MAX],
    )


#: Kept well under any description limit (aiplatform.v1 Model.description states none): the releases are also the
#: configuration's and the labels'.
COHOST_DESCRIPTION_MAX = 1000


def _model(
    v: VertexPlan,
    *,
    image: str,
    command: tuple[str, ...],
    args: tuple[str, ...],
    display_name: str,
    artifact_uri: str,
    labels: dict[str, str],
    description: str,
) -> rq.ModelSpec:
    container = rq.ContainerSpec(
        image=image,
        command=command,
        args=args,
        env=tuple(rq.EnvVar(k, val) for k, val in SERVER_ENV),
        port=v.port,
        predict_route=v.predict_route,
        health_route=v.health_route,
        shared_memory_mb=v.shared_memory_mb,
        startup_probe=rq.startup_probe(v.startup_window_seconds, path=v.health_route, port=v.port),
        health_probe=rq.HttpProbe(v.health_route, port=v.port, failure_threshold=v.health_failure_threshold),
        deployment_timeout_seconds=v.deployment_timeout_seconds,
    )
    return rq.ModelSpec(
        display_name=display_name,
        artifact=rq.ReleaseArtifact.from_uri(artifact_uri),
        container=container,
        labels=labels,
        description=description,
    )


def dedicated_resources(v: VertexPlan) -> rq.DedicatedResources:
    """Machine spec (the accelerator topology, its reservation by resource name), replica bounds, autoscaling."""
    reservation = (
        rq.Reservation(v.reservation_project, v.zone, v.reservation_name)
        if v.reservation_name is not None and v.reservation_project is not None
        else None
    )
    return rq.DedicatedResources(
        machine=rq.MachineSpec(v.machine_type, v.gpu_type, v.accelerator_count, reservation),
        scaling=rq.Scaling(
            v.min_replicas, v.max_replicas, (rq.AutoscalingTarget(v.autoscaling_signal, v.autoscaling_target),)
        ),
        spot=v.spot,
    )


def serving_args(stack: str, cfg: StackConfig, plan: StackPlan) -> VertexServingArgs:
    c = vertex_section(cfg)
    assert c is not None  # the vertex rules require the section for a vertex pool
    planned = vertex_part(plan).vertex_pools()
    roles = [role for role, _ in vertex_pools(cfg)]
    first = planned[roles[0]].release
    return VertexServingArgs(
        stack=stack,
        project=cfg.project,
        region=cfg.region,
        endpoint_id=c.endpoint_id,
        display_name=c.endpoint_id,
        # One bucket for every release (rule vertex.releases_share_one_weights_bucket).
        weights_bucket=first.weights_bucket,
        service_account_id=service_account_id(c.endpoint_id),
        deployments=tuple(
            VertexDeployment(
                role,
                planned[role].weight,
                model_spec(planned[role]),
                dedicated_resources(planned[role].vertex),
                replacement=planned[role].vertex.replacement,
            )
            for role in roles
        ),
        inference_timeout_seconds=planned[roles[0]].vertex.inference_timeout_seconds,
        # The serving account reads the served releases' folders only.
        weights_prefixes=tuple(dict.fromkeys(planned[role].release.weights_prefix for role in roles)),
        **_access(cfg, c),
    )


class _Access(TypedDict):
    """The :class:`VertexServingArgs` fields every endpoint of the stack shares."""

    private_service_connect: PrivateServiceConnect | None
    caller_members: tuple[str, ...]
    caller_role: str
    image_repository: ImageRepository | None
    labels: dict[str, str]
    protect: bool
    request_logging: rq.RequestResponseLogging | None


def _access(cfg: StackConfig, c: VertexConfig) -> _Access:
    """What every endpoint of the stack shares: access, callers, the image repository, labels, protection."""
    return _Access(
        private_service_connect=(
            PrivateServiceConnect(tuple(c.private_service_connect.project_allowlist))
            if c.access == "private_service_connect" and c.private_service_connect
            else None
        ),
        caller_members=tuple(c.caller_members),
        caller_role=c.caller_role,
        image_repository=ImageRepository(cfg.project, cfg.region, c.repository) if c.repository else None,
        labels=platform_labels(cfg),
        protect=c.protect,
        # Off unless configured: the rows would hold users' prompts and the model's answers.
        request_logging=None
        if c.request_response_logging is None
        else rq.RequestResponseLogging(c.request_response_logging.bigquery, c.request_response_logging.sampling_rate),
    )


#: The role of a co-hosted group's one deployment: its deployed model's displayName is ``cohost-<group key>``
#: (``<role>-<model display name>``, requests.deployed_model_display_name; the model's display name is the key).
COHOST_ROLE = "cohost"


def cohosted_args(stack: str, cfg: StackConfig, g: CoHostedGroupPlan) -> VertexServingArgs:
    """The group's endpoint with its one deployed model at 100 %: dedicated resources (the whole machine:
    ``acceleratorCount`` = the machine's GPUs), the co-host server's container. Its account reads every release
    folder of the group in the group's one weights bucket (rule cohosting.group_releases_share_one_weights_bucket)."""
    c = vertex_section(cfg)
    assert c is not None  # the cohosting rules require the section for a vertex group
    return VertexServingArgs(
        stack=stack,
        project=cfg.project,
        region=cfg.region,
        endpoint_id=g.endpoint_id,
        display_name=g.endpoint_id,
        weights_bucket=g.models[0].release.weights_bucket,
        service_account_id=service_account_id(g.endpoint_id),
        deployments=(
            VertexDeployment(
                COHOST_ROLE,
                100,
                cohosted_model_spec(g),
                dedicated_resources(g.machine),
                replacement=g.machine.replacement,
            ),
        ),
        inference_timeout_seconds=g.machine.inference_timeout_seconds,
        weights_prefixes=tuple(dict.fromkeys(m.release.weights_prefix for m in g.models)),
        watched_objects=(g.watch_object,) if g.watch_object else (),
        **_access(cfg, c),
    )


def compose(resolved: ResolvedStack, services: ProjectServices) -> dict[str, object]:
    cfg, plan = resolved.config, resolved.plan
    outputs: dict[str, object] = {}
    part = vertex_part(plan)
    if part.vertex_pools():
        outputs.update(_compose_pools(resolved.stack, cfg, plan, services))
    if part.vertex_groups():
        outputs["vertex_cohosting"] = _compose_groups(resolved.stack, cfg, plan, services)
    return outputs


def _compose_groups(stack: str, cfg: StackConfig, plan: StackPlan, services: ProjectServices) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, g in vertex_part(plan).vertex_groups().items():
        args = cohosted_args(stack, cfg, g)
        serving = VertexServing(f"vertex-{g.endpoint_id}", args, opts=pulumi.ResourceOptions(depends_on=[services]))
        deployment = args.deployments[0]
        series_pool = rq.deployed_model_display_name(deployment.role, deployment.model.display_name)
        # Per co-hosted model: its dashboard panels and alerts, through the group's endpoint and deployed model
        # (vLLM's model_name label, the release id, tells the models apart), and the endpoint's own panels.
        VertexObservability(
            f"vertex-cohosting-{key}-observability",
            VertexObservabilityArgs(
                project=cfg.project,
                environment=cfg.environment,
                endpoint_id=g.endpoint_id,
                models=(),
                thresholds=thresholds(cfg),
                notification_channels=tuple(channel_spec(ch) for ch in cfg.observability.alerts.notification_channels),
                cohosted=tuple(
                    CoHostedOnVertex(
                        g.endpoint_id,
                        CoHostedModel(
                            group=key,
                            series_pool=series_pool,
                            model_name=m.model_name,
                            release=m.release.release,
                            instances=m.placement.instances,
                        ),
                    )
                    for m in g.models
                ),
            ),
            opts=pulumi.ResourceOptions(depends_on=[services]),
        )
        out[key] = {
            "endpoint": serving.endpoint_name,
            "dedicated_endpoint_dns": serving.endpoint.dedicated_endpoint_dns,
            "deployed_model_id": serving.deployments[COHOST_ROLE].deployed_model_id,
            "machine": f"{g.machine.machine_type} ({g.machine.accelerator_count} x {g.machine.gpu_type})",
            "reservation": g.machine.reservation_resource,
            "replicas": {"min": g.machine.min_replicas, "max": g.machine.max_replicas},
            "startup_window_seconds": g.machine.startup_window_seconds,
            "partition_sum_per_gpu": list(g.layout.partition_sum_per_gpu),
            "models": {
                m.model_name: {
                    "release": m.release.release,
                    "partition": m.placement.partition,
                    "gpus": [list(x) for x in m.placement.gpus],
                    "max_seqs_at_max_model_len": m.placement.max_seqs_at_max_model_len,
                    "instances": {i.name: list(i.args) for i in m.instances},
                }
                for m in g.models
            },
        }
    return out


def _compose_pools(stack: str, cfg: StackConfig, plan: StackPlan, services: ProjectServices) -> dict[str, object]:
    args = serving_args(stack, cfg, plan)
    # The identity, its grants, the endpoint, the deployed models, the split and the callers: everything waits for
    # the APIs it is created through.
    serving = VertexServing("vertex", args, opts=pulumi.ResourceOptions(depends_on=[services]))
    planned = vertex_part(plan).vertex_pools()
    observability = VertexObservability(
        "vertex-observability",
        VertexObservabilityArgs(
            project=cfg.project,
            environment=cfg.environment,
            endpoint_id=args.endpoint_id,
            models=deployed_model_views(args.deployments),
            thresholds=thresholds(cfg),
            notification_channels=tuple(channel_spec(ch) for ch in cfg.observability.alerts.notification_channels),
        ),
        # The dashboard and alert policies need the Monitoring API.
        opts=pulumi.ResourceOptions(depends_on=[services]),
    )
    return {
        "vertex": {
            "endpoint": serving.endpoint_name,
            "dedicated_endpoint_dns": serving.endpoint.dedicated_endpoint_dns,
            "service_account": serving.service_account_email,
            "deployed_models": {
                role: {
                    "deployed_model_id": serving.deployments[role].deployed_model_id,
                    "model_id": serving.creation_ids[role].model_id,
                    "weight": p.weight,
                    "release": p.release.release,
                    "vllm_args": list(p.vllm_args),
                    "machine": f"{p.vertex.machine_type} ({p.vertex.accelerator_count} x {p.vertex.gpu_type})",
                    "reservation": p.vertex.reservation_resource,
                    "replicas": {"min": p.vertex.min_replicas, "max": p.vertex.max_replicas},
                    "autoscaling": {"metric": p.vertex.autoscaling_metric, "target": p.vertex.autoscaling_target},
                    "startup_window_seconds": p.vertex.startup_window_seconds,
                }
                for role, p in sorted(planned.items())
            },
            "dashboard": observability.dashboard.id,
        },
    }
