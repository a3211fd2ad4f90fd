"""The ``cloud_run`` target: vLLM on Cloud Run GPU instances, stable and canary as tagged revisions of one service.

Maps the validated config and the resolved plan to the components' small typed Args: one
:class:`~components.cloud_run.spec.RevisionSpec` per pool (the planner's arguments, probes, concurrency, timeout,
shape), the service-wide settings, the programs (verifier and stager) at their content-addressed folder of the
stack's programs bucket, and the observability views named by each pool's revision.
"""

from __future__ import annotations

import pulumi

from components import naming
from components.cloud_run.component import CloudRunServing, CloudRunServingArgs, ServingPool
from components.cloud_run.observability import CloudRunObservability, CloudRunObservabilityArgs, revision_views
from components.cloud_run.programs import programs_volume
from components.cloud_run.spec import HubToken, InstanceShape, RevisionSpec, VpcEgress
from components.project import ProjectServices
from infra.config.stack import StackConfig
from infra.planning.plan import StackPlan
from infra.targets.base import ResolvedStack
from infra.targets.common import channel_spec, thresholds

from .config import CloudRunPool, cloud_run_section
from .planning import GA_LAUNCH_STAGE, CloudRunPoolPlan, run_pools

#: APIs a Cloud Run stack uses: Cloud Run Admin, IAM (the serving account), Cloud Storage (the weights volume),
#: Artifact Registry (image pulls), Secret Manager (the optional hub token), Monitoring (the collector's writes,
#: dashboard, alerts) and Logging (container logs).
SERVICES: tuple[str, ...] = (
    "artifactregistry.googleapis.com",
    "iam.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",
    "run.googleapis.com",
    "secretmanager.googleapis.com",
    "storage.googleapis.com",
)


def revision_spec(
    cfg: StackConfig, plan: StackPlan, role: str, pool: CloudRunPool, p: CloudRunPoolPlan
) -> RevisionSpec:
    run, rel = p.cloud_run, p.release
    vpc = pool.vpc_egress
    return RevisionSpec(
        role=role,
        release=rel,
        public_model_name=plan.public_model_name,
        vllm_args=p.vllm_args,
        model_root=p.model_root,
        mount_path=naming.weights_mount_path(rel.weights_prefix),
        mount_options=run.mount_options,
        staging_size_gib=run.staging_size_gib,
        staged_path=naming.staged_weights_path(rel.weights_prefix) if run.staging_size_gib is not None else None,
        stage_workers=run.stage_workers,
        shape=InstanceShape(
            gpu=run.gpu,
            gpu_count=run.gpu_count,
            cpu=run.cpu,
            memory_gib=run.memory_gib,
            zonal_redundancy_disabled=run.zonal_redundancy_disabled,
        ),
        probes=run.probes,
        min_instances=run.min_instances,
        max_instances=run.max_instances,
        concurrency=run.concurrency,
        timeout_seconds=run.request_timeout_seconds,
        vpc_egress=VpcEgress(vpc.network, vpc.subnetwork, vpc.egress, tuple(vpc.tags)) if vpc else None,
        stream_bound_seconds=plan.stream_bound_seconds,
        contract_max_model_len=cfg.contract.max_model_len,
        contract_max_input_tokens=cfg.contract.max_input_tokens,
        contract_max_output_tokens=cfg.contract.max_output_tokens,
    )


def serving_args(cfg: StackConfig, plan: StackPlan) -> CloudRunServingArgs:
    c = cloud_run_section(cfg)
    assert c is not None  # the cloud_run rules require the section for a cloud_run pool
    runs = plan.pools_of(CloudRunPoolPlan)
    pools = run_pools(cfg)
    stable = pools[0][1]
    return CloudRunServingArgs(
        project=cfg.project,
        region=cfg.region,
        environment=cfg.environment,
        service_name=c.service_name,
        service_account_id=naming.cloud_run_service_account_id(c.service_name),
        pools=tuple(
            ServingPool(role, pool.weight, revision_spec(cfg, plan, role, pool, runs[role])) for role, pool in pools
        ),
        # Service-wide; the rules require the pools to agree.
        ingress=stable.ingress,
        invoker_members=tuple(stable.invoker_members),
        collector_image=c.collector_image,
        hub_token=HubToken(c.hub_token.secret_id, c.hub_token.version) if c.hub_token else None,
        # One service: a Preview feature in any pool's revision needs the preview launch stage for all.
        launch_stage=next(
            (runs[r].cloud_run.launch_stage for r, _ in pools if runs[r].cloud_run.launch_stage != GA_LAUNCH_STAGE),
            GA_LAUNCH_STAGE,
        ),
        programs=programs_volume(c.programs_bucket or naming.cloud_run_programs_bucket(cfg.project, c.service_name)),
        protect=c.protect,
    )


def compose(resolved: ResolvedStack, services: ProjectServices) -> dict[str, object]:
    cfg, plan = resolved.config, resolved.plan
    args = serving_args(cfg, plan)
    # The identity, its grants, the service with one tagged revision per pool, and its invokers: everything waits
    # for the APIs it is created through.
    serving = CloudRunServing("cloud-run", args, opts=pulumi.ResourceOptions(depends_on=[services]))

    runs = plan.pools_of(CloudRunPoolPlan)
    obs = cfg.observability
    observability = CloudRunObservability(
        "cloud-run-observability",
        CloudRunObservabilityArgs(
            project=cfg.project,
            environment=cfg.environment,
            service_name=args.service_name,
            revisions=revision_views(
                args,
                {r: p.cloud_run.instance_hourly_usd for r, p in runs.items()},
                {r: p.capacity.cost_per_million_output_tokens_usd for r, p in runs.items()},
            ),
            thresholds=thresholds(cfg),
            notification_channels=tuple(channel_spec(ch) for ch in obs.alerts.notification_channels),
        ),
        # The dashboard and alert policies need the Monitoring API.
        opts=pulumi.ResourceOptions(depends_on=[services]),
    )

    return {
        "cloud_run": {
            "service": args.service_name,
            "uri": serving.uri,
            "service_account": serving.service_account_email,
            "revisions": {
                role: {
                    "revision": serving.revision_names[role],
                    "tag": naming.cloud_run_revision_tag(role),
                    "weight": runs[role].weight,
                    "release": runs[role].release.release,
                    "vllm_args": list(runs[role].vllm_args),
                    "startup_window_seconds": runs[role].cloud_run.probes.startup_window_seconds,
                    "request_timeout_seconds": runs[role].cloud_run.request_timeout_seconds,
                    "concurrency": runs[role].cloud_run.concurrency,
                    "min_instances": runs[role].cloud_run.min_instances,
                    "max_instances": runs[role].cloud_run.max_instances,
                    "cold_start_usd": round(runs[role].cloud_run.cold_start_usd, 4),
                }
                for role in sorted(runs)
            },
            "dashboard": observability.dashboard.id,
        },
    }
